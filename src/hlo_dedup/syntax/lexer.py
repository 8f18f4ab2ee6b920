"""Span-level scanning of HLO text.

The parser never builds a full token stream for an instruction it can read with the
line fast path; this module provides the careful scanner used for everything else:
skipping trivia, reading one token, and finding the end of a balanced attribute value
while honouring strings and the raw-JSON mode of `backend_config`/frontend attributes.
"""

from __future__ import annotations

import re

from .cursor import TextCursor, TextSyntaxError

_TRIVIA = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)*", re.S)
_UNTERMINATED_COMMENT = re.compile(r"/\*")
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|\'[^\'\\]*+(?:\\.[^\'\\]*+)*+\'')
_WORD = re.compile(r"%?(?:[A-Za-z0-9_.?]|-(?!>))+:?")
_PUNCT = ("->", "<=", "...", "=", ",", ":", "*", "#", "+", "~", "[", "]", "{", "}", "(", ")")
_OPEN = {"{": "}", "(": ")", "[": "]"}
_CLOSE = frozenset("})]")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
ATTR_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)=(?!=)")
#: What continues a mesh `replica_groups` value past a top-level comma.
MESH_DEVICE_IDS = "device_ids="
_LISTED_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")


class ScanError(Exception):
    """A scanning failure at `offset`; the parser turns it into an HloParseError."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message


def skip_trivia(text: str, pos: int) -> int:
    """Position of the next token after whitespace and comments."""
    end = _TRIVIA.match(text, pos).end()
    if text.startswith("/*", end):
        raise ScanError(end, "unterminated /* comment")
    return end


def token_at(text: str, pos: int, *, lenient: bool = False) -> tuple[str, int]:
    """The token starting exactly at `pos` and the position after it ("" at EOF).

    `lenient` accepts any other single character as a token; attribute values use it so
    that legacy spellings such as `sparsity=L.1@2:4` are kept verbatim.
    """
    if pos >= len(text):
        return "", pos
    ch = text[pos]
    if ch == '"' or ch == "'":
        m = _STRING.match(text, pos)
        if m is None:
            raise ScanError(pos, "unterminated string")
        return m.group(), m.end()
    m = _WORD.match(text, pos)
    if m is not None:
        return m.group(), m.end()
    for p in _PUNCT:
        if text.startswith(p, pos):
            return p, pos + len(p)
    if lenient:
        return ch, pos + 1
    raise ScanError(pos, f"unexpected character {ch!r}")


def next_token(text: str, pos: int) -> tuple[str, int, int]:
    """Skip trivia, then return (token, start, end)."""
    start = skip_trivia(text, pos)
    tok, end = token_at(text, start)
    return tok, start, end


def match_group(text: str, pos: int, *, raw_json: bool = False) -> int:
    """End of the balanced group opening at `pos` (`{`, `(` or `[`).

    In raw-JSON mode only double-quoted strings are skipped and no other character is
    special, as XLA's lexer does for `backend_config={...}`. The scan jumps from one special
    character to the next (a regex search), so long stretches of names and numbers cost
    no Python steps.
    """
    stack = [_OPEN[text[pos]]]
    special = _JSON_SPECIAL if raw_json else _GROUP_SPECIAL
    i = pos + 1
    while True:
        m = special.search(text, i)
        if m is None:
            break
        i = m.start()
        ch = text[i]
        if ch == '"' or ch == "'":
            m = _STRING.match(text, i)
            if m is None:
                raise ScanError(i, "unterminated string")
            i = m.end()
            continue
        if ch == "/":
            if text.startswith("/*", i):
                j = text.find("*/", i + 2)
                if j < 0:
                    raise ScanError(i, "unterminated /* comment")
                i = j + 2
                continue
        elif ch in _OPEN:
            stack.append(_OPEN[ch])
        else:
            if ch != stack[-1]:
                raise ScanError(i, f"mismatched {ch!r}, expected {stack[-1]!r}")
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    raise ScanError(pos, f"unbalanced {text[pos]!r}: no matching {stack[-1]!r}")


#: What `match_group` stops at: quotes, comment starts and brackets (raw JSON: `"` and braces).
_GROUP_SPECIAL = re.compile(r"[\"'/{}()\[\]]")
_JSON_SPECIAL = re.compile(r'["{}]')


def at_top_level(text: str, at: int) -> bool:
    """True if offset `at` of an attribute text is outside every quoted string and bracket
    (and no comment comes before it): the strings ahead of it, such as the axis names of a
    mesh `replica_groups`, are stepped over whole. The scan `match_group` makes, from the
    start of the text instead of from an opening bracket."""
    depth = 0
    pos = 0
    while True:
        m = _GROUP_SPECIAL.search(text, pos, at)
        if m is None:
            return depth == 0
        ch = m.group()
        if ch == '"' or ch == "'":
            string = _STRING.match(text, m.start())
            if string is None or string.end() > at:
                return False
            pos = string.end()
            continue
        if ch == "/":
            return False
        depth += 1 if ch in _OPEN else -1
        pos = m.end()


def _attribute_value_end(text: str, pos: int, key: str, single: bool) -> int:
    """End of the raw value of `key=` starting at `pos` (hlo-text-format §8.1).

    With `single`, the value is one token or one balanced group (module header values).
    """
    n = len(text)
    raw_json_key = key == "backend_config"
    i = skip_trivia(text, pos)
    if i >= n:
        raise ScanError(i, f"missing value for attribute {key!r}")
    end = i
    first = True
    while True:
        i = skip_trivia(text, end)
        if i >= n:
            return end
        ch = text[i]
        if ch in _CLOSE:
            if first:
                raise ScanError(i, f"missing value for attribute {key!r}")
            return end
        if ch == ",":
            if first:
                raise ScanError(i, f"missing value for attribute {key!r}")
            j = skip_trivia(text, i + 1)
            if key == "replica_groups" and text.startswith(MESH_DEVICE_IDS, j):
                # `mesh[...], device_ids=(...) {...}`: XLA's mesh reader takes the ids as
                # part of the replica groups, not as an attribute of their own.
                end = j + len(MESH_DEVICE_IDS)
                continue
            m = ATTR_NAME.match(text, j)
            if m is not None or j >= n or text[j] in _CLOSE:
                return end
            # `calls=%a, %b`: a comma followed by another value, not an attribute.
            tok, _ = token_at(text, j)
            if tok.startswith("%") and not text.startswith("=", skip_trivia(text, j + len(tok))):
                end = j + len(tok)
                first = False
                continue
            return end
        if ch in _OPEN:
            if single and not first:
                return end
            end = match_group(text, i, raw_json=raw_json_key and ch == "{" and first)
            first = False
            continue
        if single and not first:
            return end
        tok, tend = token_at(text, i, lenient=True)
        if not first:
            after = skip_trivia(text, tend)
            if tok == "ROOT" or ATTR_NAME.match(text, i) or text.startswith("=", after):
                return end
        end = tend
        first = False


def attribute_value_end(text: str, pos: int, key: str) -> int:
    """End of the raw value of instruction attribute `key=` whose value starts at `pos`."""
    return _attribute_value_end(text, pos, key, False)


def split_attributes(
    text: str, pos: int, end: int | None = None, *, single: bool = False
) -> tuple[list[tuple[str, str, int]], int]:
    """Read `(, key=value)*` from `pos`; returns [(key, raw_value, value_offset)] and the end.

    Stops before the first token that is not `,` followed by an attribute name.
    """
    out: list[tuple[str, str, int]] = []
    limit = len(text) if end is None else end
    cur = pos
    while True:
        i = skip_trivia(text, cur)
        if i >= limit or text[i] != ",":
            return out, cur
        j = skip_trivia(text, i + 1)
        m = ATTR_NAME.match(text, j)
        if m is None:
            raise ScanError(j, "expected attribute name followed by '='")
        key = m.group(1)
        vstart = skip_trivia(text, m.end())
        vend = _attribute_value_end(text, vstart, key, single)
        if vend > limit:
            raise ScanError(limit, f"attribute {key!r} runs past the instruction")
        out.append((key, text[vstart:vend], vstart))
        cur = vend


def name_list(raw: str, base: int = 0) -> list[tuple[str, int]]:
    """The names in an attribute value `%a`, `{%a, %b}` or `%a, %b` (comments allowed) and
    their offsets, counted from `base`; ScanError (offset from `base` too) if it is not one."""
    whole = _LISTED_NAME.fullmatch(raw)
    if whole is not None:  # one bare name, as XLA prints `calls=%f`
        return [(whole.group(1), base)]
    cursor = TextCursor(raw)
    out: list[tuple[str, int]] = []
    try:
        braced = cursor.eat("{")
        if not (braced and cursor.eat("}")):
            while True:
                cursor.skip()
                m = _LISTED_NAME.match(raw, cursor.pos)
                if m is None:
                    raise cursor.error(f"expected a name, found {cursor.describe()}")
                out.append((m.group(1), base + m.start()))
                cursor.pos = m.end()
                if not cursor.eat(","):
                    break
            if braced:
                cursor.expect("}", "to end the list of names")
        cursor.finish("the list of names")
    except TextSyntaxError as e:
        raise ScanError(base + (e.offset or 0), e.message) from None
    return out
