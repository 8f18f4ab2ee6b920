"""Instruction lines as XLA prints them: the reader's fast path, and the grammar facts both
readers share.

`PrintedLines` reads instructions that XLA printed one per line, each from a single
match of `LINE`, deferring everything it can (attributes stay one raw string, shapes stay
text). Whenever it is not sure — hand-written wrapping, old operand shapes, nested
instructions, compact GTEs, odd literals — it stops, and the careful reader in `parser`
takes the line, so both build the same IR. `printed_header` does the same for a
computation's header line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.opcodes import OPCODES, is_known_opcode
from ..ir.shape import PrimitiveType
from ..ir.source import SourceSpan
from ..syntax.lexer import ScanError, match_group, next_token, skip_trivia, split_attributes, token_at

# A string up to its closing quote, or up to the end of the line when it has none: every
# match consumes what it scanned, so masking the strings of a line is linear in its length.
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*+(")?|\'(?:[^\'\\\n]|\\.)*+(\')?')

# Names are ASCII, as the careful reader's IDENT and XLA's lexer have them (and an ASCII
# class is a quarter cheaper to match than `\w`).
LINE = re.compile(
    r"(\n[ \t]*)(ROOT[ \t]+)?(%?)([A-Za-z_][A-Za-z0-9_.\-]*)[ \t]*=[ \t]*"
    r"(?:([a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^}\n]*\})?|\([^\n]*?\))[ \t]+)?"
    r"([a-z][a-z0-9\-]*)\(([^()\n]*)\)([^\n]*)"
)
_HEADER = re.compile(
    r"[ \t\r\n]*(ENTRY[ \t]+)?(%?)([A-Za-z_][A-Za-z0-9_.\-]*)[ \t]*(\([^\n\"'/]*\))[ \t]*->[ \t]*"
    r"([a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^}\n\"'/]*\})?|\([^\n\"'/]*\))[ \t]*(\{)"
)
# Signatures and result shapes as XLA prints most of them, accepted without the scanners:
# no tuple, no bracket nested in another (then `match_group`/`shape_end` end where these do).
_FLAT_SIGNATURE = re.compile(r"\((?:[^()\[\]{}\n]|\[[^()\[\]{}\n]*\]|\{[^()\[\]{}\n]*\})*\)")
_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[[0-9,]*\](?:\{[0-9][0-9,]*\})?")
_NEEDS_ATTRS = re.compile(
    r"(?:to_apply|calls|condition|body|select|scatter|true_computation|false_computation|"
    r"branch_computations|called_computations|control-predecessors)="
)


def _may_reference(tail: str) -> bool:
    """False only if no key `_NEEDS_ATTRS` finds is in `tail`: a few substring tests (each
    key holds one of these words) cost a fifth of that regex's search on a metadata line."""
    return (
        "computation=" in tail or "computations=" in tail or "to_apply=" in tail or "calls=" in tail or "condition=" in tail
        or "body=" in tail or "select=" in tail or "scatter=" in tail or "control-predecessors=" in tail
    )


_SIMPLE_REFERENCE = re.compile(
    r", (to_apply|calls|condition|body|select|scatter|true_computation|false_computation)="
    r"(%?[A-Za-z_][\w.\-]*)(?=, [A-Za-z_][\w.\-]*=|$)"
)
_LIST_REFERENCE = re.compile(
    r", (branch_computations|called_computations|control-predecessors)=(\{[^{}]*\})(?=, [A-Za-z_][\w.\-]*=|$)"
)
_INDEX_COMMENT = re.compile(r"(?<=, )/\*index=\d+\*/")

PAYLOAD_OPCODES = frozenset({"parameter", "constant"})
#: Nesting of tuple shapes and of nested-instruction operands the readers follow: far
#: beyond anything XLA writes, and reported where it is exceeded.
MAX_NESTING = 200
PRIMITIVE_NAMES = frozenset(t.value for t in PrimitiveType)
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

@dataclass
class ComputationState:
    """What both readers know of the computation they are reading."""

    comp: HloComputation
    roots: list[HloInstruction] = field(default_factory=list)
    compact: dict[tuple[HloInstruction, int], HloInstruction] = field(default_factory=dict)
    last: HloInstruction | None = None
    suffixes: dict[str, int] = field(default_factory=dict)
    parameters: list[HloInstruction] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lookup = self.comp.name_lookup()

    def append(self, inst: HloInstruction) -> None:
        self.comp.append_instruction(inst)
        self.last = inst
        if inst.opcode == "parameter":
            self.parameters.append(inst)

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


#: What an attribute tail asks of the fast path (`_tail_kind`).
_PLAIN, _REFERENCES, _NOT_ONE_LINE = 0, 1, 2


def _tail_kind(tail: str) -> int:
    if tail and not _tail_is_one_line(tail):
        return _NOT_ONE_LINE
    if tail and _may_reference(tail) and _NEEDS_ATTRS.search(tail):
        return _REFERENCES
    return _PLAIN


class PrintedLines:
    """The fast path over one module's text.

    XLA repeats the same attribute tails (the metadata of a layer's ops, layer after
    layer: ~1,500 distinct tails in 21,000 lines) and a tail's verdict depends on nothing
    else, so each distinct tail is checked once.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._tail_kinds: dict[str, int] = {}

    def read(
        self,
        pos: int,
        state: ComputationState,
        resolve: Callable[[HloInstruction, list[tuple[str, str, int]]], None],
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
        lookup = state.lookup
        add = state.comp.append_instruction
        while True:
            m = match(text, pos)
            if m is None:
                return pos
            lead, root, pct, name, shape, opcode, ops, tail = m.groups()
            if (opcode not in OPCODES and not is_known_opcode(opcode)) or lookup(name) is not None or (shape is None and name == "ROOT"):
                return pos
            if shape is None and shape_required(opcode):
                return pos
            kind = tail_kinds.get(tail)
            if kind is None:
                kind = tail_kinds[tail] = _tail_kind(tail)
            if kind == _NOT_ONE_LINE:
                return pos
            if opcode in PAYLOAD_OPCODES:
                if opcode == "parameter" and not (ops.isdigit() and ops.isascii() and len(ops) <= 18):
                    return pos
                operands: list[HloInstruction] = []
                payload: str | None = ops
            else:
                payload = None
                if "/*" in ops:
                    ops = _INDEX_COMMENT.sub("", ops)  # XLA's `/*index=5*/` before every 5th operand
                operands = []
                if ops:
                    for ref in ops.split(", "):  # XLA's separator; anything else is not found
                        op = lookup(ref[1:] if ref[:1] == "%" else ref)
                        if op is None:
                            return pos  # the careful reader decides (and reports with a column)
                        operands.append(op)
            tail_start = m.start(8)
            end = m.end()
            span = SourceSpan(leads.get(lead) or intern_lead(lead), m.end(1), tail_start, end, percent=pct == "%")
            inst = HloInstruction.from_source(name, opcode, shape, operands, payload, span)
            if kind == _REFERENCES:
                quick = _quick_references(tail, tail_start)
                resolve(inst, quick if quick is not None else split_attributes(text, tail_start, end)[0])
            add(inst)
            state.last = inst
            if root:
                state.roots.append(inst)
            if payload is not None and opcode == "parameter":
                state.parameters.append(inst)
            pos = end


def printed_header(text: str, pos: int) -> tuple[str, bool, bool, int, int] | None:
    """A computation header XLA printed on one line at `pos` (signature and result shape
    checked by the careful reader's scanners when the quick regexes are not enough): its
    name, whether it is ENTRY, whether the name has `%`, and the start and end of the
    body's `{`; None to let the careful reader decide."""
    m = _HEADER.match(text, pos)
    if m is None:
        return None
    entry, name = m.group(1), m.group(3)
    if entry is None and name == "ENTRY":
        return None
    flat = _FLAT_SIGNATURE.match(text, m.start(4))
    shape = _ARRAY_SHAPE.match(text, m.start(5))
    try:
        if (flat is None or flat.end() != m.end(4)) and match_group(text, m.start(4)) != m.end(4):
            return None
        if (shape is None or shape.end() != m.end(5) or shape.group(1) not in PRIMITIVE_NAMES) and (
            shape_end(text, m.start(5)) != m.end(5)
        ):
            return None
    except ScanError:
        return None
    return name, entry is not None, m.group(2) == "%", m.start(6), m.end(6)

def _tail_is_one_line(tail: str) -> bool:
    """True if an attribute tail is complete on its line (XLA prints one line each).

    Brackets and quotes must balance; only when a raw count is off are strings masked
    (they may hold brackets or quotes) and the count taken again.
    """
    if tail[0] != "," or tail[-1] in ", \t\r":
        return False
    if "/" in tail and ("//" in tail or ("/*" in tail and tail.count("/*") != len(_INDEX_COMMENT.findall(tail)))):
        return False  # a comment other than XLA's `/*index=5*/` (in tuple shardings) may hide anything
    if (
        not tail.count('"') % 2
        and tail.count("{") == tail.count("}")
        and ("'" not in tail or tail.count("'") == tail.count("\\'"))  # only escaped ones, inside "..."
    ):
        return True
    bare = _without_strings(tail)
    return (
        bare is not None
        and bare.count("{") == bare.count("}")
        and bare.count("(") == bare.count(")")
        and bare.count("[") == bare.count("]")
    )


def _without_strings(tail: str) -> str | None:
    """`tail` with each string replaced by `""`; None if a string is not closed on the line."""
    parts = []
    last = 0
    for m in _STRING.finditer(tail):
        if m.group(1) is None and m.group(2) is None:
            return None
        parts.append(tail[last : m.start()])
        parts.append('""')
        last = m.end()
    parts.append(tail[last:])
    return "".join(parts)


def _quick_references(tail: str, base: int) -> list[tuple[str, str, int]] | None:
    """Called-computation and control-predecessor attributes of a one-line tail, read with
    two regexes before the first string; None when that is not certain (then split fully)."""
    cut = len(tail)
    for quote in ('"', "'"):
        at = tail.find(quote)
        if 0 <= at < cut:
            cut = at
    # A key holds no quote, so none straddles `cut`: any from there on is inside or after a string.
    if _may_reference(tail[cut:]) and _NEEDS_ATTRS.search(tail, cut):
        return None
    head = tail[:cut]
    found = [(m.start(2), m.group(1), m.group(2)) for m in _SIMPLE_REFERENCE.finditer(head)]
    found += [(m.start(2), m.group(1), m.group(2)) for m in _LIST_REFERENCE.finditer(head)]
    if len(found) != len(_NEEDS_ATTRS.findall(head)):
        return None
    found.sort()
    return [(key, raw, base + at) for at, key, raw in found]


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
