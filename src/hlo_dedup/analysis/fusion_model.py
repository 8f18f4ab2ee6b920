"""Which instructions of an unscheduled module a compiler gives no buffer of their own.

A module before optimizations (no ``is_scheduled=true``) is not the program a backend
runs: XLA fuses it, assigns layouts and turns layout-preserving reshapes and transposes
into bitcasts before it allocates anything. Pricing its text instruction by instruction
counts buffers no compiler allocates (a transposed weight the dot reads in place, each
step of an elementwise chain), which inflates the baseline peak so much that a fold
adding a whole weight seems to stay under it. This module decides, per instruction of
one computation, what XLA:CPU would make of it; `liveness` then treats the instruction
as an alias:

Bitcasts (the value is operand 0's buffer, read in place)
    * ``reshape`` that is a bitcast under the written layouts (``ShapeUtil::
      ReshapeIsBitcast``): same element type, and both shapes' non-degenerate
      dimensions laid out major-to-minor in logical order, so the linear order of the
      elements is unchanged (a layout written nowhere is XLA's default, which is that);
    * ``transpose`` that is a bitcast under the layouts (``ShapeUtil::
      TransposeIsBitcast``: the output's physical dimension order is the operand's
      permuted), as JAX writes the transposes of ``w.T`` (``{0,1}`` layouts);
    * ``transpose`` read only by dots (XLA's TransposeFolding folds it into the dots'
      dimension numbers).
    A bitcast whose operand is fused into it is the root of that fusion instead, and
    allocates.

Fused into their consumers (the value lives in the operands' buffers, read by the
consumer; XLA's instruction fusion as ``cpu_instruction_fusion.cc`` decides it)
    A loop-fusible producer (elementwise, ``broadcast``, ``iota``, ``reshape``,
    ``transpose``, ``slice``, ``dynamic-slice``, ``pad``, ``reverse``, ``concatenate``
    of at most 8 operands, ``reduce``, ``gather``, ``dynamic-update-slice``, ``bitcast``)
    fuses when every user is loop-fusible too (a transpose a dot absorbs is not: its
    reader is the dot). A producer read more than once (several users, or one user
    twice) is duplicated into each, which XLA does only when it is cheap (not
    ``CpuInstructionFusion::IsExpensive``: transcendental ops, float divides, ``reduce``,
    ``gather``, f32-to-bf16 converts are expensive). An expensive producer does not fuse
    into a ``broadcast`` (a consumer that re-reads operand elements). The root never
    fuses: it is the result. The root of each fused group (the first instruction down a
    chain that does not fuse) owns the one buffer of the group.

A fused group reads at most `MAX_FUSED_READS` buffers: the producer that would make it
read more is the root of a group of its own (a result written into an operand's buffer
is `compiled_liveness`'s rule). Not modelled: output fusion of matrix-vector dots, the
copies layout assignment adds, multi-output fusion, and XLA's own limits on fusion size
and code duplication; constants and parameters stay static (see `buffers`). bf16 is priced
as written, as a compiler with bf16 matmuls and collectives runs it; XLA:CPU's f32
arithmetic for bf16 (``float-normalization-bf16``, ``all-reduce-promotion``: f32 copies of
the operands of each dot or collective, an f32 result converted back, a transposed copy of
a dot) is opt-in (`f32_arithmetic`, which also makes such a transpose no bitcast).

Agreement: with the schedule of `schedule` and the folded program scheduled anew, the
predicted change of the peak on JAX programs before optimizations (FSDP layers under
``jax.checkpoint``, a weight tied between the first and last layer in inference and in a
remat train step, a tied weight read by an elementwise tail; ``benchmarks/
price_vs_xla_dev.py``) is within 25% of XLA:CPU's own (the bytes in use at its peak, with
CSE off and the memory-minimizing scheduler), byte for byte on most; priced as written,
tied inference showed a sixteenth of a weight where XLA adds the whole weight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.shape import Layout

if TYPE_CHECKING:
    from ..ir.computation import HloComputation
    from ..ir.instruction import HloInstruction
    from ..ir.shape import Shape

#: What `FusionDecisions.kind` says of an instruction (0: it runs, with a buffer of its own).
BITCAST = 1  # its value is operand 0's buffer
FUSED = 2  # its value lives in its operands' buffers, read where its consumers run

ELEMENTWISE = frozenset(
    """abs add and atan2 bitcast-convert cbrt ceil clamp clz compare complex convert copy cos divide erf
    exp expm1 floor imag is-finite log log1p logistic maximum minimum multiply negate not or popcnt power
    real reduce-precision remainder round-nearest-afz round-nearest-even rsqrt select shift-left
    shift-right-arithmetic shift-right-logical sign sin sqrt stochastic-convert subtract tan tanh xor""".split()
)
LOOP_FUSIBLE = ELEMENTWISE | frozenset(
    """bitcast broadcast concatenate dynamic-slice dynamic-update-slice gather iota pad reduce reshape
    reverse slice transpose""".split()
)
_EXPENSIVE = frozenset(
    """acos acosh asin asinh atan atan2 atanh cosh sinh tanh cbrt power rsqrt sqrt erf exp expm1 log log1p
    logistic reduce gather""".split()
)
_MAX_CONCATENATE_OPERANDS = 8
#: The most buffers one fused group reads (counted with repeats): XLA bounds a fusion's
#: operands too (its GPU fusion at 96 operands and outputs), and an unbounded group made
#: the buffer lists of a long elementwise chain quadratic.
MAX_FUSED_READS = 96
# Every opcode `is_expensive` may say True of: the others are cheap without a look at shapes.
_MAYBE_EXPENSIVE = _EXPENSIVE | frozenset("divide remainder convert abs sign cos sin tan".split())


def is_expensive(inst: HloInstruction) -> bool:
    """`CpuInstructionFusion::IsExpensive` for the loop-fusible opcodes."""
    op = inst.opcode
    if op in _EXPENSIVE:
        return True
    if op in ("divide", "remainder"):
        return not inst.shape.element_type.is_integral
    if op == "convert":
        return inst.shape.element_type.value == "bf16" and inst.operands[0].shape.element_type.value == "f32"
    return op in ("abs", "sign", "cos", "sin", "tan") and inst.shape.element_type.is_complex


def _physical_order(shape: Shape) -> list[int]:
    """The dimensions of size > 1, major to minor (XLA's default layout if none is written)."""
    dims = shape.dimensions
    layout = shape.layout if shape.layout is not None else Layout.default(len(dims))
    return [d for d in reversed(layout.minor_to_major) if dims[d] != 1]


def reshape_is_bitcast(inst: HloInstruction) -> bool:
    """Whether a reshape keeps the elements' linear order under both layouts: with each
    side's non-degenerate dimensions laid out in logical order, a reshape (which keeps
    row-major order) keeps the physical order too."""
    out, operand = inst.shape, inst.operands[0].shape
    if out.element_type != operand.element_type:
        return False
    for shape in (out, operand):
        order = _physical_order(shape)
        if order != sorted(order):
            return False
    return True


def transpose_is_bitcast(inst: HloInstruction) -> bool:
    """Whether the transpose only relabels dimensions: reading the output's dimensions
    major to minor through the permutation gives the operand's physical order."""
    permutation = inst.dimensions
    out, operand = inst.shape, inst.operands[0].shape
    if out.element_type != operand.element_type or len(permutation) != len(out.dimensions):
        return False
    return [permutation[d] for d in _physical_order(out)] == _physical_order(operand)


def _layout_bitcast(inst: HloInstruction) -> bool:
    """A reshape or transpose that keeps the bytes as they are (False if its shapes or
    attributes cannot be read)."""
    try:
        return reshape_is_bitcast(inst) if inst.opcode == "reshape" else transpose_is_bitcast(inst)
    except (ValueError, IndexError, TypeError, AttributeError):
        return False


def _dot_operand(inst: HloInstruction) -> bool:
    """A transpose read only by dots, which fold it into their dimension numbers: a
    bitcast, and no consumer a producer fuses into."""
    return inst.opcode == "transpose" and inst.user_count > 0 and all(u.opcode == "dot" for u in inst.iter_users())


class FusionDecisions:
    """What a compiler makes of each instruction of one computation: `kind(inst)` is
    BITCAST, FUSED, or 0 for an instruction that runs with a buffer of its own. Asked in
    `order` (every operand before its users): a decision reads the instruction, whether
    each user can take a fused producer, and what was decided of its operands."""

    def __init__(self, computation: HloComputation, order: list[HloInstruction]) -> None:
        self.root = computation.root
        self.reads: dict[HloInstruction, int] = {}  # a fused instruction: the buffers its group reads, at most
        self._bitcast: dict[tuple, bool] = {}  # per (opcode, shape texts, permutation): a layout bitcast?
        # Producers with a user they cannot fuse into, found from the users' side: most
        # instructions are loop-fusible, and their users need no look.
        blocked: set[HloInstruction] = set()
        for u in order:
            op = u.opcode
            if op not in LOOP_FUSIBLE or (op == "concatenate" and len(u.operands) > _MAX_CONCATENATE_OPERANDS) \
                    or (op == "transpose" and _dot_operand(u)):
                blocked.update(u.operands)
        self.blocked = blocked

    def kind(self, inst: HloInstruction) -> int:
        op = inst.opcode
        if op in LOOP_FUSIBLE and inst not in self.blocked and self._fuses(inst, op):
            return FUSED
        if (op == "transpose" or op == "reshape") and inst.operands and inst.operands[0] not in self.reads \
                and (_dot_operand(inst) or self._layout_bitcast(inst)):
            return BITCAST  # a bitcast whose operand is fused into it is that fusion's root instead
        return 0

    def _fuses(self, inst: HloInstruction, op: str) -> bool:
        """A loop-fusible producer whose users all take it: does it fuse?"""
        count = inst.user_count
        if not count or inst is self.root or (op == "concatenate" and len(inst.operands) > _MAX_CONCATENATE_OPERANDS):
            return False
        text = inst.shape_text  # read, not decoded: most shapes are never decoded
        if inst.shape.is_tuple if text is None else text[:1] == "(":
            return False
        if op in _MAYBE_EXPENSIVE:
            try:
                expensive = is_expensive(inst)
            except (ValueError, IndexError, AttributeError):
                return False
            if expensive:  # not duplicated into several readers, nor re-read by a broadcast
                if count > 1:
                    return False
                u = next(inst.iter_users())
                if u.operands.count(inst) > 1 or u.opcode == "broadcast":
                    return False
        reads = self.reads
        read = 0
        for o in inst.operands:
            read += reads.get(o, 1)
        if read > MAX_FUSED_READS:
            return False  # the group stops growing here: this instruction owns its buffer
        reads[inst] = read
        return True

    def _layout_bitcast(self, inst: HloInstruction) -> bool:
        """`_layout_bitcast`, once per distinct shapes and permutation (layers repeat them)."""
        out, operand = inst.shape_text, inst.operands[0].shape_text
        if out is None or operand is None:
            return _layout_bitcast(inst)
        key = (inst.opcode, out, operand, inst.attr("dimensions") if inst.opcode == "transpose" else None)
        found = self._bitcast.get(key)
        if found is None:
            found = self._bitcast[key] = _layout_bitcast(inst)
        return found
