"""absl ``CEscape`` / ``CUnescape``, byte-exact, for HLO string attributes (§9).

XLA escapes strings byte by byte over their UTF-8 encoding, so non-ASCII text
prints as octal escapes. Python strings carry arbitrary bytes through
``surrogateescape``: ``c_unescape`` decodes its bytes that way, and
``c_escape`` encodes that way, so the two round-trip on any such string.
"""

from __future__ import annotations

import re

from .cursor import TextSyntaxError

__all__ = ["UnescapeError", "c_escape", "c_unescape"]


class UnescapeError(TextSyntaxError):
    """An invalid escape sequence; ``offset`` indexes the input string."""


def _escape_for(byte: int) -> str:
    special = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}
    if byte in special:
        return special[byte]
    if 0x20 <= byte <= 0x7E:
        return chr(byte)
    return f"\\{byte:03o}"


_ESCAPES: tuple[str, ...] = tuple(_escape_for(b) for b in range(256))
_NEEDS_ESCAPE = re.compile(r"[^\x20-\x7e]|[\"'\\]")


def c_escape(s: str) -> str:
    """absl ``CEscape`` of the UTF-8 bytes of ``s``: ``\\n \\r \\t \\" \\' \\\\``,
    and 3-digit octal for every other byte outside printable ASCII."""
    if _NEEDS_ESCAPE.search(s) is None:
        return s
    return "".join([_ESCAPES[b] for b in s.encode("utf-8", "surrogateescape")])


_SIMPLE = {
    "a": b"\a", "b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t",
    "v": b"\v", "\\": b"\\", "?": b"?", "'": b"'", '"': b'"',
}  # fmt: skip
_OCTAL_RE = re.compile(r"[0-7]{1,3}")
_HEX_RUN_RE = re.compile(r"[0-9a-fA-F]+")
_HEX4_RE = re.compile(r"[0-9a-fA-F]{4}")
_HEX8_RE = re.compile(r"[0-9a-fA-F]{8}")


def c_unescape(s: str) -> str:
    """absl ``CUnescape``; the resulting bytes are decoded as UTF-8 with
    ``surrogateescape``. Raises :class:`UnescapeError` as absl would fail."""
    pos = s.find("\\")
    if pos < 0:
        return s
    out = bytearray(s[:pos].encode("utf-8", "surrogateescape"))
    n = len(s)
    while pos >= 0:
        start = pos
        pos += 1
        if pos >= n:
            raise UnescapeError("String cannot end with \\", start)
        c = s[pos]
        simple = _SIMPLE.get(c)
        if simple is not None:
            out += simple
            pos += 1
        elif "0" <= c <= "7":
            m = _OCTAL_RE.match(s, pos)
            assert m is not None
            value = int(m.group(), 8)
            if value > 0xFF:
                raise UnescapeError(f"Value of \\{m.group()} exceeds 0xff", start)
            out.append(value)
            pos = m.end()
        elif c in "xX":
            m = _HEX_RUN_RE.match(s, pos + 1)
            if m is None:
                if pos + 1 >= n:
                    raise UnescapeError("String cannot end with \\x", start)
                raise UnescapeError("\\x cannot be followed by a non-hex digit", start)
            # absl accumulates in a 32-bit unsigned int, so long runs wrap.
            value = 0
            for digit in m.group():
                value = ((value << 4) + int(digit, 16)) & 0xFFFFFFFF
            if value > 0xFF:
                raise UnescapeError(f"Value of \\{c}{m.group()} exceeds 0xff", start)
            out.append(value)
            pos = m.end()
        elif c == "u" or c == "U":
            width = 4 if c == "u" else 8
            m = (_HEX4_RE if width == 4 else _HEX8_RE).match(s, pos + 1)
            if m is None:
                raise UnescapeError(f"\\{c} must be followed by {width} hex digits", start)
            rune = int(m.group(), 16)
            if rune > 0x10FFFF:
                raise UnescapeError(
                    f"Value of \\{c}{m.group()} exceeds Unicode limit (0x10FFFF)", start
                )
            if 0xD800 <= rune <= 0xDFFF:
                raise UnescapeError(
                    f"invalid surrogate character (0xD800-DFFF): \\{c}{m.group()}", start
                )
            out += chr(rune).encode("utf-8")
            pos = m.end()
        else:
            raise UnescapeError(f"Unknown escape sequence: \\{c}", start)
        nxt = s.find("\\", pos)
        out += s[pos : n if nxt < 0 else nxt].encode("utf-8", "surrogateescape")
        pos = nxt
    return out.decode("utf-8", "surrogateescape")
