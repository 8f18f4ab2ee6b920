"""The HLO IR: module, computation, instruction, shape."""

from .computation import HloComputation
from .instruction import HloInstruction, HloIrError
from .module import HloModule
from .shape import Layout, PrimitiveType, Shape
from .shape_reader import parse_shape

__all__ = [
    "HloComputation",
    "HloInstruction",
    "HloIrError",
    "HloModule",
    "Layout",
    "PrimitiveType",
    "ReplicaGroups",
    "Shape",
    "parse_shape",
]


def __getattr__(name: str) -> object:
    """`ReplicaGroups` loads on first use: only collectives decode replica groups."""
    if name == "ReplicaGroups":
        from .replica_groups import ReplicaGroups

        return ReplicaGroups
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
