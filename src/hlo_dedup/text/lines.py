"""Instruction lines as XLA prints them: the reader's fast path, and the grammar facts both
readers share.

`PrintedLines` reads instructions that XLA printed one per line, each from a single
match of `LINE`, deferring everything it can (attributes stay one raw string, shapes stay
text). Whenever it is not sure — hand-written wrapping, old operand shapes, nested
instructions, compact GTEs, odd literals, attributes it cannot vouch for — it stops, and
the careful reader in `parser` takes the line, so both build the same IR and reject the
same text at the same place. `printed_header` does the same for a computation's header.
"""

from __future__ import annotations

import re
from typing import Callable

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.opcodes import CALLED_COMPUTATION_KEYS, OPCODES, is_known_opcode
from ..ir.shape import PrimitiveType
from ..syntax.lexer import ScanError, match_group, next_token, skip_trivia, split_attributes, token_at

# Names are ASCII, as the careful reader's IDENT and XLA's lexer have them (and an ASCII
# class is a quarter cheaper to match than `\w`); none is `ROOT`, which the careful reader
# takes for the keyword. An optional part is an alternative with an empty branch (`ROOT `
# is then "", not None): `(...)?` runs the regex engine's general repeat, which cost a
# fifth of the match. No repeat here ever needs to give back what it took (each stops at a
# character that must follow it), so all are possessive.
LINE = re.compile(
    r"(\n[ \t]*+)(ROOT[ \t]++|)(?!ROOT[ \t]*=)(%?)([A-Za-z_][A-Za-z0-9_.\-]*+)[ \t]*+=[ \t]*+"
    r"(?:([a-z][a-z0-9]*+\[[^\]\n]*+\](?:\{[^}\n]*+\}|)|\([^\n]*?\))[ \t]++|)"
    r"([a-z][a-z0-9\-]*+)\(([^()\n]*+)\)([^\n]*+)"
)
# What ends an instruction's attributes for the careful reader, which reads on across lines:
# the body's `}` or the next instruction (a line LINE matches is one).
_NEXT_INSTRUCTION = re.compile(r"\n[ \t]*+(?:\}|ROOT[ \t]|%?[A-Za-z_][A-Za-z0-9_.\-]*+[ \t]*+=)")
_HEADER = re.compile(
    r"[ \t\r\n]*+(ENTRY[ \t]++|)(%?)([A-Za-z_][A-Za-z0-9_.\-]*)[ \t]*(\([^\n\"'/]*\))[ \t]*->[ \t]*"
    r"([a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^}\n\"'/]*\})?|\([^\n\"'/]*\))[ \t]*(\{)"
)
# A signature as XLA prints most of them, accepted without the scanner: no bracket nested
# in another (then `match_group` ends where it does).
_FLAT_SIGNATURE = re.compile(r"\((?:[^()\[\]{}\n]++|\[[^()\[\]{}\n]*+\]|\{[^()\[\]{}\n]*+\})*+\)")
# An attribute tail as XLA prints it, read without the scanner, one `, key=value` per match.
# At top level a value holds no comma, no `=` but in `<=`, no comment and no whitespace but
# single spaces (mesh replica groups: `mesh['x'=8] {'x'}`); its strings close on the line and
# its brackets nest as XLA's do: three levels at most (tuple shardings, operand aliasing),
# strings and `/*index=N*/` (tuple shardings) in the outer one. The first `{...}` of
# backend_config is raw JSON, as the lexer reads it. The careful reader ends each such value
# where the match does (a `ROOT` token would end it too: `_tail_references` looks for it).
_DQ = r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
_SQ = r"'[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'"
_PLAIN = r"[^{}()\[\]\"'/\n]"  # none of what `match_group` stops at
_FLAT = rf"\{{{_PLAIN}*+\}}|\({_PLAIN}*+\)|\[{_PLAIN}*+\]"
_TWO = rf"\{{(?:{_PLAIN}++|{_FLAT})*+\}}|\((?:{_PLAIN}++|{_FLAT})*+\)|\[{_PLAIN}*+\]"
_TEXT = rf"{_PLAIN}++|{_DQ}|{_SQ}|/(?!\*)|/\*index=[0-9]++\*/"
_GROUP = rf"\{{(?:{_TEXT}|{_TWO})*+\}}|\((?:{_PLAIN}++|{_FLAT})*+\)|\[(?:{_TEXT})*+\]"
_JSON = rf'\{{(?:[^{{}}"\n]++|{_DQ}|\{{(?:[^{{}}"\n]++|{_DQ}|\{{(?:[^{{}}"\n]++|{_DQ})*+\}})*+\}})*+\}}'
_ATTRIBUTE = re.compile(
    rf", ([A-Za-z_][A-Za-z0-9_.\-]*+)=(?:(?<=, backend_config=)(?:{_JSON}|{_DQ})|(?<!, backend_config=)(?! )"
    rf"(?:[^\s,=<{{}}()\[\]\"'/]++|<=?+(?!=)|{_DQ}|{_SQ}|{_GROUP}| (?![\s,=/]|\Z))++)"
)

# A constant's literal with nothing that could make `match_group` end it elsewhere than at
# LINE's `)` (others are checked with it).
_PLAIN_LITERAL = re.compile(r"[^{}\[\]\"'/]*+")
#: Keys the reader resolves while reading: called computations and control predecessors.
_REFERENCE_KEYS = frozenset((*CALLED_COMPUTATION_KEYS, "control-predecessors"))
_INDEX_COMMENT = re.compile(r"(?<=, )/\*index=\d+\*/")

PAYLOAD_OPCODES = frozenset({"parameter", "constant"})
#: Nesting of tuple shapes and of nested-instruction operands the readers follow: far
#: beyond anything XLA writes, and reported where it is exceeded.
MAX_NESTING = 200
PRIMITIVE_NAMES = frozenset(t.value for t in PrimitiveType)
# Result shapes as XLA prints most of them (arrays with a plain layout, flat tuples of them),
# which `shape_end` reads whole if their element types are primitive types: no need to run
# it (a 960-element tuple took it 4 ms).
_ARRAY = r"([a-z][a-z0-9]*)\[[0-9,]*\](?:\{[0-9][0-9,]*\})?"
_ARRAY_SHAPE = re.compile(_ARRAY)
# The whole header as XLA prints most of them, in one match of simple repeats: a flat
# signature (no string, comment or parenthesis in it) `->` an array, and the line ends
# after the body's `{`, which the next line does not make look like a layout (`_opens_layout`).
# Whatever it matches, `_HEADER` and the checks after it read the same way (the last `)`
# before `->` is the signature's); anything else takes them.
_PRINTED_HEADER = re.compile(
    r"[ \t\r\n]*+(ENTRY[ \t]++|)(%?)([A-Za-z_][A-Za-z0-9_.\-]*+)[ \t]*+"
    r"\((?:[^()\[\]{}\n\"'/]++|\[[^()\[\]{}\n\"'/]*+\]|\{[^()\[\]{}\n\"'/]*+\})*+\)[ \t]*+->[ \t]*+"
    r"([a-z][a-z0-9]*+)\[[0-9,]*+\](?:\{[0-9][0-9,]*+\}|)[ \t]*+(\{)(?=[ \t]*+\n[ \t\r\n]*+[^0-9:\s/])"
)
_TUPLE_SHAPE = re.compile(rf"\((?:{_ARRAY}(?:, (?:/\*index=[0-9]+\*/)?{_ARRAY})*+)?\)")
_ELEMENT_TYPE = re.compile(r"([a-z][a-z0-9]*)\[")
#: Opcodes XLA's parser cannot infer a result shape for (hlo-text-format §5).
_SHAPE_REQUIRED = frozenset(
    """all-gather all-gather-start all-gather-done all-reduce all-reduce-start all-reduce-done
    all-to-all collective-broadcast collective-permute collective-permute-start
    collective-permute-done copy-start copy-done dynamic-reshape dynamic-slice
    dynamic-update-slice ragged-all-to-all recv recv-done send send-done reduce-scatter slice
    bitcast bitcast-convert constant convert custom-call fusion infeed iota outfeed parameter
    reduce-precision reshape rng rng-bit-generator rng-get-and-update-state
    stochastic-convert async-start async-update async-done""".split()
)


def shape_required(opcode: str) -> bool:
    return opcode in _SHAPE_REQUIRED or (
        opcode.endswith(("-start", "-update", "-done")) and opcode not in OPCODES
    )


_leads: dict[str, str] = {}


def intern_lead(lead: str) -> str:
    """Most leads are the same few strings ("\\n  "); share one object for each."""
    if len(lead) > 16:
        return lead
    return _leads.setdefault(lead, lead)

class ComputationState:
    """What both readers know of the computation they are reading. `numbers` holds the
    text of each parameter's number, beside `parameters` (`finish_computation` checks
    XLA's 0, 1, 2, ... order on the text, which the reader has at hand)."""

    __slots__ = ("comp", "roots", "compact", "last", "suffixes", "parameters", "numbers", "lookup")

    def __init__(self, comp: HloComputation) -> None:
        self.comp = comp
        self.roots: list[HloInstruction] = []
        self.compact: dict[tuple[HloInstruction, int], HloInstruction] = {}
        self.last: HloInstruction | None = None
        self.suffixes: dict[str, int] = {}
        self.parameters: list[HloInstruction] = []
        self.numbers: list[str] = []
        self.lookup = comp.name_lookup()

    def append(self, inst: HloInstruction) -> None:
        self.comp.append_instruction(inst)
        self.last = inst
        if inst.opcode == "parameter":
            self.parameters.append(inst)
            self.numbers.append(inst.payload or "")

    def unique_name(self, wanted: str) -> str:
        """`wanted`, else the first free `wanted.N` (N from 1). Names are only added while
        reading, so the search resumes where the last one for `wanted` stopped."""
        if self.lookup(wanted) is None:
            return wanted
        k = self.suffixes.get(wanted, 1)
        while self.lookup(f"{wanted}.{k}") is not None:
            k += 1
        self.suffixes[wanted] = k + 1
        return f"{wanted}.{k}"


#: An attribute the reader resolves: key, raw value, offset.
Reference = tuple[str, str, int]


#: Keys of a piece of a tail and the references among its attributes (offsets in the piece).
_Read = tuple[list[str], list[Reference]]
#: Where XLA's per-op metadata starts: what follows it repeats across lines whose heads
#: differ (`calls=%fused_computation.N`), so it is read once (`_tail_references`).
_METADATA = ", metadata="


def _printed_attributes(piece: str) -> _Read | None:
    """The keys and references of `piece` read as `, key=value` attributes one match at a
    time; None unless the matches tile it."""
    match = _ATTRIBUTE.match
    keys = []
    found = []
    pos = 0
    while pos < len(piece):
        m = match(piece, pos)
        if m is None:
            return None
        key = m.group(1)
        keys.append(key)
        if key in _REFERENCE_KEYS:
            found.append((key, piece[m.end(1) + 1 : m.end()], m.end(1) + 1))
        pos = m.end()
    return keys, found


def _tail_references(tail: str, pieces: dict[str, _Read | None]) -> tuple[Reference, ...] | None:
    """The attributes of an instruction line's tail that name computations or control
    predecessors, as (key, raw value, offset in `tail`); None unless the careful reader
    reads the tail as these same distinct `, key=value` attributes ending with the line.

    The regex reads the tails XLA prints; any other (an unusual value, a comment, `ROOT`
    where it may end a value, a duplicate key) is split by the careful reader's scanner.
    A tail is read as two pieces split before `, metadata=` when both tile (no attribute
    value reaches across: an unclosed bracket or string keeps a piece from tiling, and a
    value ends at a top-level comma), the second from `pieces`, which keeps each one's
    reading.
    """
    if "ROOT" not in tail:
        read = None
        cut = tail.find(_METADATA)
        if cut > 0:
            rest = tail[cut:]
            second = pieces.get(rest, False)
            if second is False:
                second = pieces[rest] = _printed_attributes(rest)
            first = _printed_attributes(tail[:cut]) if second is not None else None
            if first is not None and second is not None:
                read = first[0] + second[0], first[1] + [(key, raw, cut + at) for key, raw, at in second[1]]
        if read is None:
            read = _printed_attributes(tail)
        if read is not None and len(set(read[0])) == len(read[0]):
            return tuple(read[1])
    try:
        attrs, end = split_attributes(tail, 0)
    except ScanError:
        return None
    keys = [key for key, _, _ in attrs]
    if end != len(tail) or len(set(keys)) != len(keys):
        return None
    return tuple(a for a in attrs if a[0] in _REFERENCE_KEYS)


#: The verdict above for a reader that builds the IR from lines it printed itself
#: (`hlo_dedup.io.proto_ir`): the same function, so the two cannot disagree on a tail.
tail_references = _tail_references


class PrintedLines:
    """The fast path over one module's text.

    XLA repeats the same attribute tails (the metadata of a layer's ops, layer after
    layer: ~1,500 distinct tails in 21,000 lines) and a tail's verdict depends on nothing
    else, so each distinct tail is checked once (`_tail_references`).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._tail_kinds: dict[str, tuple[Reference, ...] | None] = {}
        self._tail_pieces: dict[str, _Read | None] = {}
        self._shapes: set[str] = set()  # result shapes the careful reader ends where LINE does

    def read(
        self,
        pos: int,
        state: ComputationState,
        resolve: Callable[[ComputationState, HloInstruction, list[tuple[str, str, int]]], None],
    ) -> int:
        """Read the instructions XLA printed one per line from `pos` on into `state`, and
        return where the first line this reader is not sure of starts (for the careful
        reader to take). `resolve` binds attributes that name computations or control
        predecessors.
        """
        text = self.text
        match = LINE.match
        leads = _leads
        tail_kinds = self._tail_kinds
        shapes = self._shapes
        lookup = state.lookup
        add = state.comp.append_instruction
        make = HloInstruction.from_source
        m = match(text, pos)
        while m is not None:
            lead, root, pct, name, shape, opcode, ops, tail = m.groups()
            if (opcode not in OPCODES and not is_known_opcode(opcode)) or lookup(name) is not None:
                return pos
            if shape is None:
                if shape_required(opcode):
                    return pos
            elif shape not in shapes:
                if not _is_shape(text, m.start(5), m.end(5)):
                    return pos  # LINE's shape pattern is loose: any name, any text in brackets
                shapes.add(shape)
            refs = tail_kinds.get(tail, False)
            if refs is False:
                refs = tail_kinds[tail] = _tail_references(tail, self._tail_pieces)
            if refs is None:
                return pos
            if opcode in PAYLOAD_OPCODES:
                if opcode == "parameter":
                    if not (ops.isdigit() and ops.isascii() and len(ops) <= 18):
                        return pos
                elif _PLAIN_LITERAL.fullmatch(ops) is None and not _group_ends(text, m.start(7) - 1, m.end(7) + 1):
                    return pos
                operands: list[HloInstruction] = []
                payload: str | None = ops
            else:
                payload = None
                if ops:
                    if "/*" in ops:
                        ops = _INDEX_COMMENT.sub("", ops)  # XLA's `/*index=5*/` before every 5th operand
                    # XLA's separator; anything else is not found, and the careful reader
                    # decides (and reports with a column).
                    operands = list(map(lookup, ops[1:].split(", %") if ops[0] == "%" else ops.split(", ")))
                    if None in operands:
                        return pos
                else:
                    operands = []
            end = m.end()
            following = match(text, end)
            if following is None and not text.startswith("\n}", end) and _NEXT_INSTRUCTION.match(text, end) is None:
                return pos  # the careful reader may read the next line as more attributes
            tail_start = end - len(tail)
            # The span's fields, made a SourceSpan only if it is asked for (the match
            # started at `pos`).
            span = (leads.get(lead) or intern_lead(lead), pos + len(lead), tail_start, end, pct == "%")
            inst = make(name, opcode, shape, operands, payload, span)
            if refs:
                resolve(state, inst, [(key, raw, tail_start + at) for key, raw, at in refs])
            add(inst)
            state.last = inst
            if root:
                state.roots.append(inst)
            if payload is not None and opcode == "parameter":
                state.parameters.append(inst)
                state.numbers.append(payload)
            pos = end
            m = following
        return pos


def printed_header(text: str, pos: int) -> tuple[str, bool, bool, int, int] | None:
    """A computation header XLA printed on one line at `pos` (signature and result shape
    checked by the careful reader's scanners when the quick regexes are not enough): its
    name, whether it is ENTRY, whether the name has `%`, and the start and end of the
    body's `{`; None to let the careful reader decide. The common form takes one match."""
    m = _PRINTED_HEADER.match(text, pos)
    if m is not None and m.group(4) in PRIMITIVE_NAMES and (m.group(1) or m.group(3) != "ENTRY"):
        return m.group(3), m.group(1) != "", m.group(2) == "%", m.start(5), m.end(5)
    m = _HEADER.match(text, pos)
    if m is None:
        return None
    entry, percent, name = m.group(1, 2, 3)
    if not entry and name == "ENTRY":
        return None
    flat = _FLAT_SIGNATURE.match(text, m.start(4))
    try:
        if (flat is None or flat.end() != m.end(4)) and match_group(text, m.start(4)) != m.end(4):
            return None
        if not _is_shape(text, m.start(5), m.end(5)) or _opens_layout(text, m.start(6)):
            return None
    except ScanError:
        return None
    return name, entry != "", percent == "%", m.start(6), m.end(6)


def _opens_layout(text: str, brace: int) -> bool:
    """True if the careful reader reads the `{` at `brace`, right after a result shape, as
    the shape's layout (a digit or `:` comes next) rather than as the body's."""
    k = skip_trivia(text, brace + 1)
    return k < len(text) and (text[k].isdigit() or text[k] == ":")


def _group_ends(text: str, start: int, end: int) -> bool:
    """True if the careful reader's `match_group` ends the group opening at `start` at `end`."""
    try:
        return match_group(text, start) == end
    except ScanError:
        return False


def _is_shape(text: str, start: int, end: int) -> bool:
    """True if the careful reader reads `text[start:end]` as one shape (`shape_end`)."""
    if text.startswith("(", start):
        if _TUPLE_SHAPE.fullmatch(text, start, end) and PRIMITIVE_NAMES.issuperset(
            _ELEMENT_TYPE.findall(text, start, end)
        ):
            return True
    else:
        array = _ARRAY_SHAPE.fullmatch(text, start, end)
        if array is not None and array.group(1) in PRIMITIVE_NAMES:
            return True
    try:
        return shape_end(text, start) == end
    except ScanError:
        return False


def shape_end(text: str, pos: int, depth: int = 0) -> int | None:
    """End of the shape starting at `pos`, or None if no shape starts there (ScanError
    where tuples nest deeper than MAX_NESTING)."""
    if pos >= len(text):
        return None
    if text[pos] == "(":
        if depth >= MAX_NESTING:
            raise ScanError(pos, f"tuple shape nests deeper than {MAX_NESTING} levels")
        i = skip_trivia(text, pos + 1)
        if text.startswith(")", i):
            return i + 1
        while True:
            end = shape_end(text, i, depth + 1)
            if end is None:
                return None
            tok, _, tend = next_token(text, end)
            if tok == ")":
                return tend
            if tok != ",":
                return None
            i = skip_trivia(text, tend)
    tok, end = token_at(text, pos)
    if tok == "b" and text.startswith("(", end):
        return match_group(text, end)
    if tok not in PRIMITIVE_NAMES or not text.startswith("[", end):
        return None
    end = match_group(text, end)
    j = skip_trivia(text, end)
    if text.startswith("{", j):
        k = skip_trivia(text, j + 1)
        if k < len(text) and (text[k].isdigit() or text[k] == ":"):
            return match_group(text, j)
    return end
