"""Tests for hlo_dedup.syntax.escape: absl CEscape/CUnescape, byte for byte
(checked against XLA's string handling where marked ``oracle``)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hlo_dedup.syntax.escape import UnescapeError, c_escape, c_unescape


@pytest.mark.parametrize(
    ("plain", "escaped"),
    [
        ("", ""),
        ("abc xyz ~!@#$%^&*()", "abc xyz ~!@#$%^&*()"),
        ("a\nb\rc\td", "a\\nb\\rc\\td"),
        ("say \"hi\" it's", "say \\\"hi\\\" it\\'s"),
        ("back\\slash", "back\\\\slash"),
        ("\x00\x01\x1f\x7f", "\\000\\001\\037\\177"),
        ("\a\b\v\f", "\\007\\010\\013\\014"),
        ("?", "?"),
        ("é", "\\303\\251"),
        ("\U0001f600", "\\360\\237\\230\\200"),
        ("args[1][0][0]['params']", "args[1][0][0][\\'params\\']"),
        ("\udcff\udc80", "\\377\\200"),  # raw bytes carried by surrogateescape
    ],
)
def test_c_escape(plain: str, escaped: str) -> None:
    assert c_escape(plain) == escaped
    assert c_unescape(escaped) == plain


@pytest.mark.parametrize(
    ("escaped", "plain"),
    [
        ("no escapes", "no escapes"),
        ("\\a\\b\\f\\n\\r\\t\\v\\\\\\?\\'\\\"", "\a\b\f\n\r\t\v\\?'\""),
        ("\\0", "\x00"),
        ("\\7", "\x07"),
        ("\\101", "A"),
        ("\\1012", "A2"),  # at most three octal digits
        ("\\18", "\x018"),
        ("\\377", "\udcff"),  # a lone byte, not valid UTF-8
        ("\\303\\251", "é"),
        ("\\x41", "A"),
        ("\\X41", "A"),
        ("\\x041", "A"),  # any number of hex digits
        ("\\x0000000041", "A"),
        ("\\x100000041", "A"),  # absl accumulates in 32 bits and wraps
        ("\\x4g", "\x04g"),
        ("\\u00e9", "é"),
        ("\\u00E9x", "éx"),
        ("\\U0001F600", "\U0001f600"),
        ("\\U0010FFFF", "\U0010ffff"),
        ("\\u0000", "\x00"),
        ("é\\n€", "é\n€"),
    ],
)
def test_c_unescape(escaped: str, plain: str) -> None:
    assert c_unescape(escaped) == plain


@pytest.mark.parametrize(
    ("escaped", "offset", "message"),
    [
        ("abc\\", 3, "cannot end with \\"),
        ("\\400", 0, "exceeds 0xff"),
        ("ab\\777", 2, "exceeds 0xff"),
        ("\\x", 0, "cannot end with \\x"),
        ("\\xg", 0, "non-hex digit"),
        ("\\x100", 0, "exceeds 0xff"),
        ("\\u12", 0, "4 hex digits"),
        ("\\u12g4", 0, "4 hex digits"),
        ("\\ud800", 0, "surrogate"),
        ("x\\uDFFF", 1, "surrogate"),
        ("\\U0000D800", 0, "surrogate"),
        ("\\U00110000", 0, "Unicode limit"),
        ("\\U0001F60", 0, "8 hex digits"),
        ("\\q", 0, "Unknown escape sequence: \\q"),
        ("é\\8", 1, "Unknown escape sequence"),
        ("\\é", 0, "Unknown escape sequence"),
        ("ok\\n\\z", 4, "Unknown escape sequence"),
    ],
)
def test_c_unescape_errors(escaped: str, offset: int, message: str) -> None:
    with pytest.raises(UnescapeError) as info:
        c_unescape(escaped)
    assert isinstance(info.value, ValueError)
    assert info.value.offset == offset
    assert message in str(info.value)


@given(st.text())
def test_unescape_inverts_escape(s: str) -> None:
    escaped = c_escape(s)
    assert re.fullmatch(r"[\x20-\x7e]*", escaped)
    assert c_unescape(escaped) == s


@given(st.binary())
def test_round_trip_of_arbitrary_bytes(data: bytes) -> None:
    s = data.decode("utf-8", "surrogateescape")
    assert c_escape(s).encode("ascii") == b"".join(
        c_escape(chr(b)).encode() if b < 0x80 else b"\\%03o" % b for b in data
    )
    assert c_unescape(c_escape(s)) == s


@given(st.lists(st.characters(codec="ascii") | st.sampled_from(["\\", "\\x", "\\u", "\\U", "é"])).map("".join))
def test_unescape_only_raises_unescape_error(s: str) -> None:
    try:
        c_unescape(s)
    except UnescapeError as e:
        assert 0 <= e.offset < len(s)


_ESCAPE_PIECES = st.sampled_from(
    ["a", " ", "\\'", '\\"', "\\\\", "\\n", "\\t", "\\?", "\\a", "\\0", "\\12", "\\377", "\\x7", "\\xfF",
     "\\x100000041", "\\u00e9", "\\u20AC", "\\U0001F600", "é", "€", "{", "}"]
)  # fmt: skip


@given(st.lists(_ESCAPE_PIECES, max_size=12).map("".join))
def test_escaping_matches_xla(xla_hlo, raw: str) -> None:  # type: ignore[no-untyped-def]
    """XLA unescapes metadata op_name with CUnescape and prints it with CEscape;
    it must reject exactly the strings we reject."""
    hlo = xla_hlo
    text = f'HloModule m\nENTRY e {{\n  ROOT p = f32[] parameter(0), metadata={{op_name="{raw}"}}\n}}\n'
    try:
        expected = c_escape(c_unescape(raw))
    except UnescapeError:
        with pytest.raises(Exception, match="parsing attribute op_name"):
            hlo.hlo_module_from_text(text)
        return
    m = re.search(r'op_name="((?:[^"\\]|\\.)*)"', hlo.hlo_module_from_text(text).to_string())
    assert expected == ("" if m is None else m.group(1))  # XLA omits an empty op_name
