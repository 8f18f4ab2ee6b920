"""gzip-compressed inputs and outputs (`--xla_dump_compress_protos`, archived caches and dumps)."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

from hlo_dedup.cli import main
from hlo_dedup.io.formats import detect_format, output_format_for

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FSDP = DATA / "fsdp_remat_grad.hlo"


def run(*argv: str | Path) -> tuple[int, str]:
    err = io.StringIO()
    status = main([str(a) for a in argv], stdin=io.BytesIO(), stdout=io.StringIO(), stderr=err)
    return status, err.getvalue()


def test_the_name_says_the_format_through_gz() -> None:
    assert detect_format("m.hlo.pb.gz", b"") == "pb"
    assert detect_format("m.pbtxt.gz", b"") == "pbtxt"
    assert output_format_for("out/model.hlo_module.pb.gz") == "pb"
    assert output_format_for("out/m.hlo.gz") == "hlo"


def test_a_compressed_text_module_in_and_out(tmp_path: Path) -> None:
    (tmp_path / "m.hlo.gz").write_bytes(gzip.compress(FSDP.read_bytes()))
    assert run(FSDP, "-o", tmp_path / "plain.hlo")[0] == 0
    status, summary = run(tmp_path / "m.hlo.gz", "-o", tmp_path / "out.hlo.gz")
    assert status == 0 and "neuron_all_gather_duplicate_remover: changed, 2 folds" in summary
    written = (tmp_path / "out.hlo.gz").read_bytes()
    assert gzip.decompress(written) == (tmp_path / "plain.hlo").read_bytes()
    # No time stamp in the gzip header: the same module always gives the same bytes.
    assert run(tmp_path / "m.hlo.gz", "-o", tmp_path / "again.hlo.gz")[0] == 0
    assert (tmp_path / "again.hlo.gz").read_bytes() == written


def test_a_corrupt_or_truncated_gzip_is_one_error_line(tmp_path: Path) -> None:
    data = gzip.compress(FSDP.read_bytes())
    (tmp_path / "cut.hlo.gz").write_bytes(data[: len(data) // 2])
    status, message = run(tmp_path / "cut.hlo.gz", "-o", tmp_path / "x.hlo")
    assert status == 2
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'cut.hlo.gz'))}: error: corrupt or truncated gzip data: .+\n",
                        message)
    assert not (tmp_path / "x.hlo").exists()


def test_a_compressed_proto_dump(tmp_path: Path, xc) -> None:  # type: ignore[no-untyped-def]
    """What --xla_dump_compress_protos writes: a gzip'd HloProto named .hlo.pb.gz."""
    from google.protobuf import wrappers_pb2

    module = xc.hlo.hlo_module_from_text(FSDP.read_text()).as_serialized_hlo_module_proto()
    hlo_proto = wrappers_pb2.BytesValue(value=module).SerializeToString()  # HloProto { hlo_module = 1; }
    (tmp_path / "module_0001.jit_loss.before_optimizations.hlo.pb.gz").write_bytes(gzip.compress(hlo_proto))
    status, summary = run(tmp_path / "module_0001.jit_loss.before_optimizations.hlo.pb.gz", "-o", tmp_path / "o.pb.gz")
    assert status == 0 and "2 folds" in summary
    out = xc.hlo.HloModule.from_serialized_hlo_module_proto(gzip.decompress((tmp_path / "o.pb.gz").read_bytes()))
    assert out.to_string().count("all-gather(") == FSDP.read_text().count("all-gather(") - 2
