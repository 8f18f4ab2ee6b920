"""Where an instruction came from in the user's program: `metadata={...}` and the module's
stack-frame tables (hlo-text-format §3 and §8.13).

JAX and XLA record the framework op (`op_name="jit(step)/dot_general"`) and the Python
source line of each instruction, either inline (`source_file=... source_line=N`) or, since
2025, as `stack_frame_id=N` into the `FileNames` / `FunctionNames` / `FileLocations` /
`StackFrames` tables printed between the module header and the first computation. Both are
decoded here on demand; a malformed value decodes to what could be read, never an error,
because attribution is a courtesy of the report, not part of any pass's semantics.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..syntax.escape import UnescapeError, c_unescape

#: Strings as an unrolled, possessive loop: `(?:[^"\\]|\\.)*` keeps a backtracking entry
#: per character (a 5 MiB op_name cost 900 MB and seconds).
_STRING_FIELD = re.compile(r'\b(op_type|op_name|source_file)="([^"\\]*+(?:\\.[^"\\]*+)*+)"')
#: At most 19 digits (XLA's int64 fields): a longer number is unreadable, left out, never
#: handed to int() (which refuses 4,300 digits and is quadratic before that).
_INT_FIELD = re.compile(r"\b(source_line|source_column|stack_frame_id)=(-?\d{1,19})(?!\d)")
# Each table line on its own (a line: the text between two newlines).
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_SECTION = re.compile(r"(FileNames|FunctionNames|FileLocations|StackFrames)[ \t]*")
_NAMED = re.compile(r'[ \t]*(\d{1,19})[ \t]+"([^"\\]*+(?:\\.[^"\\]*+)*+)"[ \t]*')
_BRACED = re.compile(r"[ \t]*(\d{1,19})[ \t]+\{([^}]*)\}[ \t]*")
_FIELD = re.compile(r"(\w+)=(-?\d{1,19})(?!\d)")


def _unescape(text: str) -> str:
    try:
        return c_unescape(text)
    except UnescapeError:
        return text


class OpMetadata(NamedTuple):
    """The parts of XLA's OpMetadata a user reads: the framework op and the source line.
    (Named tuples, not dataclasses: a dataclass compiles its methods when this module
    loads, on a report's first gather, and that was most of the load.)"""

    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0
    source_column: int = 0
    stack_frame_id: int = 0

    @classmethod
    def parse(cls, raw: str | None) -> OpMetadata:
        """Decode the raw value of `metadata=` (None or unreadable parts: left empty)."""
        if not raw:
            return cls()
        # A list form ({{...}, {...}}) describes a fused op: its first entry speaks for it.
        strings = {key: _unescape(value) for key, value in reversed(_STRING_FIELD.findall(raw))}
        ints = {key: int(value) for key, value in reversed(_INT_FIELD.findall(raw))}
        return cls(strings.get("op_type", ""), strings.get("op_name", ""), strings.get("source_file", ""),
                   ints.get("source_line", 0), ints.get("source_column", 0), ints.get("stack_frame_id", 0))


class SourceFrame(NamedTuple):
    """One frame of a stack: a file, a line and the function it is in."""

    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


class StackFrameIndex:
    """The module's stack-frame tables: `frame(id)` and `stack(id)` (innermost first)."""

    def __init__(self, files: dict[int, str], functions: dict[int, str],
                 locations: dict[int, dict[str, int]], frames: dict[int, dict[str, int]]) -> None:
        self.files = files
        self.functions = functions
        self.locations = locations
        self.frames = frames

    @classmethod
    def parse(cls, head: str) -> StackFrameIndex:
        """Read the tables out of the text before a module's first computation: line by line
        (a line-anchored search would try every character of the header line, tens of
        kilobytes in a real module), each table the lines up to the next table's name."""
        tables: dict[str, list[str]] = {}
        lines: list[str] | None = None
        for line in head.split("\n"):
            # (A regex match costs the length of the line, and the header line is long.)
            mark = _SECTION.fullmatch(line) if line.startswith(_TABLES) else None
            if mark is not None:
                lines = tables[mark.group(1)] = []
            elif lines is not None:
                lines.append(line)

        def entries(section: str, pattern: re.Pattern[str]) -> list[tuple[str, str]]:
            return [m.groups() for m in map(pattern.fullmatch, tables.get(section, ())) if m is not None]  # type: ignore[misc]

        def named(section: str) -> dict[int, str]:
            return {int(n): _unescape(s) for n, s in entries(section, _NAMED)}

        def braced(section: str) -> dict[int, dict[str, int]]:
            return {int(n): {k: int(v) for k, v in _FIELD.findall(body)} for n, body in entries(section, _BRACED)}

        return cls(named("FileNames"), named("FunctionNames"), braced("FileLocations"), braced("StackFrames"))

    def frame(self, frame_id: int) -> SourceFrame | None:
        """The location of frame `frame_id` itself (the op's own line), if the tables have it."""
        frame = self.frames.get(frame_id)
        if frame is None:
            return None
        location = self.locations.get(frame.get("file_location_id", 0))
        if location is None:
            return None
        file = self.files.get(location.get("file_name_id", 0), "")
        return SourceFrame(file, location.get("line", 0), self.functions.get(location.get("function_name_id", 0), ""))

    def stack(self, frame_id: int) -> list[SourceFrame]:
        """Frame `frame_id` and its callers, innermost first (a cycle in the table ends it)."""
        out: list[SourceFrame] = []
        seen: set[int] = set()
        while frame_id and frame_id not in seen:
            seen.add(frame_id)
            frame = self.frame(frame_id)
            if frame is None:
                break
            out.append(frame)
            frame_id = self.frames[frame_id].get("parent_frame_id", 0)
        return out


def program_location(metadata: OpMetadata, index: StackFrameIndex | None) -> SourceFrame | None:
    """Where in the user's program the op came from: the inline source line, else the
    stack frame it names."""
    if metadata.source_file:
        return SourceFrame(metadata.source_file, metadata.source_line)
    if metadata.stack_frame_id and index is not None:
        return index.frame(metadata.stack_frame_id)
    return None
