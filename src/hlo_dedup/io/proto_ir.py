"""The IR of a module printed from its proto, built on the printed text without reading it.

The printer (:mod:`hlo_dedup.io.proto_text`) knows every piece of every line it writes:
the name, shape, opcode, operands and attribute tail, and where each lands in the text.
This builds, through the IR's public constructors, exactly the IR the text reader builds
from that text (`hlo_dedup.text.parse_module`), offsets into the text included, so the
module prints back as the text until a pass edits it.

Where the text reader might not read a piece as printed (a name it takes for a keyword,
a shape or an attribute tail it would not vouch for, an operand printed after its user,
a callee it cannot find), the direct build is not sure and gives up: the text is then
read, which gives the same IR or the located error the reader reports for it.

The work is done column by column, in C loops where it can be: pieces repeat (a layer's
shapes, opcodes and attribute tails recur layer after layer), so each distinct piece is
checked once, and the instructions of a computation are made by one `map`.
"""

from __future__ import annotations

import re
from itertools import accumulate, repeat
from operator import add, sub
from typing import NoReturn

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import is_known_opcode
from ..ir.source import ComputationSpan, ModuleSource
from ..syntax.lexer import IDENT, ScanError, match_group, split_attributes
from ..text import parse_module
from ..text.lines import Reference, shape_end, tail_references
from ..text.parser import bind_references
from .proto_text import PrintedModule

_LEAD = "\n  "  # every printed line's indentation
_ROOT = len("ROOT ")
_MODULE = "HloModule "
#: Names one per line, each one the reader reads as a name (the printer's are sanitized).
_NAMES = re.compile(rf"(?:{IDENT.pattern}\n)*+{IDENT.pattern}")
#: The reader's verdict on an attribute tail does not change when a digit becomes another
#: (no pattern of its fast path or scanner tells digits apart): tails that differ only in
#: numbers (channel ids, `%region_12.3`) are checked once, as their form with zeros.
_DIGITS = bytes.maketrans(b"123456789", b"000000000")  # (in UTF-8, no other character has such a byte)


class _NotSure(Exception):
    """The text reader might read this module otherwise than the direct build."""


def module_from_printed(printed: PrintedModule, filename: str, container: str, *, spmd: bool) -> HloModule:
    """The module `printed` holds, named `filename`; read from its text where the direct
    build is not sure (errors then point into that text, which says it came from a
    `container`). Only `printed.text` is left to use afterwards: its tables are let go
    as they are read."""
    try:
        return _Builder(printed, filename, spmd).build()
    except (_NotSure, ScanError):
        pass
    module = parse_module(printed.text, f"{filename} ({container} as XLA text)", spmd=spmd)
    module.filename = filename
    return module


class _Builder:
    def __init__(self, printed: PrintedModule, filename: str, spmd: bool) -> None:
        self.printed = printed
        self.filename = filename
        self.spmd = spmd
        self.shapes: dict[str, bool] = {}  # shape text -> the reader reads it as one shape

    def build(self) -> HloModule:
        printed = self.printed
        module = self._module()
        source = ModuleSource(printed.text, self.filename, head=printed.head, tail=printed.closing[-2:])
        module.source = source
        names = printed.names
        comp_names = [name for name, _, _ in printed.computations]
        if (
            "ROOT" in names  # the reader takes it for the keyword
            or ("ENTRY" in comp_names and comp_names[printed.entry] != "ENTRY")
            or _NAMES.fullmatch("\n".join(names)) is None
            or _NAMES.fullmatch("\n".join(comp_names)) is None
            or not all(map(_plain_thread, {thread for _, thread, _ in printed.computations}))
        ):
            raise _NotSure
        shapes, opcodes = printed.shapes, printed.opcodes
        if not all(map(is_known_opcode, set(opcodes))) or not all(map(self._is_shape, set(shapes))):
            raise _NotSure
        payloads: list[str | None] = [None] * len(names)
        operands = printed.operands
        for i, payload in printed.payloads.items():
            payloads[i] = payload  # printed between the parentheses instead of operands
            if operands[i]:
                if operands is printed.operands:
                    operands = list(operands)
                operands[i] = []
        if not all(_literal_reads(payload) for i, payload in printed.payloads.items() if opcodes[i] == "constant"):
            raise _NotSure
        refs, starts, tail_starts, ends = self._layout()
        sequence = printed.sequence
        objects: list[HloInstruction | None] = [None] * len(names)
        make = HloInstruction.from_source
        openings = printed.openings
        # What follows each computation's last line: its closing, "\n\n", the next opening.
        afters = [before for _, _, before, _ in openings[1:]] + [printed.closing]
        for j, (_, _, parameters) in enumerate(printed.computations):
            first, root_line, _, _ = openings[j]
            stop = openings[j + 1][0] if j + 1 < len(openings) else len(sequence)
            computation = self._computation(module, j, ends[first - 1] if first else 0)
            append = computation.append_instruction
            for i, start, tail_start, end in zip(sequence[first:stop], starts[first:stop], tail_starts[first:stop],
                                                 ends[first:stop]):
                uses = [objects[o] for o in operands[i]]
                if None in uses:
                    raise _NotSure  # an operand printed after its user
                inst = objects[i] = make(names[i], opcodes[i], shapes[i], uses, payloads[i],  # type: ignore[arg-type]
                                         (_LEAD, start, tail_start, end, True))
                if refs[i]:  # bound before the line is added, as the reader does
                    bind_references(module, computation, computation.get_instruction, inst, refs[i], _not_sure)
                append(inst)
            computation.root = objects[sequence[root_line]]
            computation.parameters = [objects[p] for p in parameters]  # type: ignore[misc]
            span = computation.span
            assert span is not None
            span.body_end = ends[stop - 1]
            span.tail = afters[j][:-2]
        module.attach_source(source)
        return module

    def _module(self) -> HloModule:
        """The module and its header attributes, as the reader reads the header: values the
        printer makes of shapes, numbers and keywords are read as printed; frontend
        attributes (strings, raw JSON) go through the reader's scanner."""
        printed = self.printed
        name = printed.name
        if IDENT.fullmatch(name) is None:
            raise _NotSure
        module = HloModule(name, use_spmd_partitioning=self.spmd)
        attributes = printed.header_attributes
        if any(key == "frontend_attributes" for key, _ in attributes):
            start = len(_MODULE) + len(name)
            attrs, end = split_attributes(printed.head, start, single=True)
            if [(key, raw) for key, raw, _ in attrs] != attributes or end != start + sum(
                len(key) + len(value) + 3 for key, value in attributes  # ", key=value"
            ):
                raise _NotSure
        module.header_attributes = list(attributes)
        return module

    def _layout(self) -> tuple[list[tuple[Reference, ...]], list[int], list[int], list[int]]:
        """Each instruction's references (`_references`), and where each line starts (at
        `ROOT` or its name), where its attribute tail starts and where it ends, in print
        order: a line is its prefix (indentation; the opening of its computation before a
        first line; `ROOT`), then its text."""
        printed = self.printed
        tails = printed.tails
        refs = self._references(tails)
        lengths = printed.lengths
        steps = list(map(add, lengths, repeat(len(_LEAD))))
        for first, root, before, comp_head in printed.openings:
            steps[first] += len(before) + len(comp_head) - len(_LEAD)
            steps[root] += _ROOT
        ends = list(accumulate(steps))
        tail_starts = list(map(sub, ends, map(len, map(tails.__getitem__, printed.sequence))))
        printed.tails = printed.lengths = []  # read: the IR is built beside the text alone
        starts = list(map(sub, ends, lengths))
        for _, root, _, _ in printed.openings:
            starts[root] -= _ROOT
        return refs, starts, tail_starts, ends

    def _references(self, tails: list[str]) -> list[tuple[Reference, ...]]:
        """Each instruction's attributes that name computations or control predecessors
        (offsets in its tail), as the reader finds them in its tail; _NotSure where the
        reader might not read the tail as these attributes (a line break in it, too)."""
        verdicts: dict[str, tuple[Reference, ...] | None] = {}
        pieces: dict = {}
        found: dict[str, tuple[Reference, ...]] = {}
        for tail in set(tails):
            form = tail.encode("utf-8", "surrogateescape").translate(_DIGITS).decode("utf-8", "surrogateescape")
            refs = verdicts.get(form, False)
            if refs is False:
                refs = verdicts[form] = tail_references(form, pieces) if "\n" not in form else None
            if refs is None:
                raise _NotSure
            # The same attributes at the same offsets: their values from the tail itself.
            found[tail] = tuple([(key, tail[at : at + len(raw)], at) for key, raw, at in refs]) if refs else ()
        return list(map(found.__getitem__, tails))

    def _computation(self, module: HloModule, j: int, opening: int) -> HloComputation:
        """The `j`-th computation printed, whose opening (the closing before it, then its
        head) starts at `opening`."""
        printed = self.printed
        name, thread, _ = printed.computations[j]
        _, _, before, comp_head = printed.openings[j]
        is_entry = j == printed.entry
        if not self._is_shape(comp_head[comp_head.rindex(" -> ") + 4 : -5]):  # the result, before " {\n  "
            raise _NotSure
        # The head starts after the module's head or the closing before it, and ends with
        # the "{" of "{\n  ".
        start = opening + (len(printed.head) if j == 0 else len(before) - 2)
        brace = opening + len(before) + len(comp_head) - 4
        span = ComputationSpan(printed.text[start : brace + 1], brace)
        computation = HloComputation(name, is_entry=is_entry, span=span)
        module.add_computation(computation)
        if is_entry:
            module.entry = computation
        computation.execution_thread = thread
        return computation

    def _is_shape(self, text: str) -> bool:
        """The reader reads `text` as one shape."""
        known = self.shapes.get(text)
        if known is None:
            try:
                known = shape_end(text, 0) == len(text)
            except ScanError:
                known = False
            self.shapes[text] = known
        return known


def _not_sure(offset: int, message: str) -> NoReturn:
    raise _NotSure


def _literal_reads(literal: str) -> bool:
    """The reader ends the group `(literal)` where the printer does."""
    try:
        return match_group(f"({literal})", 0) == len(literal) + 2
    except ScanError:
        return False


def _plain_thread(thread: str) -> bool:
    """A thread name the printer quotes as the reader unquotes it (no escapes)."""
    return thread.isascii() and thread.isprintable() and '"' not in thread and "\\" not in thread


__all__ = ["module_from_printed"]
