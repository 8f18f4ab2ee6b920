"""Liveness of a computation before optimizations, as a compiler would run it.

A module without ``is_scheduled=true`` is not the program a backend runs: XLA fuses it,
turns layout-preserving reshapes and transposes into bitcasts, and schedules it to
minimize memory. This model prices it so:

Steps
    The program points are the instructions that run: every instruction but those
    `fusion_model` makes aliases (fused into their consumers, or bitcasts). A fused
    group is one step, at its root, reading the buffers its members read; a bitcast's
    readers read its operand's buffers. An alias is placed at the step of the last
    instruction it stands for (before any of its consumers), so asking where it is never
    extends a live range.

In place
    XLA writes an instruction's result into the buffer of an operand it reads last when
    the two have the same shape and layout and the result reads that operand element by
    element (``HloDataflowAnalysis::CanShareOperandBufferWithUser``: an elementwise
    instruction, or a loop fusion whose every use of the operand is elementwise; operand
    0 of ``dynamic-update-slice``). A step that may do so lists those buffers
    (`in_place`); where it is their last reader, the buffer's range ends one point
    earlier, so the two count once. Buffer assignment's other sharing (a buffer reused
    by a later, unrelated value) changes no peak and is not modelled.

Schedule
    The better of the text order and the list schedule (`schedule`), measured on the
    buffers the steps define; the model is built once, in the order chosen.

Everything else (what allocates, live ranges, nested computations) is `liveness`'s.
Building over steps rather than every instruction keeps the price cheap: a JAX module
before optimizations has two or three instructions per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .buffers import Leaf
from .f32_arithmetic import F32Decisions, Scratch, add_f32_arithmetic
from .fusion_model import BITCAST, ELEMENTWISE, FUSED, FusionDecisions
from .liveness import MEMORY_MINIMIZING, ComputationLiveness, definition_order
from .schedule import Steps, list_schedule

if TYPE_CHECKING:
    from ..ir.computation import HloComputation
    from ..ir.instruction import HloInstruction
    from .buffers import Buffer
    from .module_liveness import ModuleLiveness


def compiled_liveness(ml: ModuleLiveness, comp: HloComputation) -> ComputationLiveness:
    """The model of `comp` over the steps a compiler runs, under the better schedule."""
    text = comp.instructions if comp.definition_ordered else definition_order(comp.name, comp.instructions)
    cl = ComputationLiveness.blank(comp, MEMORY_MINIMIZING)
    try:
        steps, through, inputs = _steps(cl, ml, text)
    except KeyError:  # raised by an operand outside the computation
        definition_order(comp.name, text)  # says which one
        raise
    if ml.f32_arithmetic:  # the backend computes bf16 and f16 in f32 (`f32_arithmetic`)
        add_f32_arithmetic(cl, steps)
    plan = _schedule_input(cl, steps, inputs)
    order, listed_peak, text_peak = list_schedule(plan)
    cl.plan = SchedulePlan(steps, plan, min(listed_peak, text_peak))
    _place(cl, steps, [steps[t] for t in order] if listed_peak < text_peak else steps, through)
    _close_ranges(cl, plan.held)
    return cl


class SchedulePlan:
    """What the schedule of a compiler-shaped model was chosen from, kept so that the
    folded program can be scheduled anew (`rescheduled_peak`): the steps in text order,
    the scheduler's input over them, and the peak of the better order."""

    __slots__ = ("steps", "input", "peak")

    def __init__(self, steps: list[HloInstruction], input: Steps, peak: int) -> None:  # noqa: A002
        self.steps, self.input, self.peak = steps, input, peak


def rescheduled_peak(cl: ComputationLiveness, forward: dict[Buffer, Buffer],
                     deleted: set[HloInstruction]) -> int:
    """`cl`'s peak once some of its buffers are merged into others (`forward`: a merged
    buffer -> the one it went into, which may be merged in turn) and some steps `deleted`,
    with the program scheduled anew, as a compiler schedules the program it is given: the
    better of the list schedule and the text order of what is left. Static and nested
    bytes are taken as before."""

    def find(b: Buffer) -> Buffer:
        while b in forward:
            b = forward[b]
        return b

    plan = cl.plan
    steps = plan.input
    held = {find(b) for b in steps.held}
    gone = held.union(forward)  # a read of a held buffer is no reader: it is never freed
    reads = list(steps.reads)
    defines = list(steps.defines)
    for t, inst in enumerate(plan.steps):
        mine = reads[t]
        if inst in deleted:
            reads[t] = defines[t] = ()
        elif mine and not gone.isdisjoint(mine):
            reads[t] = tuple({s: None for s in map(find, mine) if s not in held})
    shares = {t: tuple(map(find, mine)) for t, mine in steps.shares.items() if plan.steps[t] not in deleted}
    _, listed, text = list_schedule(steps.with_buffers(reads, defines, held, shares))
    return cl.peak_bytes + min(listed, text) - plan.peak


def in_place(inst: HloInstruction, cl: ComputationLiveness, fused: set[HloInstruction]) -> tuple:
    """The buffers step `inst` may write its result into, in operand order: plain buffers
    of its shape text that it reads only through elementwise instructions (its fused
    members in `fused`), never a static one."""
    text = inst.shape_text
    if text is None:
        return ()
    leaves, static = cl.leaves, cl.static
    operands = inst.operands[:1] if inst.opcode == "dynamic-update-slice" else inst.operands
    found: dict = {}
    for o in operands:
        for b in leaves.get(o, (o,)):
            if type(b) is not Leaf and b not in static and b.shape_text == text:
                found[b] = None
    if not found or not any(o in fused for o in operands):
        return tuple(found)
    # Through the fused members: a buffer a member that is not elementwise reads is barred.
    barred: set = set()
    stack = [o for o in operands if o in fused]
    seen: set[HloInstruction] = set()
    while stack:
        o = stack.pop()
        if o in seen:
            continue
        seen.add(o)
        if o.opcode not in ELEMENTWISE:
            barred.update(leaves[o])
            continue
        stack += [x for x in o.operands if x in fused]
    return tuple([b for b in found if b not in barred]) if barred else tuple(found)


def _steps(cl: ComputationLiveness, ml: ModuleLiveness, text: list[HloInstruction]
           ) -> tuple[list[HloInstruction], dict[HloInstruction, tuple], list[list[int]]]:
    """One loop over the text order: the steps in text order, with their buffers and
    sizes (by text step) in `cl`, and the steps each waits for (all-gathers chained in
    text order); each alias's buffers in `cl.leaves`, and the steps it stands for
    (`through`; a fused group leaves the static ones out of both)."""
    kind_of = (F32Decisions if ml.f32_arithmetic else FusionDecisions)(cl.computation, text).kind
    steps: list[HloInstruction] = []
    inputs: list[list[int]] = []
    through: dict[HloInstruction, tuple] = {}
    leaves, static, sizes = cl.leaves, cl.static, cl.sizes
    position = cl.position
    fused: set[HloInstruction] = set()
    shares = cl.in_place
    previous_gather = -1
    for inst in text:
        kind = kind_of(inst)
        if kind:
            if kind == FUSED:
                fused.add(inst)
            operands = inst.operands
            if kind == BITCAST or len(operands) == 1:  # operand 0's buffers, read in place
                o = operands[0]
                mine = leaves.get(o)
                if mine is None:  # a plain step: one tuple for both, as a fused group may share them
                    leaves[inst] = through[inst] = (o,)
                else:
                    leaves[inst] = mine
                    through[inst] = through.get(o, (o,))
                continue
            found: dict = {}
            same = True  # the group's buffers are the steps it stands for: one tuple for both
            for o in operands:
                mine = leaves.get(o)
                if mine is None:
                    if o not in static:
                        found[o] = None
                    continue
                if through.get(o) is not mine:
                    same = False
                for b in mine:
                    if b not in static:
                        found[b] = None
            leaves[inst] = group = tuple(found)
            if same:
                through[inst] = group
                continue
            stands: dict = {}
            for o in operands:
                for x in through.get(o, (o,)):
                    if x not in static:
                        stands[x] = None
            through[inst] = tuple(stands)
            continue
        t = position[inst] = len(steps)
        steps.append(inst)
        sizes.append(0)
        waits = []
        for o in inst.operands:
            found = through.get(o)
            if found is None:
                waits.append(position[o])
            else:
                waits += [position[x] for x in found]
        op = inst.opcode
        if op == "all-gather":
            if previous_gather >= 0:
                waits.append(previous_gather)
            previous_gather = t
        elif op in ELEMENTWISE or op == "dynamic-update-slice":
            mine = in_place(inst, cl, fused)
            if mine:
                shares[inst] = mine
        inputs.append(waits)
        if cl.admit(inst, t, ml, inst.shape_text):
            cl.classify(inst, t, ml)
    return steps, through, inputs


def _schedule_input(cl: ComputationLiveness, steps: list[HloInstruction], inputs: list[list[int]]) -> Steps:
    """The steps as the scheduler sees them: the buffers each reads and defines (none for
    a step that only aliases, like a tuple), never a static one or one the result holds."""
    leaves, defines, static, sizes, position = cl.leaves, cl.defines, cl.static, cl.sizes, cl.position
    root = cl.computation.root
    held = set(cl.leaves_of(root)) if root is not None else set()
    kept = static | held  # never freed: not read here
    size: dict[Buffer, int] = {}
    reads: list[tuple] = []
    own: list[tuple] = []
    for t, inst in enumerate(steps):
        if inst in leaves:
            mine = defines.get(inst)
            if not mine:  # aliases its operands (a tuple, a get-tuple-element): costs nothing
                reads.append(())
                own.append(())
                continue
            mine = tuple([b for b in mine if b not in static])
            for b in mine:
                size[b] = b.size
        elif inst in static:
            mine = ()
        else:
            mine = (inst,)
            size[inst] = sizes[t]
        own.append(mine)
        read: dict = {}
        for o in inst.operands:
            for b in leaves.get(o, (o,)):
                if b not in kept:
                    read[b] = None
        reads.append(tuple(read))
    for mine in reads:  # buffers defined by a step this one reads through a tuple
        for b in mine:
            if b not in size:
                size[b] = b.size if type(b) is Leaf else sizes[position[b]]
    shares = {position[inst]: tuple([b for b in mine if b not in kept]) for inst, mine in cl.in_place.items()}
    for t, extra in cl.scratch.items():  # a step's f32 temporaries: defined, read by nothing
        b = Scratch(steps[t])
        own[t] += (b,)
        size[b] = extra
    return Steps(inputs, reads, own, [inst.user_count for inst in steps], size, held, shares)


def _place(cl: ComputationLiveness, steps: list[HloInstruction], order: list[HloInstruction],
           through: dict[HloInstruction, tuple]) -> None:
    """Put the model built over `steps` (text order) in `order`: program points, sizes and
    call sites moved; an alias's point is found when asked (`_Positions`)."""
    old = cl.position
    n = len(order)
    position = cl.position = _Positions(zip(order, range(n)))
    position.through = through
    sizes = cl.sizes
    cl.sizes = [sizes[old[inst]] for inst in order]
    cl.nested = {position[steps[t]]: v for t, v in cl.nested.items()}
    if cl.scratch:
        cl.scratch = {position[steps[t]]: v for t, v in cl.scratch.items()}
    cl.instructions = order
    cl.ends = list(range(n))
    cl.leaf_ends = {b: position[b.instruction] for b in cl.leaf_ends}


class _Positions(dict):
    """Program points by instruction: a step's, and for an alias the point of the last
    step it stands for (0 if only static ones), worked out on first request: few aliases
    are ever asked for, and there are two or three times as many as steps."""

    through: dict[HloInstruction, tuple]

    def __missing__(self, inst: HloInstruction) -> int:
        stands = self.through[inst]  # KeyError: not in this computation
        p = self[inst] = max([self[s] for s in stands]) if stands else 0
        return p

    def __contains__(self, inst: object) -> bool:
        return dict.__contains__(self, inst) or inst in self.through


def _close_ranges(cl: ComputationLiveness, held: set[Buffer]) -> None:
    """Each buffer lives to its last reading step (a get-tuple-element reads its element,
    any other step every buffer of every operand, through the aliases), a result's (in
    `held`, the scheduler's set) to the end; then the live bytes. Steps come in order, so
    the last reader is the last written."""
    position, ends, leaf_ends, static, leaves = cl.position, cl.ends, cl.leaf_ends, cl.static, cl.leaves
    element_readers = cl.element_readers
    for p, inst in enumerate(cl.instructions):
        for o in inst.operands:
            found = leaves[inst] if inst in element_readers else leaves.get(o)
            if found is None:
                if o not in static:
                    ends[position[o]] = p
                continue
            for b in found:
                if type(b) is Leaf:
                    if b in leaf_ends:
                        leaf_ends[b] = p
                elif b not in static:
                    ends[position[b]] = p
    for b in held:
        cl.extend(b, len(cl.instructions) - 1)
    for inst, mine in cl.in_place.items():  # the result takes a buffer it reads last
        p = position[inst]
        for b in mine:
            q = position[b]
            if ends[q] == p and q < p and b not in held:
                ends[q] = p - 1
                break
    cl.live_bytes = cl.profile()
