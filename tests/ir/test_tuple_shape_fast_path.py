"""Flat tuple shapes decoded element by element against the careful shape reader: the same
Shape whenever the fast path answers, and no answer for any text the reader refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support import corpus_instructions
from hlo_dedup.ir.attributes import _flat_tuple
from hlo_dedup.ir.shape_reader import parse_shape


def careful(text: str) -> object:
    try:
        return parse_shape(text)
    except ValueError as e:
        return e


def test_corpus_tuple_shapes() -> None:
    answered = 0
    for inst in corpus_instructions():
        text = inst.shape_text
        if text is None or not text.startswith("("):
            continue
        fast = _flat_tuple(text)
        if fast is not None:
            answered += 1
            assert fast == careful(text), (inst.parent.name, inst.name)
    assert answered


_VALID = ["f32[2]{0}", "f32[2,3]{1,0}", "s32[]", "pred[]", "token[]", "bf16[4,4]", "f32[?]{0}", "f32[<=4]{0}",
          "u8[0]{0}", "s64[3,2,1]{0,1,2}"]
#: Mostly what XLA prints; the rest is what the careful reader refuses or reads otherwise.
_ELEMENTS = st.one_of(
    st.sampled_from(_VALID * 3 + ["x32[2]", "f32[2] {0}", "f32[-1]{0}", "f32[2]{1,0}", "f32[99999999999999999999]{0}",
                                  "(f32[2])", "b(f32[2])", "f32[2]{0:T(2)}", "f32[2]{0}/*c*/", ""]),
    st.text(alphabet="f32[]{},() ", max_size=6),
)
_SEPARATORS = st.sampled_from([", "] * 4 + [", /*index=5*/"] * 2 + [",", " , ", ", /*index=x*/", ",  "])


@given(st.lists(st.tuples(_SEPARATORS, _ELEMENTS), max_size=6))
def test_generated_tuples(parts: list[tuple[str, str]]) -> None:
    text = "(" + "".join((sep if i else "") + element for i, (sep, element) in enumerate(parts)) + ")"
    fast = _flat_tuple(text)
    expected = careful(text)
    if isinstance(expected, ValueError):
        assert fast is None
    elif fast is not None:
        assert fast == expected


@pytest.mark.parametrize("text", ["()", "(f32[2]{0})", "(f32[32]{0}, s32[], /*index=2*/pred[4]{0})"])
def test_printed_tuples_take_the_fast_path(text: str) -> None:
    fast = _flat_tuple(text)
    assert fast is not None and fast == parse_shape(text)
