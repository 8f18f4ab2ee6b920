"""`--report`'s JSON writer against the standard library's `json.dumps(indent=2,
ensure_ascii=False)`: the same text for any JSON value, and the same errors."""

from __future__ import annotations

import enum
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hlo_dedup.report.json import dumps_indented


def reference(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                     st.text())
_KEYS = st.one_of(st.text(), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=30)


@given(_VALUES)
def test_any_json_value_is_written_as_json_dumps_writes_it(value: object) -> None:
    assert dumps_indented(value) == reference(value)


class Color(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Items(list):  # type: ignore[type-arg]
    pass


class Table(dict):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize("value", [
    {}, [], (), [[]], {"a": {}}, {"a": [1, 2.5, math.nan, math.inf, -math.inf, None, True, False]},
    "line\nbreak \"quoted\" \\ \u2028 \u00e9 \x00", -0.0, 10**40, {2: 1, 2.5: 3, True: 4, False: 5, None: 6},
    [Color.RED, Level.HIGH, {Color.RED: Level.HIGH}], Items([1, Table(a=Items())]),
])
def test_subclasses_and_special_values_are_written_as_json_dumps_writes_them(value: object) -> None:
    assert dumps_indented(value) == reference(value)


@pytest.mark.parametrize("value", [{"a": object()}, [{1, 2}], {(1, 2): 3}])
def test_what_json_cannot_write_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        reference(value)
    with pytest.raises(TypeError):
        dumps_indented(value)
