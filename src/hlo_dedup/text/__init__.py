"""HLO text: lexer, parser and printer."""

from ..syntax.errors import HloParseError
from .parser import parse_module, parse_modules, split_module_texts

__all__ = ["HloParseError", "parse_module", "parse_modules", "split_module_texts"]
