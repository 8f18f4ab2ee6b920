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

if TYPE_CHECKING:
    from ..ir.instruction import HloInstruction
    from .buffers import Buffer


class _Model(Protocol):
    """What the scheduler reads of a `liveness.ComputationLiveness`."""

    instructions: list[HloInstruction]
    position: dict[HloInstruction, int]
    static: set[Buffer]

    def reads(self, inst: HloInstruction) -> tuple[Buffer, ...]: ...
    def own_buffers(self, inst: HloInstruction) -> tuple[Buffer, ...]: ...
    def size_of(self, b: Buffer) -> int: ...
    def leaves_of(self, inst: HloInstruction) -> tuple[Buffer, ...]: ...


def list_schedule(model: _Model) -> list[HloInstruction]:
    """The instructions of `model`'s computation in the list scheduler's order."""
    insts = model.instructions
    n = len(insts)
    position = model.position
    static = model.static
    root = model.computation.root  # type: ignore[attr-defined]
    held = set(model.leaves_of(root)) if root is not None else set()
    size_of = model.size_of

    # Readers of every buffer that can be freed, and what each instruction defines.
    reads: list[tuple[Buffer, ...]] = []
    readers: dict[Buffer, list[int]] = {}
    defined = [0] * n
    for p, inst in enumerate(insts):
        mine = tuple({b: None for b in model.reads(inst) if b not in static and b not in held})
        reads.append(mine)
        for b in mine:
            found = readers.get(b)
            if found is None:
                readers[b] = [p]
            else:
                found.append(p)
        defined[p] = sum(size_of(b) for b in model.own_buffers(inst) if b not in static)
    remaining = {b: len(r) for b, r in readers.items()}
    freed = [0] * n  # bytes of the buffers each instruction is the last unscheduled reader of
    for b, r in readers.items():
        if len(r) == 1:
            freed[r[0]] += size_of(b)

    # Dependencies: distinct operands, and the previous all-gather.
    waiting = [0] * n
    successors: list[list[int]] = [[] for _ in range(n)]
    previous_gather = -1
    for p, inst in enumerate(insts):
        operands = {position[o] for o in inst.operands}
        if inst.opcode == "all-gather":
            if previous_gather >= 0:
                operands.add(previous_gather)
            previous_gather = p
        waiting[p] = len(operands)
        for q in operands:
            successors[q].append(p)
    users = [inst.user_count for inst in insts]

    heap: list[tuple[int, int, int]] = [(defined[p] - freed[p], -users[p], p) for p in range(n) if not waiting[p]]
    heap.sort()
    ready = [False] * n
    for _, _, p in heap:
        ready[p] = True
    done = [False] * n
    order: list[HloInstruction] = []
    while heap:
        key, _, p = heappop(heap)
        if done[p] or key != defined[p] - freed[p]:
            continue  # scheduled already, or its priority changed since it was pushed
        done[p] = True
        order.append(insts[p])
        for b in reads[p]:
            left = remaining[b] = remaining[b] - 1
            if left == 1:  # the last unscheduled reader now frees it
                last = next(q for q in readers[b] if not done[q])
                freed[last] += size_of(b)
                if ready[last]:
                    heappush(heap, (defined[last] - freed[last], -users[last], last))
        for q in successors[p]:
            waiting[q] -= 1
            if not waiting[q]:
                ready[q] = True
                heappush(heap, (defined[q] - freed[q], -users[q], q))
    if len(order) != n:
        raise ValueError(f"{model.computation.name}: the operand graph has a cycle")  # type: ignore[attr-defined]
    return order
