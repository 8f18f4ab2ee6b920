"""Instruction lines, as ``HloInstruction::PrintWithCanonicalNameMap`` writes them
with ``HloPrintOptions::Default()`` and large constants printed.

Sub-message texts (shapes, metadata, shardings, frontend attributes, backend
configs) are memoised on their bytes, and the optional parts are only looked for
when their field tag occurs in the module at all: a typical line costs a few list
lookups and one string join.
"""

from __future__ import annotations

from typing import Callable

from .proto_attributes import ACCURACY_OPCODES, CALLS_TO_APPLY, OPCODE_ATTRIBUTES, Site, result_accuracy_text
from .proto_fields import Decoder
from .proto_instruction import ASYNC_OPCODES, Computation
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


def field_tag(field: int, wire_type: int = 2) -> bytes:
    """The encoded tag of a field (wire type 2: length-delimited or packed)."""
    value = field << 3 | wire_type
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class LinePrinter:
    """Prints the instruction lines of one module's computations."""

    def __init__(self, data: bytes, decoder: Decoder, shapes: ShapeText) -> None:
        self.decoder = decoder
        self.shapes = shapes
        # A field whose tag never occurs in the module is set on no instruction.
        self.sharding = field_tag(40) in data
        self.frontend = field_tag(68) in data
        self.config = field_tag(43) in data
        self.statistics = field_tag(82) in data
        self.original = field_tag(88) in data
        self.accuracy = field_tag(91) in data
        self.metadata: dict[bytes, tuple[str, int, bool]] = {}
        self._frontend_text = decoder.memo(lambda b: frontend_attributes(decoder.decode("FrontendAttributes", b)))
        self._config_text = decoder.memo(lambda b: raw_or_quoted(b.decode("utf-8", "surrogateescape")))

    def metadata_of(self, data: bytes) -> tuple[str, int, bool]:
        """(text without the stack frame, stack frame id, whether anything else prints)."""
        parts = self.metadata.get(data)
        if parts is None:
            parts = self.metadata[data] = op_metadata_parts(self.decoder.decode("OpMetadata", data))
        return parts

    def lines(self, comp: Computation, order: list[int], frames: Callable[[int], int]) -> list[str]:
        """The lines of ``comp``'s instructions in ``order`` (without indentation).

        Built column by column (heads, operands, attributes, metadata, configs), each
        column a comprehension over all instructions or a loop over the few that need it.
        """
        names = comp.names
        opcodes = comp.opcodes
        views = comp.views
        shape_text = self.shapes.text
        refs = ["%" + n for n in names]
        heads = [f"%{n} = {shape_text(s)} {o}(" for n, s, o in zip(names, comp.shapes, opcodes)]
        args = [
            ", ".join([refs[o] for o in ops]) if len(ops) <= 5 else _long_operand_list(refs, ops)
            for ops in comp.operands
        ]
        n = len(names)
        tails = [")"] * n
        for i in comp.parameters:
            args[i] = str(views[i].parameter_number)
        attributes = OPCODE_ATTRIBUTES
        called = comp.called
        control = comp.control
        sharding, frontend, statistics = self.sharding, self.frontend, self.statistics
        accuracy = self.accuracy
        any_optional = sharding or frontend or statistics or accuracy or control
        for i, opcode in enumerate(opcodes):
            if opcode in attributes or opcode in ASYNC_OPCODES or opcode == "constant" or i in called:
                pass
            elif not any_optional:
                continue
            else:
                view = views[i]
                if not (
                    (sharding and view.HasField("sharding"))
                    or (frontend and view.frontend_attributes)
                    or i in control
                    or (statistics and view.statistics_viz)
                    or (accuracy and opcode in ACCURACY_OPCODES and view.HasField("result_accuracy"))
                ):
                    continue
            parts = [")"]
            if opcode == "constant":
                view = views[i]
                args[i] = (
                    literal_text(self.decoder.decode("LiteralProto", view.literal)) if view.HasField("literal") else "{...}"
                )
            if opcode in ASYNC_OPCODES:
                heads[i] = self._async_head(comp, i, heads[i], parts)
            else:
                extra = attributes.get(opcode)
                if extra is not None:
                    parts.extend([", " + a for a in extra(Site(comp, i, self))])
                if i in called:
                    parts.append(_called_text(comp, i, called[i]))
                if any_optional:
                    self._common_attributes(comp, i, parts)
            tails[i] = "".join(parts)
        if self.original:
            for i, view in enumerate(views):
                if view.HasField("original_value"):
                    value = self.decoder.decode("OriginalValueProto", view.original_value)
                    tails[i] += ", origin={" + original_value(value) + "}"
        cache = self.metadata
        metadata_of = self.metadata_of
        for i, data in enumerate(comp.metadata):
            if data:
                text, frame, prints = cache.get(data) or metadata_of(data)
                if frame:
                    frame = frames(frame)
                    if frame:
                        text = f"{text} stack_frame_id={frame}" if text else f"stack_frame_id={frame}"
                        prints = True
                if prints:
                    tails[i] += ", metadata={" + text + "}"
        if self.config:
            config_text = self._config_text
            for i, view in enumerate(views):
                raw = view.backend_config
                if raw:
                    tails[i] += ", backend_config=" + config_text(raw)
        return [heads[i] + args[i] + tails[i] for i in order]

    def _async_head(self, comp: Computation, i: int, head: str, parts: list[str]) -> str:
        """An async op's head and attributes; sugared as ``<wrapped>-start/-update/-done``
        when its wrapped computation is one instruction (``syntax_sugar_async_ops``, on by
        default)."""
        opcode = comp.opcodes[i]
        wrapped = comp.async_root(i)
        if wrapped is None:
            self._extra_attributes(comp, i, parts)
            return head
        inner, root = wrapped
        if len(comp.views[i].output_operand_aliasing):
            raise UnsupportedProto("HloInstructionProto.output_operand_aliasing", "on a sugared async op")
        shape = self.shapes.text(comp.shapes[i])
        if opcode == "async-start":
            thread = comp.async_threads.get(i, "main")
            if thread != "main":
                parts.append(f', async_execution_thread="{thread}"')
            self._extra_attributes(inner, root, parts)
        self._common_attributes(comp, i, parts)
        return f"%{comp.names[i]} = {shape} {inner.opcodes[root]}{opcode[5:]}("

    def _extra_attributes(self, comp: Computation, i: int, parts: list[str]) -> None:
        """``PrintExtraAttributes``: opcode attributes, called computations, then the
        attributes every instruction may have."""
        extra = OPCODE_ATTRIBUTES.get(comp.opcodes[i])
        if extra is not None:
            parts.extend([", " + a for a in extra(Site(comp, i, self))])
        called = comp.called.get(i)
        if called is not None:
            parts.append(_called_text(comp, i, called))
        self._common_attributes(comp, i, parts)

    def _common_attributes(self, comp: Computation, i: int, parts: list[str]) -> None:
        view = comp.views[i]
        if self.sharding and view.HasField("sharding"):
            sharding = self.decoder.decode("OpSharding", view.sharding)
            parts.append(", sharding=" + sharding_text(sharding, self.shapes.shape(comp.shapes[i])))
        if self.frontend and view.frontend_attributes:
            text = self._frontend_text(view.frontend_attributes)
            if text != "{}":
                parts.append(", frontend_attributes=" + text)
        control = comp.control.get(i)
        if control:
            parts.append(", control-predecessors={" + ", ".join("%" + comp.names[p] for p in control) + "}")
        if self.statistics and view.statistics_viz:
            if len(self.decoder.decode("StatisticsViz", view.statistics_viz).statistics):
                raise UnsupportedProto("HloInstructionProto.statistics_viz")
        if self.accuracy:
            accuracy = result_accuracy_text(Site(comp, i, self))
            if accuracy:
                parts.append(", result_accuracy=" + accuracy)


def _long_operand_list(refs: list[str], ops: list[int]) -> str:
    """Operands joined by ", " with ``/*index=N*/`` before every fifth."""
    parts = [refs[ops[0]]]
    for k in range(1, len(ops)):
        parts.append((f", /*index={k}*/" if k % 5 == 0 else ", ") + refs[ops[k]])
    return "".join(parts)


def _called_text(comp: Computation, i: int, called: list[Computation]) -> str:
    """The called-computation attributes of ``PrintExtraAttributes`` (name-only mode)."""
    opcode = comp.opcodes[i]
    name = comp.names[i]
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
        if opcode == "call" and comp.views[i].is_composite:
            text += ", is_composite=true"
        return text
    if opcode == "custom-call":
        return ", called_computations={" + ", ".join("%" + c.name for c in called) + "}"
    if opcode == "async-start":
        return f", calls=%{called[0].name}"
    return ", calls=" + ", ".join("%" + c.name for c in called)
