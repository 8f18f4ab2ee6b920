"""`markup.escape` is `html.escape` (with or without quotes) that also spells every character
past ASCII as a numeric reference, C1 controls aside: the text reads the same, and the page
stays ASCII."""

from __future__ import annotations

import html

from hypothesis import example, given
from hypothesis import strategies as st

from hlo_dedup.report.markup import escape
from hlo_dedup.report.undecodable import spell

#: The five characters escaping is about, some past ASCII (one past the BMP), and plain text.
_TEXT = st.text(st.sampled_from(list("&<>\"'a =%{}\u00b7\u00e9\u2192\U0001f600")) | st.characters(), max_size=40)


def _c1(c: str) -> bool:
    return 0x80 <= ord(c) <= 0x9F


def _noncharacter(c: str) -> bool:
    return 0xFDD0 <= ord(c) <= 0xFDEF or ord(c) & 0xFFFE == 0xFFFE


@given(_TEXT, st.booleans())
@example("\ufffe\ufdd0\U0001ffff", False)  # noncharacters: found by the search, kept here
@example("a\udc80\udcff", True)  # undecodable bytes: found by the search too
def test_escape_reads_as_the_text_and_is_ascii_but_for_c1_controls(text: str, quote: bool) -> None:
    escaped = escape(text, quote)
    assert all(c.isascii() or _c1(c) for c in escaped)
    # A lone surrogate reads as U+FFFD; a reference to a noncharacter (U+FDD0-U+FDEF, U+xFFFE,
    # U+xFFFF) reads as itself in a browser but as nothing in `html.unescape`, the oracle here.
    if not any(0xD800 <= ord(c) < 0xE000 or _noncharacter(c) for c in text):
        assert html.unescape(escaped) == text
    expected = html.escape(spell(text), quote)  # an undecodable byte (U+DC80-U+DCFF) reads \xNN
    assert escaped == "".join(c if c.isascii() or _c1(c) else f"&#{ord(c)};" for c in expected)


def test_a_c1_control_is_not_a_reference() -> None:
    """HTML reads `&#145;` as the Windows-1252 quote, not U+0091."""
    assert escape("a\x91b\u00e9") == "a\x91b&#233;"


def test_element_content_keeps_its_quotes() -> None:
    line = 'copy(%ag.1), metadata={op_name="jit(f)/x<y"}'
    assert escape(line, quote=False) == 'copy(%ag.1), metadata={op_name="jit(f)/x&lt;y"}'
    assert escape(line) == 'copy(%ag.1), metadata={op_name=&quot;jit(f)/x&lt;y&quot;}'
