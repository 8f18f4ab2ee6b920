"""A module's instructions decoded as columns a chunk at a time (`ModuleData`) read as when
they are decoded all at once: with chunks of a few instructions, a chunk boundary falls
between any two, and every outcome (the columns and id lists, the printed text, or the
error) must be the same."""

from __future__ import annotations

from typing import Any

import pytest
import support

from hlo_dedup.io import proto, proto_columns
from hlo_dedup.io.descriptors import length_delimited
from hlo_dedup.io.proto_columns import ModuleData
from hlo_dedup.io.proto_fields import message_classes


def _outcome(data: bytes) -> object:
    try:
        decoded = ModuleData(data)
        text = proto.module_bytes_to_hlo_text(data)
    except (proto.ProtoError, proto_columns.InvalidProto, proto_columns.UnsupportedProto) as exc:
        return type(exc), str(exc)
    return decoded.columns, decoded.id_lists, decoded.counts, decoded.bounds, text


def _with_record(data: bytes, name: str, field: str, record: bytes) -> bytes:
    """`data` with one more record of `field` (encoded `record`) on instruction `name`."""
    views = message_classes(True)
    module = views["HloModuleProtoView"].FromString(data)
    number = views["HloInstructionProtoView"].DESCRIPTOR.fields_by_name[field].number
    for computation in module.computations:
        for k, encoding in enumerate(computation.instructions):
            if views["HloInstructionProtoView"].FromString(encoding).name == name:
                computation.instructions[k] = encoding + length_delimited(number, record)
    return module.SerializeToString()


def _cases() -> list[bytes]:
    base = support.proto_module()
    metadata = message_classes(False)["OpMetadata"](op_name="again").SerializeToString()
    unsupported = support.proto_module()
    unsupported.computations[1].instructions[3].backend_config_payload.SetInParent()
    return [
        base.SerializeToString(),
        _with_record(base.SerializeToString(), "a", "metadata", metadata),  # two records: read canonically
        _with_record(base.SerializeToString(), "s", "name", b"renamed"),  # the last record wins
        unsupported.SerializeToString(),
        *(m.SerializeToString() for m in support.damaged_protos(150, 17)),
    ]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_columns_read_a_chunk_at_a_time_as_all_at_once(monkeypatch: Any, chunk: int) -> None:
    cases = _cases()
    whole = [_outcome(data) for data in cases]
    monkeypatch.setattr(proto_columns, "_CHUNK", chunk)
    assert [_outcome(data) for data in cases] == whole
    kinds = {type(outcome[0]) for outcome in whole}
    assert dict in kinds and type in kinds  # some read, some refused
