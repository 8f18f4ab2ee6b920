"""HloInstruction::IdenticalInternal with pointer-equal operands (xla-semantics §5).

Opcode-specific slow paths are approximated by comparing every semantic attribute's raw
text (attributes XLA does not compare — names, metadata, frontend attributes, control
edges, statistics, origin — are skipped); replica groups and channel ids follow XLA's
own rules (materialised groups; channel values unless ignored).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .shape import shapes_compatible, shapes_equal

if TYPE_CHECKING:
    from .instruction import HloInstruction

_NOT_COMPARED = frozenset(
    {"metadata", "frontend_attributes", "sharding", "control-predecessors", "statistics",
     "origin", "original_value", "backend_config", "replica_groups", "channel_id"}
)
_NEVER_IDENTICAL = frozenset({"after-all", "add-dependency", "infeed", "outfeed"})


def identical(
    a: HloInstruction,
    b: HloInstruction,
    *,
    layout_sensitive: bool = True,
    sharding_sensitive: bool = False,
    ignore_channel_id_values: bool = False,
) -> bool:
    if a is b:
        return True
    if a.opcode != b.opcode:
        return False
    same_shape = shapes_equal if layout_sensitive else shapes_compatible
    if not same_shape(a.shape, b.shape):
        return False
    if sharding_sensitive:
        sa, sb = a.attr("sharding"), b.attr("sharding")
        if sa is not None and sb is not None and sa != sb:
            return False
    if len(a.operands) != len(b.operands) or a.attr("result_accuracy") != b.attr("result_accuracy"):
        return False
    if any(x is not y for x, y in zip(a.operands, b.operands)):
        return False
    if a.raw_backend_config != b.raw_backend_config:
        return False
    return _identical_slow_path(a, b, ignore_channel_id_values)


def _identical_slow_path(a: HloInstruction, b: HloInstruction, ignore_channel_id_values: bool) -> bool:
    if a.opcode in _NEVER_IDENTICAL:
        return False
    if a.payload != b.payload:
        return False
    if len(a.called_computations) != len(b.called_computations) or any(
        x is not y for x, y in zip(a.called_computations, b.called_computations)
    ):
        return False
    if (a.attr("channel_id") is None) != (b.attr("channel_id") is None):
        return False
    if not ignore_channel_id_values and a.channel_id != b.channel_id:
        return False
    if (a.attr("replica_groups") is not None or b.attr("replica_groups") is not None) and (
        a.replica_groups.groups != b.replica_groups.groups
    ):
        return False
    return _semantic_attrs(a) == _semantic_attrs(b)


def _semantic_attrs(inst: HloInstruction) -> dict[str, str]:
    return {k: v for k, v in inst.attributes if k not in _NOT_COMPARED}
