"""XLA shapes and layouts: the data model, the HLO-text parser and printer, and
XLA's shape-equality rules.

The model keeps what the text says. A shape written without ``{...}`` has
``layout=None``, distinct from an explicit default layout, so that printing
reproduces the source; XLA's parser fills in default layouts and cannot tell
the two apart. The comparison functions follow XLA (``Shape::Equal`` and the
``ShapeUtil`` wrappers) as if those layouts had been filled in.

Representation choices (XLA uses ``INT64_MIN`` for both; -1 is never a valid
size or tile bound, so nothing is lost):

* an unbounded dynamic dimension ``?`` is size ``UNBOUNDED_SIZE`` (-1) with its
  dynamic flag set; a bounded one ``<=N`` is size ``N`` with the flag set;
* a combined tile dimension ``*`` is ``Tile.COMBINE`` (-1).
"""

from __future__ import annotations

import enum
import functools
import math
import re
from dataclasses import dataclass, replace
from typing import ClassVar

from .._syntax import SKIP_RE, TextCursor, TextSyntaxError

__all__ = [
    "UNBOUNDED_SIZE",
    "Layout",
    "PrimitiveType",
    "Shape",
    "ShapeSyntaxError",
    "SplitConfig",
    "Tile",
    "byte_size",
    "parse_shape",
    "shapes_compatible",
    "shapes_compatible_ignoring_fp_precision",
    "shapes_compatible_kind",
    "shapes_equal",
    "shapes_equal_ignoring_fp_precision",
]

UNBOUNDED_SIZE = -1
"""Size stored for an unbounded dynamic dimension (``?``)."""


class PrimitiveType(enum.Enum):
    """Element types, valued by their HLO-text names (§6.1).

    XLA's ``TUPLE`` and ``BUFFER`` are not here: they are not text type names,
    and a :class:`Shape` says "tuple" or "buffer" structurally instead.
    """

    PRED = "pred"
    S1 = "s1"
    S2 = "s2"
    S4 = "s4"
    S8 = "s8"
    S16 = "s16"
    S32 = "s32"
    S64 = "s64"
    U1 = "u1"
    U2 = "u2"
    U4 = "u4"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"
    F8E5M2 = "f8e5m2"
    F8E4M3 = "f8e4m3"
    F8E4M3FN = "f8e4m3fn"
    F8E4M3B11FNUZ = "f8e4m3b11fnuz"
    F8E3M4 = "f8e3m4"
    F8E5M2FNUZ = "f8e5m2fnuz"
    F8E4M3FNUZ = "f8e4m3fnuz"
    F8E8M0FNU = "f8e8m0fnu"
    F6E3M2FN = "f6e3m2fn"
    F6E2M3FN = "f6e2m3fn"
    F4E2M1FN = "f4e2m1fn"
    C64 = "c64"
    C128 = "c128"
    TOKEN = "token"
    OPAQUE = "opaque"

    @property
    def is_floating(self) -> bool:
        """``primitive_util::IsFloatingPointType``: real floats only, not complex."""
        return self in _FLOATING

    @property
    def is_complex(self) -> bool:
        return self is PrimitiveType.C64 or self is PrimitiveType.C128

    @property
    def is_signed_integral(self) -> bool:
        return self in _SIGNED

    @property
    def is_unsigned_integral(self) -> bool:
        return self in _UNSIGNED

    @property
    def is_integral(self) -> bool:
        """``primitive_util::IsIntegralType``: signed or unsigned ints, not pred."""
        return self in _SIGNED or self in _UNSIGNED

    @property
    def is_array_type(self) -> bool:
        """False for ``token`` and ``opaque``, whose shapes hold no elements."""
        return self is not PrimitiveType.TOKEN and self is not PrimitiveType.OPAQUE

    @property
    def bit_width(self) -> int:
        """Bits per element as XLA stores it (pred is 8); 0 for token/opaque."""
        return _BIT_WIDTH[self]


_P = PrimitiveType
_SIGNED = frozenset({_P.S1, _P.S2, _P.S4, _P.S8, _P.S16, _P.S32, _P.S64})
_UNSIGNED = frozenset({_P.U1, _P.U2, _P.U4, _P.U8, _P.U16, _P.U32, _P.U64})
_FLOATING = frozenset(
    {
        _P.F16, _P.BF16, _P.F32, _P.F64,
        _P.F8E5M2, _P.F8E4M3, _P.F8E4M3FN, _P.F8E4M3B11FNUZ, _P.F8E3M4,
        _P.F8E5M2FNUZ, _P.F8E4M3FNUZ, _P.F8E8M0FNU,
        _P.F6E3M2FN, _P.F6E2M3FN, _P.F4E2M1FN,
    }
)  # fmt: skip
_BIT_WIDTH: dict[PrimitiveType, int] = {
    _P.PRED: 8, _P.S1: 1, _P.S2: 2, _P.S4: 4, _P.S8: 8, _P.S16: 16, _P.S32: 32,
    _P.S64: 64, _P.U1: 1, _P.U2: 2, _P.U4: 4, _P.U8: 8, _P.U16: 16, _P.U32: 32,
    _P.U64: 64, _P.F16: 16, _P.BF16: 16, _P.F32: 32, _P.F64: 64,
    _P.F8E5M2: 8, _P.F8E4M3: 8, _P.F8E4M3FN: 8, _P.F8E4M3B11FNUZ: 8, _P.F8E3M4: 8,
    _P.F8E5M2FNUZ: 8, _P.F8E4M3FNUZ: 8, _P.F8E8M0FNU: 8,
    _P.F6E3M2FN: 6, _P.F6E2M3FN: 6, _P.F4E2M1FN: 4,
    _P.C64: 64, _P.C128: 128, _P.TOKEN: 0, _P.OPAQUE: 0,
}  # fmt: skip
_BY_NAME: dict[str, PrimitiveType] = {t.value: t for t in PrimitiveType}


class ShapeSyntaxError(TextSyntaxError):
    """Malformed shape or layout text; ``offset`` indexes the text."""


@dataclass(frozen=True, slots=True)
class Tile:
    """One ``(d0,d1,...)`` group of a ``T`` tiling; ``COMBINE`` stands for ``*``."""

    dimensions: tuple[int, ...]

    COMBINE: ClassVar[int] = -1

    def to_text(self) -> str:
        return "(" + ",".join("*" if d == Tile.COMBINE else str(d) for d in self.dimensions) + ")"


@dataclass(frozen=True, slots=True)
class SplitConfig:
    """One ``(dimension:i0,i1,...)`` group of an ``SC`` layout field."""

    dimension: int
    split_indices: tuple[int, ...]

    def to_text(self) -> str:
        return f"({self.dimension}:{','.join(map(str, self.split_indices))})"


@dataclass(frozen=True, slots=True)
class Layout:
    """An array layout with every field of XLA's ``Layout`` that the text carries.

    ``dim_level_types`` holds the raw items of a ``D(...)`` field (e.g. ``"C+"``).
    Today's XLA parses but neither prints nor compares it, and neither do we.
    ``dynamic_shape_metadata_prefix_bytes`` is printed but, as in XLA's
    ``Layout::Equal``, not compared.
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[Tile, ...] = ()
    tail_padding_alignment: int = 1
    index_primitive_type: PrimitiveType | None = None
    pointer_primitive_type: PrimitiveType | None = None
    element_size_in_bits: int = 0
    memory_space: int = 0
    split_configs: tuple[SplitConfig, ...] = ()
    physical_shape: Shape | None = None
    dynamic_shape_metadata_prefix_bytes: int = 0
    dim_level_types: tuple[str, ...] = ()

    @staticmethod
    def default(rank: int) -> Layout:
        """The layout XLA assigns to an array written without one: ``{rank-1,...,0}``."""
        return _default_layout(rank)

    def to_text(self) -> str:
        """``Layout::Print``: extension fields in XLA's fixed order, defaults omitted."""
        ext: list[str] = []
        if self.tiles:
            ext.append("T" + "".join(t.to_text() for t in self.tiles))
        if self.tail_padding_alignment != 1:
            ext.append(f"L({self.tail_padding_alignment})")
        if self.index_primitive_type is not None:
            ext.append(f"#({_integral_name(self.index_primitive_type)})")
        if self.pointer_primitive_type is not None:
            ext.append(f"*({_integral_name(self.pointer_primitive_type)})")
        if self.element_size_in_bits != 0:
            ext.append(f"E({self.element_size_in_bits})")
        if self.memory_space != 0:
            ext.append(f"S({self.memory_space})")
        if self.split_configs:
            ext.append("SC" + "".join(s.to_text() for s in self.split_configs))
        if self.physical_shape is not None:
            ext.append(f"P({self.physical_shape.to_text()})")
        if self.dynamic_shape_metadata_prefix_bytes > 0:
            ext.append(f"M({self.dynamic_shape_metadata_prefix_bytes})")
        m2m = ",".join(map(str, self.minor_to_major))
        return "{" + m2m + (":" + "".join(ext) if ext else "") + "}"

    def equality_key(self) -> tuple[object, ...]:
        """The fields ``Layout::Equal`` compares, as a hashable tuple."""
        return (
            self.minor_to_major,
            self.tiles,
            self.tail_padding_alignment,
            self.index_primitive_type,
            self.pointer_primitive_type,
            self.element_size_in_bits,
            self.memory_space,
            self.split_configs,
            None if self.physical_shape is None else self.physical_shape.layout_key(),
        )


def _integral_name(t: PrimitiveType) -> str:
    return t.value if t.is_integral else "invalid"


@functools.lru_cache(maxsize=64)
def _default_layout(rank: int) -> Layout:
    return Layout(tuple(range(rank - 1, -1, -1)))


@dataclass(frozen=True, slots=True)
class Shape:
    """An array, token, opaque, tuple or buffer shape.

    * array: ``element_type`` set, ``dimensions``/``dynamic`` per dimension,
      ``layout`` None when the text had no ``{...}``;
    * token/opaque: ``element_type`` TOKEN/OPAQUE and nothing else;
    * tuple: ``element_type`` None and ``tuple_shapes`` a (possibly empty) tuple;
    * buffer ``b(...)``: an array shape with ``buffer`` True.

    ``==`` and ``hash`` are structural (they tell a missing layout from an
    explicit default one); use :func:`shapes_equal` or :meth:`layout_key` for
    XLA's notion of equality.
    """

    element_type: PrimitiveType | None
    dimensions: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] | None = None
    buffer: bool = False

    def __post_init__(self) -> None:
        if self.tuple_shapes is not None:
            if self.element_type is not None or self.dimensions or self.layout is not None or self.buffer:
                raise ValueError("a tuple shape has only tuple_shapes")
            return
        if self.element_type is None:
            raise ValueError("a non-tuple shape needs an element type")
        if len(self.dynamic) != len(self.dimensions):
            if self.dynamic:
                raise ValueError("dynamic flags must match the dimensions")
            object.__setattr__(self, "dynamic", (False,) * len(self.dimensions))
        if not self.element_type.is_array_type and (
            self.dimensions or self.layout is not None or self.buffer
        ):
            raise ValueError(f"{self.element_type.value} shapes have no dimensions or layout")

    @staticmethod
    def array(
        element_type: PrimitiveType,
        dimensions: tuple[int, ...] | list[int] = (),
        dynamic: tuple[bool, ...] | list[bool] | None = None,
        layout: Layout | None = None,
    ) -> Shape:
        return Shape(element_type, tuple(dimensions), tuple(dynamic or ()), layout)

    @staticmethod
    def tuple_of(shapes: tuple[Shape, ...] | list[Shape]) -> Shape:
        return Shape(None, tuple_shapes=tuple(shapes))

    @staticmethod
    def token() -> Shape:
        return Shape(PrimitiveType.TOKEN)

    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def is_buffer(self) -> bool:
        return self.buffer

    @property
    def is_array(self) -> bool:
        """As XLA's ``IsArray``: false for tuples, buffers, token and opaque."""
        et = self.element_type
        return et is not None and not self.buffer and et.is_array_type

    @property
    def is_dynamic(self) -> bool:
        if self.tuple_shapes is not None:
            return any(s.is_dynamic for s in self.tuple_shapes)
        return any(self.dynamic)

    @property
    def rank(self) -> int:
        if self.tuple_shapes is not None:
            raise ValueError("a tuple shape has no rank")
        return len(self.dimensions)

    @property
    def element_count(self) -> int:
        """Elements of an array or buffer; a bounded dynamic dimension counts its bound."""
        if self.element_type is None or not self.element_type.is_array_type:
            raise ValueError(f"{self.to_text()} is not an array shape")
        if UNBOUNDED_SIZE in self.dimensions:
            raise ValueError(f"{self.to_text()} has an unbounded dimension")
        return math.prod(self.dimensions)

    def with_default_layout(self) -> Shape:
        """This shape with every layout-less array given its default layout, as
        XLA's parser does (``fill_missing_layouts``)."""
        if self.tuple_shapes is not None:
            return Shape.tuple_of([s.with_default_layout() for s in self.tuple_shapes])
        if self.layout is None and self.element_type is not None and self.element_type.is_array_type:
            return replace(self, layout=_default_layout(len(self.dimensions)))
        return self

    def layout_key(self) -> tuple[object, ...]:
        """A hashable key equal for two shapes exactly when :func:`shapes_equal` holds."""
        if self.tuple_shapes is not None:
            return ("(", tuple(s.layout_key() for s in self.tuple_shapes))
        et = self.element_type
        assert et is not None
        if not et.is_array_type:
            return (et,)
        layout = self.layout or _default_layout(len(self.dimensions))
        key = (et, self.dimensions, self.dynamic, layout.equality_key())
        return ("b", key) if self.buffer else key

    def to_text(self) -> str:
        """The shape as XLA prints it with layouts (``Shape::Print``)."""
        parts: list[str] = []
        _print_shape(self, parts)
        return "".join(parts)

    def __str__(self) -> str:
        return self.to_text()


def _print_shape(shape: Shape, out: list[str]) -> None:
    if shape.tuple_shapes is not None:
        out.append("(")
        for i, sub in enumerate(shape.tuple_shapes):
            if i:
                out.append(", ")
                if i % 5 == 0:
                    out.append(f"/*index={i}*/")
            _print_shape(sub, out)
        out.append(")")
        return
    et = shape.element_type
    assert et is not None
    if shape.buffer:
        out.append("b(")
    out.append(et.value)
    out.append("[")
    out.append(
        ",".join(
            ("?" if d == UNBOUNDED_SIZE else f"<={d}") if dyn else str(d)
            for d, dyn in zip(shape.dimensions, shape.dynamic)
        )
    )
    out.append("]")
    if shape.layout is not None:
        text = shape.layout.to_text()
        # XLA omits a scalar's layout when it prints as "{}".
        if shape.dimensions or text != "{}":
            out.append(text)
    if shape.buffer:
        out.append(")")


# ----------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------

_MAX_DEPTH = 200  # nesting of tuples/buffers/physical shapes; keeps clear of RecursionError
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# Compact "type[dims]" and "{m2m}" with at most 18 digits per number (so no
# int64 range check is needed); anything else takes the general parser.
_FAST_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[((?:(?:<=)?\d{1,18}|\?)(?:,(?:(?:<=)?\d{1,18}|\?))*)?\]")
_FAST_LAYOUT_RE = re.compile(r"\{(\d{1,18}(?:,\d{1,18})*)\}")
# The whole text is a plain array shape: the overwhelmingly common case.
_FAST_SHAPE_RE = re.compile(_FAST_ARRAY_RE.pattern + "(?:" + _FAST_LAYOUT_RE.pattern + ")?")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_INT_RE = re.compile(r"-?[0-9]+")


def _dims_from_text(text: str | None) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    if not text:
        return (), ()
    dims: list[int] = []
    dyn: list[bool] = []
    for item in text.split(","):
        if item == "?":
            dims.append(UNBOUNDED_SIZE)
            dyn.append(True)
        elif item[0] == "<":
            dims.append(int(item[2:]))
            dyn.append(True)
        else:
            dims.append(int(item))
            dyn.append(False)
    return tuple(dims), tuple(dyn)


def _m2m_from_text(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


@functools.lru_cache(maxsize=65536)
def parse_shape(text: str) -> Shape:
    """Parse a shape in HLO text syntax (§6), keeping "no layout" as ``layout=None``.

    Memoised: real modules repeat the same shape text thousands of times, and
    shapes are immutable. Raises :class:`ShapeSyntaxError` on malformed input.
    """
    m = _FAST_SHAPE_RE.fullmatch(text)
    if m is not None:
        et = _BY_NAME.get(m.group(1))
        if et is not None and et.is_array_type:
            dims, dyn = _dims_from_text(m.group(2))
            m2m = m.group(3)
            if m2m is None:
                return Shape(et, dims, dyn)
            minor_to_major = _m2m_from_text(m2m)
            if len(minor_to_major) == len(dims):
                return Shape(et, dims, dyn, Layout(minor_to_major))
    return _ShapeParser(text).parse()


class _ShapeParser(TextCursor):
    """Recursive-descent parser over the token grammar of §6 (whitespace and
    comments allowed between any two tokens)."""

    __slots__ = ("depth",)
    error_type = ShapeSyntaxError

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0

    def peek_ident(self) -> str | None:
        self.skip()
        m = _IDENT_RE.match(self.text, self.pos)
        return None if m is None else m.group()

    def integer(self, context: str) -> int:
        self.skip()
        m = _INT_RE.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected an integer {context}, found {self.describe()}")
        value = int(m.group())
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise self.error(f"integer {m.group()} does not fit in int64")
        self.pos = m.end()
        return value

    def int_list(self, close: str, context: str) -> tuple[int, ...]:
        """Integers separated by ',' up to and including ``close``; may be empty."""
        if self.eat(close):
            return ()
        items = [self.integer(context)]
        while self.eat(","):
            items.append(self.integer(context))
        self.expect(close, f"to end {context}")
        return tuple(items)

    # -- grammar -------------------------------------------------------------

    def parse(self) -> Shape:
        shape = self.shape()
        self.skip()
        if self.pos != len(self.text):
            raise self.error(f"unexpected text after shape: {self.describe()}")
        return shape

    def shape(self) -> Shape:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error("shape nesting is too deep")
        try:
            self.skip()
            text, pos = self.text, self.pos
            if text.startswith("(", pos):
                return self.tuple_shape()
            if text.startswith("b", pos) and self.peek_ident() == "b":
                start = pos
                self.pos += 1
                if self.eat("("):
                    inner = self.shape()
                    if not inner.is_array:
                        raise self.error("a buffer shape must hold an array shape", start)
                    self.expect(")", "to end buffer shape")
                    return replace(inner, buffer=True)
                self.pos = start
            return self.array_shape()
        finally:
            self.depth -= 1

    def tuple_shape(self) -> Shape:
        self.pos += 1  # '('
        elements: list[Shape] = []
        if not self.eat(")"):
            elements.append(self.shape())
            while self.eat(","):
                elements.append(self.shape())
            self.expect(")", "to end tuple shape")
        return Shape(None, tuple_shapes=tuple(elements))

    def array_shape(self) -> Shape:
        start = self.pos
        fast = _FAST_ARRAY_RE.match(self.text, start)
        if fast is not None:
            name = fast.group(1)
            dims, dyn = _dims_from_text(fast.group(2))
            self.pos = fast.end()
        else:
            m = _IDENT_RE.match(self.text, start)
            if m is None:
                raise self.error(f"expected a shape, found {self.describe()}")
            name = m.group()
            self.pos = m.end()
            dims, dyn = self.dimension_list()
        et = _BY_NAME.get(name)
        if et is None:
            raise self.error(f"unknown primitive type {name!r}", start)
        if not et.is_array_type:
            if dims:
                raise self.error(f"{name} shapes take no dimensions", start)
            if self.layout_follows():
                raise self.error(f"{name} shapes cannot have a layout")
            return Shape(et)
        for d, is_dyn in zip(dims, dyn):
            if d < 0 and not (is_dyn and d == UNBOUNDED_SIZE):
                raise self.error(f"invalid dimension size {d}", start)
        layout = None
        if self.layout_follows():
            layout_start = self.pos
            simple = _FAST_LAYOUT_RE.match(self.text, self.pos)
            if simple is not None:
                self.pos = simple.end()
                layout = Layout(_m2m_from_text(simple.group(1)))
            else:
                layout = self.layout()
            if len(layout.minor_to_major) != len(dims):
                raise self.error(
                    f"layout has {len(layout.minor_to_major)} minor-to-major entries "
                    f"but the shape has rank {len(dims)}",
                    layout_start,
                )
        return Shape(et, dims, dyn, layout)

    def dimension_list(self) -> tuple[tuple[int, ...], tuple[bool, ...]]:
        self.expect("[", "after element type")
        dims: list[int] = []
        dyn: list[bool] = []
        if not self.eat("]"):
            while True:
                if self.eat("?"):
                    dims.append(UNBOUNDED_SIZE)
                    dyn.append(True)
                else:
                    bounded = self.eat("<=")
                    start = self.pos
                    size = self.integer("as dimension size")
                    if size < 0:
                        raise self.error(f"invalid dimension size {size}", start)
                    dims.append(size)
                    dyn.append(bounded)
                if not self.eat(","):
                    break
            self.expect("]", "to end dimensions")
        return tuple(dims), tuple(dyn)

    def layout_follows(self) -> bool:
        """XLA reads '{' as a layout only when an INT or ':' comes next."""
        self.skip()
        if not self.text.startswith("{", self.pos):
            return False
        after = SKIP_RE.match(self.text, self.pos + 1).end()  # type: ignore[union-attr]
        return self.text.startswith(":", after) or _INT_RE.match(self.text, after) is not None

    def layout(self) -> Layout:
        self.expect("{", "to start layout")
        self.skip()
        minor_to_major: tuple[int, ...] = ()
        if _INT_RE.match(self.text, self.pos):
            items = [self.integer("in minor_to_major")]
            while self.eat(","):
                items.append(self.integer("in minor_to_major"))
            minor_to_major = tuple(items)
        fields: dict[str, object] = {}
        if self.eat(":"):
            if self.peek_ident() == "D":
                self.pos += 1
                fields["dim_level_types"] = self.dim_level_types()
            if self.peek_ident() == "T":
                self.pos += 1
                fields["tiles"] = self.tiles()
            if self.peek_ident() == "L":
                self.pos += 1
                start = self.pos
                alignment = self.paren_int("tail padding alignment")
                if alignment < 1:
                    raise self.error("tail padding alignment must be at least 1", start)
                fields["tail_padding_alignment"] = alignment
            if self.eat("#"):
                fields["index_primitive_type"] = self.paren_integral_type("index")
            if self.eat("*"):
                fields["pointer_primitive_type"] = self.paren_integral_type("pointer")
            if self.peek_ident() == "E":
                self.pos += 1
                fields["element_size_in_bits"] = self.paren_int("element size in bits")
            if self.peek_ident() == "S":
                self.pos += 1
                fields["memory_space"] = self.paren_int("memory space")
            if self.peek_ident() == "SC":
                self.pos += 2
                fields["split_configs"] = self.split_configs()
            if self.peek_ident() == "P":
                self.pos += 1
                self.expect("(", "after P")
                fields["physical_shape"] = self.shape()
                self.expect(")", "to end physical shape")
            if self.peek_ident() == "M":
                self.pos += 1
                fields["dynamic_shape_metadata_prefix_bytes"] = self.paren_int(
                    "dynamic shape metadata prefix bytes"
                )
        self.expect("}", "to end layout")
        return Layout(minor_to_major, **fields)  # type: ignore[arg-type]

    def paren_int(self, context: str) -> int:
        self.expect("(", f"before {context}")
        value = self.integer(f"as {context}")
        self.expect(")", f"after {context}")
        return value

    def paren_integral_type(self, what: str) -> PrimitiveType:
        self.expect("(", f"before {what} primitive type")
        start = self.pos
        name = self.peek_ident()
        et = _BY_NAME.get(name or "")
        if et is None or not et.is_unsigned_integral:
            raise self.error(f"expected an unsigned integer {what} primitive type", start)
        self.pos += len(et.value)
        self.expect(")", f"after {what} primitive type")
        return et

    def dim_level_types(self) -> tuple[str, ...]:
        self.expect("(", "after D")
        items: list[str] = []
        if self.eat(")"):
            return ()
        while True:
            start = self.pos
            name = self.peek_ident()
            if name not in ("D", "C", "S", "H"):
                raise self.error("expected a dim level type (D, C, S or H)", start)
            self.pos += 1
            item = name
            if self.eat("+"):
                item += "+"
            if self.eat("~"):
                item += "~"
            items.append(item)
            if not self.eat(","):
                break
        self.expect(")", "to end dim level types")
        return tuple(items)

    def tiles(self) -> tuple[Tile, ...]:
        tiles: list[Tile] = []
        self.expect("(", "after T")
        while True:
            dims: list[int] = []
            if not self.eat(")"):
                while True:
                    if self.eat("*"):
                        dims.append(Tile.COMBINE)
                    else:
                        start = self.pos
                        size = self.integer("as tile dimension")
                        if size < 0:
                            raise self.error("tile dimensions must be >= 0 or '*'", start)
                        dims.append(size)
                    if not self.eat(","):
                        break
                self.expect(")", "to end tile")
            tiles.append(Tile(tuple(dims)))
            if not self.eat("("):
                return tuple(tiles)

    def split_configs(self) -> tuple[SplitConfig, ...]:
        configs: list[SplitConfig] = []
        self.expect("(", "after SC")
        while True:
            dimension = self.integer("as split dimension")
            self.expect(":", "after split dimension")
            configs.append(SplitConfig(dimension, self.int_list(")", "split indices")))
            if not self.eat("("):
                return tuple(configs)


# ----------------------------------------------------------------------------
# Equality (xla-semantics §7: Shape::Equal and the ShapeUtil wrappers)
# ----------------------------------------------------------------------------


def _equal(
    a: Shape,
    b: Shape,
    *,
    ignore_element_type: bool = False,
    ignore_fp_precision: bool = False,
    ignore_dimensions: bool = False,
    ignore_layout: bool = False,
    ignore_dynamic_dimension: bool = False,
) -> bool:
    """``Shape::Equal`` with its ignore flags; a missing layout is the default one."""
    if a.tuple_shapes is not None:
        return (
            b.tuple_shapes is not None
            and len(a.tuple_shapes) == len(b.tuple_shapes)
            and all(
                _equal(
                    x, y,
                    ignore_element_type=ignore_element_type,
                    ignore_fp_precision=ignore_fp_precision,
                    ignore_dimensions=ignore_dimensions,
                    ignore_layout=ignore_layout,
                    ignore_dynamic_dimension=ignore_dynamic_dimension,
                )
                for x, y in zip(a.tuple_shapes, b.tuple_shapes)
            )
        )  # fmt: skip
    if a.buffer or b.buffer:
        # XLA compares buffer contents with plain operator==, whatever the flags.
        return a.buffer and b.buffer and shapes_equal(replace(a, buffer=False), replace(b, buffer=False))
    if not a.is_array:
        return a.element_type is b.element_type
    if not b.is_array:
        return False
    if not ignore_element_type and a.element_type is not b.element_type:
        both_float = a.element_type.is_floating and b.element_type.is_floating  # type: ignore[union-attr]
        if not (ignore_fp_precision and both_float):
            return False
    if len(a.dimensions) != len(b.dimensions):
        return False
    if not ignore_dimensions:
        for da, db, dyn_a, dyn_b in zip(a.dimensions, b.dimensions, a.dynamic, b.dynamic):
            if ignore_dynamic_dimension and (
                (dyn_a and da == UNBOUNDED_SIZE) or (dyn_b and db == UNBOUNDED_SIZE)
            ):
                continue
            if da != db:
                return False
    if not ignore_layout:
        rank = len(a.dimensions)
        la = (a.layout or _default_layout(rank)).equality_key()
        lb = (b.layout or _default_layout(rank)).equality_key()
        if la != lb:
            return False
    return ignore_dynamic_dimension or a.dynamic == b.dynamic


def shapes_equal(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::Equal``: exact element type, dimensions, dynamic flags and layout."""
    return _equal(a, b)


def shapes_equal_ignoring_fp_precision(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::EqualIgnoringFpPrecision``: any two float types match; still layout-sensitive."""
    return _equal(a, b, ignore_fp_precision=True)


def shapes_compatible(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::Compatible``: ignores layouts and dynamic flags (``?`` matches any size)."""
    return _equal(a, b, ignore_layout=True, ignore_dynamic_dimension=True)


def shapes_compatible_ignoring_fp_precision(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::CompatibleIgnoringFpPrecision``: as compatible, and any float matches any float."""
    return _equal(a, b, ignore_fp_precision=True, ignore_layout=True, ignore_dynamic_dimension=True)


def shapes_compatible_kind(a: Shape, b: Shape) -> bool:
    """``ShapeUtil::CompatibleKind``: same tuple structure and ranks only."""
    return _equal(
        a, b,
        ignore_element_type=True,
        ignore_dimensions=True,
        ignore_layout=True,
        ignore_dynamic_dimension=True,
    )  # fmt: skip


def byte_size(shape: Shape) -> int:
    """Bytes of all array leaves: ``ceil(elements * bit_width / 8)`` per array.

    Token and opaque leaves are 0; tuples add no pointer table (unlike XLA's
    ``ByteSizeOf``), so this measures data only.
    """
    if shape.tuple_shapes is not None:
        return sum(byte_size(s) for s in shape.tuple_shapes)
    et = shape.element_type
    assert et is not None
    if not et.is_array_type:
        return 0
    return (shape.element_count * et.bit_width + 7) // 8
