"""A small cursor over a short piece of text, shared by the readers of shapes and
replica groups, and the error type whose `offset` indexes that text."""

from __future__ import annotations

import re
from typing import ClassVar

SKIP_RE = re.compile(r"(?:[ \t\r\n]+|/\*.*?\*/|//[^\n]*)*", re.S)
_INT_RE = re.compile(r"-?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def int64(digits: str) -> int | None:
    """The value of `-?[0-9]+` text if it fits XLA's int64, else None. The length is checked
    first: converting a long run of digits is quadratic (and refused past 4300 digits)."""
    if len(digits.lstrip("-").lstrip("0")) > 19:
        return None
    value = int(digits)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _shorten(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class TextSyntaxError(ValueError):
    """Malformed text; `offset` indexes it when known."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message, offset)
        self.message = message
        self.offset = offset

    def __str__(self) -> str:
        return self.message if self.offset is None else f"{self.message} (at offset {self.offset})"


class TextCursor:
    """Position in `text`, skipping whitespace and comments between tokens."""

    __slots__ = ("text", "pos")
    error_type: ClassVar[type[TextSyntaxError]] = TextSyntaxError

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str, offset: int | None = None) -> TextSyntaxError:
        return self.error_type(message, self.pos if offset is None else offset)

    def skip(self) -> None:
        self.pos = SKIP_RE.match(self.text, self.pos).end()  # type: ignore[union-attr]
        if self.text.startswith("/*", self.pos):
            raise self.error("unterminated comment")

    def describe(self) -> str:
        if self.pos >= len(self.text):
            return "end of text"
        return repr(self.text[self.pos : self.pos + 12])

    def eat(self, token: str) -> bool:
        self.skip()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str, context: str) -> None:
        if not self.eat(token):
            raise self.error(f"expected '{token}' {context}, found {self.describe()}")

    def integer(self, context: str) -> int:
        """A signed integer that fits XLA's int64."""
        self.skip()
        m = _INT_RE.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected an integer {context}, found {self.describe()}")
        value = int64(m.group())
        if value is None:
            raise self.error(f"integer {_shorten(m.group())} does not fit in int64")
        self.pos = m.end()
        return value

    def int_list(self, open_: str, close: str, context: str) -> tuple[int, ...]:
        """`open_ (int (',' int)*)? close`; XLA allows no trailing comma."""
        self.expect(open_, f"to start {context}")
        if self.eat(close):
            return ()
        items = [self.integer(f"in {context}")]
        while self.eat(","):
            items.append(self.integer(f"in {context}"))
        self.expect(close, f"to end {context}")
        return tuple(items)

    def finish(self, context: str) -> None:
        """Only whitespace and comments may follow."""
        self.skip()
        if self.pos != len(self.text):
            raise self.error(f"unexpected text after {context}: {self.describe()}")
