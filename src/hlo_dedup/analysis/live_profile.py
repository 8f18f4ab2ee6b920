"""A computation's live bytes before and after its folds, small enough for a report.

A computation of a real module has tens of thousands of program points (a million in a
whole module): a report cannot carry them, and a picture has a few hundred pixels. The
profile keeps, per column, the highest live bytes among the points it covers, so the
peak is drawn at its full height wherever it falls; the exact peaks and their program
points are kept beside the columns. Built once per changed computation after its last
fold (one O(n) read of the pricer's profile), never per fold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..plain import FrozenRecord, init_frozen

if TYPE_CHECKING:
    from ..ir.computation import HloComputation
    from ..ir.instruction import HloInstruction
    from .fold_price import FoldPrice, FoldPricer

#: Columns a profile keeps at most: a picture's width in pixel buckets.
COLUMNS = 240


def column_bounds(points: int, columns: int) -> list[int]:
    """The first point of each of `columns` columns over `points` points, then `points`:
    column i covers [ceil(i*points/columns), ceil((i+1)*points/columns)), so that point p
    lies in column p*columns//points (`column_of`)."""
    return [-(-i * points // columns) for i in range(columns + 1)]


def column_of(point: int, points: int, columns: int) -> int:
    """The column holding `point` (see `column_bounds`)."""
    return point * columns // points


def column_max(values: Sequence[int], columns: int = COLUMNS) -> list[int]:
    """The highest value in each column: as many columns as values when they are fewer.
    A maximum, not a mean or a sample, so the peak survives at its height."""
    n = len(values)
    if n <= columns:
        return list(values)
    bounds = column_bounds(n, columns)
    return [max(values[a:b]) for a, b in zip(bounds, bounds[1:])]


class Peak(FrozenRecord):
    """The highest live bytes and the first program point (and its instruction) at it."""

    __slots__ = ("bytes", "point", "instruction")

    def __init__(self, bytes: int, point: int, instruction: str) -> None:  # noqa: A002
        init_frozen(self, bytes, point, instruction)


class Extension(FrozenRecord):
    """A fold's kept gather lives on points `first`..`last` (inclusive) past its old last
    reader: where the fold undid a rematerialization."""

    __slots__ = ("kept", "removed", "first", "last")

    def __init__(self, kept: str, removed: str, first: int, last: int) -> None:
        init_frozen(self, kept, removed, first, last)


class LiveProfile(FrozenRecord):
    """One computation's live bytes over its `points` program points under `schedule`:
    per column (`column_bounds`) the highest before any fold and after all of its folds,
    the two peaks, and every fold's extension in program points. `rescheduled`: the peak
    after the folds with the folded program scheduled anew (`FoldPricer.rescheduled_peak`;
    None when the module's own schedule is kept)."""

    __slots__ = ("computation", "schedule", "points", "before", "after", "peak_before", "peak_after", "folds",
                 "extensions", "rescheduled")

    def __init__(self, computation: str, schedule: str, points: int, before: tuple[int, ...],
                 after: tuple[int, ...], peak_before: Peak, peak_after: Peak, folds: int,
                 extensions: tuple[Extension, ...], rescheduled: int | None = None) -> None:
        init_frozen(self, computation, schedule, points, before, after, peak_before, peak_after, folds, extensions,
                    rescheduled)


def _peak(values: Sequence[int], instructions: Sequence[HloInstruction]) -> Peak:
    if not values:
        return Peak(0, -1, "")
    top = max(values)
    at = values.index(top)
    return Peak(top, at, instructions[at].name)


def live_profile(pricer: FoldPricer, computation: HloComputation, prices: Sequence[FoldPrice],
                 columns: int = COLUMNS) -> LiveProfile:
    """The profile of `computation` once `prices` (its folds, applied to `pricer`) are made."""
    cl = pricer.liveness.computation(computation)
    before, after = cl.live_bytes, pricer.live_bytes(computation)
    if not before:  # an empty computation: the pricer's tree holds one zero point
        after = []
    extensions = tuple(Extension(p.kept, p.removed, p.extended_from, p.extended_from + p.live_range_extension - 1)
                       for p in prices if p.live_range_extension > 0 and p.extended_from >= 0)
    insts = cl.instructions
    return LiveProfile(computation.name, cl.schedule, len(before), tuple(column_max(before, columns)),
                       tuple(column_max(after, columns)), _peak(before, insts), _peak(after, insts), len(prices),
                       extensions, pricer.rescheduled_peak(computation))

