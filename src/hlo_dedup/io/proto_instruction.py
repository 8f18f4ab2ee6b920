"""Computations and instructions of an ``HloModuleProto`` as XLA loads and prints them.

:class:`Computation` keeps what ``HloComputation::CreateFromProto`` does (the
instruction vector in local-id order, operands, users, parameters, root) as flat
lists indexed by instruction, and computes XLA's instruction post order;
:class:`LinePrinter` writes instruction lines as ``HloInstruction::
PrintWithCanonicalNameMap`` does with the default options. Instructions are the
view messages of :mod:`hlo_dedup.io.proto_fields`: sub-messages arrive as bytes and
their texts are memoised on those bytes.
"""

from __future__ import annotations

import re
from itertools import chain
from typing import Any

from ..ir.shape import PrimitiveType
from .proto_values import InvalidProto, UnsupportedProto

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
ASYNC_OPCODES = frozenset(("async-start", "async-update", "async-done"))
# Opcodes XLA no longer has; the loader turns them into compare with this direction.
DEPRECATED_COMPARES = {
    "equal-to": "EQ", "not-equal-to": "NE", "greater-than-or-equal-to": "GE",
    "greater-than": "GT", "less-than-or-equal-to": "LE", "less-than": "LT",
}  # fmt: skip
_CHANNEL_COLLECTIVES = frozenset(
    "all-reduce all-gather all-to-all collective-broadcast collective-permute ragged-all-to-all reduce-scatter".split()
)

_BAD_NAME_CHAR = re.compile(r"[^A-Za-z0-9_.\-\n]|^[^A-Za-z_]|\n[^A-Za-z_]")
_NOT_ALLOWED = re.compile(rb"[^A-Za-z0-9_.\-]")
_TYPE_NAMES = frozenset([t.value for t in PrimitiveType] + ["primitive_type_invalid", "buffer"])


def sanitized_name(name: str) -> str:
    """``NameUniquer::GetSanitizedName``, byte by byte over the UTF-8 name."""
    if not name:
        return ""
    if _BAD_NAME_CHAR.search(name) is not None:
        raw = name.encode("utf-8", "surrogateescape")
        first = raw[:1] if (raw[:1].isalpha() and raw[:1].isascii()) or raw[:1] == b"_" else b"_"
        name = (first + _NOT_ALLOWED.sub(b"_", raw[1:])).decode("ascii")
    if name in _TYPE_NAMES:
        name += "_"
    if name.startswith("__") and not name.startswith("__xla_"):
        name = "a" + name[1:]
    return name


def sanitized_names(names: list[str]) -> list[str]:
    """:func:`sanitized_name` of each, with one regex scan when all are plain."""
    joined = "\n".join(names)
    if (
        _BAD_NAME_CHAR.search(joined) is None
        and "\n__" not in joined
        and not joined.startswith("__")
        and _TYPE_NAMES.isdisjoint(names)
        and "" not in names
    ):
        return names
    return [sanitized_name(n) for n in names]


def local_id(proto_id: int) -> int:
    """``HloInstruction::CalculateLocalId``: the low 32 bits, as int32."""
    low = proto_id & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low


class Computation:
    """A computation as ``HloComputation::CreateFromProto`` leaves it: parallel lists
    over its instructions in local-id order."""

    def __init__(self, proto: Any) -> None:
        self.proto = proto
        self.name = sanitized_name(proto.name)
        self.thread = proto.execution_thread or "main"
        self.is_fusion = proto.is_fusion_computation
        self.is_async = False
        views = list(proto.instructions)
        ids = [v.id for v in views]
        plain = (
            not ids
            or ids[0] >= 0 and ids[0] >> 32 == ids[-1] >> 32 and ids[-1] & 0xFFFFFFFF < 1 << 31
            and ids == sorted(set(ids))
        )  # fmt: skip
        if not plain:
            lids = [local_id(i) for i in ids]
            if len(set(lids)) != len(lids) or min(ids, default=0) < 0:
                raise InvalidProto(f"computation {self.name} has negative or repeated instruction ids")
            # preserve_instruction_ids: the instruction vector is ordered by local id.
            order = sorted(range(len(views)), key=lids.__getitem__)
            views = [views[k] for k in order]
            ids = [ids[k] for k in order]
            self.creation_rank = order  # index -> position in the proto
        else:
            self.creation_rank = range(len(views))
        self.views = views
        self.ids = ids
        raw_names = [v.name for v in views]
        if "" in raw_names:
            raise InvalidProto(f"an instruction of {self.name} has no name")
        self.names = sanitized_names(raw_names)
        self.opcodes = [v.opcode for v in views]
        self.directions: dict[int, str] = {}
        if not OPCODES.issuperset(self.opcodes):
            for i, op in enumerate(self.opcodes):
                if op not in OPCODES:
                    direction = DEPRECATED_COMPARES.get(op)
                    if direction is None:
                        raise InvalidProto(f"unknown opcode {op!r} (instruction {self.names[i]})")
                    self.opcodes[i] = "compare"
                    self.directions[i] = direction
        self.shapes = [v.shape for v in views]
        self.metadata = [v.metadata for v in views]
        root = self._index(proto.root_id) if views else None
        if root is None:
            raise InvalidProto(f"computation {self.name} has no root instruction {proto.root_id}")
        self.root = root
        params = [i for i, op in enumerate(self.opcodes) if op == "parameter"]
        numbers = [views[i].parameter_number for i in params]
        if sorted(numbers) != list(range(len(params))):
            raise InvalidProto(f"computation {self.name} has parameter numbers {sorted(numbers)}")
        self.parameters = [i for _, i in sorted(zip(numbers, params))]
        # CanExpandIntoSingleInstruction: only the root and parameters.
        self.single_instruction = len(views) == len(params) + (self.opcodes[root] != "parameter")
        self.operands: list[list[int]] = []
        self.users: list[int] = []
        self.control: dict[int, list[int]] = {}
        self.called: dict[int, list[Computation]] = {}
        self.async_threads: dict[int, str] = {}

    def _index(self, proto_id: int) -> int | None:
        """The instruction a proto id names (only its local part counts)."""
        by_lid = self.__dict__.get("_by_lid")
        if by_lid is None:
            by_lid = self._by_lid = {local_id(pid): i for i, pid in enumerate(self.ids)}
        return by_lid.get(local_id(proto_id))

    def link(self, computations: dict[int, "Computation"], with_control: bool, with_calls: bool) -> None:
        """Resolve operand, control-predecessor and called-computation ids."""
        get = {pid: i for i, pid in enumerate(self.ids)}.get
        views = self.views
        operands = self.operands = [list(map(get, v.operand_ids)) for v in views]
        for i, ops in enumerate(operands):
            if None in ops:
                ops = operands[i] = [self._index(x) for x in views[i].operand_ids]  # type: ignore[misc]
                if None in ops:
                    raise InvalidProto(f"{self.names[i]} names an instruction that is not in {self.name}")
        users = [0] * len(views)
        for o in chain.from_iterable(operands):
            users[o] += 1
        self.users = users
        opcodes = self.opcodes
        if with_calls:
            for i, opcode in enumerate(opcodes):
                if opcode in CALLING_OPCODES:
                    self._link_calls(i, opcode, computations)
                elif len(views[i].called_computation_ids):
                    raise UnsupportedProto("HloInstructionProto.called_computation_ids", f"on {opcode}")
        if with_control:
            for i, view in enumerate(views):
                preds = view.control_predecessor_ids
                if len(preds):
                    control = [self._index(x) for x in preds]
                    if None in control:
                        raise InvalidProto(f"{self.names[i]} names an instruction that is not in {self.name}")
                    self.control[i] = control  # type: ignore[assignment]

    def _link_calls(self, i: int, opcode: str, computations: dict[int, "Computation"]) -> None:
        try:
            called = [computations[c] for c in self.views[i].called_computation_ids]
        except KeyError:
            raise InvalidProto(f"{self.names[i]} calls a computation that does not exist") from None
        if opcode == "fusion":
            for comp in called:
                comp.is_fusion = True
        elif opcode == "async-start":
            for comp in called:
                comp.is_async = True
        elif opcode in ("async-update", "async-done"):
            called = []  # XLA reaches the wrapped computation through the async-start
        if called:
            self.called[i] = called

    def set_thread(self, thread: str) -> None:
        """``SetThreadName``: this computation and everything it calls, async ops included."""
        self.thread = thread
        for i, called in self.called.items():
            opcode = self.opcodes[i]
            if opcode == "async-start":
                self.set_async_thread(i, thread)
            elif opcode not in ASYNC_OPCODES:
                for comp in called:
                    comp.set_thread(thread)

    def set_async_thread(self, i: int, thread: str) -> None:
        """``HloAsyncStartInstruction::set_async_execution_thread``."""
        self.async_threads[i] = thread
        for comp in self.called.get(i, ()):
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
                    stack.append([comp, iter(sorted(comp.called.items()))])

        for _, called in sorted(self.called.items()):
            push(called)
            while stack:
                top = stack[-1]
                nxt = next(top[1], None)
                if nxt is None:
                    stack.pop()
                    post.append(top[0])
                else:
                    push(nxt[1])
        return post

    def post_order(self, channel_dependencies: bool) -> list[int]:
        """``ForEachInstructionPostOrder``: a DFS from each unused instruction in id
        order, operands first to last, control predecessors, and (for collectives
        sharing a channel) the earlier collectives of that channel."""
        n = len(self.views)
        operands = self.operands
        control = self.control
        deps: dict[int, list[int]] = {}
        if channel_dependencies:
            groups: dict[int, list[int]] = {}
            for i, opcode in enumerate(self.opcodes):
                if opcode in _CHANNEL_COLLECTIVES:
                    view = self.views[i]
                    channel = view.channel_id
                    if opcode in ("all-reduce", "reduce-scatter") and view.all_reduce_id > 0:
                        channel = view.all_reduce_id
                    if channel > 0:
                        group = groups.setdefault(channel, [])
                        if group:
                            deps[i] = list(group)
                        group.append(i)
        state = [0] * n  # 1 visiting, 2 visited
        out: list[int] = []
        append = out.append
        for start, used in enumerate(self.users):
            if used or state[start] == 2:
                continue
            stack = [start]
            while stack:
                current = stack[-1]
                s = state[current]
                if s:
                    stack.pop()
                    if s == 1:
                        state[current] = 2
                        append(current)
                    continue
                state[current] = 1
                if deps and current != start and current in deps:
                    stack.extend(d for d in deps[current] if state[d] != 2)
                ops = operands[current]
                if len(ops) == 1:
                    if state[ops[0]] != 2:
                        stack.append(ops[0])
                else:
                    stack.extend(o for o in reversed(ops) if state[o] != 2)
                if control and current in control:
                    stack.extend(p for p in control[current] if state[p] != 2)
        if len(out) != n:
            raise InvalidProto(f"computation {self.name} has a cycle")
        return out

    def async_root(self, i: int) -> tuple["Computation", int] | None:
        """The wrapped instruction a sugared async op prints as (``syntax_sugar_async_ops``
        is on in the default options), when its computation is that instruction plus
        parameters; None otherwise."""
        start = i
        while self.opcodes[start] != "async-start":
            ops = self.operands[start]
            if len(ops) != 1 or self.opcodes[ops[0]] not in ("async-start", "async-update"):
                raise InvalidProto(f"{self.opcodes[i]} {self.names[i]} does not follow an async-start")
            start = ops[0]
        called = self.called.get(start, [])
        if len(called) != 1:
            raise InvalidProto(f"async-start {self.names[start]} needs one called computation")
        comp = called[0]
        return (comp, comp.root) if comp.single_instruction else None


__all__ = ["Computation", "local_id", "sanitized_name"]
