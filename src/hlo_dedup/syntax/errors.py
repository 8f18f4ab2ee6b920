"""Errors raised while reading HLO text."""

from __future__ import annotations


class HloParseError(ValueError):
    """Malformed HLO input, located by file, line and column.

    Every problem in the input (syntax, undefined names, duplicates, cycles) surfaces as
    this one exception so callers and the CLI can report `file:line:col: error: ...`.
    """

    def __init__(
        self,
        message: str,
        *,
        filename: str = "<string>",
        line: int = 0,
        column: int = 0,
        snippet: str = "",
    ) -> None:
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.snippet = snippet
        super().__init__(self.format())

    def format(self) -> str:
        """The one-line `file:line:col: error: message` form compilers print."""
        text = f"{self.filename}:{self.line}:{self.column}: error: {self.message}"
        if self.snippet:
            text += f" (at {self.snippet!r})"
        return text


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of `offset` in `text`."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column
