"""A backend that computes bf16 and f16 in f32 (XLA:CPU), as the compiler-shaped model prices it.

Opt-in (``f32_arithmetic=True`` on `ModuleLiveness`, `FoldPricer` and `analyze`; the
all-gather pass's ``price_backend="xla-cpu"``, ``--price-backend xla-cpu``). Off, bf16 and
f16 are priced as written, as a backend with 16-bit matmuls and collectives (Neuron, GPUs)
runs them.

What XLA:CPU does (its dumps around ``--xla_dump_hlo_pass_re=all-reduce-promotion|
float-normalization-bf16``, on JAX programs in bf16): its dot emitter takes no bf16, so
before layout assignment ``all-reduce-promotion`` makes each bf16 all-reduce and
reduce-scatter an f32 one, and ``float-normalization-bf16`` computes every other bf16
instruction in f32 -- dots, all-gathers, all-to-alls, collective-permutes, sorts, elementwise
instructions, copies -- between a convert to f32 of each operand and a convert of the result
back to bf16 (f16 dots are run in f32 too). Values stay bf16 where the program holds them;
then instruction fusion takes the converts into loop fusions: an elementwise (loop-fusible)
instruction reads bf16, computes in f32 and writes bf16 in one kernel, and costs nothing
more. A dot, convolution, collective or sort is no loop fusion: its converts are kernels of
their own, so its f32 operands and its f32 result are buffers. And the convert between a
dot and a ``transpose`` of its result keeps the simplifier from folding the transpose into
the dot (it does in f32): the dot gets its default layout and the transpose is a physical
copy.

The rules, for the steps XLA:CPU runs as kernels of their own in f32 (`F32_STEPS`: dot,
convolution, all-gather, all-reduce, reduce-scatter, all-to-all, collective-permute, sort):

1. Operand copies: each bf16/f16 operand is read as an f32 copy, twice its bytes, live at
   the step only (its convert runs just before). A transposed copy (3) is written in f32
   already and is read as it is.
2. The f32 result: a bf16/f16 result is computed in f32, twice its bytes. A dot or
   convolution whose one reader is loop-fusible (the convert back fuses into it) or another
   of these steps (the two converts become that step's operand copy) keeps its result in
   f32: its buffer is twice its bytes. Any other result keeps its 16-bit buffer, and the
   f32 result is a temporary live at the step only: the value a collective gathers is what
   a fold keeps, and XLA holds it in bf16 wherever more than one instruction reads it.
3. Transposed copy: a bf16/f16 ``transpose`` of a dot or convolution, which the model
   otherwise takes for a bitcast, is a step with a buffer of its own: twice its bytes when
   its one reader is one of these steps (the converts fuse into the copy), its bytes
   otherwise.

Loop-fusible steps (elementwise roots, copies, reduces, ...) get nothing: their converts are
fused. The temporaries of rules 1 and 2 are `ComputationLiveness.scratch` (bytes by program
point); the list scheduler sees them as buffers the step defines and nothing reads; a fold
that deletes a step deletes them with it. A buffer held in f32 is never shared in place with
a 16-bit result (XLA shares only buffers of one shape). Not modelled: where the converts of
rule 1 run before the step (they are counted at it), and f32 arithmetic in a module priced
as scheduled (XLA's optimized module already shows it).

Agreement (``benchmarks/price_vs_xla.py``, which prices with this backend): the FSDP remat
training step in bf16 is estimated at +15.8 MiB against XLA:CPU's +15.25 MiB (+21.2 MiB
priced as written), in f16 at +15.8 against +15.75; programs without bf16 or f16 are priced
byte for byte as without it. Where XLA:CPU's own schedule keeps a re-gathered bf16 weight
across a weight gradient's f32 burst and the list schedule here does not (a tied-weight
remat step in bf16: baseline 38.1 MiB against XLA's 44.5, folded 59.5 against 59.6), the
estimate is high by that weight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .buffers import array_bytes
from .fusion_model import BITCAST, LOOP_FUSIBLE, FusionDecisions

if TYPE_CHECKING:
    from ..ir.instruction import HloInstruction
    from ..ir.shape import Shape
    from .liveness import ComputationLiveness

#: Element types XLA:CPU computes in f32.
HALF = frozenset({"bf16", "f16"})
#: Steps XLA:CPU runs in f32 as kernels of their own (their converts are not fused).
F32_STEPS = frozenset("dot convolution all-gather all-reduce reduce-scatter all-to-all collective-permute sort".split())
#: Steps whose result may stay in f32 for its one reader (rule 2); never a collective.
_HOLDS_F32 = frozenset({"dot", "convolution"})
_TAKES_F32 = LOOP_FUSIBLE | F32_STEPS


class Scratch:
    """A step's f32 temporaries (rules 1 and 2) as the list scheduler sees them: a buffer
    the step defines and nothing reads."""

    __slots__ = ("step",)

    def __init__(self, step: HloInstruction) -> None:
        self.step = step

    def __repr__(self) -> str:
        return f"<Scratch {self.step.name}>"


def half_bytes(shape: Shape) -> int:
    """Bytes of the bf16/f16 arrays of `shape` (0 if it cannot be decoded)."""
    try:
        if shape.is_tuple:
            return sum(half_bytes(s) for s in shape.tuple_shapes or ())
        return array_bytes(shape) if shape.element_type.value in HALF else 0
    except (ValueError, AttributeError):
        return 0


def _transposed_copy(inst: HloInstruction) -> bool:
    """Rule 3: a 16-bit transpose of a dot or convolution."""
    return inst.opcode == "transpose" and bool(inst.operands) and inst.operands[0].opcode in _HOLDS_F32 \
        and half_bytes(inst.shape) > 0


class F32Decisions(FusionDecisions):
    """`FusionDecisions` on a backend computing bf16 in f32: a transpose of a dot is no
    bitcast (rule 3)."""

    def kind(self, inst: HloInstruction) -> int:
        found = FusionDecisions.kind(self, inst)
        if found == BITCAST and _transposed_copy(inst):
            return 0
        return found


def _one_reader(inst: HloInstruction) -> HloInstruction | None:
    if inst.user_count != 1:
        return None
    return next(inst.iter_users())


def add_f32_arithmetic(cl: ComputationLiveness, steps: list[HloInstruction]) -> None:
    """Apply the rules to a model just built over `steps` (text order; `cl.sizes` by step):
    resize the buffers held in f32, record each step's temporaries in `cl.scratch`, and take
    the resized buffers out of the in-place candidates."""
    sizes, scratch = cl.sizes, cl.scratch
    root = cl.computation.root
    in_f32: set[HloInstruction] = set()  # transposed copies written in f32
    resized: set[HloInstruction] = set()
    for t, inst in enumerate(steps):
        op = inst.opcode
        if op == "transpose":
            if _transposed_copy(inst) and sizes[t]:
                reader = _one_reader(inst)
                if reader is not None and reader.opcode in F32_STEPS and inst is not root:
                    sizes[t] *= 2
                    in_f32.add(inst)
                    resized.add(inst)
            continue
        if op not in F32_STEPS:
            continue
        extra = 0
        for o in inst.operands:
            if o not in in_f32:
                extra += 2 * half_bytes(o.shape)
        result = half_bytes(inst.shape)
        if result:
            reader = _one_reader(inst)
            if op in _HOLDS_F32 and reader is not None and reader.opcode in _TAKES_F32 and inst is not root \
                    and sizes[t] == result:
                sizes[t] = 2 * result
                resized.add(inst)
            else:
                extra += 2 * result
        if extra:
            scratch[t] = extra
    if resized:
        for inst, mine in list(cl.in_place.items()):
            if not resized.isdisjoint(mine):
                kept = tuple([b for b in mine if b not in resized])
                if kept:
                    cl.in_place[inst] = kept
                else:
                    del cl.in_place[inst]
