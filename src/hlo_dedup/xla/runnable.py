"""Module text as XLA:CPU can compile it from scratch: what `verify` runs (see
:func:`cpu_runnable_text`). It reads text with hlo_dedup's own reader, never with XLA."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["cpu_runnable_text"]

_SCHEDULED = re.compile(r",\s*is_scheduled=true\b")
_MESH_GROUPS = "replica_groups=mesh["
#: Attributes only a fusion has; the call that replaces it has none of them.
_FUSION_ONLY = ("kind", "calls", "backend_config", "output_to_operand_aliasing")


def cpu_runnable_text(text: str) -> str:
    """`text` as XLA:CPU can compile it from scratch, and run the collectives written in it.

    XLA:CPU runs its whole pipeline on what it is given. Post-optimization text carries what
    only the backend that wrote it reads: fusions, whose kind and backend config the CPU
    emitter rejects ("Fusion must have backend config", "Unsupported fusion kind"), and a
    schedule. A fusion computes what a call of its fused computation computes, so each becomes
    that call; the header's `is_scheduled=true` goes; XLA:CPU then fuses and schedules anew.
    A bitcast between arrays of one element type whose layouts are both the default
    (row-major) reads the elements in the order a reshape does, so it becomes that reshape:
    XLA's HLO-to-StableHLO import, which the run goes through, keeps a bitcast's layouts and
    pairs them with the wrong shape ("layout minor_to_major field contains 3 elements, but
    shape has 2 dimensions"). Other bitcasts stay, and XLA says why it cannot run them.

    Mesh replica groups (`mesh['a'=4,'b'=2], device_ids=(...) {'a'}`) are spelled out as the
    list of groups they stand for: the HLO -> StableHLO conversion a run goes through drops
    their `device_ids`, and on the way back every group is read against one of the module's
    meshes, so a module with several meshes would run collectives over other devices than
    written (groups of one device under an eight-device all-gather read memory never written).
    Other text, and text hlo_dedup's reader rejects (XLA reports it), is returned as is.
    """
    if (" fusion(" not in text and "is_scheduled=true" not in text and " bitcast(" not in text
            and _MESH_GROUPS not in text):
        return text
    from hlo_dedup.text import parse_module

    try:
        module = parse_module(text)
    except (ValueError, RuntimeError):  # HloParseError, the IR's errors: XLA will say what is wrong
        return text
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode == "bitcast" and _reads_as_reshape(instruction):
                instruction.opcode = "reshape"
                instruction.mark_changed()
            groups = instruction.attr("replica_groups")
            if groups is not None and groups.startswith("mesh["):
                instruction.set_attr("replica_groups", _listed_groups(groups))
            if instruction.opcode != "fusion" or instruction.attr("calls") is None:
                continue
            callee = instruction.attr("calls")
            for key in _FUSION_ONLY:
                instruction.set_attr(key, None)
            instruction.opcode = "call"
            instruction.set_attr("to_apply", callee)
    lowered = module.to_text()
    header_end = lowered.find("\n")
    header = _SCHEDULED.sub("", lowered[:header_end])
    return header + lowered[header_end:]


def _reads_as_reshape(bitcast: Any) -> bool:
    """A bitcast of one array to another of its element type, both row-major: a reshape."""
    from hlo_dedup.ir.shape import Layout

    try:
        shapes = (bitcast.shape, bitcast.operands[0].shape)
    except (ValueError, RuntimeError, IndexError):
        return False
    if not all(shape.tuple_shapes is None and shape.is_array for shape in shapes):
        return False
    if shapes[0].element_type is not shapes[1].element_type:
        return False
    return all(shape.layout is None or shape.layout.equality_key() == Layout.default(len(shape.dimensions)).equality_key()
               for shape in shapes)


def _listed_groups(mesh_groups: str) -> str:
    """`{{0,2,4,6},{1,3,5,7}}`: the groups a mesh `replica_groups` value stands for."""
    from hlo_dedup.ir.replica_groups import ReplicaGroups, parse_replica_groups

    return ReplicaGroups.from_groups(parse_replica_groups(mesh_groups).groups).to_text()
