"""Computations and instructions of an ``HloModuleProto`` as XLA loads them.

:class:`Instructions` keeps what ``HloComputation::CreateFromProto`` does for every
computation (the instruction vector in local-id order, operands, users, control
predecessors, called computations, parameters, root) as one table of parallel lists
over the module's instructions, read from the columns of
:mod:`hlo_dedup.io.proto_columns`, and computes XLA's instruction post order;
:class:`Computation` is one computation's range of that table.
"""

from __future__ import annotations

import re
from collections import deque
from itertools import accumulate, chain, compress, repeat
from operator import add, and_, eq, le, lt, rshift, sub
from typing import Any, Sequence

from ..ir.shape import PrimitiveType
from .proto_columns import ModuleData
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

_BAD_NAME_CHAR = re.compile(r"[^A-Za-z0-9_.\-]|^[^A-Za-z_]")
_NOT_ALLOWED = re.compile(rb"[^A-Za-z0-9_.\-]")
_NAME_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-\n"
_BAD_NAME_START = re.compile(r"\n[0-9.\-]")  # after the other name bytes are checked
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
    """:func:`sanitized_name` of each; all at once (in C) when all are plain (joined by
    line breaks, none of them holding one)."""
    joined = "\n".join(names)
    if (
        joined.count("\n") == len(names) - 1
        and joined.isascii()
        and not joined.encode("ascii").translate(None, _NAME_BYTES)
        and _BAD_NAME_START.search(joined) is None
        and (joined[:1].isalpha() or joined[:1] == "_")
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
    """One computation: its range of the module's instruction table, its root and
    parameters (table indices), and what loading it sets (thread, fusion/async)."""

    def __init__(self, proto: Any, position: int, start: int, stop: int) -> None:
        self.proto = proto
        self.id = proto.id
        self.position = position  # in the proto's computation list
        self.name = ""
        self.thread = proto.execution_thread or "main"
        self.is_fusion = proto.is_fusion_computation
        self.is_async = False
        self.start, self.stop = start, stop
        self.root = -1
        self.parameters: list[int] = []
        self.single_instruction = False
        self.calls: list[tuple[int, list[Computation]]] = []  # (instruction, callees) in index order
        self._by_lid: dict[int, int] | None = None

    def index(self, proto_id: int, ids: list[int]) -> int | None:
        """The table index of the instruction ``proto_id`` names here (only its local part counts)."""
        if self._by_lid is None:
            self._by_lid = {local_id(ids[i]): i for i in range(self.start, self.stop)}
        return self._by_lid.get(local_id(proto_id))


class Instructions:
    """Every instruction of the module as parallel lists (a table), in proto order.
    ``order`` lists them as XLA holds them once loaded: computation after computation
    and, within one, in local-id order (the instruction vector
    ``HloComputation::CreateFromProto`` builds with ``preserve_instruction_ids``);
    ``rank`` is each one's index in ``order``. Everything whose result depends on that
    order (post orders, the stack-frame table, which error is found
    first) walks ``order``.

    Loading checks what XLA's loader checks: operands and control predecessors are
    instructions of the same computation defined earlier in the proto, and called
    computations come earlier in the proto than their caller.
    """

    def __init__(self, data: ModuleData) -> None:
        self.data = data
        self.view = data.view
        columns = data.columns
        comps = self.computations = [
            Computation(proto, k, start, stop) for k, (proto, (start, stop)) in enumerate(zip(data.computations, data.bounds))
        ]
        n = len(data.raw)
        self.owner = list(chain.from_iterable(repeat(c.position, c.stop - c.start) for c in comps))
        self.ids: list[int] = columns["id"]
        self.order: Sequence[int] = range(n)
        self.rank: Sequence[int] = range(n)
        self._by_id: dict[int, int] = {}  # id -> index, when ids are unique in the module
        self._local_id_order()
        if "" in columns["name"]:
            raise InvalidProto("an instruction has no name")
        self.names = sanitized_names(columns["name"])
        for comp, name in zip(comps, sanitized_names([c.proto.name for c in comps])):
            comp.name = name
        self.opcodes: list[str] = list(columns["opcode"])
        self.directions: dict[int, str] = {}
        if not OPCODES.issuperset(self.opcodes):
            self._deprecated_compares()
        self.shapes: list[bytes] = columns["shape"]
        self.metadata: list[bytes] = columns["metadata"]
        self.operands = self._operands()
        self.used = set(chain.from_iterable(self.operands))  # instructions with a user
        self.control: dict[int, list[int]] = self._control()
        self.called: dict[int, list[Computation]] = self._called()
        self.async_threads: dict[int, str] = {}
        self._roots_and_parameters()

    # -- loading ------------------------------------------------------------------------

    def _local_id_order(self) -> None:
        """``order`` and ``rank``, when the proto lists some computation's instructions
        out of local-id order (XLA writes them in post order)."""
        ids = self.ids
        n = len(ids)
        if not n:
            return
        if min(ids) < 0:
            raise InvalidProto("an instruction has a negative id")
        rank = self._dense_rank()
        if rank is not None and len(set(rank)) == n:
            if rank == list(range(n)):
                return
            order = [0] * n
            deque(map(order.__setitem__, rank, range(n)), maxlen=0)
        else:
            order = self._sorted_order()
            rank = [0] * n
            deque(map(rank.__setitem__, order, range(n)), maxlen=0)
        self.order, self.rank = order, rank

    def _dense_rank(self) -> list[int] | None:
        """Each instruction's rank when each computation's ids share their high half
        and their low halves (below 2**31) are consecutive, as XLA writes them: its
        computation's start plus its id less the smallest. None when they are not."""
        ids = self.ids
        comps = [c for c in self.computations if c.stop > c.start]
        parts = [ids[c.start : c.stop] for c in comps]
        low, high = list(map(min, parts)), list(map(max, parts))
        sizes = [c.stop - c.start for c in comps]
        if (
            list(map(rshift, low, repeat(32))) != list(map(rshift, high, repeat(32)))
            or any(map(and_, high, repeat(1 << 31)))
            or list(map(sub, high, low)) != list(map(sub, sizes, repeat(1)))
        ):
            return None
        offsets = chain.from_iterable(map(repeat, map(sub, [c.start for c in comps], low), sizes))
        return list(map(add, ids, offsets))

    def _sorted_order(self) -> list[int]:
        """``order`` by sorting each computation's instructions by local id."""
        ids = self.ids
        order = list(range(len(ids)))
        for comp in self.computations:
            a, b = comp.start, comp.stop
            lids = [local_id(x) for x in ids[a:b]]
            if len(set(lids)) != b - a:
                raise InvalidProto(f"computation {comp.proto.name} has repeated instruction ids")
            order[a:b] = [a + k for k in sorted(range(b - a), key=lids.__getitem__)]
        return order

    def _deprecated_compares(self) -> None:
        for i in self.order:
            op = self.opcodes[i]
            if op not in OPCODES:
                direction = DEPRECATED_COMPARES.get(op)
                if direction is None:
                    raise InvalidProto(f"unknown opcode {op!r} (instruction {self.names[i]})")
                self.opcodes[i] = "compare"
                self.directions[i] = direction

    def _operands(self) -> list[list[int]]:
        """Operand ids to table indices; module-wide ids (XLA's usual) resolve in one map."""
        ids = self.ids
        values, counts = self.data.id_lists["operand_ids"]
        by_id = dict(zip(ids, range(len(ids))))
        if len(by_id) == len(ids):
            self._by_id = by_id
            flat = list(map(by_id.get, values))
        else:
            flat = [-1] * len(values)  # resolved below, by local id
        ends = list(accumulate(counts))
        operands = [flat[b - c : b] for b, c in zip(ends, counts)]
        # Every operand an earlier instruction of the same computation (checked in C)?
        starts = list(chain.from_iterable(repeat(c.start, c.stop - c.start) for c in self.computations))
        users = list(chain.from_iterable(map(repeat, range(len(ids)), counts)))
        if (
            self._by_id
            and None not in flat
            and all(map(lt, flat, users))  # type: ignore[arg-type]
            and all(map(le, map(starts.__getitem__, users), flat))  # type: ignore[arg-type]
        ):
            return operands  # type: ignore[return-value]
        suspects = [
            i for i, ops in enumerate(operands)
            if ops and (None in ops or -1 in ops or any(not starts[i] <= o < i for o in ops))  # type: ignore[operator]
        ]  # fmt: skip
        for i in sorted(suspects, key=self.rank.__getitem__):
            operands[i] = self._earlier(i, values[ends[i] - counts[i] : ends[i]], "operand")
        return operands  # type: ignore[return-value]

    def _id_lists(self, name: str) -> dict[int, list[int]]:
        """The instructions whose ``name`` field lists ids, in instruction order, and their ids."""
        values, counts = self.data.id_lists[name]
        if not values:
            return {}
        ends = list(accumulate(counts))
        have = sorted(compress(range(len(counts)), counts), key=self.rank.__getitem__)
        return {i: values[ends[i] - counts[i] : ends[i]] for i in have}

    def _earlier(self, i: int, proto_ids: list[int], what: str) -> list[int]:
        """Resolve ids the way XLA's loader does: by local id, among the instructions of
        ``i``'s computation that come before ``i`` in the proto."""
        comp = self.computations[self.owner[i]]
        out = []
        for x in proto_ids:
            k = comp.index(x, self.ids)
            if k is None or k >= i:
                raise InvalidProto(f"{self.names[i]} names {what} id {x}, which is not an earlier instruction of {comp.name}")
            out.append(k)
        return out

    def _control(self) -> dict[int, list[int]]:
        return {i: self._earlier(i, ids, "control predecessor") for i, ids in self._id_lists("control_predecessor_ids").items()}

    def _called(self) -> dict[int, list[Computation]]:
        opcodes, comps = self.opcodes, self.computations
        callers = self._id_lists("called_computation_ids")  # in instruction order, as comp.calls
        if not callers:
            return {}
        for i in callers:
            if opcodes[i] not in CALLING_OPCODES:
                raise UnsupportedProto("HloInstructionProto.called_computation_ids", f"on {opcodes[i]}")
        get = {c.id: c for c in comps}.get  # XLA looks a callee up by the local part of its id
        called: dict[int, list[Computation]] = {}
        for i, callee_ids in callers.items():
            callees = [get(local_id(c)) for c in callee_ids]
            caller = self.owner[i]
            if None in callees or max([c.position for c in callees], default=-1) >= caller:  # type: ignore[union-attr]
                raise InvalidProto(f"{self.names[i]} calls a computation that is not defined before its caller")
            opcode = opcodes[i]
            if opcode == "fusion":
                for comp in callees:
                    comp.is_fusion = True  # type: ignore[union-attr]
            elif opcode == "async-start":
                for comp in callees:
                    comp.is_async = True  # type: ignore[union-attr]
            elif opcode in ("async-update", "async-done"):
                continue  # XLA reaches the wrapped computation through the async-start
            if callees:
                called[i] = callees  # type: ignore[assignment]
                comps[caller].calls.append((i, called[i]))  # type: ignore[arg-type]
        return called

    def _roots_and_parameters(self) -> None:
        comps, opcodes = self.computations, self.opcodes
        params = self.parameters = list(compress(range(len(opcodes)), map(eq, opcodes, repeat("parameter"))))
        numbered: list[list[tuple[int, int]]] = [[] for _ in comps]
        owner, param_numbers = self.owner, self.data.columns["parameter_number"]
        for i in params:
            numbered[owner[i]].append((param_numbers[i], i))
        by_id = self._by_id
        for comp, numbers in zip(comps, numbered):
            root = by_id.get(comp.proto.root_id, -1)
            if not comp.start <= root < comp.stop:
                root = comp.index(comp.proto.root_id, self.ids) if comp.stop > comp.start else None
            if root is None:
                raise InvalidProto(f"computation {comp.name} has no root instruction {comp.proto.root_id}")
            comp.root = root
            numbers.sort()
            if [n for n, _ in numbers] != list(range(len(numbers))):
                raise InvalidProto(f"computation {comp.name} has parameter numbers {[n for n, _ in numbers]}")
            comp.parameters = [i for _, i in numbers]
            # CanExpandIntoSingleInstruction: only the root and parameters.
            comp.single_instruction = comp.stop - comp.start == len(numbers) + (opcodes[root] != "parameter")

    # -- threads ------------------------------------------------------------------------

    def set_thread(self, comp: Computation, thread: str) -> None:
        """``SetThreadName``: ``comp`` and everything it calls, async ops included."""
        comp.thread = thread
        for i, called in comp.calls:
            opcode = self.opcodes[i]
            if opcode == "async-start":
                self.set_async_thread(i, thread)
            elif opcode not in ASYNC_OPCODES:
                for callee in called:
                    self.set_thread(callee, thread)

    def set_async_thread(self, i: int, thread: str) -> None:
        """``HloAsyncStartInstruction::set_async_execution_thread``."""
        self.async_threads[i] = thread
        for callee in self.called.get(i, ()):
            self.set_thread(callee, thread)

    # -- orders -------------------------------------------------------------------------

    def post_order(self, comps: list[Computation]) -> list[int]:
        """``ForEachInstructionPostOrder`` of each of ``comps``, one after the other: a
        DFS from each unused instruction in instruction order, operands first to last,
        then control predecessors. (Collectives sharing a channel add no edges: jaxlib's
        printer orders them by their operands alone, whatever the device assignment.)"""
        operands, control, used, order = self.operands, self.control, self.used, self.order
        entered = bytearray(len(operands))
        out: list[int] = []
        append = out.append
        for comp in comps:
            for start in order[comp.start : comp.stop]:
                if start in used or entered[start]:
                    continue
                stack = [start]
                pop, push, extend = stack.pop, stack.append, stack.extend
                while stack:
                    current = pop()
                    if current < 0:  # ~i: every operand of i is out
                        append(~current)
                        continue
                    if entered[current]:
                        continue
                    entered[current] = 1
                    push(~current)
                    # Pushed in reverse of the visiting order: control predecessors, then
                    # operands first to last.
                    extend(reversed(operands[current]))
                    if control and current in control:
                        extend(control[current])
        return out

    def embedded_computations(self, comp: Computation) -> list[Computation]:
        """``MakeEmbeddedComputationsList``: callees in DFS post order."""
        visited: set[int] = set()
        post: list[Computation] = []
        stack: list[list[Any]] = []

        def push(called: list[Computation]) -> None:
            for callee in reversed(called):
                if callee.position not in visited:
                    visited.add(callee.position)
                    stack.append([callee, iter(callee.calls)])

        for _, called in comp.calls:
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

    def async_root(self, i: int) -> int | None:
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
        return comp.root if comp.single_instruction else None


__all__ = ["Computation", "Instructions", "local_id", "sanitized_name"]
