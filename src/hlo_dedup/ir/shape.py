"""XLA shapes and layouts: the data model, its HLO-text printer, and XLA's
shape-equality rules (the text reader is `shape_reader`).

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
from typing import ClassVar

from ..plain import FrozenRecord, init_frozen


__all__ = [
    "UNBOUNDED_SIZE",
    "Layout",
    "PrimitiveType",
    "Shape",
    "SplitConfig",
    "Tile",
    "byte_size",
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

    # Members are singletons compared by identity: hashed by it too, in C. Enum's own hash
    # (of the member's name) is a Python call each time a shape or a pass's key is hashed.
    __hash__ = object.__hash__

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
PRIMITIVE_TYPES_BY_NAME: dict[str, PrimitiveType] = {t.value: t for t in PrimitiveType}


class Tile(FrozenRecord):
    """One ``(d0,d1,...)`` group of a ``T`` tiling; ``COMBINE`` stands for ``*``."""

    __slots__ = ("dimensions",)

    COMBINE: ClassVar[int] = -1

    def __init__(self, dimensions: tuple[int, ...]) -> None:
        init_frozen(self, dimensions)

    def to_text(self) -> str:
        return "(" + ",".join("*" if d == Tile.COMBINE else str(d) for d in self.dimensions) + ")"


class SplitConfig(FrozenRecord):
    """One ``(dimension:i0,i1,...)`` group of an ``SC`` layout field."""

    __slots__ = ("dimension", "split_indices")

    def __init__(self, dimension: int, split_indices: tuple[int, ...]) -> None:
        init_frozen(self, dimension, split_indices)

    def to_text(self) -> str:
        return f"({self.dimension}:{','.join(map(str, self.split_indices))})"


class Layout(FrozenRecord):
    """An array layout with every field of XLA's ``Layout`` that the text carries.

    ``dim_level_types`` holds the raw items of a ``D(...)`` field (e.g. ``"C+"``).
    Today's XLA parses but neither prints nor compares it, and neither do we.
    ``dynamic_shape_metadata_prefix_bytes`` is printed but, as in XLA's
    ``Layout::Equal``, not compared.
    """

    __slots__ = ("minor_to_major", "tiles", "tail_padding_alignment", "index_primitive_type",
                 "pointer_primitive_type", "element_size_in_bits", "memory_space", "split_configs",
                 "physical_shape", "dynamic_shape_metadata_prefix_bytes", "dim_level_types")

    def __init__(
        self,
        minor_to_major: tuple[int, ...],
        tiles: tuple[Tile, ...] = (),
        tail_padding_alignment: int = 1,
        index_primitive_type: PrimitiveType | None = None,
        pointer_primitive_type: PrimitiveType | None = None,
        element_size_in_bits: int = 0,
        memory_space: int = 0,
        split_configs: tuple[SplitConfig, ...] = (),
        physical_shape: Shape | None = None,
        dynamic_shape_metadata_prefix_bytes: int = 0,
        dim_level_types: tuple[str, ...] = (),
    ) -> None:
        init_frozen(self, minor_to_major, tiles, tail_padding_alignment, index_primitive_type, pointer_primitive_type,
                    element_size_in_bits, memory_space, split_configs, physical_shape,
                    dynamic_shape_metadata_prefix_bytes, dim_level_types)

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


class Shape(FrozenRecord):
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

    __slots__ = ("element_type", "dimensions", "dynamic", "layout", "tuple_shapes", "buffer")

    def __init__(
        self,
        element_type: PrimitiveType | None,
        dimensions: tuple[int, ...] = (),
        dynamic: tuple[bool, ...] = (),
        layout: Layout | None = None,
        tuple_shapes: tuple[Shape, ...] | None = None,
        buffer: bool = False,
    ) -> None:
        if tuple_shapes is not None:
            if element_type is not None or dimensions or layout is not None or buffer:
                raise ValueError("a tuple shape has only tuple_shapes")
        elif element_type is None:
            raise ValueError("a non-tuple shape needs an element type")
        else:
            if len(dynamic) != len(dimensions):
                if dynamic:
                    raise ValueError("dynamic flags must match the dimensions")
                dynamic = (False,) * len(dimensions)
            if not element_type.is_array_type and (dimensions or layout is not None or buffer):
                raise ValueError(f"{element_type.value} shapes have no dimensions or layout")
        init_frozen(self, element_type, dimensions, dynamic, layout, tuple_shapes, buffer)

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
            return self.replaced(layout=_default_layout(len(self.dimensions)))
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
        return a.buffer and b.buffer and shapes_equal(a.replaced(buffer=False), b.replaced(buffer=False))
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
    ``ByteSizeOf``), so this measures data only. A bounded dynamic dimension counts its
    bound (as XLA sizes its buffers); an array with an unbounded one (``?``) has no size
    before it runs and counts 0.
    """
    if shape.tuple_shapes is not None:
        return sum(byte_size(s) for s in shape.tuple_shapes)
    et = shape.element_type
    assert et is not None
    if not et.is_array_type or UNBOUNDED_SIZE in shape.dimensions:
        return 0
    return (shape.element_count * et.bit_width + 7) // 8
