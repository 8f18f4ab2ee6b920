"""Computations and instructions of an ``HloModuleProto`` as XLA loads and prints them.

:class:`Computation` rebuilds what ``HloComputation::CreateFromProto`` keeps
(instructions by local id, operands, users, parameters, root) and XLA's
instruction post order; :class:`InstructionPrinter` writes one instruction line as
``HloInstruction::PrintWithCanonicalNameMap`` does with the default options.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..ir.shape import PrimitiveType
from ..text.escape import c_escape
from .proto_attributes import OPCODE_ATTRIBUTES, CALLS_TO_APPLY, result_accuracy_text
from .proto_literal import literal_text
from .proto_sharding import sharding_text
from .proto_values import (
    InvalidProto,
    ShapeText,
    UnsupportedProto,
    frontend_attributes,
    has_entries,
    metadata_prints,
    op_metadata,
    original_value,
    raw_or_quoted,
)

# HloOpcode strings (hlo_opcode.h), and which of them may call computations.
OPCODES = frozenset(
    """abs acos acosh add add-dependency after-all all-gather all-gather-done all-gather-start
    all-reduce all-reduce-done all-reduce-start all-to-all and asin asinh async-done async-start
    async-update atan2 atanh batch-norm-grad batch-norm-inference batch-norm-training bitcast
    bitcast-convert broadcast call cbrt ceil cholesky clamp collective-broadcast collective-permute
    collective-permute-done collective-permute-start compare complex concatenate conditional
    constant convert convolution copy copy-done copy-start cosine cosh count-leading-zeros
    custom-call divide domain dot dynamic-reshape dynamic-slice dynamic-update-slice erf
    exponential exponential-minus-one fft floor fusion gather get-dimension-size get-tuple-element
    imag infeed iota is-finite log log-plus-one logistic map maximum minimum multiply negate not
    opt-barrier or outfeed pad parameter partition-id popcnt power ragged-all-to-all ragged-dot real
    recv recv-done reduce reduce-precision reduce-scatter reduce-window remainder replica-id
    reshape reverse rng rng-bit-generator rng-get-and-update-state round-nearest-afz
    round-nearest-even rsqrt scaled-dot scan scatter select select-and-scatter send send-done
    set-dimension-size shift-left shift-right-arithmetic shift-right-logical sign sine sinh slice
    sort sqrt stochastic-convert subtract tan tanh topk transpose triangular-solve tuple while
    xor""".split()
)
CALLING_OPCODES = frozenset(
    """all-reduce all-reduce-start async-done async-start async-update call conditional
    custom-call fusion map reduce reduce-scatter reduce-window scan scatter select-and-scatter
    sort while""".split()
)
# Opcodes XLA no longer has; the loader turns them into compare with this direction.
DEPRECATED_COMPARES = {
    "equal-to": "EQ", "not-equal-to": "NE", "greater-than-or-equal-to": "GE",
    "greater-than": "GT", "less-than-or-equal-to": "LE", "less-than": "LT",
}  # fmt: skip

_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_NOT_ALLOWED = re.compile(rb"[^A-Za-z0-9_.\-]")
_TYPE_NAMES = frozenset(
    [t.value for t in PrimitiveType] + ["primitive_type_invalid", "buffer"]
)


def sanitized_name(name: str) -> str:
    """``NameUniquer::GetSanitizedName``, byte by byte over the UTF-8 name."""
    if _NAME_OK.match(name) is None:
        if not name:
            return ""
        raw = name.encode("utf-8", "surrogateescape")
        first = raw[:1] if raw[:1].isalpha() and raw[:1].isascii() or raw[:1] == b"_" else b"_"
        name = (first + _NOT_ALLOWED.sub(b"_", raw[1:])).decode("ascii")
    if name in _TYPE_NAMES:
        name += "_"
    if name.startswith("__") and not name.startswith("__xla_"):
        name = "a" + name[1:]
    return name


class Instruction:
    """One instruction as loaded: its proto, sanitised name, opcode and graph edges."""

    __slots__ = (
        "proto", "name", "opcode", "local_id", "operands", "control_predecessors", "called",
        "users", "stack_frame_id", "shape_proto", "parent", "async_thread", "direction",
    )  # fmt: skip

    def __init__(self, proto: Any, parent: "Computation", local_id: int) -> None:
        self.proto = proto
        self.parent = parent
        self.local_id = local_id
        self.name = sanitized_name(proto.name)
        if not proto.name:
            raise InvalidProto(f"an instruction of {parent.name} has no name")
        opcode = proto.opcode
        self.direction = ""
        if opcode not in OPCODES:
            direction = DEPRECATED_COMPARES.get(opcode)
            if direction is None:
                raise InvalidProto(f"unknown opcode {opcode!r} (instruction {self.name})")
            opcode, self.direction = "compare", direction
        self.opcode = opcode
        if not proto.HasField("shape"):
            raise InvalidProto(f"instruction {self.name} has no shape")
        self.shape_proto = proto.shape
        self.operands: list[Instruction] = []
        self.control_predecessors: list[Instruction] = []
        self.called: list[Computation] = []
        self.users = 0
        self.stack_frame_id = proto.metadata.stack_frame_id
        self.async_thread = ""

    def set_async_thread(self, thread: str) -> None:
        """``HloAsyncStartInstruction::set_async_execution_thread`` / ``SetThreadName``."""
        self.async_thread = thread
        for comp in self.called:
            comp.set_thread(thread)


class Computation:
    """A computation as ``HloComputation::CreateFromProto`` leaves it."""

    def __init__(self, proto: Any, local_id: Callable[[int], int]) -> None:
        self.proto = proto
        self.name = sanitized_name(proto.name)
        self.thread = proto.execution_thread or "main"
        self.is_fusion = proto.is_fusion_computation
        self._local_id = local_id
        self.creation_order: list[Instruction] = []
        self.by_local_id: dict[int, Instruction] = {}
        for ins_proto in proto.instructions:
            lid = local_id(ins_proto.id)
            if ins_proto.id < 0 or lid in self.by_local_id:
                raise InvalidProto(f"instruction id {ins_proto.id} is invalid or repeated in {self.name}")
            ins = Instruction(ins_proto, self, lid)
            self.by_local_id[lid] = ins
            self.creation_order.append(ins)
        # preserve_instruction_ids: the instruction vector is indexed by local id.
        self.instructions = [self.by_local_id[i] for i in sorted(self.by_local_id)]
        root = self.by_local_id.get(local_id(proto.root_id)) if proto.instructions else None
        if root is None:
            raise InvalidProto(f"computation {self.name} has no root instruction {proto.root_id}")
        self.root = root
        params = [i for i in self.instructions if i.opcode == "parameter"]
        numbers = sorted(p.proto.parameter_number for p in params)
        if numbers != list(range(len(params))):
            raise InvalidProto(f"computation {self.name} has parameter numbers {numbers}")
        self.parameters = sorted(params, key=lambda p: p.proto.parameter_number)
        self.is_async = False
        # CanExpandIntoSingleInstruction: only the root and parameters.
        self.single_instruction = len(self.instructions) == len(params) + (root.opcode != "parameter")

    def link(self, computations: dict[int, "Computation"]) -> None:
        """Resolve operand, control-predecessor and called-computation ids."""
        lookup = self.by_local_id
        local_id = self._local_id
        for ins in self.creation_order:
            proto = ins.proto
            try:
                ins.operands = [lookup[local_id(i)] for i in proto.operand_ids]
                ins.control_predecessors = [lookup[local_id(i)] for i in proto.control_predecessor_ids]
            except KeyError:
                raise InvalidProto(f"{ins.name} names an instruction that is not in {self.name}") from None
            try:
                ins.called = [computations[i] for i in proto.called_computation_ids]
            except KeyError:
                raise InvalidProto(f"{ins.name} calls a computation that does not exist") from None
            if ins.called and ins.opcode not in CALLING_OPCODES:
                raise UnsupportedProto("HloInstructionProto.called_computation_ids", f"on {ins.opcode}")
            for operand in ins.operands:
                operand.users += 1
            if ins.opcode == "fusion":
                for comp in ins.called:
                    comp.is_fusion = True
            elif ins.opcode == "async-start":
                for comp in ins.called:
                    comp.is_async = True
            elif ins.opcode in ("async-update", "async-done"):
                ins.called = []  # XLA reaches the wrapped computation through the async-start

    def set_thread(self, thread: str) -> None:
        """``SetThreadName``: this computation and everything it calls, async ops included."""
        self.thread = thread
        for ins in self.instructions:
            if ins.opcode in ("async-start", "async-update", "async-done"):
                if ins.opcode == "async-start":
                    ins.set_async_thread(thread)
                continue
            for comp in ins.called:
                comp.set_thread(thread)

    def embedded_computations(self) -> list["Computation"]:
        """``MakeEmbeddedComputationsList``: callees in DFS post order."""
        visited: set[int] = set()
        post: list[Computation] = []
        stack: list[list[Any]] = []

        def push(called: list[Computation]) -> None:
            for comp in reversed(called):
                if id(comp) not in visited:
                    visited.add(id(comp))
                    stack.append([comp, 0])

        for ins in self.instructions:
            push(ins.called)
            while stack:
                top = stack[-1]
                comp, pos = top
                if pos == len(comp.instructions):
                    stack.pop()
                    post.append(comp)
                else:
                    top[1] = pos + 1
                    push(comp.instructions[pos].called)
        return post

    def post_order(self, channel_dependencies: bool) -> list[Instruction]:
        """``ForEachInstructionPostOrder``: a DFS from each unused instruction in id
        order, operands first to last, control predecessors, and (for collectives
        sharing a channel) the earlier collectives of that channel."""
        deps: dict[int, list[Instruction]] = {}
        if channel_dependencies:
            groups: dict[int, list[Instruction]] = {}
            for ins in self.instructions:
                if ins.opcode in _CHANNEL_COLLECTIVES:
                    channel = ins.proto.channel_id
                    if ins.opcode in ("all-reduce", "reduce-scatter") and ins.proto.all_reduce_id > 0:
                        channel = ins.proto.all_reduce_id
                    if channel > 0:
                        group = groups.setdefault(channel, [])
                        deps[id(ins)] = list(group)
                        group.append(ins)
        state: dict[int, int] = {}  # 1 visiting, 2 visited
        out: list[Instruction] = []
        for start in self.instructions:
            if start.users:
                continue
            stack = [start]
            while stack:
                current = stack[-1]
                key = id(current)
                s = state.get(key)
                if s is None:
                    state[key] = 1
                else:
                    stack.pop()
                    if s == 1:
                        state[key] = 2
                        out.append(current)
                    continue
                if deps and current is not start:
                    for dep in deps.get(key, ()):
                        if state.get(id(dep)) != 2:
                            stack.append(dep)
                for operand in reversed(current.operands):
                    if state.get(id(operand)) != 2:
                        stack.append(operand)
                for pred in current.control_predecessors:
                    if state.get(id(pred)) != 2:
                        stack.append(pred)
        if len(out) != len(self.instructions):
            raise InvalidProto(f"computation {self.name} has a cycle")
        return out


_CHANNEL_COLLECTIVES = frozenset(
    "all-reduce all-gather all-to-all collective-broadcast collective-permute ragged-all-to-all reduce-scatter".split()
)


class InstructionPrinter:
    """``PrintWithCanonicalNameMap`` with ``HloPrintOptions::Default()`` and large constants."""

    def __init__(self, shapes: ShapeText) -> None:
        self.shapes = shapes

    def line(self, ins: Instruction) -> str:
        proto = ins.proto
        opcode = ins.opcode
        wrapped = sugared_async_root(ins)
        shown = opcode if wrapped is None else wrapped.opcode + opcode[5:]  # async-start -> x-start
        parts = ["%", ins.name, " = ", self.shapes.text(ins.shape_proto), " ", shown, "("]
        if opcode == "parameter":
            parts.append(str(proto.parameter_number))
        elif opcode == "constant":
            parts.append(literal_text(proto.literal) if proto.HasField("literal") else "{...}")
        else:
            operands = ins.operands
            for i, operand in enumerate(operands):
                if i:
                    parts.append(f", /*index={i}*/%" if i % 5 == 0 else ", %")
                else:
                    parts.append("%")
                parts.append(operand.name)
        parts.append(")")
        self._extra_attributes(ins, wrapped, parts)
        if proto.HasField("original_value"):
            parts.append(", origin={")
            parts.append(original_value(proto.original_value))
            parts.append("}")
        if proto.HasField("metadata"):
            metadata = proto.metadata
            if ins.stack_frame_id != metadata.stack_frame_id:
                metadata = _with_stack_frame(metadata, ins.stack_frame_id)
            if metadata_prints(metadata):
                parts.append(", metadata={")
                parts.append(op_metadata(metadata))
                parts.append("}")
        config = proto.backend_config
        if config:
            parts.append(", backend_config=")
            parts.append(raw_or_quoted(config.decode("utf-8", "surrogateescape")))
        return "".join(parts)

    def _extra_attributes(self, ins: Instruction, wrapped: Instruction | None, parts: list[str]) -> None:
        """``PrintExtraAttributes``: opcode attributes, called computations, sharding,
        frontend attributes, control predecessors, statistics, result accuracy."""
        proto = ins.proto
        if wrapped is not None:
            if ins.opcode == "async-start":
                if ins.async_thread != "main":
                    parts.append(f', async_execution_thread="{ins.async_thread}"')
                self._extra_attributes(wrapped, None, parts)
        else:
            extra = OPCODE_ATTRIBUTES.get(ins.opcode)
            if extra is not None:
                for attribute in extra(ins, self.shapes):
                    parts.append(", ")
                    parts.append(attribute)
            self._called(ins, parts)
        if proto.HasField("sharding"):
            parts.append(", sharding=")
            parts.append(sharding_text(proto.sharding, self.shapes.shape(ins.shape_proto)))
        if proto.HasField("frontend_attributes") and has_entries(proto.frontend_attributes):
            parts.append(", frontend_attributes=")
            parts.append(frontend_attributes(proto.frontend_attributes))
        if ins.control_predecessors:
            parts.append(", control-predecessors={")
            parts.append(", ".join("%" + p.name for p in ins.control_predecessors))
            parts.append("}")
        if proto.HasField("statistics_viz") and len(proto.statistics_viz.statistics):
            raise UnsupportedProto("HloInstructionProto.statistics_viz")
        accuracy = result_accuracy_text(ins)
        if accuracy:
            parts.append(", result_accuracy=")
            parts.append(accuracy)

    def _called(self, ins: Instruction, parts: list[str]) -> None:
        """The called-computation attributes of ``PrintExtraAttributes`` (name-only mode)."""
        called = ins.called
        opcode = ins.opcode
        if opcode == "while":
            if len(called) != 2:
                raise InvalidProto(f"while {ins.name} needs 2 called computations")
            parts.append(f", condition=%{called[1].name}, body=%{called[0].name}")  # [body, condition]
        elif opcode == "select-and-scatter":
            if len(called) != 2:
                raise InvalidProto(f"select-and-scatter {ins.name} needs 2 called computations")
            parts.append(f", select=%{called[0].name}, scatter=%{called[1].name}")
        elif opcode == "conditional":
            if not ins.operands or not called:
                raise InvalidProto(f"conditional {ins.name} needs a predicate and branches")
            if ins.operands[0].shape_proto.element_type == 1 and len(called) == 2:
                parts.append(f", true_computation=%{called[0].name}, false_computation=%{called[1].name}")
            elif ins.operands[0].shape_proto.element_type == 1:
                raise InvalidProto(f"conditional {ins.name} on a pred needs 2 branches")
            else:
                parts.append(", branch_computations={" + ", ".join("%" + c.name for c in called) + "}")
        elif opcode in CALLS_TO_APPLY:
            if called:
                parts.append(f", to_apply=%{called[0].name}")
            if opcode == "call" and ins.proto.is_composite:
                parts.append(", is_composite=true")
        elif opcode == "custom-call":
            if called:
                parts.append(", called_computations={" + ", ".join("%" + c.name for c in called) + "}")
        elif opcode == "async-start":
            parts.append(f", calls=%{called[0].name}")
        elif opcode in ("async-update", "async-done"):
            pass
        elif called:
            parts.append(", calls=" + ", ".join("%" + c.name for c in called))


def sugared_async_root(ins: Instruction) -> Instruction | None:
    """The wrapped instruction an async op prints as (``syntax_sugar_async_ops``, on in
    the default options), when its computation is that one instruction plus parameters."""
    if ins.opcode not in ("async-start", "async-update", "async-done"):
        return None
    start = ins
    while start.opcode != "async-start":
        if len(start.operands) != 1 or start.operands[0].opcode not in ("async-start", "async-update"):
            raise InvalidProto(f"{ins.opcode} {ins.name} does not follow an async-start")
        start = start.operands[0]
    if len(start.called) != 1:
        raise InvalidProto(f"async-start {start.name} needs one called computation")
    comp = start.called[0]
    return comp.root if comp.single_instruction else None


def _with_stack_frame(metadata: Any, frame_id: int) -> Any:
    copy = type(metadata)()
    copy.CopyFrom(metadata)
    copy.stack_frame_id = frame_id
    return copy


__all__ = ["Computation", "Instruction", "InstructionPrinter", "sanitized_name", "c_escape"]
