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


def _outcome(data: bytes) -> tuple[object, object]:
    """(the columns, id lists, counts and bounds, or the error; the text, or the error)."""
    outcomes: list[object] = []
    for read in (lambda: _fields(ModuleData(data)), lambda: proto.module_bytes_to_hlo_text(data)):
        try:
            outcomes.append(read())
        except (proto.ProtoError, proto_columns.InvalidProto, proto_columns.UnsupportedProto) as exc:
            outcomes.append((type(exc), str(exc)))
    return outcomes[0], outcomes[1]


def _fields(decoded: ModuleData) -> object:
    return decoded.columns, decoded.id_lists, decoded.counts, decoded.bounds


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
    two_callees = support.proto_module()  # with enough instructions that a whole decode finds the ids
    two_callees.computations[1].instructions[3].called_computation_ids.append(1)
    for k in range(10):
        copy = two_callees.computations[1].instructions.add()
        copy.CopyFrom(two_callees.computations[1].instructions[1])
        copy.name, copy.id = f"n{k}", 30 + k
    separator_ids = []  # -1 separates each instruction's ids when they are read together
    for field in ("called_computation_ids", "control_predecessor_ids"):
        module = support.proto_module()
        getattr(module.computations[1].instructions[4], field).append(-1)
        separator_ids.append(module.SerializeToString())
    return [
        base.SerializeToString(),
        _with_record(base.SerializeToString(), "a", "metadata", metadata),  # two records: read canonically
        _with_record(base.SerializeToString(), "s", "name", b"renamed"),  # the last record wins
        unsupported.SerializeToString(),
        two_callees.SerializeToString(),
        *separator_ids,
        *(m.SerializeToString() for m in support.damaged_protos(150, 17)),
    ]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_columns_read_a_chunk_at_a_time_as_all_at_once(monkeypatch: Any, chunk: int) -> None:
    cases = _cases()
    whole = [_outcome(data) for data in cases]
    monkeypatch.setattr(proto_columns, "_CHUNK", chunk)
    assert [_outcome(data) for data in cases] == whole
    texts = {type(text) for _, text in whole}
    assert str in texts and tuple in texts  # some printed, some refused
