"""The lexical layer of HLO text: tokens, strings and their escapes, comments, and errors
located by file, line and column. It knows no IR; the IR and the parser both build on it."""

from .cursor import TextCursor, TextSyntaxError
from .errors import HloParseError, line_col

__all__ = ["HloParseError", "TextCursor", "TextSyntaxError", "line_col"]
