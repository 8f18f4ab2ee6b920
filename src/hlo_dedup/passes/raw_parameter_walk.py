"""FindRawParameter: the walk from an all-gather's operand up to the parameter it gathers.

The walk (spec: shared/spec/dedup-passes.txt, "FindRawParameter") goes up through
get-tuple-element (pushing its index), tuple (popping one), opt-barrier, shape-preserving
convert and inner all-gathers to a parameter, and stops anywhere else.

Gathers of one module share most of their walks: a layer stack's gathers run through the
same opt-barriers, and an adversarial module can put thousands of gathers after one long
chain of converts, or nest thousands of gathers. `RawParameterWalker` therefore remembers
the rest of the walk from each (instruction, pending index path) it has passed, as a
`Trail` that links to the trail it continues with: every instruction is walked once per
index path, whatever the number of gathers, and what a walk reports about itself (its
length, its last hops, the gathers it tunnelled through) is read off the shared trails.
`walk_to_parameter` is the plain walk, one hop at a time, for the `--v=2` log lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..ir.shape import shapes_equal

if TYPE_CHECKING:
    from ..ir.instruction import HloInstruction

__all__ = ["GATHERS", "RawParameterWalker", "Trail", "walk_to_parameter"]

GATHERS = ("all-gather", "all-gather-start")
#: A walk's hops are reported as its first and last this many, with the count left out
#: between them (the page draws each hop).
SHOWN_HOPS = 16


def _next(node: HloInstruction, pending: list[int], log: Callable[..., None] | None) -> HloInstruction | None:
    """The instruction the walk moves to from `node` (not a parameter), updating the
    pending index stack in place; None where the walk stops at `node`."""
    op = node.opcode
    if op == "get-tuple-element":
        index = node.tuple_index
        if log:
            log(2, "Found get-tuple-element at index: %d", index)
        pending.append(index)
    elif op == "tuple":
        index = pending[-1] if pending else -1
        if log:
            log(2, "Found tuple, moving to element at index: %d", index)
        if not 0 <= index < node.operand_count:
            return None
        pending.pop()
        return node.operands[index]
    elif op == "opt-barrier":
        if log:
            log(2, "Found optimization barrier, moving to its input")
    elif op == "convert":
        if not node.operands or not shapes_equal(node.operands[0].shape, node.shape):
            return None
        if log:
            log(2, "Found convert operation, moving to its input")
    elif op in GATHERS:
        if log:
            log(2, "Found all-gather operation, moving to its input")
    else:
        return None
    return node.operands[0] if node.operands else None


def walk_to_parameter(
    node: HloInstruction, path: tuple[int, ...], log: Callable[..., None] | None = None
) -> tuple[HloInstruction | None, tuple[int, ...], HloInstruction | None, list[HloInstruction]]:
    """The walk from `node` with the tuple-index stack `path` (innermost last), one hop at
    a time: the parameter reached, or None and the instruction the walk stopped at; the
    path left there; and every instruction visited, `node` first. `log` gets the --v=2
    lines."""
    pending = list(path)
    hops: list[HloInstruction] = []
    while True:
        hops.append(node)
        if log:
            log(2, "Finding raw parameter for instruction: %s", node.to_text())
        if node.opcode == "parameter":
            return node, tuple(pending), None, hops
        following = _next(node, pending, log)
        if following is None:
            return None, tuple(pending), node, hops
        node = following


class Trail:
    """The walk from `node` under one pending index path, to where it ends; `rest` is the
    trail it continues with (None at the end). `raw_param`, `path` and `stop` are the
    walk's outcome; `length` counts its hops, `last` holds its last `SHOWN_HOPS`;
    `gathers` is the first trail (this one or later) whose instruction is an all-gather
    the walk tunnelled through, `gather_count` how many there are."""

    __slots__ = ("gather_count", "gathers", "last", "length", "node", "path", "raw_param", "rest", "stop")

    def __init__(self, node: HloInstruction, rest: Trail | None, raw_param: HloInstruction | None,
                 path: tuple[int, ...], stop: HloInstruction | None) -> None:
        self.node = node
        self.rest = rest
        if rest is None:
            self.raw_param, self.path, self.stop = raw_param, path, stop
            self.length, self.last, self.gathers, self.gather_count = 1, (node,), None, 0
            return
        self.raw_param, self.path, self.stop = rest.raw_param, rest.path, rest.stop
        self.length = rest.length + 1
        self.last = (node, *rest.last) if rest.length < SHOWN_HOPS else rest.last
        if node.opcode in GATHERS:
            self.gathers, self.gather_count = self, rest.gather_count + 1
        else:
            self.gathers, self.gather_count = rest.gathers, rest.gather_count

    def tunnelled(self) -> Iterator[Trail]:
        """The trails of the inner gathers the walk went through, in walk order."""
        trail = self.gathers
        while trail is not None:
            yield trail
            trail = trail.rest.gathers  # type: ignore[union-attr]  # a tunnelled gather is never the end

    def hops(self) -> tuple[tuple[str, str], ...]:
        """(opcode, name) of each hop, `node` first; a walk longer than twice
        `SHOWN_HOPS` shows its first and last ones with ("...", "N hops") between."""
        first: list[HloInstruction] = []
        trail: Trail | None = self
        while trail is not None and len(first) < SHOWN_HOPS:
            first.append(trail.node)
            trail = trail.rest
        if trail is None:
            return tuple([(h.opcode, h.name) for h in first])
        omitted = self.length - SHOWN_HOPS - len(self.last)
        if omitted <= 0:
            shown = first + list(self.last[-omitted:] if omitted else self.last)
            return tuple([(h.opcode, h.name) for h in shown])
        return (*[(h.opcode, h.name) for h in first], ("...", f"{omitted} hops"),
                *[(h.opcode, h.name) for h in self.last])


class RawParameterWalker:
    """FindRawParameter with every trail remembered for the walks after it (one module's
    run: the module must not change in between, or only where no remembered walk goes)."""

    def __init__(self) -> None:
        self._trails: dict[tuple[HloInstruction, tuple[int, ...]], Trail] = {}

    def walk(self, node: HloInstruction, path: tuple[int, ...] = ()) -> Trail:
        trails = self._trails
        pending = list(path)
        passed: list[tuple[HloInstruction, tuple[int, ...]]] = []
        on_walk: set[HloInstruction] = set()  # a walk of an acyclic graph meets each instruction once
        while True:
            key = (node, tuple(pending))
            end = trails.get(key)
            if end is not None:
                break
            if node.opcode == "parameter":
                end = trails[key] = Trail(node, None, node, key[1], None)
                break
            following = _next(node, pending, None)
            if following is None or node in on_walk:  # an operand cycle (only a proto can hold one) ends it
                end = trails[key] = Trail(node, None, None, key[1], node)
                break
            on_walk.add(node)
            passed.append(key)
            node = following
        for key in reversed(passed):
            end = trails[key] = Trail(key[0], end, None, (), None)
        return end

    def __call__(self, node: HloInstruction, path: tuple[int, ...]) -> tuple[
            HloInstruction | None, tuple[int, ...], HloInstruction | None, Trail]:
        """The walk as `walk_to_parameter` answers it, with the trail for the hops."""
        trail = self.walk(node, path)
        return trail.raw_param, trail.path, trail.stop, trail
