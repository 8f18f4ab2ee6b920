"""Regenerate `src/hlo_dedup/io/hlo_schema_supported.binpb`, the encoded schema a `.pb` run
builds its message classes from (`hlo_dedup.io.proto_fields.supported_file`), after editing
`hlo_schema.txt` or `proto_fields.SUPPORTED`:

    python tests/io/gen_supported_schema.py

tests/io/test_descriptors.py fails while the shipped file is not what this writes.
"""

from __future__ import annotations

from pathlib import Path

from hlo_dedup.io import proto_fields

TARGET = Path(proto_fields.__file__).with_name(proto_fields.SUPPORTED_FILE)

if __name__ == "__main__":
    TARGET.write_bytes(proto_fields.supported_file())
    print(f"wrote {TARGET} ({TARGET.stat().st_size:,} bytes)")
