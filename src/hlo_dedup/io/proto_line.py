"""Instruction lines, as ``HloInstruction::PrintWithCanonicalNameMap`` writes them
with ``HloPrintOptions::Default()`` and large constants printed.

Sub-message texts (shapes, metadata, shardings, frontend attributes, backend
configs) are memoised on their bytes, and the optional parts are only looked for
when their field tag occurs in the module at all: a typical line costs a few list
lookups and one string join.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import add, is_not, lt
from typing import Any, Callable

from .proto_attributes import ACCURACY_OPCODES, CALLS_TO_APPLY, OPCODE_ATTRIBUTES, QUIET_UNLESS, result_accuracy_text
from .proto_site import Site
from .proto_fields import Decoder
from .proto_instruction import ASYNC_OPCODES, Computation, Instructions
from .proto_literal import literal_text
from .proto_sharding import sharding_text
from .proto_values import (
    InvalidProto,
    ShapeText,
    UnsupportedProto,
    frontend_attributes,
    op_metadata_parts,
    original_value,
    raw_or_quoted,
)


class LinePrinter:
    """Prints the instruction lines of one module."""

    def __init__(self, decoder: Decoder, shapes: ShapeText) -> None:
        self.decoder = decoder
        self.shapes = shapes
        self.metadata: dict[bytes, tuple[str, int, bool]] = {}
        self._frontend_text = decoder.memo(lambda b: frontend_attributes(decoder.decode("FrontendAttributes", b)))
        self._config_text = decoder.memo(lambda b: raw_or_quoted(b.decode("utf-8", "surrogateescape")))
        self._literal_text = decoder.memo(lambda b: literal_text(decoder.decode("LiteralProto", b)))
        self._sharding_text = lambda proto, shape: sharding_text(proto, shapes.shape(shape))
        self.counts: dict[str, int] = {}  # how many values each other instruction field has
        self._shardings: list[bytes | None] = []
        self._frontend: list[bytes] = []
        self._statistics: list[bytes] = []
        self._accuracy = False

    def metadata_of(self, data: bytes) -> tuple[str, int, bool]:
        """(text without the stack frame, stack frame id, whether anything else prints)."""
        parts = self.metadata.get(data)
        if parts is None:
            parts = self.metadata[data] = op_metadata_parts(self.decoder.decode("OpMetadata", data))
        return parts

    def columns(self, table: Instructions, frames: Callable[[int], int]) -> list[list[str]]:
        """The pieces of every instruction's line, as columns: ``%name``, its shape, its
        opcode (as printed: an async op's may be sugared), what goes between the
        parentheses (operands, a parameter number, a literal), and its attribute tail
        (what follows the ``)``: attributes, metadata, backend config).

        Each column is a comprehension over all instructions, a lookup of texts made
        once per distinct value, or a loop over the few instructions that need it.
        """
        columns = table.data.columns
        names = table.names
        opcodes = table.opcodes
        shapes = table.shapes
        shape_texts = {data: self.shapes.text(data) for data in dict.fromkeys(map(shapes.__getitem__, table.order))}
        refs = ["%" + n for n in names]
        ref = refs.__getitem__
        args = list(map(", ".join, map(map, repeat(ref), table.operands)))
        for i in compress(range(len(args)), map(lt, repeat(5), map(len, table.operands))):
            args[i] = _long_operand_list(refs, table.operands[i])
        n = len(names)
        tails = [""] * n
        numbers = columns["parameter_number"]
        for i in table.parameters:
            args[i] = str(numbers[i])
        # The attributes any instruction may have, and which instructions have them.
        self._shardings = shardings = columns["sharding"]
        self._frontend = frontend = columns["frontend_attributes"]
        self._statistics = statistics = columns["statistics_viz"]
        self.counts = counts = table.data.counts
        self._accuracy = counts["result_accuracy"] > 0
        special = _SPECIAL_OPCODES.difference(
            op for op, fields in QUIET_UNLESS.items() if not any(counts[f] for f in fields)
        )
        common = set(table.control)  # the rows with attributes any instruction may have
        if shardings.count(None) != n:
            common.update(compress(range(n), map(is_not, shardings, repeat(None))))
        if any(frontend):
            common.update(compress(range(n), frontend))
        if any(statistics):
            common.update(compress(range(n), statistics))
        if self._accuracy:
            common.update(compress(range(n), map(ACCURACY_OPCODES.__contains__, opcodes)))
        rows = set(compress(range(n), map(special.__contains__, opcodes)))
        rows.update(table.called, common)
        attributes = OPCODE_ATTRIBUTES
        called = table.called
        printed_opcodes = opcodes  # copied before an async op's sugared name goes in
        rows_in_order = sorted(rows, key=table.rank.__getitem__)
        for i, view in zip(rows_in_order, table.data.views(rows_in_order)):
            opcode = opcodes[i]
            parts: list[str] = []
            if opcode == "constant":
                args[i] = self._literal_text(view.literal) if view.HasField("literal") else "{...}"
            if opcode in ASYNC_OPCODES:
                if printed_opcodes is opcodes:
                    printed_opcodes = list(opcodes)
                printed_opcodes[i] = self._async_opcode(table, i, parts)
            else:
                extra = attributes.get(opcode)
                if extra is not None:
                    texts = list(extra(Site(table, i, self, view)))
                    if texts:
                        parts.append(", " + ", ".join(texts))
                if i in called:
                    parts.append(_called_text(table, i, called[i]))
                if i in common or self._accuracy:
                    self._common_attributes(table, i, parts, view)
            tails[i] = "".join(parts)
        originals = columns["original_value"]
        if originals.count(None) != n:
            for i in table.order:
                value = originals[i]
                if value is not None:
                    tails[i] += ", origin={" + original_value(self.decoder.decode("OriginalValueProto", value)) + "}"
        tails = list(map(add, map(add, tails, self._metadata_texts(table.metadata, frames)),
                         self._config_texts(columns["backend_config"])))
        return [refs, list(map(shape_texts.__getitem__, shapes)), printed_opcodes, args, tails]

    def _metadata_texts(self, metadata: list[bytes], frames: Callable[[int], int]) -> list[str]:
        """Each instruction's ``, metadata={...}`` (or nothing), made once per distinct
        metadata (its stack frame renumbered)."""
        texts = {}
        for data in dict.fromkeys(metadata):
            if not data:
                texts[data] = ""
                continue
            text, frame, prints = self.metadata_of(data)
            if frame:
                frame = frames(frame)
                if frame:
                    text = f"{text} stack_frame_id={frame}" if text else f"stack_frame_id={frame}"
                    prints = True
            texts[data] = ", metadata={" + text + "}" if prints else ""
        return list(map(texts.__getitem__, metadata))

    def _config_texts(self, configs: list[bytes]) -> list[str]:
        """Each instruction's ``, backend_config=...`` (or nothing)."""
        texts = {raw: ", backend_config=" + self._config_text(raw) if raw else "" for raw in dict.fromkeys(configs)}
        return list(map(texts.__getitem__, configs))

    def _async_opcode(self, table: Instructions, i: int, parts: list[str]) -> str:
        """An async op's printed opcode, its attributes added to ``parts``; sugared as
        ``<wrapped>-start/-update/-done`` when its wrapped computation is one instruction
        (``syntax_sugar_async_ops``, on by default)."""
        opcode = table.opcodes[i]
        root = table.async_root(i)
        if root is None:
            self._extra_attributes(table, i, parts)
            return opcode
        if len(table.view(i).output_operand_aliasing):
            raise UnsupportedProto("HloInstructionProto.output_operand_aliasing", "on a sugared async op")
        if opcode == "async-start":
            thread = table.async_threads.get(i, "main")
            if thread != "main":
                parts.append(f', async_execution_thread="{thread}"')
            self._extra_attributes(table, root, parts)
        self._common_attributes(table, i, parts)
        return table.opcodes[root] + opcode[5:]

    def _extra_attributes(self, table: Instructions, i: int, parts: list[str]) -> None:
        """``PrintExtraAttributes``: opcode attributes, called computations, then the
        attributes every instruction may have."""
        extra = OPCODE_ATTRIBUTES.get(table.opcodes[i])
        if extra is not None:
            parts.extend([", " + a for a in extra(Site(table, i, self))])
        called = table.called.get(i)
        if called is not None:
            parts.append(_called_text(table, i, called))
        self._common_attributes(table, i, parts)

    def _common_attributes(self, table: Instructions, i: int, parts: list[str], view: Any = None) -> None:
        sharding = self._shardings[i]
        if sharding is not None:
            parts.append(", sharding=" + self.decoder.printed("OpSharding", sharding, self._sharding_text, table.shapes[i]))
        frontend = self._frontend[i]
        if frontend:
            text = self._frontend_text(frontend)
            if text != "{}":
                parts.append(", frontend_attributes=" + text)
        control = table.control.get(i)
        if control:
            parts.append(", control-predecessors={" + ", ".join("%" + table.names[p] for p in control) + "}")
        statistics = self._statistics[i]
        if statistics and len(self.decoder.decode("StatisticsViz", statistics).statistics):
            raise UnsupportedProto("HloInstructionProto.statistics_viz")
        if self._accuracy:
            accuracy = result_accuracy_text(Site(table, i, self, view))
            if accuracy:
                parts.append(", result_accuracy=" + accuracy)


# Opcodes whose lines always have more than the common parts.
_SPECIAL_OPCODES = frozenset(OPCODE_ATTRIBUTES) | ASYNC_OPCODES | {"constant"}


def _long_operand_list(refs: list[str], ops: list[int]) -> str:
    """Operands joined by ", " with ``/*index=N*/`` before every fifth."""
    parts = [refs[ops[0]]]
    for k in range(1, len(ops)):
        parts.append((f", /*index={k}*/" if k % 5 == 0 else ", ") + refs[ops[k]])
    return "".join(parts)


def _called_text(table: Instructions, i: int, called: list[Computation]) -> str:
    """The called-computation attributes of ``PrintExtraAttributes`` (name-only mode)."""
    opcode = table.opcodes[i]
    name = table.names[i]
    if opcode == "while":
        if len(called) != 2:
            raise InvalidProto(f"while {name} needs 2 called computations")
        return f", condition=%{called[1].name}, body=%{called[0].name}"  # proto order: body, condition
    if opcode == "select-and-scatter":
        if len(called) != 2:
            raise InvalidProto(f"select-and-scatter {name} needs 2 called computations")
        return f", select=%{called[0].name}, scatter=%{called[1].name}"
    if opcode == "conditional":
        return ""  # printed with the opcode attributes: it needs the predicate's type
    if opcode in CALLS_TO_APPLY:
        text = f", to_apply=%{called[0].name}"
        if opcode == "call" and table.view(i).is_composite:
            text += ", is_composite=true"
        return text
    if opcode == "custom-call":
        return ", called_computations={" + ", ".join("%" + c.name for c in called) + "}"
    if opcode == "async-start" or len(called) == 1:
        return f", calls=%{called[0].name}"
    return ", calls=" + ", ".join(["%" + c.name for c in called])
