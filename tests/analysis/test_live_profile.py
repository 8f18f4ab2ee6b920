"""The live-bytes profile a report draws: columns that keep the peak, bounded size, and
the profile the all-gather pass records for a remat-like fold."""

from __future__ import annotations

import random

import pytest
from support import ACROSS_PEAK, scheduled_module
from test_fold_price import REMAT_LAYERS

import hlo_dedup
from hlo_dedup.analysis import FoldPricer
from hlo_dedup.analysis.live_profile import COLUMNS, Extension, Peak, column_bounds, column_max, column_of, live_profile


def test_columns_cover_every_point_once_and_hold_their_maximum() -> None:
    # 10 points in 4 columns: [0, 3), [3, 5), [5, 8), [8, 10).
    assert column_bounds(10, 4) == [0, 3, 5, 8, 10]
    assert column_max([1, 9, 2, 3, 4, 0, 0, 7, 5, 6], 4) == [9, 4, 7, 6]
    assert [column_of(p, 10, 4) for p in range(10)] == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]


def test_fewer_points_than_columns_are_kept_as_they_are() -> None:
    assert column_max([3, 1, 2], 4) == [3, 1, 2]
    assert column_max([], 4) == []


@pytest.mark.parametrize("n", [COLUMNS + 1, 999, 18_432, 100_003])
def test_the_peak_survives_in_its_own_column_and_the_size_is_bounded(n: int) -> None:
    rng = random.Random(n)
    values = [rng.randrange(1 << 30) for _ in range(n)]
    at = rng.randrange(n)
    values[at] = 1 << 31  # the one peak
    columns = column_max(values)
    assert len(columns) == COLUMNS
    assert max(columns) == 1 << 31 and columns.index(1 << 31) == column_of(at, n, COLUMNS)
    bounds = column_bounds(n, COLUMNS)
    assert all(b > a for a, b in zip(bounds, bounds[1:]))  # no empty column
    assert all(bounds[column_of(p, n, COLUMNS)] <= p < bounds[column_of(p, n, COLUMNS) + 1] for p in range(n))


def test_a_fold_across_the_peak_is_profiled_before_and_after() -> None:
    module = hlo_dedup.load(scheduled_module(ACROSS_PEAK))
    pricer = FoldPricer(module)
    price = pricer.apply("main", "g1", "g2")
    profile = live_profile(pricer, module.entry, [price], columns=4)
    # 9 points in 4 columns: [0, 3), [3, 5), [5, 7), [7, 9) of
    # before [520, 520, 584, 648, 1608, 1672, 712, 776, 712] and
    # after  [520, 520, 584, 648, 1672, 1736, 712, 776, 712].
    assert (profile.points, profile.before, profile.after) == (9, (584, 1608, 1672, 776), (584, 1672, 1736, 776))
    assert profile.peak_before == Peak(1672, 5, "s") and profile.peak_after == Peak(1736, 5, "s")
    # g1 was last read by a at 3: it now lives on 4..7, up to b.
    assert profile.extensions == (Extension("g1", "g2", 4, 7),)
    assert profile.schedule == "module's schedule" and profile.folds == 1


def test_the_pass_records_a_profile_per_changed_computation() -> None:
    result = hlo_dedup.run_passes(hlo_dedup.load(REMAT_LAYERS))
    profiles = [c for p in result.passes for c in p.profiles]
    assert [c.computation for c in profiles] == sorted({f.computation for f in result.folds})
    (profile,) = profiles
    assert profile.folds == 6 and len(profile.extensions) == 6
    # Each backward re-gather folded onto its forward gather keeps it live across the
    # layers between them: the peak rises and lies inside every extension.
    after = profile.peak_after
    assert after.bytes > profile.peak_before.bytes == max(profile.before)
    assert after.bytes == max(profile.after)
    assert all(e.first <= after.point <= e.last for e in profile.extensions)
    fresh = hlo_dedup.analysis.analyze(hlo_dedup.load(REMAT_LAYERS)).computation(profile.computation)
    assert profile.points == len(fresh.live_bytes) and profile.peak_before.point == fresh.peak_position
