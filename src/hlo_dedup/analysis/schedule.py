"""A memory-minimizing schedule for an unscheduled computation, like XLA's list scheduler.

A module before optimizations has no schedule: its text order is one valid order (JAX's
keeps every gradient alive to the end of the backward pass), and a backend schedules
anew. XLA's default memory scheduler (``hlo_memory_scheduler.cc``) runs a list
scheduler, a DFS scheduler and the post order and keeps whichever peaks lowest; the
liveness model (`liveness`) does the same with the list scheduler here and the text
order (XLA prints post order), and reports the schedule as ``memory-minimizing``.

The list scheduler is XLA's greedy one: among the instructions whose operands are all
scheduled, take the one with the highest ``bytes freed - bytes defined`` (bytes freed:
the buffers it reads of which it is the last unscheduled reader, not the result's), then
the most users, then the earliest in the text. Buffers and readers are those of the
liveness model it is given, so bitcasts and fused instructions (`fusion_model`) cost
nothing and their readers read the underlying buffers. Each instruction's freed bytes
are kept up to date as readers are scheduled (a buffer down to one reader credits that
reader) and the ready set is a heap with stale entries skipped, so the schedule costs
O((n + reads) log n).

All-gathers keep their text order (each waits for the one before it): the dedup pass
keeps the first of equal gathers in the text, and its price needs the kept one first.
Control dependencies are not read; nested computations' bytes at call sites are not in
the priority (XLA adds them; a computation with folds rarely has large callees).
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import TYPE_CHECKING, Protocol

from .buffers import Leaf

if TYPE_CHECKING:
    from ..ir.instruction import HloInstruction
    from ..ir.computation import HloComputation
    from .buffers import Buffer


class _Model(Protocol):
    """What the scheduler reads of a `liveness.ComputationLiveness`."""

    computation: HloComputation
    instructions: list[HloInstruction]
    position: dict[HloInstruction, int]
    static: set[Buffer]
    sizes: list[int]  # a plain definer's bytes, by position
    leaves: dict[HloInstruction, tuple[Buffer, ...]]  # every instruction that is not a plain definer
    defines: dict[HloInstruction, tuple[Leaf, ...]]

    def leaves_of(self, inst: HloInstruction) -> tuple[Buffer, ...]: ...


def list_schedule(model: _Model) -> tuple[list[HloInstruction], int, int]:
    """The instructions of `model`'s computation in the list scheduler's order, and the
    peak bytes of the buffers it defines under that order and under the text order
    (`model.instructions`), each buffer live from its definition to its last reader, a
    result buffer to the end: what choosing between the two needs (static buffers and
    nested computations add the same to both, and are left out)."""
    insts = model.instructions
    n = len(insts)
    position = model.position
    static = model.static
    root = model.computation.root
    held = set(model.leaves_of(root)) if root is not None else set()
    kept = static | held  # never freed: not read here
    leaves = model.leaves
    defines = model.defines
    sizes = model.sizes

    # Readers of every buffer that can be freed, what each instruction defines, and the
    # dependencies: operands (one count per use) and the previous all-gather. An
    # instruction that defines nothing (an alias, a fused producer) is scheduled as soon as
    # its operands are and reads nothing here: its users read the same buffers.
    free = [False] * n
    reads: list[tuple[Buffer, ...]] = [()] * n
    readers: dict[Buffer, list[int]] = {}
    defined = list(sizes)  # a plain definer's bytes (0 for parameters and constants)
    waiting = [0] * n
    successors: list[list[int]] = [[] for _ in range(n)]
    previous_gather = -1
    for p, inst in enumerate(insts):
        operands = inst.operands
        for o in operands:
            successors[position[o]].append(p)
        waiting[p] = len(operands)
        if inst.opcode == "all-gather":
            if previous_gather >= 0:
                successors[previous_gather].append(p)
                waiting[p] += 1
            previous_gather = p
        if inst in leaves:
            own = defines.get(inst)
            if not own:
                free[p] = True
                continue
            defined[p] = sum([b.size for b in own if b not in static])
        mine = {}
        for o in operands:
            found = leaves.get(o)
            if found is None:  # a plain definer: its own buffer
                if o not in kept:
                    mine[o] = None
                continue
            for b in found:
                if b not in kept:
                    mine[b] = None
        reads[p] = mine = tuple(mine)
        for b in mine:
            found = readers.get(b)
            if found is None:
                readers[b] = [p]
            else:
                found.append(p)

    size_of = {b: b.size if type(b) is Leaf else sizes[position[b]] for b in readers}
    counts = {b: len(r) for b, r in readers.items()}
    remaining = dict(counts)
    freed = [0] * n  # bytes of the buffers each instruction is the last unscheduled reader of
    for b, r in readers.items():
        if len(r) == 1:
            freed[r[0]] += size_of[b]
    dead = [0] * n  # bytes an instruction defines that nothing reads: gone after it
    for p, size in enumerate(defined):
        if size:
            inst = insts[p]
            if inst in leaves:
                dead[p] = sum([b.size for b in defines[inst] if b not in readers and b not in held])
            elif inst not in readers and inst not in held:
                dead[p] = size

    done = [False] * n
    ready = [False] * n
    heap: list[tuple[int, int, int]] = []
    order: list[HloInstruction] = []
    live = peak = 0
    now = [p for p in range(n) if not waiting[p]]  # ready, and costing nothing or next in the heap
    while True:
        while now:
            p = now.pop()
            if not free[p]:
                ready[p] = True
                heappush(heap, (defined[p] - freed[p], -insts[p].user_count, p))
                continue
            done[p] = True
            order.append(insts[p])
            for q in successors[p]:
                left = waiting[q] = waiting[q] - 1
                if not left:
                    now.append(q)
        if not heap:
            break
        key, users, p = heappop(heap)
        if done[p] or key != defined[p] - freed[p]:
            continue  # scheduled already, or its priority changed since it was pushed
        done[p] = True
        order.append(insts[p])
        live += defined[p]
        if live > peak:
            peak = live
        live -= dead[p]
        for b in reads[p]:
            left = remaining[b] = remaining[b] - 1
            if not left:
                live -= size_of[b]
            elif left == 1:  # the last unscheduled reader now frees it
                last = next(q for q in readers[b] if not done[q])
                freed[last] += size_of[b]
                if ready[last]:
                    heappush(heap, (defined[last] - freed[last], -insts[last].user_count, last))
        for q in successors[p]:
            left = waiting[q] = waiting[q] - 1
            if not left:
                now.append(q)
    if len(order) != n:
        raise ValueError(f"{model.computation.name}: the operand graph has a cycle")
    return order, peak, _text_peak(reads, counts, defined, dead, size_of)


def _text_peak(reads: list[tuple[Buffer, ...]], counts: dict[Buffer, int], defined: list[int], dead: list[int],
               size_of: dict[Buffer, int]) -> int:
    """The peak `list_schedule` measures, under the text order."""
    remaining = dict(counts)
    live = peak = 0
    for p, mine in enumerate(reads):
        live += defined[p]
        if live > peak:
            peak = live
        live -= dead[p]
        for b in mine:
            left = remaining[b] = remaining[b] - 1
            if not left:
                live -= size_of[b]
    return peak
