"""Where a module, computation or instruction came from in the text it was read from.

The IR prints itself (as XLA's does): unchanged code is re-emitted byte for byte from the
source text, edited code is printed in XLA's format. These small records are what makes
that possible. A reader fills them in; the IR marks them edited; the printer reads them.
They hold offsets into the module's source rather than copies, because a million
instructions' lines would otherwise be kept twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..syntax.errors import line_col

if TYPE_CHECKING:
    from .instruction import HloInstruction


class ModuleSource:
    """The text a module was read from, and the module's own parts of it.

    `head` is everything before the first computation (header, stack-frame tables) and
    `tail` everything after the last one; `has_header` is False for text that starts
    directly with a computation (the module's name is then made up, as XLA does).
    """

    __slots__ = ("text", "filename", "first_line", "head", "tail", "has_header")

    def __init__(self, text: str, filename: str = "<string>", first_line: int = 1, *,
                 head: str = "", tail: str = "\n", has_header: bool = True) -> None:
        self.text = text
        self.filename = filename
        self.first_line = first_line
        self.head = head
        self.tail = tail
        self.has_header = has_header

    def location(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset, counted in the file it came from."""
        line, column = line_col(self.text, offset)
        return line + self.first_line - 1, column


class ComputationSpan:
    """A parsed computation's header (with the whitespace and comments before it) and its
    closing text, and how its names were written. Its instructions' lines are
    `source[start + 1:body_end]` (`start`: its `{`)."""

    __slots__ = ("head", "tail", "start", "body_end", "percent", "has_signature")

    def __init__(self, head: str, start: int, *, percent: bool = True, has_signature: bool = True) -> None:
        self.head = head
        self.tail = "\n}"
        self.start = start
        self.body_end = -1
        self.percent = percent
        self.has_signature = has_signature


#: A read instruction's span as its reader records it: lead, start, tail start, end, percent
#: (`SourceSpan.from_fields`' parameters), read by these indices where no SourceSpan is built.
SpanFields = tuple[str, int, int, int, bool]
SPAN_LEAD, SPAN_START, SPAN_TAIL_START, SPAN_END = range(4)


class SourceSpan:
    """How an instruction is written.

    `source[start:end]` is its line while `edited` is False; `source[tail_start:end]` is its
    raw attribute list until the attributes are edited (then `tail_start` is -1). `lead` is
    the whitespace and comments before it, kept for a regenerated line too. `percent` and
    `operand_shapes` are the spelling a regenerated line follows (`%name`, the old
    `f32[2] %x` operand form). `compact_gte_base` is set on get-tuple-elements written inline
    as `%t#0` (their operand and index), `host` on an instruction written nested inside
    another's operand list; both are printed inside their users' lines. `detached_line` is
    the line as read of an instruction that left its module unedited (its text does not
    change by its removal, as in XLA), until it is edited.

    An instruction made by a pass has a span with `start` -1: only the spelling is known.
    """

    __slots__ = ("lead", "start", "tail_start", "end", "edited", "percent", "operand_shapes",
                 "compact_gte_base", "host", "detached_line")

    def __init__(self, lead: str = "", start: int = -1, tail_start: int = -1, end: int = -1, *,
                 percent: bool = True, operand_shapes: bool = False) -> None:
        self.lead = lead
        self.start = start
        self.tail_start = tail_start
        self.end = end
        self.edited = start < 0
        self.percent = percent
        self.operand_shapes = operand_shapes
        self.compact_gte_base: tuple[HloInstruction, int] | None = None
        self.host: HloInstruction | None = None
        self.detached_line: str | None = None

    @classmethod
    def from_fields(cls, lead: str, start: int, tail_start: int, end: int, percent: bool) -> SourceSpan:
        """The span of an unedited line, as readers record it (`HloInstruction.span` makes
        one per read instruction that is asked for its span: half the cost of `__init__`)."""
        span = cls.__new__(cls)
        span.lead = lead
        span.start = start
        span.tail_start = tail_start
        span.end = end
        span.edited = False
        span.percent = percent
        span.operand_shapes = False
        span.compact_gte_base = None
        span.host = None
        span.detached_line = None
        return span

    @property
    def has_line(self) -> bool:
        """True while the source holds this instruction's line unchanged."""
        return not self.edited and self.end >= 0

    def styled_like(self) -> SourceSpan:
        """A span for a new instruction spelled like this one (no text of its own)."""
        return SourceSpan(self.lead, percent=self.percent, operand_shapes=self.operand_shapes)
