"""Buffer liveness of HLO computations under their instruction order.

Folding a backward re-gather onto the forward gather undoes ``jax.checkpoint``: the kept
gather's buffer now lives from the forward pass into the backward pass. Pricing that
needs an estimate of the live bytes at every program point. This module is that
estimate; `fold_price` keeps it up to date as folds are applied. The model follows XLA's
HloDataflowAnalysis (which instruction defines which value) and HloLiveRange (how long a
value lives), simplified where XLA's answer depends on the backend:

Schedule
    When the module has ``is_scheduled=true``, a computation's instruction order is its
    schedule, exactly XLA's sequence, and every instruction is priced as written (XLA
    already fused it). A module before optimizations is priced as a compiler would run
    it (`compiled_liveness`): its program points are the steps that run (a fused group
    once, no bitcast; `fusion_model`), under the better of the text order and a list
    schedule (`schedule`), like XLA's default memory scheduler. ``schedule`` on each
    computation's model says which (``MODULE_SCHEDULE``, ``MEMORY_MINIMIZING``, or
    ``TEXT_ORDER`` when the compiler model is turned off for an unscheduled module). An
    instruction a pass appended after its users (the preprocess-kernel pass's clones)
    is placed right before its first user, as the printer writes it. An instruction
    written without a shape that cannot be inferred (XLA's text allows omitting it)
    counts 0 bytes and is listed in ``unsized``.

What allocates and what aliases
    See `buffers`: XLA's dataflow rules (tuple, get-tuple-element, bitcast, opt-barrier,
    while and the async pairs alias; everything else allocates); parameters and constants
    are static, live at every program point.

Live ranges
    A buffer is live from its defining instruction to its last reader, both inclusive
    (at an instruction its operands and its result coexist). An instruction reads every
    leaf of every operand, except ``get-tuple-element``, which reads only its element.
    Aliasing instructions are readers too, so a buffer lives as long as any alias of it
    is read. Root leaves live to the end. A buffer nothing reads lives at its definition
    only. Static buffers live throughout.

Called computations
    * ``fusion`` bodies and the scalar computations of ``reduce``, ``sort``, ``scatter``,
      ``map``, collectives, ... are not separate buffers (XLA emits them as loops over
      the fusion's output); only the calling instruction's result counts.
    * ``while`` (body and condition), ``conditional`` (branches), ``call`` and
      ``async-start`` run the callee at the call point: its *nested* bytes, the largest
      over the callees of ``max over t of (live(t) - parameter bytes - bytes of the
      root's own buffers live at t)``, are added at that program point. Parameters
      alias the caller's operands, and the root's buffers are the result the caller
      holds at that point (for ``while``, the loop state XLA colocates them with), so
      neither is counted twice.

Output per computation: every buffer's live range, the live bytes at every program point,
the peak and its first program point.
"""

from __future__ import annotations

from itertools import accumulate, chain
from operator import sub
from typing import TYPE_CHECKING

from ..plain import FrozenRecord, init_frozen
from .buffers import (
    GTE,
    STATIC,
    Buffer,
    Leaf,
    alias_leaves,
    array_bytes,
    kind_of,
    leaf_indices,
    new_leaves,
    runs_callee,
)

if TYPE_CHECKING:
    from ..ir.computation import HloComputation
    from ..ir.instruction import HloInstruction
    from .compiled_liveness import SchedulePlan
    from .module_liveness import ModuleLiveness

# Opcode classes of the build loop: 0 is a plain definer.
STATIC_CODE = 1  # parameter, constant
SPECIAL_CODE = 2  # visited one by one: aliases, calls

#: Which schedule a model's program points follow (`ComputationLiveness.schedule`).
MODULE_SCHEDULE = "module's schedule"  # an is_scheduled=true module's own order
TEXT_ORDER = "text order"
MEMORY_MINIMIZING = "memory-minimizing schedule"  # `schedule.memory_minimizing`

class BufferRange(FrozenRecord):
    """One buffer's live range in program points of its computation (both inclusive): the
    leaf at shape `index` (() for an array) of `instruction`; `static` for a parameter or
    constant, live throughout."""

    __slots__ = ("instruction", "index", "bytes", "start", "end", "static")

    def __init__(self, instruction: str, index: tuple[int, ...], bytes: int, start: int, end: int,  # noqa: A002
                 static: bool) -> None:
        init_frozen(self, instruction, index, bytes, start, end, static)


class ComputationLiveness:
    """Liveness of one computation: buffers, their live ranges, live bytes per point.

    Built in linear time by one loop over the instructions (program points, each
    operand's last reader, plain buffer sizes), a visit of each instruction that is not
    a plain array definer (aliases, tuples, parameters, constants, calls), and a prefix
    sum of bytes defined minus bytes whose range ended. On a million instructions every
    pass over the instruction objects costs a visible share of parsing, so there is one.
    The compiler-shaped model (`compiled_liveness`) fills the same fields over its steps;
    there an alias's `position` is a step's, and `instructions` lists the steps only.
    """

    def __init__(self, module_liveness: ModuleLiveness, computation: HloComputation,
                 schedule: str = TEXT_ORDER) -> None:
        """The model of `computation` in its instruction order, which is the schedule
        `schedule` names (`compiled_liveness` builds the compiler-shaped one)."""
        self._start(computation, schedule)
        texts = None
        if computation.definition_ordered:
            insts = computation.instructions
            texts = computation.shape_texts()
        else:
            # A pass appended instructions after their users (the preprocess-kernel pass's
            # clones): place each right before its first user, as the printer writes it.
            insts = definition_order(computation.name, computation.instructions)
        self.instructions = insts
        for p in self._scan(insts, module_liveness, texts):
            self.classify(insts[p], p, module_liveness)
        self._extend_through_aliases()
        root = computation.root
        for b in self.leaves_of(root) if root is not None else ():
            self.extend(b, len(insts) - 1)
        self.live_bytes: list[int] = self.profile()

    @classmethod
    def blank(cls, computation: HloComputation, schedule: str) -> ComputationLiveness:
        """A model with no instruction yet, for a builder that places them itself."""
        self = cls.__new__(cls)
        self._start(computation, schedule)
        self.instructions = []
        self.position = {}
        self.sizes = []
        self.static_bytes = 0
        return self

    def _start(self, computation: HloComputation, schedule: str) -> None:
        self.computation = computation
        self.schedule = schedule
        self.static: set[Buffer] = set()  # parameters and constants: live throughout
        self.unsized: list[HloInstruction] = []  # written without a shape, not inferable: 0 bytes
        # Everything but a plain definer: the buffers its value lives in, and the ones it defines.
        self.leaves: dict[HloInstruction, tuple[Buffer, ...]] = {}
        self.defines: dict[HloInstruction, tuple[Leaf, ...]] = {}
        self.leaf_ends: dict[Leaf, int] = {}
        self.element_readers: set[HloInstruction] = set()  # get-tuple-elements
        self.nested: dict[int, int] = {}  # program point -> nested bytes of its callees
        # Compiler model on a backend computing bf16 in f32: program point -> bytes of the
        # step's f32 temporaries, live at it only (`f32_arithmetic`).
        self.scratch: dict[int, int] = {}
        # Compiler model: per step, the buffers its result may be written into (`compiled_liveness.in_place`).
        self.in_place: dict[HloInstruction, tuple[Buffer, ...]] = {}
        self.plan: SchedulePlan | None = None  # compiler model: what its schedule was chosen from

    # ----------------------------------------------------------------- building
    def _scan(self, insts: list[HloInstruction], ml: ModuleLiveness, texts: list[str | None] | None) -> list[int]:
        """The one loop over all instructions: each operand's last reader, plain buffer
        sizes, static bytes. Returns the points to visit one by one. `insts` lists every
        operand before its users; `texts` are their shape texts when they are the
        computation's own order (`shape_texts`: a property read per instruction is a
        visible share of this loop)."""
        n = len(insts)
        position = self.position = self.computation.positions() if texts is not None else dict(zip(insts, range(n)))
        if texts is None:
            texts = [inst.shape_text for inst in insts]
        # A plain definer (array-shaped, not an alias, not static) is its own buffer:
        # its bytes and last program point are kept by program point.
        sizes = self.sizes = [0] * n
        ends = self.ends = list(range(n))  # nothing reads it: live at its definition
        special: list[int] = []
        self.static_bytes = 0
        text_size, opcode_code = ml.text_size, ml.opcode_code
        admit = self.admit
        try:
            for p, inst, text in zip(range(n), insts, texts):
                for o in inst.operands:
                    ends[position[o]] = p  # a later reader overwrites an earlier one
                # The plain definer whose shape and opcode are known, inline: subscripts,
                # not .get or a call, since a call per instruction is a visible share here.
                try:
                    if not opcode_code[inst.opcode]:
                        size = text_size[text]  # a shape decoded once per distinct text
                        if size >= 0:
                            sizes[p] = size
                            continue
                except KeyError:
                    pass
                if admit(inst, p, ml, text):
                    special.append(p)
        except KeyError:  # raised by an operand outside the computation
            definition_order(self.computation.name, insts)  # says which one
            raise
        return special

    def admit(self, inst: HloInstruction, p: int, ml: ModuleLiveness, text: str | None) -> bool:
        """Record the buffer of `inst` at point `p` (shape text `text`) if it is a plain
        definer, a static one, or of a shape that cannot be known (0 bytes, `unsized`);
        True if it needs a visit of its own (`classify`)."""
        try:
            size = ml.text_size[text] if text in ml.text_size else ml.learn_shape(inst)
        except ValueError:
            self.unsized.append(inst)
            return False
        op = inst.opcode
        code = ml.opcode_code[op] if op in ml.opcode_code else ml.learn_opcode(op)
        if code or size < 0:
            if code == STATIC_CODE and size >= 0:  # array parameter or constant
                self.static.add(inst)
                self.static_bytes += size
                return False
            return True
        self.sizes[p] = size
        return False

    def classify(self, inst: HloInstruction, p: int, ml: ModuleLiveness) -> None:
        """Leaves and own buffers of an instruction that is not a plain definer."""
        code, arg = kind_of(inst.opcode)
        try:
            # Most aliases are read from their operands' leaves alone: their own shape is
            # decoded only when the rule needs it.
            found = None if code <= STATIC else alias_leaves(inst, code, arg, ml.shape_info, self.leaves_of)
            info = ml.shape_info(inst.shape) if found is None else None
        except ValueError:  # an operand's shape is unknown (see `unsized`)
            self.unsized.append(inst)
            return
        if runs_callee(inst.opcode) and inst.called_computations:
            self.nested[p] = ml.nested_bytes_of(inst, self.computation)
        if info is not None and code <= STATIC:  # array parameters and constants never come here
            if info.leaf_sizes is None:  # an array-shaped call: a plain definer
                self.sizes[p] = info.size
                return
            own = new_leaves(inst, info, range(len(info.leaf_sizes)))
            self.leaves[inst] = self.defines[inst] = own
            for b in own:
                if code == STATIC:
                    self.static.add(b)
                    self.static_bytes += b.size
                else:
                    self.leaf_ends[b] = p
            return
        if info is not None:  # the aliasing rule does not fit this shape: a plain definer
            self.sizes[p] = info.size
            return
        self.leaves[inst] = found
        own = tuple(b for b in found if type(b) is Leaf and b.instruction is inst)
        if own:
            self.defines[inst] = own
            for b in own:
                self.leaf_ends[b] = p
        elif code == GTE:
            self.element_readers.add(inst)

    def _extend_through_aliases(self) -> None:
        """Readers of an alias's (or tuple definer's) value keep its buffers live.

        A get-tuple-element reads its element where it stands; every other user reads
        all leaves; get-tuple-element users are aliases themselves, handled in turn.
        (One loop with the extension inlined: under the compiler model most
        instructions come here.)"""
        position, element_readers = self.position, self.element_readers
        ends, leaf_ends, static = self.ends, self.leaf_ends, self.static
        for inst, leaves in self.leaves.items():
            if not leaves:
                continue
            end = position[inst] if inst in element_readers else -1
            for user in inst.iter_users():
                if user not in element_readers:
                    q = position[user]
                    if q > end:
                        end = q
            if end < 0:
                continue
            for b in leaves:
                if type(b) is Leaf:
                    if b in leaf_ends and leaf_ends[b] < end:
                        leaf_ends[b] = end
                elif b not in static:
                    p = position[b]
                    if ends[p] < end:
                        ends[p] = end

    def extend(self, b: Buffer, end: int) -> None:
        if type(b) is Leaf:
            if b in self.leaf_ends and self.leaf_ends[b] < end:
                self.leaf_ends[b] = end
        elif b not in self.static:
            p = self.position[b]
            if self.ends[p] < end:
                self.ends[p] = end

    def profile(self) -> list[int]:
        """Live bytes per point: prefix sum of bytes defined minus bytes whose range ended."""
        n = len(self.instructions)
        if n == 0:
            return []
        ended = [0] * n  # bytes whose range ends at each point: gone from the next one on
        for end, size in zip(self.ends, self.sizes):
            ended[end] += size
        starts = list(self.sizes)
        position = self.position
        for b, end in self.leaf_ends.items():
            starts[position[b.instruction]] += b.size
            ended[end] += b.size
        starts[0] += self.static_bytes
        # One running sum of (bytes starting at t) - (bytes that ended at t - 1).
        live = list(accumulate(map(sub, starts, chain((0,), ended))))
        for p, extra in self.nested.items():
            live[p] += extra
        for p, extra in self.scratch.items():
            live[p] += extra
        return live

    # ------------------------------------------------------------------ buffers
    def leaves_of(self, inst: HloInstruction) -> tuple[Buffer, ...]:
        """The buffers an instruction's value lives in, depth-first by leaf."""
        found = self.leaves.get(inst)
        return (inst,) if found is None else found

    def own_buffers(self, inst: HloInstruction) -> tuple[Buffer, ...]:
        """The buffers `inst` defines (empty for a pure alias)."""
        if inst not in self.leaves:
            return (inst,)
        return self.defines.get(inst, ())

    def reads(self, inst: HloInstruction) -> tuple[Buffer, ...]:
        """The buffers `inst` reads: every operand leaf, a get-tuple-element its element."""
        if inst in self.element_readers:
            return self.leaves[inst]
        operands = inst.operands
        if len(operands) == 1:
            return self.leaves_of(operands[0])
        return tuple(chain.from_iterable(map(self.leaves_of, operands)))

    def size_of(self, b: Buffer) -> int:
        if type(b) is Leaf:
            return b.size
        if b in self.static:
            return array_bytes(b.shape)
        return self.sizes[self.position[b]]

    def start_of(self, b: Buffer) -> int:
        if b in self.static:
            return 0
        return self.position[b.instruction if type(b) is Leaf else b]

    def end_of(self, b: Buffer) -> int:
        """The buffer's last program point (its last reader, the end, or its definition)."""
        if b in self.static:
            return len(self.instructions) - 1
        if type(b) is Leaf:
            return self.leaf_ends[b]
        return self.ends[self.position[b]]

    # ---------------------------------------------------------------- results
    @property
    def peak_bytes(self) -> int:
        return max(self.live_bytes) if self.live_bytes else 0

    @property
    def peak_position(self) -> int:
        """The first program point where the live bytes reach the peak (-1 if empty)."""
        live = self.live_bytes
        return live.index(max(live)) if live else -1

    @property
    def peak_instruction(self) -> HloInstruction | None:
        p = self.peak_position
        return self.instructions[p] if p >= 0 else None

    def parameter_bytes(self) -> int:
        return sum(self.size_of(b) for p in self.computation.parameters for b in self.leaves_of(p))

    def result_buffers(self, root: HloInstruction | None = None) -> set[Buffer]:
        """The root's buffers that are not parameters: what a caller receives as its result."""
        root = self.computation.root if root is None else root
        if root is None:
            return set()
        params = {b for p in self.computation.parameters for b in self.leaves_of(p)}
        return set(self.leaves_of(root)) - params

    def nested_profile(self, live: list[int], results: set[Buffer]) -> list[int]:
        """`live` minus the parameters and the result buffers live at each point: what
        running this computation adds on top of its caller, point by point."""
        steps = [0] * (len(live) + 1)
        for b in results:
            steps[self.start_of(b)] += self.size_of(b)
        base = self.parameter_bytes()
        return [v - base - r for v, r in zip(live, accumulate(steps))]

    def buffers(self) -> list[BufferRange]:
        """Every buffer of the computation with its live range, in definition order."""
        out = []
        for inst in self.instructions:
            own = self.own_buffers(inst)
            indices = leaf_indices(inst.shape) if own and type(own[0]) is Leaf else [()]
            for b in own:
                index = indices[b.index] if type(b) is Leaf else ()
                out.append(BufferRange(inst.name, index, self.size_of(b), self.start_of(b),
                                       self.end_of(b), b in self.static))
        return out


def definition_order(name: str, insts: list[HloInstruction]) -> list[HloInstruction]:
    """`insts` with every instruction moved after its operands, otherwise in order."""
    members = set(insts)
    placed: set[HloInstruction] = set()
    order: list[HloInstruction] = []
    for start in insts:
        if start in placed:
            continue
        stack = [(start, iter(start.operands))]
        visiting = {start}
        while stack:
            node, operands = stack[-1]
            for o in operands:
                if o not in placed:
                    if o in visiting or o not in members:
                        raise ValueError(f"{name}: {o.name} is part of a cycle or not in this computation")
                    visiting.add(o)
                    stack.append((o, iter(o.operands)))
                    break
            else:
                stack.pop()
                visiting.discard(node)
                placed.add(node)
                order.append(node)
    return order
