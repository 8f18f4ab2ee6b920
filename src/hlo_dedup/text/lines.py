"""Instruction lines as XLA prints them: the reader's fast path, and the grammar facts both
readers share.

`instruction_from_line` reads an instruction that XLA printed on one line from a single
match of `LINE`, deferring everything it can (attributes stay one raw string, shapes stay
text). Whenever it is not sure — hand-written wrapping, old operand shapes, nested
instructions, compact GTEs, odd literals — it returns None and the careful reader in
`parser` takes the line, so both build the same IR.
"""

from __future__ import annotations

import re
from typing import Callable

from ..ir.instruction import HloInstruction
from ..ir.opcodes import OPCODES, is_known_opcode
from ..ir.shape import PrimitiveType
from ..ir.source import SourceSpan
from ..syntax.lexer import ScanError, match_group, next_token, skip_trivia, split_attributes, token_at

# A string up to its closing quote, or up to the end of the line when it has none: every
# match consumes what it scanned, so masking the strings of a line is linear in its length.
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*+(")?|\'(?:[^\'\\\n]|\\.)*+(\')?')

LINE = re.compile(
    r"(\n[ \t]*)(ROOT[ \t]+)?(%?)([A-Za-z_][\w.\-]*)[ \t]*=[ \t]*"
    r"(?:([a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^}\n]*\})?|\([^\n]*?\))[ \t]+)?"
    r"([a-z][a-z0-9\-]*)\(([^()\n]*)\)([^\n]*)"
)
_NEEDS_ATTRS = re.compile(
    r"(?:to_apply|calls|condition|body|select|scatter|true_computation|false_computation|"
    r"branch_computations|called_computations|control-predecessors)="
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

def instruction_from_line(
    text: str, m: re.Match[str], lookup: Callable[[str], HloInstruction | None]
) -> tuple[HloInstruction, bool, list[tuple[str, str, int]]] | None:
    """The instruction of one `LINE` match, whether it is the ROOT, and its attributes that
    name computations or control predecessors (for the reader to resolve); None to let the
    careful reader decide."""
    lead, root, pct, name, shape, opcode, ops, tail = m.groups()
    if (opcode not in OPCODES and not is_known_opcode(opcode)) or lookup(name) is not None or (shape is None and name == "ROOT"):
        return None
    if shape is None and shape_required(opcode):
        return None
    if tail and not _tail_is_one_line(tail):
        return None
    if opcode in PAYLOAD_OPCODES:
        if opcode == "parameter" and not (ops.isdigit() and ops.isascii() and len(ops) <= 18):
            return None
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
                    return None  # the careful reader decides (and reports with a column)
                operands.append(op)
    tail_start = m.start(8)
    span = SourceSpan(_leads.get(lead) or intern_lead(lead), m.end(1), tail_start, m.end(), percent=pct == "%")
    inst = HloInstruction.from_source(name, opcode, shape, operands, payload, span)
    references: list[tuple[str, str, int]] = []
    if tail and _NEEDS_ATTRS.search(tail):
        quick = _quick_references(tail, tail_start)
        references = quick if quick is not None else split_attributes(text, tail_start, m.end())[0]
    return inst, bool(root), references


def _tail_is_one_line(tail: str) -> bool:
    """True if an attribute tail is complete on its line (XLA prints one line each).

    Brackets and quotes must balance; only when a raw count is off are strings masked
    (they may hold brackets or quotes) and the count taken again.
    """
    if tail[0] != "," or tail[-1] in ", \t\r":
        return False
    if "/" in tail and ("//" in tail or "/*" in tail):
        return False
    if (
        not tail.count('"') % 2
        and tail.count("{") == tail.count("}")
        and tail.count("'") == tail.count("\\'")  # only escaped ones, inside "..."
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
    wanted = [m.start() for m in _NEEDS_ATTRS.finditer(tail)]
    if wanted[-1] >= cut:
        return None
    head = tail[:cut]
    found = [(m.start(2), m.group(1), m.group(2)) for m in _SIMPLE_REFERENCE.finditer(head)]
    found += [(m.start(2), m.group(1), m.group(2)) for m in _LIST_REFERENCE.finditer(head)]
    if len(found) != len(wanted):
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
