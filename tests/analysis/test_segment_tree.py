"""The range-add/range-max tree against a plain list, on random operation sequences."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hlo_dedup.analysis.segment_tree import RangeAddMaxTree


@st.composite
def _scenario(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 70))
    values = draw(st.lists(st.integers(-(10**12), 10**12), min_size=n, max_size=n))
    ops = []
    for _ in range(draw(st.integers(0, 40))):
        lo = draw(st.integers(0, n - 1))
        hi = draw(st.integers(lo, n - 1))
        ops.append((draw(st.sampled_from(["add", "reaches"])), lo, hi, draw(st.integers(-(10**9), 10**9))))
    return values, ops


@given(_scenario())
def test_matches_a_list(scenario) -> None:  # type: ignore[no-untyped-def]
    values, ops = scenario
    tree = RangeAddMaxTree(values)
    plain = list(values)
    for op, lo, hi, delta in ops:
        if op == "add":
            tree.add(lo, hi, delta)
            for i in range(lo, hi + 1):
                plain[i] += delta
        else:
            # Just below, at and just above the range's maximum, and at the peak.
            for value in (max(plain[lo : hi + 1]) + d for d in (-1, 0, 1)):
                assert tree.reaches(lo, hi, value) is (value <= max(plain[lo : hi + 1]))
            assert tree.reaches(lo, hi, max(plain)) is (max(plain[lo : hi + 1]) == max(plain))
        assert tree.peak() == max(plain)
        assert tree.argmax() == plain.index(max(plain))
    assert tree.values() == plain


def test_bounds_are_checked() -> None:
    tree = RangeAddMaxTree([1, 2, 3])
    tree.add(2, 1, 5)  # empty range: nothing
    assert tree.values() == [1, 2, 3]
    with pytest.raises(IndexError):
        tree.add(0, 3, 1)
    with pytest.raises(IndexError):
        tree.reaches(2, 1, 0)
    with pytest.raises(IndexError):
        tree.reaches(0, 3, 1)
    with pytest.raises(ValueError):
        RangeAddMaxTree([])
