"""The HLO IR: module, computation, instruction, shape."""

from .computation import HloComputation
from .instruction import HloInstruction, HloIrError
from .module import HloModule
from .replica_groups import ReplicaGroups
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
