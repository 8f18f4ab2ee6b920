"""A memory-minimizing schedule for an unscheduled computation, like XLA's list scheduler.

A module before optimizations has no schedule: its text order is one valid order (JAX's
keeps every gradient alive to the end of the backward pass), and a backend schedules
anew. XLA's default memory scheduler (``hlo_memory_scheduler.cc``) runs a list
scheduler, a DFS scheduler and the post order and keeps whichever peaks lowest; the
compiler-shaped liveness model (`compiled_liveness`) does the same with the list
scheduler here and the text order (XLA prints post order), and reports the schedule as
``memory-minimizing``.

What is scheduled are the steps a compiler runs: the instructions `fusion_model` leaves
a buffer or a role of their own (each fused group once, at its root; bitcasts are not
steps). The list scheduler is XLA's greedy one: among the steps whose inputs are all
scheduled, take the one with the highest ``bytes freed - bytes defined`` (bytes freed:
the buffers it reads of which it is the last unscheduled reader), then the most users,
then the earliest in the text. A step whose result may take the buffer of an operand it
reads last (`Steps.shares`, XLA's in-place sharing) holds only one of the two at its
peak; the priority ignores that, as XLA's does. Each step's freed bytes are kept up to date as readers
are scheduled (a buffer down to one reader credits that reader) and the ready set is a
heap with stale entries skipped, so the schedule costs O((n + reads) log n).

All-gathers keep their text order (each waits for the one before it; the caller adds
that input): the dedup pass keeps the first of equal gathers in the text, and its price
needs the kept one first. Control dependencies are not read; nested computations' bytes
at call sites are not in the priority (XLA adds them; a computation with folds rarely
has large callees).
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence


class Steps:
    """What the scheduler reads of a computation: n steps in text order, each with the
    steps it waits for (`inputs`, one entry per use), the buffers it `reads` (never a
    static one or one the result holds), the buffers it defines (`defines`), and its
    number of `users` (the tie-break); `size` gives every buffer's bytes and `held`
    the buffers the result keeps to the end. `shares` (by step, optional): buffers it
    reads that its result may be written into when it is their last reader, in order
    of preference (`compiled_liveness.in_place`). Read as given: the order graph is built
    from `inputs` and `users` on the first schedule and kept."""

    __slots__ = ("inputs", "reads", "defines", "users", "size", "held", "shares", "_graph")

    def __init__(self, inputs: Sequence[Sequence[int]], reads: Sequence[tuple[Hashable, ...]],
                 defines: Sequence[tuple[Hashable, ...]], users: Sequence[int], size: dict[Hashable, int],
                 held: set[Hashable], shares: dict[int, tuple[Hashable, ...]] | None = None) -> None:
        self.inputs, self.reads, self.defines, self.users, self.size, self.held = \
            inputs, reads, defines, users, size, held
        self.shares = shares or {}
        self._graph: tuple[list[list[int]], list[int]] | None = None

    def with_buffers(self, reads: Sequence[tuple[Hashable, ...]], defines: Sequence[tuple[Hashable, ...]],
                     held: set[Hashable], shares: dict[int, tuple[Hashable, ...]]) -> Steps:
        """The same steps, waiting for the same steps, over other buffers (a folded program):
        the order graph is shared, not built again."""
        other = Steps(self.inputs, reads, defines, self.users, self.size, held, shares)
        other._graph = self.graph()
        return other

    def graph(self) -> tuple[list[list[int]], list[int]]:
        """Each step's successors, and its users as the low bits of a heap key (built once)."""
        if self._graph is None:
            successors: list[list[int]] = [[] for _ in self.inputs]
            for p, waits in enumerate(self.inputs):
                for q in waits:
                    successors[q].append(p)
            self._graph = successors, [(_FIELD - 1 - min(u, _FIELD - 1)) << _SHIFT for u in self.users]
        return self._graph


_SHIFT = 32  # bits of the step index in a heap key (no computation has 2**32 instructions)
_FIELD = 1 << _SHIFT  # users past this count tie
_KEY = 2 * _SHIFT  # the priority sits above the users and the step
_STEP = _FIELD - 1


def list_schedule(steps: Steps) -> tuple[list[int], int, int]:
    """The steps in the list scheduler's order (indices into the text order), and the peak
    bytes of the buffers they define under that order and under the text order, each
    buffer live from its definition to its last reader and a held one to the end: what
    choosing between the two needs (static buffers and nested computations add the same
    to both, and are left out). ValueError if the inputs form a cycle."""
    inputs, reads, size, held, shares = steps.inputs, steps.reads, steps.size, steps.held, steps.shares
    n = len(inputs)
    waiting = [len(i) for i in inputs]
    successors, users = steps.graph()
    readers: dict[Hashable, list[int]] = {}
    for p, mine in enumerate(reads):
        for b in mine:
            found = readers.get(b)
            if found is None:
                readers[b] = [p]
            else:
                found.append(p)
    defined = [0] * n
    dead = [0] * n  # bytes a step defines that nothing reads: gone right after it
    for p, own in enumerate(steps.defines):
        for b in own:
            bytes_ = size[b]
            defined[p] += bytes_
            if b not in readers and b not in held:
                dead[p] += bytes_
    counts = {b: len(r) for b, r in readers.items()}
    remaining = dict(counts)
    freed = [0] * n  # bytes of the buffers each step is the last unscheduled reader of
    for b, r in readers.items():
        if len(r) == 1:
            freed[r[0]] += size[b]

    # The heap's keys are single integers ordered as (defined - freed, -users, step): one
    # comparison each instead of a tuple's (`users` holds the middle field).
    done = [False] * n
    ready = [False] * n
    heap: list[int] = []
    order: list[int] = []
    live = peak = 0
    now = [p for p in range(n) if not waiting[p]]  # ready: costless ones go first, others to the heap
    while True:
        while now:
            p = now.pop()
            if defined[p] or reads[p]:
                ready[p] = True
                heappush(heap, ((defined[p] - freed[p]) << _KEY) + users[p] + p)
                continue
            done[p] = True
            order.append(p)
            for q in successors[p]:
                left = waiting[q] = waiting[q] - 1
                if not left:
                    now.append(q)
        if not heap:
            break
        key = heappop(heap)
        p = key & _STEP
        if done[p] or key >> _KEY != defined[p] - freed[p]:
            continue  # scheduled already, or its priority changed since it was pushed
        done[p] = True
        order.append(p)
        live += defined[p]
        at = live - _reused(shares, p, remaining, size) if p in shares else live
        if at > peak:
            peak = at
        live -= dead[p]
        for b in reads[p]:
            left = remaining[b] = remaining[b] - 1
            if not left:
                live -= size[b]
            elif left == 1:  # the last unscheduled reader now frees it
                for last in readers[b]:
                    if not done[last]:
                        break
                freed[last] += size[b]
                if ready[last]:
                    heappush(heap, ((defined[last] - freed[last]) << _KEY) + users[last] + last)
        for q in successors[p]:
            left = waiting[q] = waiting[q] - 1
            if not left:
                now.append(q)
    if len(order) != n:
        raise ValueError("the operand graph has a cycle")
    return order, peak, _text_peak(reads, counts, defined, dead, size, shares)


def _reused(shares: dict[int, tuple[Hashable, ...]], p: int, remaining: dict[Hashable, int],
            size: dict[Hashable, int]) -> int:
    """Bytes of the buffer step `p`'s result is written into: the first it may share that
    it reads last (0 if none)."""
    for b in shares[p]:
        if remaining.get(b) == 1:
            return size[b]
    return 0


def _text_peak(reads: Sequence[tuple[Hashable, ...]], counts: dict[Hashable, int], defined: list[int],
               dead: list[int], size: dict[Hashable, int], shares: dict[int, tuple[Hashable, ...]]) -> int:
    """The peak `list_schedule` measures, under the text order."""
    remaining = dict(counts)
    live = peak = 0
    for p, mine in enumerate(reads):
        live += defined[p]
        at = live - _reused(shares, p, remaining, size) if p in shares else live
        if at > peak:
            peak = at
        live -= dead[p]
        for b in mine:
            left = remaining[b] = remaining[b] - 1
            if not left:
                live -= size[b]
    return peak
