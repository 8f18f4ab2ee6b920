"""What allocates and what aliases: the buffers an HLO instruction's value lives in.

The rules follow XLA's HloDataflowAnalysis (which instruction defines which value) and
its buffer assignment where that is cheap to do:

What allocates
    A *buffer* is one array leaf (tokens count 0 bytes) of the value an instruction
    defines, of ``byte_size`` bytes: data only, no 8-byte tuple index tables. Every
    instruction defines a buffer per leaf of its shape, except the aliasing ones below.
    Parameters and constants are static allocations in XLA (entry parameters, read-only
    constants): the liveness model keeps them live at every program point.

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
    from the callee root; the liveness model charges them to the caller and leaves them
    out of what the callee adds). An aliasing rule that does not fit an instruction's
    shape makes it allocate. In-place sharing (a ``dynamic-update-slice`` or fusion
    writing into a dying operand, ``output_to_operand_aliasing``) is not modelled: such
    instructions allocate, so the estimate bounds what XLA's sharing achieves from above.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Union

from ..ir.shape import Shape, byte_size

if TYPE_CHECKING:
    from ..ir.instruction import HloInstruction

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

    __slots__ = ("index", "instruction", "size")

    def __init__(self, instruction: HloInstruction, index: int, size: int) -> None:
        self.instruction = instruction
        self.index = index  # position in the depth-first list of the shape's leaves
        self.size = size

    def __repr__(self) -> str:
        return f"<Leaf {self.instruction.name}#{self.index} {self.size}B>"


#: A buffer: the instruction itself for an array-shaped definer, else a Leaf.
Buffer = Union["HloInstruction", Leaf]


class ShapeInfo:
    """Bytes and tuple structure of one Shape object."""

    __slots__ = ("leaf_sizes", "shape", "size", "spans")

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.leaf_sizes: tuple[int, ...] | None = None  # depth-first, for a tuple
        self.spans: tuple[tuple[int, int], ...] = ()  # (first leaf, leaf count) per element
        if shape.is_tuple:
            sizes: list[int] = []
            spans = []
            known: dict[int, int] = {}  # bytes by array Shape object: a root tuple repeats a few
            for element in shape.tuple_shapes or ():
                start = len(sizes)
                _flatten_sizes(element, sizes, known)
                spans.append((start, len(sizes) - start))
            self.leaf_sizes = tuple(sizes)
            self.spans = tuple(spans)
            self.size = sum(sizes)
        else:
            self.size = array_bytes(shape)


def array_bytes(shape: Shape) -> int:
    """Bytes of a non-tuple shape (token and opaque 0; an unbounded dimension counts 0)."""
    try:
        return byte_size(shape)
    except ValueError:
        return 0


def _flatten_sizes(shape: Shape, out: list[int], known: dict[int, int]) -> None:
    """The leaves' bytes of `shape` appended to `out`, depth-first; `known` holds the bytes
    of array shapes met so far, by id (they stay alive in the tuple being flattened)."""
    if shape.tuple_shapes is not None:
        for element in shape.tuple_shapes:
            _flatten_sizes(element, out, known)
        return
    size = known.get(id(shape))
    if size is None:
        size = known[id(shape)] = array_bytes(shape)
    out.append(size)


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


def new_leaves(inst: HloInstruction, info: ShapeInfo, indices: Iterable[int]) -> tuple[Leaf, ...]:
    sizes = info.leaf_sizes or ()
    return tuple(Leaf(inst, i, sizes[i]) for i in indices)


def alias_leaves(
    inst: HloInstruction,
    kind: int,
    arg: object,
    info_of: Callable[[Shape], ShapeInfo],
    leaves_of: Callable[[HloInstruction], tuple[Buffer, ...]],
) -> tuple[Buffer, ...] | None:
    """The leaves of an aliasing instruction of `kind` (operands' leaves from `leaves_of`);
    None if the rule does not fit its shape and it is an array: then it allocates. Its
    own shape is read only when the rule needs it."""
    operands = inst.operands
    if kind == TUPLE:
        return tuple(b for o in operands for b in leaves_of(o))
    if not operands:
        return _defined(inst, info_of(inst.shape))
    first = leaves_of(operands[0])
    if kind == FORWARD:
        return first
    if kind in (GTE, ELEMENT):
        index = inst.tuple_index if kind == GTE else arg
        spans = info_of(operands[0].shape).spans
        if not isinstance(index, int) or not 0 <= index < len(spans):
            return _defined(inst, info_of(inst.shape))
        start, count = spans[index]
        return first[start : start + count]
    info = info_of(inst.shape)
    spans = info.spans
    if kind == PREFIX:
        aliased = tuple(b for o in operands for b in leaves_of(o)) if arg == "all" else first
        element = 0
    elif kind == COPY_START:
        aliased, element = first, 1
    else:  # RECV_DONE
        operand_spans = info_of(operands[0].shape).spans
        if not operand_spans:
            return _defined(inst, info)
        start, count = operand_spans[0]
        aliased, element = first[start : start + count], 0
    if element >= len(spans) or spans[element][1] != len(aliased):
        return _defined(inst, info)
    start, count = spans[element]
    total = len(info.leaf_sizes or ())
    fresh = iter(new_leaves(inst, info, [i for i in range(total) if not start <= i < start + count]))
    return tuple(aliased[i - start] if start <= i < start + count else next(fresh) for i in range(total))


def _defined(inst: HloInstruction, info: ShapeInfo) -> tuple[Buffer, ...] | None:
    if info.leaf_sizes is None:
        return None
    return new_leaves(inst, info, range(len(info.leaf_sizes)))
