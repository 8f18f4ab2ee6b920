"""Buffer liveness of HLO computations under their instruction order.

Folding a backward re-gather onto the forward gather undoes ``jax.checkpoint``: the kept
gather's buffer now lives from the forward pass into the backward pass. Pricing that
needs an estimate of the live bytes at every program point. This module is that
estimate; `fold_price` keeps it up to date as folds are applied. The model follows XLA's
HloDataflowAnalysis (which instruction defines which value) and HloLiveRange (how long a
value lives), simplified where XLA's answer depends on the backend:

Schedule
    The instruction order of a computation is its schedule: exactly XLA's sequence when
    the module has ``is_scheduled=true``; otherwise the text order, which is a valid
    order (XLA prints post order) but not necessarily the one XLA would schedule.

What allocates
    A *buffer* is one array leaf (tokens count 0 bytes) of the value an instruction
    defines, of ``byte_size`` bytes: data only, no 8-byte tuple index tables. Every
    instruction defines a buffer per leaf of its shape, except the aliasing ones below.
    Parameters and constants are static allocations in XLA (entry parameters, read-only
    constants): they are live at every program point of their computation.

What aliases (defines no buffer; its leaves are buffers of its operands)
    * ``get-tuple-element``: the leaves of its element of the operand.
    * ``tuple``: the leaves of its operands, in order.
    * ``bitcast``, ``opt-barrier``, ``domain``, ``add-dependency``, ``set-dimension-size``:
      operand 0's leaves (XLA: no new value; bitcasts define none on CPU).
    * ``while``: its operand's leaves (XLA colocates the loop state with the init value,
      the body parameter and the body root).
    * async pairs, as XLA's dataflow: ``all-gather-start`` / ``async-start`` (and the
      ``<op>-start`` sugar) element 0 are the operands and the rest is new;
      ``collective-permute-start`` and ``send`` element 0 is operand 0; ``copy-start``
      element 1 is operand 0; ``copy-done`` is its operand's element 0;
      ``all-gather-done`` / ``collective-permute-done`` / ``async-done`` its element 1;
      ``recv-done`` element 0 is the ``recv``'s element 0; ``all-reduce-done`` and
      ``async-update`` are their operand.
    ``call`` and ``conditional`` results are new buffers in the caller (XLA's values come
    from the callee root, which this model charges to the caller instead, see below).
    In-place sharing (a ``dynamic-update-slice`` or fusion writing into a dying operand,
    ``output_to_operand_aliasing``) is not modelled: every other instruction allocates,
    so the estimate is an upper bound of what XLA's buffer sharing achieves.

Live ranges
    A buffer is live from its defining instruction to its last reader, both inclusive
    (at an instruction its operands and its result coexist). An instruction reads every
    leaf of every operand, except ``get-tuple-element``, which reads only its element.
    Aliasing instructions are readers too, so a buffer lives as long as any alias of it
    is read. Root leaves live to the end. A buffer nothing reads lives at its definition
    only. Static buffers live throughout.

Called computations
    * ``fusion`` bodies and the scalar computations of ``reduce``, ``sort``, ``scatter``,
      ``map``, collectives, ... are not separate buffers (XLA emits them as loops over
      the fusion's output); only the calling instruction's result counts.
    * ``while`` (body and condition), ``conditional`` (branches), ``call`` and
      ``async-start`` run the callee at the call point: its *nested* bytes, the largest
      over the callees of ``max over t of (live(t) - parameter bytes - bytes of the
      root's own buffers live at t)``, are added at that program point. Parameters
      alias the caller's operands, and the root's buffers are the result the caller
      holds at that point (for ``while``, the loop state XLA colocates them with), so
      neither is counted twice.

Output per computation: every buffer's live range, the live bytes at every program point,
the peak and its first program point.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from operator import sub
from typing import TYPE_CHECKING, Iterator, Union

from ..ir.shape import Shape, byte_size

if TYPE_CHECKING:
    from ..ir.computation import HloComputation
    from ..ir.instruction import HloInstruction
    from ..ir.module import HloModule

# Kinds of instruction, by how its leaves relate to its operands'.
DEFINE = 0  # every leaf is a new buffer
STATIC = 1  # every leaf is a new buffer, live throughout (parameter, constant)
FORWARD = 2  # all leaves are operand 0's
GTE = 3  # one element of operand 0
TUPLE = 4  # all operands' leaves, concatenated
ELEMENT = 5  # one element of operand 0 (arg: the element index)
PREFIX = 6  # element 0 aliases the operands (arg: "all" or "first"), the rest is new
COPY_START = 7  # element 1 aliases operand 0, the rest is new
RECV_DONE = 8  # element 0 aliases operand 0's element 0, the rest is new

_KINDS: dict[str, tuple[int, object]] = {
    "parameter": (STATIC, None),
    "constant": (STATIC, None),
    "get-tuple-element": (GTE, None),
    "tuple": (TUPLE, None),
    "copy-done": (ELEMENT, 0),
    "all-gather-done": (ELEMENT, 1),
    "collective-permute-done": (ELEMENT, 1),
    "async-done": (ELEMENT, 1),
    "all-gather-start": (PREFIX, "all"),
    "async-start": (PREFIX, "all"),
    "collective-permute-start": (PREFIX, "first"),
    "send": (PREFIX, "first"),
    "copy-start": (COPY_START, None),
    "recv-done": (RECV_DONE, None),
}
for _op in ("bitcast", "opt-barrier", "domain", "add-dependency", "set-dimension-size", "while",
            "all-reduce-done", "async-update"):
    _KINDS[_op] = (FORWARD, None)

STATIC_CODE = 1  # opcode classes of the build loop: 0 is a plain definer
SPECIAL_CODE = 2

#: Opcodes with their own asynchronous forms; any other `<op>-start/-update/-done` is
#: XLA's sugar for async-start/-update/-done wrapping <op>.
_REAL_ASYNC = ("all-gather", "all-reduce", "collective-permute", "copy", "recv", "send")

#: Instructions that run a called computation at their program point.
NESTED_OPCODES = frozenset({"while", "conditional", "call", "async-start"})


def kind_of(opcode: str) -> tuple[int, object]:
    """The aliasing kind of an opcode and its argument (async sugar resolved)."""
    kind = _KINDS.get(opcode)
    if kind is not None:
        return kind
    for suffix in ("-start", "-update", "-done"):
        if opcode.endswith(suffix) and not opcode.startswith(_REAL_ASYNC):
            return _KINDS["async" + suffix]
    return (DEFINE, None)


def runs_callee(opcode: str) -> bool:
    """True for while, conditional, call and async starts (incl. `<op>-start` sugar)."""
    if opcode.endswith("-start") and not opcode.startswith(_REAL_ASYNC):
        return True
    return opcode in NESTED_OPCODES


class Leaf:
    """One array leaf defined by a tuple-shaped instruction: a buffer."""

    __slots__ = ("instruction", "index", "size")

    def __init__(self, instruction: HloInstruction, index: int, size: int) -> None:
        self.instruction = instruction
        self.index = index  # position in the depth-first list of the shape's leaves
        self.size = size

    def __repr__(self) -> str:
        return f"<Leaf {self.instruction.name}#{self.index} {self.size}B>"


#: A buffer: the instruction itself for an array-shaped definer, else a Leaf.
Buffer = Union["HloInstruction", Leaf]


class _ShapeInfo:
    """Bytes and tuple structure of one Shape object."""

    __slots__ = ("shape", "size", "leaf_sizes", "spans")

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.leaf_sizes: tuple[int, ...] | None = None
        self.spans: tuple[tuple[int, int], ...] = ()  # (first leaf, leaf count) per element
        if shape.is_tuple:
            sizes: list[int] = []
            spans = []
            for element in shape.tuple_shapes or ():
                start = len(sizes)
                _flatten_sizes(element, sizes)
                spans.append((start, len(sizes) - start))
            self.leaf_sizes = tuple(sizes)
            self.spans = tuple(spans)
            self.size = sum(sizes)
        else:
            self.size = _array_bytes(shape)


def _array_bytes(shape: Shape) -> int:
    return byte_size(shape) if shape.is_array or shape.is_buffer else 0


def _flatten_sizes(shape: Shape, out: list[int]) -> None:
    if shape.is_tuple:
        for element in shape.tuple_shapes or ():
            _flatten_sizes(element, out)
    else:
        out.append(_array_bytes(shape))


def leaf_indices(shape: Shape) -> list[tuple[int, ...]]:
    """XLA shape indices of the leaves, depth-first (``[()]`` for an array)."""
    out: list[tuple[int, ...]] = []

    def walk(s: Shape, prefix: tuple[int, ...]) -> None:
        if s.is_tuple:
            for i, element in enumerate(s.tuple_shapes or ()):
                walk(element, prefix + (i,))
        else:
            out.append(prefix)

    walk(shape, ())
    return out


@dataclass(frozen=True)
class BufferRange:
    """One buffer's live range in program points of its computation (both inclusive)."""

    instruction: str
    index: tuple[int, ...]  # shape index of the leaf, () for an array
    bytes: int
    start: int
    end: int
    static: bool  # a parameter or constant: live throughout


class ComputationLiveness:
    """Liveness of one computation: buffers, their live ranges, live bytes per point.

    Built in linear time by one loop over the instructions (program points, each
    operand's last reader, plain buffer sizes), a visit of each instruction that is not
    a plain array definer (aliases, tuples, parameters, constants, calls), and a prefix
    sum of bytes defined minus bytes whose range ended. On a million instructions every
    pass over the instruction objects costs a visible share of parsing, so there is one.
    """

    def __init__(self, module_liveness: ModuleLiveness, computation: HloComputation) -> None:
        self.computation = computation
        insts = computation.instructions
        self.instructions = insts
        n = len(insts)
        self.position: dict[HloInstruction, int] = {}
        # A plain definer (array-shaped, not an alias, not static) is its own buffer:
        # its bytes and last program point are kept by program point.
        self.sizes: list[int] = [0] * n
        self.ends: list[int] = list(range(n))  # nothing reads it: live at its definition
        special: list[int] = []
        self.static: set[Buffer] = set()  # parameters and constants: live throughout
        static_bytes = 0
        position, sizes, ends, static = self.position, self.sizes, self.ends, self.static
        plain_size = module_liveness.plain_size
        opcode_code = module_liveness.opcode_code
        learn_shape = module_liveness.learn_shape
        learn_opcode = module_liveness.learn_opcode
        try:
            for p, inst in enumerate(insts):
                position[inst] = p
                for o in inst.operands:
                    ends[position[o]] = p
                shape = inst.shape
                size = plain_size.get(id(shape))
                if size is None:
                    size = learn_shape(shape)
                code = opcode_code.get(inst.opcode)
                if code is None:
                    code = learn_opcode(inst.opcode)
                if code or size < 0:
                    if code == STATIC_CODE and size >= 0:  # array parameter or constant
                        static.add(inst)
                        static_bytes += size
                    else:
                        special.append(p)
                else:
                    sizes[p] = size
        except KeyError as e:
            raise ValueError(f"{computation.name}: an operand is used before its definition "
                             f"or lives in another computation ({e})") from None
        # Everything else: the buffers its value lives in, and the ones it defines.
        self.leaves: dict[HloInstruction, tuple[Buffer, ...]] = {}
        self.defines: dict[HloInstruction, tuple[Leaf, ...]] = {}
        self.leaf_ends: dict[Leaf, int] = {}
        self.static_bytes = static_bytes
        self.element_readers: set[HloInstruction] = set()  # get-tuple-elements
        self.nested: dict[int, int] = {}  # program point -> nested bytes of its callees
        for p in special:
            self._classify(insts[p], p, module_liveness)
        for inst in self.leaves:
            self._extend_through(inst)
        root = computation.root
        for b in self.leaves_of(root) if root is not None else ():
            self._extend(b, n - 1)
        self.live_bytes: list[int] = self._profile()

    # ----------------------------------------------------------------- building
    def _classify(self, inst: HloInstruction, p: int, ml: ModuleLiveness) -> None:
        """Leaves and own buffers of an instruction that is not a plain definer."""
        code, arg = kind_of(inst.opcode)
        info = ml.shape_info(inst.shape)
        if runs_callee(inst.opcode) and inst.called_computations:
            self.nested[p] = ml.nested_bytes_of(inst, self.computation)
        if code <= STATIC:  # array parameters and constants never come here
            if info.leaf_sizes is None:  # an array-shaped call: a plain definer
                self.sizes[p] = info.size
                return
            own = _new_leaves(inst, info, range(len(info.leaf_sizes)))
            self.leaves[inst] = self.defines[inst] = own
            for b in own:
                if code == STATIC:
                    self.static.add(b)
                    self.static_bytes += b.size
                else:
                    self.leaf_ends[b] = p
            return
        found = self._alias_leaves(inst, code, arg, info, ml.shape_info)
        if found is None:  # the aliasing rule does not fit this shape: a plain definer
            self.sizes[p] = info.size
            return
        self.leaves[inst] = found
        own = tuple(b for b in found if type(b) is Leaf and b.instruction is inst)
        if own:
            self.defines[inst] = own
            for b in own:
                self.leaf_ends[b] = p
        elif code == GTE:
            self.element_readers.add(inst)

    def _extend_through(self, inst: HloInstruction) -> None:
        """Readers of an alias's (or tuple definer's) value keep its buffers live.

        A get-tuple-element reads its element where it stands; every other user reads
        all leaves; get-tuple-element users are aliases themselves, handled in turn."""
        leaves = self.leaves[inst]
        if not leaves:
            return
        position = self.position
        element_readers = self.element_readers
        end = position[inst] if inst in element_readers else -1
        for user in inst.users:
            if user not in element_readers:
                q = position[user]
                if q > end:
                    end = q
        if end >= 0:
            for b in leaves:
                self._extend(b, end)

    def _extend(self, b: Buffer, end: int) -> None:
        if type(b) is Leaf:
            if b in self.leaf_ends and self.leaf_ends[b] < end:
                self.leaf_ends[b] = end
        elif b not in self.static:
            p = self.position[b]
            if self.ends[p] < end:
                self.ends[p] = end

    def _profile(self) -> list[int]:
        """Live bytes per point: prefix sum of bytes defined minus bytes whose range ended."""
        n = len(self.instructions)
        if n == 0:
            return []
        ended = [0] * (n + 1)
        for end, size in zip(self.ends, self.sizes):
            ended[end + 1] += size
        starts = list(self.sizes)
        position = self.position
        for b, end in self.leaf_ends.items():
            starts[position[b.instruction]] += b.size
            ended[end + 1] += b.size
        starts[0] += self.static_bytes
        live = list(map(sub, accumulate(starts), accumulate(ended)))
        for p, extra in self.nested.items():
            live[p] += extra
        return live

    def _alias_leaves(self, inst: HloInstruction, kind: int, arg: object, info: _ShapeInfo,
                      info_of) -> tuple[Buffer, ...] | None:
        """Leaves of an aliasing instruction; None if the rule does not fit its shape
        (then it allocates, as a plain definer)."""
        operands = inst.operands
        if kind == TUPLE:
            return tuple(b for o in operands for b in self.leaves_of(o))
        if not operands:
            return self._defined(inst, info)
        first = self.leaves_of(operands[0])
        if kind == FORWARD:
            return first
        if kind in (GTE, ELEMENT):
            index = inst.tuple_index if kind == GTE else arg
            spans = info_of(operands[0].shape).spans
            if not isinstance(index, int) or not 0 <= index < len(spans):
                return self._defined(inst, info)
            start, count = spans[index]
            return first[start : start + count]
        spans = info.spans
        if kind == PREFIX:
            aliased = tuple(b for o in operands for b in self.leaves_of(o)) if arg == "all" else first
            element = 0
        elif kind == COPY_START:
            aliased, element = first, 1
        else:  # RECV_DONE
            operand_spans = info_of(operands[0].shape).spans
            if not operand_spans:
                return self._defined(inst, info)
            start, count = operand_spans[0]
            aliased, element = first[start : start + count], 0
        if element >= len(spans) or spans[element][1] != len(aliased):
            return self._defined(inst, info)
        start, count = spans[element]
        total = len(info.leaf_sizes or ())
        new = iter(_new_leaves(inst, info, [i for i in range(total) if not start <= i < start + count]))
        return tuple(aliased[i - start] if start <= i < start + count else next(new) for i in range(total))

    @staticmethod
    def _defined(inst: HloInstruction, info: _ShapeInfo) -> tuple[Buffer, ...] | None:
        if info.leaf_sizes is None:
            return None
        return _new_leaves(inst, info, range(len(info.leaf_sizes)))

    # ------------------------------------------------------------------ buffers
    def leaves_of(self, inst: HloInstruction) -> tuple[Buffer, ...]:
        """The buffers an instruction's value lives in, depth-first by leaf."""
        found = self.leaves.get(inst)
        return (inst,) if found is None else found

    def own_buffers(self, inst: HloInstruction) -> tuple[Buffer, ...]:
        """The buffers `inst` defines (empty for a pure alias)."""
        if inst not in self.leaves:
            return (inst,)
        return self.defines.get(inst, ())

    def reads(self, inst: HloInstruction) -> Iterator[Buffer]:
        """The buffers `inst` reads: every operand leaf, a get-tuple-element its element."""
        if inst in self.element_readers:
            yield from self.leaves[inst]
            return
        for o in inst.operands:
            yield from self.leaves_of(o)

    def size_of(self, b: Buffer) -> int:
        if type(b) is Leaf:
            return b.size
        if b in self.static:
            return _array_bytes(b.shape)
        return self.sizes[self.position[b]]

    def start_of(self, b: Buffer) -> int:
        if b in self.static:
            return 0
        return self.position[b.instruction if type(b) is Leaf else b]

    def end_of(self, b: Buffer) -> int:
        """The buffer's last program point (its last reader, the end, or its definition)."""
        if b in self.static:
            return len(self.instructions) - 1
        if type(b) is Leaf:
            return self.leaf_ends[b]
        return self.ends[self.position[b]]

    # ---------------------------------------------------------------- results
    @property
    def peak_bytes(self) -> int:
        return max(self.live_bytes) if self.live_bytes else 0

    @property
    def peak_position(self) -> int:
        """The first program point where the live bytes reach the peak (-1 if empty)."""
        live = self.live_bytes
        return live.index(max(live)) if live else -1

    @property
    def peak_instruction(self) -> HloInstruction | None:
        p = self.peak_position
        return self.instructions[p] if p >= 0 else None

    def parameter_bytes(self) -> int:
        return sum(self.size_of(b) for p in self.computation.parameters for b in self.leaves_of(p))

    def result_buffers(self, root: HloInstruction | None = None) -> set[Buffer]:
        """The root's buffers that are not parameters: what a caller receives as its result."""
        root = self.computation.root if root is None else root
        if root is None:
            return set()
        params = {b for p in self.computation.parameters for b in self.leaves_of(p)}
        return set(self.leaves_of(root)) - params

    def nested_profile(self, live: list[int], results: set[Buffer]) -> list[int]:
        """`live` minus the parameters and the result buffers live at each point: what
        running this computation adds on top of its caller, point by point."""
        steps = [0] * (len(live) + 1)
        for b in results:
            steps[self.start_of(b)] += self.size_of(b)
        base = self.parameter_bytes()
        return [v - base - r for v, r in zip(live, accumulate(steps))]

    def buffers(self) -> list[BufferRange]:
        """Every buffer of the computation with its live range, in definition order."""
        out = []
        for inst in self.instructions:
            own = self.own_buffers(inst)
            indices = leaf_indices(inst.shape) if own and type(own[0]) is Leaf else [()]
            for b in own:
                index = indices[b.index] if type(b) is Leaf else ()
                out.append(BufferRange(inst.name, index, self.size_of(b), self.start_of(b),
                                       self.end_of(b), b in self.static))
        return out


def _new_leaves(inst: HloInstruction, info: _ShapeInfo, indices) -> tuple[Leaf, ...]:
    sizes = info.leaf_sizes or ()
    return tuple(Leaf(inst, i, sizes[i]) for i in indices)


class ModuleLiveness:
    """Liveness of a module's computations, each analysed on first request.

    `computation(c)` analyses `c` and, through its while/conditional/call/async call
    sites, the computations it runs; fusion bodies and scalar computations are never
    analysed. The module must not change while this object is in use.
    """

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self._computations: dict[HloComputation, ComputationLiveness] = {}
        self.call_sites: dict[HloComputation, list[tuple[HloComputation, HloInstruction]]] = {}
        # Per Shape object (parsed shapes are shared objects, so there are few): its
        # bytes as a plain buffer, -1 if tuple-shaped. Keyed by id(); `_shapes` keeps
        # the objects alive so an id is never reused while this analysis exists.
        self.plain_size: dict[int, int] = {}
        self._shapes: dict[int, _ShapeInfo] = {}
        # Per opcode: 0 for a plain definer, STATIC_CODE for parameter and constant,
        # SPECIAL_CODE for anything else the build visits one by one.
        self.opcode_code: dict[str, int] = {}

    def learn_shape(self, shape: Shape) -> int:
        info = self.shape_info(shape)
        size = self.plain_size[id(shape)] = -1 if info.leaf_sizes is not None else info.size
        return size

    def shape_info(self, shape: Shape) -> _ShapeInfo:
        info = self._shapes.get(id(shape))
        if info is None or info.shape is not shape:
            info = self._shapes[id(shape)] = _ShapeInfo(shape)
        return info

    def learn_opcode(self, opcode: str) -> int:
        kind = kind_of(opcode)[0]
        if kind == STATIC:
            code = STATIC_CODE
        elif kind != DEFINE or runs_callee(opcode):
            code = SPECIAL_CODE
        else:
            code = 0
        self.opcode_code[opcode] = code
        return code

    def computation(self, computation: HloComputation | str) -> ComputationLiveness:
        comp = self._resolve(computation)
        found = self._computations.get(comp)
        if found is None:
            found = self._computations[comp] = ComputationLiveness(self, comp)
        return found

    def _resolve(self, computation: HloComputation | str) -> HloComputation:
        if not isinstance(computation, str):
            return computation
        for comp in self.module.computations:
            if comp.name == computation:
                return comp
        raise KeyError(f"no computation named {computation!r}")

    def nested_bytes(self, computation: HloComputation) -> int:
        """What running `computation` adds on top of its caller at the call point."""
        c = self.computation(computation)
        return max(0, max(c.nested_profile(c.live_bytes, c.result_buffers()), default=0))

    def nested_bytes_of(self, inst: HloInstruction, caller: HloComputation) -> int:
        """Nested bytes at a while/conditional/call/async call site (records the site)."""
        best = 0
        for callee in inst.called_computations:
            self.call_sites.setdefault(callee, []).append((caller, inst))
            best = max(best, self.nested_bytes(callee))
        return best

    @property
    def peak_bytes(self) -> int:
        """The entry computation's peak (nested computations included)."""
        if self.module.entry is None:
            return 0
        return self.computation(self.module.entry).peak_bytes


def analyze(module: HloModule) -> ModuleLiveness:
    """Liveness for `module` (computations are analysed when first asked for)."""
    return ModuleLiveness(module)
