"""XLA's text for the values inside an ``HloModuleProto``: shapes, literals, numbers,
strings, shardings, replica groups, windows and the other attribute payloads.

Each function takes a decoded proto message (the classes of
:mod:`hlo_dedup.io.proto`) and returns exactly what XLA's printer writes for it
after ``HloModule::CreateFromProto``. Where XLA would normalise a value on load in
a way this module does not reproduce, it raises :class:`UnsupportedProto` naming
the field instead of guessing.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any, Callable, Iterable

from ..ir.shape import Layout, PrimitiveType, Shape, SplitConfig, Tile, UNBOUNDED_SIZE



class UnsupportedProto(ValueError):
    """The proto holds something this printer cannot render exactly as XLA would."""

    def __init__(self, field: str, why: str = "") -> None:
        self.field = field
        detail = f" ({why})" if why else ""
        super().__init__(f"cannot print HloModuleProto field {field} exactly as XLA does{detail}")


class InvalidProto(ValueError):
    """The proto is not a module XLA would load (a dangling id, a missing field)."""


# ------------------------------------------------------------------------------------------
# Enums (numbers from xla_data.proto / hlo.proto, as in hlo_dedup.io.hlo_schema)

PRIMITIVE_NUMBERS: dict[int, str] = {
    1: "PRED", 30: "S1", 26: "S2", 21: "S4", 2: "S8", 3: "S16", 4: "S32", 5: "S64",
    31: "U1", 27: "U2", 22: "U4", 6: "U8", 7: "U16", 8: "U32", 9: "U64",
    10: "F16", 11: "F32", 16: "BF16", 12: "F64", 19: "F8E5M2", 28: "F8E4M3",
    20: "F8E4M3FN", 23: "F8E4M3B11FNUZ", 29: "F8E3M4", 24: "F8E5M2FNUZ", 25: "F8E4M3FNUZ",
    32: "F4E2M1FN", 33: "F8E8M0FNU", 35: "F6E3M2FN", 36: "F6E2M3FN",
    15: "C64", 18: "C128", 13: "TUPLE", 14: "OPAQUE_TYPE", 17: "TOKEN", 34: "BUFFER",
}  # fmt: skip
TUPLE, OPAQUE_TYPE, TOKEN, BUFFER = 13, 14, 17, 34
_PRIMITIVES: dict[int, PrimitiveType] = {
    n: PrimitiveType[name.removesuffix("_TYPE")]
    for n, name in PRIMITIVE_NUMBERS.items()
    if name not in ("TUPLE", "BUFFER")
}
_OP_SHARDING_TYPES = {0: "REPLICATED", 1: "MAXIMAL", 2: "TUPLE", 3: "OTHER", 4: "MANUAL", 5: "UNKNOWN", 6: "UNREDUCED"}
INT64_MIN = -(2**63)


def primitive_type(number: int, field: str) -> PrimitiveType:
    try:
        return _PRIMITIVES[number]
    except KeyError:
        raise UnsupportedProto(field, f"element type {PRIMITIVE_NUMBERS.get(number, number)}") from None


# ------------------------------------------------------------------------------------------
# Shapes and layouts (printed by hlo_dedup.ir.shape, which follows Shape::Print)


def layout_of(proto: Any) -> Layout:
    """``Layout::CreateFromProto``."""
    tiles = tuple(
        Tile(tuple(Tile.COMBINE if d == INT64_MIN else d for d in t.dimensions)) for t in proto.tiles
    )
    index_type = proto.index_primitive_type
    pointer_type = proto.pointer_primitive_type
    return Layout(
        tuple(proto.minor_to_major),
        tiles=tiles,
        tail_padding_alignment=proto.tail_padding_alignment_in_elements or 1,
        index_primitive_type=primitive_type(index_type, "LayoutProto.index_primitive_type") if index_type else None,
        pointer_primitive_type=primitive_type(pointer_type, "LayoutProto.pointer_primitive_type") if pointer_type else None,
        element_size_in_bits=proto.element_size_in_bits,
        memory_space=proto.memory_space,
        split_configs=tuple(SplitConfig(s.dimension, tuple(s.split_indices)) for s in proto.split_configs),
        dynamic_shape_metadata_prefix_bytes=proto.dynamic_shape_metadata_prefix_bytes,
    )


def shape_of(proto: Any) -> Shape:
    """``Shape::FromProto``."""
    et = proto.element_type
    if et == TUPLE:
        return Shape.tuple_of([shape_of(s) for s in proto.tuple_shapes])
    if et == BUFFER:
        if len(proto.tuple_shapes) != 1:
            raise InvalidProto("a buffer shape holds one array shape")
        inner = shape_of(proto.tuple_shapes[0])
        if not inner.is_array:
            raise InvalidProto("a buffer shape holds one array shape")
        return Shape(inner.element_type, inner.dimensions, inner.dynamic, inner.layout, buffer=True)
    pt = primitive_type(et, "ShapeProto.element_type")
    if pt is PrimitiveType.TOKEN or pt is PrimitiveType.OPAQUE:
        return Shape(pt)
    dims = [UNBOUNDED_SIZE if d == INT64_MIN else d for d in proto.dimensions]
    dynamic = list(proto.is_dynamic_dimension)
    if dynamic and len(dynamic) != len(dims):
        raise InvalidProto(f"shape has {len(dims)} dimensions but {len(dynamic)} dynamic flags")
    layout = layout_of(proto.layout) if proto.HasField("layout") else None
    return Shape(pt, tuple(dims), tuple(dynamic), layout)


class ShapeText:
    """Shapes from ``ShapeProto`` bytes, printed with and without layout, memoised on the
    bytes (a tuple's elements too: the same few make up the big tuples)."""

    def __init__(self, decode: Callable[[str, bytes], Any], view: Callable[[str, bytes], Any]) -> None:
        self._decode = decode
        self._view = view
        self._shapes: dict[bytes, Shape] = {}
        self._with_layout: dict[bytes, str] = {}
        self._without: dict[bytes, str] = {}

    def proto(self, data: bytes) -> Any:
        return self._decode("ShapeProto", data)

    def shape(self, data: bytes) -> Shape:
        shape = self._shapes.get(data)
        if shape is None:
            proto = self._decode("ShapeProto", data)
            if proto.element_type == TUPLE:
                shape = Shape.tuple_of([self.shape(e) for e in self._view("ShapeProto", data).tuple_shapes])
            else:
                shape = shape_of(proto)
            self._shapes[data] = shape
        return shape

    def text(self, data: bytes) -> str:
        text = self._with_layout.get(data)
        if text is None:
            text = self._with_layout[data] = self.shape(data).to_text()
        return text

    def text_without_layout(self, data: bytes) -> str:
        text = self._without.get(data)
        if text is None:
            text = self._without[data] = without_layout(self.shape(data)).to_text()
        return text


def without_layout(shape: Shape) -> Shape:
    """``ShapeUtil::PrintHumanString``: the same shape, layouts dropped."""
    if shape.tuple_shapes is not None:
        return Shape.tuple_of([without_layout(s) for s in shape.tuple_shapes])
    if shape.layout is None:
        return shape
    return Shape(shape.element_type, shape.dimensions, shape.dynamic, buffer=shape.buffer)


def shape_index(index: Iterable[int]) -> str:
    """``ShapeIndex::ToString``."""
    return "{" + ",".join(map(str, index)) + "}"


# ------------------------------------------------------------------------------------------
# Numbers


def _f32_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _f64_bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def _nan_text(negative: bool, payload: int, quiet: int) -> str:
    text = "-nan" if negative else "nan"
    return text if payload == quiet else f"{text}(0x{payload:x})"


def f32_text(value: float) -> str:
    """``RoundTripFpToString(float)``: 6 significant digits, 9 when needed to round-trip."""
    if value != value:
        bits = _f32_bits(value)
        return _nan_text(bool(bits >> 31), bits & 0x7FFFFF, 0x400000)
    text = "%.6g" % value
    if struct.unpack("<f", struct.pack("<f", float(text)))[0] != value:
        text = "%.9g" % value
    return text


def f64_text(value: float) -> str:
    """``RoundTripFpToString(double)``: 15 significant digits, 17 when needed."""
    if value != value:
        bits = _f64_bits(value)
        return _nan_text(bool(bits >> 63), bits & 0xFFFFFFFFFFFFF, 0x8000000000000)
    text = "%.15g" % value
    if float(text) != value:
        text = "%.17g" % value
    return text


def float_attribute(value: float) -> str:
    """absl ``StrCat`` of a float attribute (``epsilon=``): 6 significant digits."""
    if value != value:
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return "%.6g" % value


class _MiniFloat:
    """A narrow float format decoded from its bits, printed with ``max_digits10`` digits."""

    def __init__(
        self, exponent_bits: int, mantissa_bits: int, bias: int, *, ieee: bool = False,
        finite_nan: int | None = None, nan_payload: tuple[int, int] | None = None,
        signed: bool = True, zero_is_nan_when_negative: bool = False, digits: int,
    ) -> None:  # fmt: skip
        self.e, self.m, self.bias = exponent_bits, mantissa_bits, bias
        self.ieee = ieee  # all-ones exponent: inf (mantissa 0) or nan
        self.finite_nan = finite_nan  # the one NaN encoding of a finite-only format (sign ignored)
        self.nan_payload = nan_payload  # (payload mask, quiet payload) if NaN payloads print
        self.signed = signed
        self.negative_zero_nan = zero_is_nan_when_negative  # FNUZ: 0x80 is NaN
        self.digits = digits

    def text(self, bits: int) -> str:
        e_bits, m_bits = self.e, self.m
        width = e_bits + m_bits + (1 if self.signed else 0)
        bits &= (1 << width) - 1
        negative = self.signed and bool(bits >> (e_bits + m_bits))
        magnitude = bits & ((1 << (e_bits + m_bits)) - 1)
        exponent = magnitude >> m_bits
        mantissa = magnitude & ((1 << m_bits) - 1)
        if self.negative_zero_nan and negative and magnitude == 0:
            return "-nan"  # printed from a double NaN with its sign bit set
        if self.finite_nan is not None and magnitude == self.finite_nan:
            return "-nan" if negative else "nan"
        if self.ieee and exponent == (1 << e_bits) - 1:
            if mantissa == 0:
                return "-inf" if negative else "inf"
            text = "-nan" if negative else "nan"
            if self.nan_payload is not None:
                mask, quiet = self.nan_payload
                payload = mantissa & mask
                if payload != quiet:
                    text += f"(0x{payload:x})"
            return text
        if exponent == 0 and m_bits:
            value = math.ldexp(mantissa, 1 - self.bias - m_bits)
        else:
            value = math.ldexp((1 << m_bits) | mantissa, exponent - self.bias - m_bits)
        if negative:
            value = -value
        return "%.*g" % (self.digits, value)


# max_digits10 of each type as ml_dtypes / Eigen define it.
NARROW_FLOATS: dict[PrimitiveType, _MiniFloat] = {
    PrimitiveType.F16: _MiniFloat(5, 10, 15, ieee=True, nan_payload=(0x3FF, 0x200), digits=5),
    PrimitiveType.BF16: _MiniFloat(8, 7, 127, ieee=True, nan_payload=(0x7F, 0x40), digits=4),
    PrimitiveType.F8E5M2: _MiniFloat(5, 2, 15, ieee=True, nan_payload=(0x3, 0x2), digits=3),
    PrimitiveType.F8E4M3: _MiniFloat(4, 3, 7, ieee=True, digits=3),
    PrimitiveType.F8E3M4: _MiniFloat(3, 4, 3, ieee=True, digits=3),
    PrimitiveType.F8E4M3FN: _MiniFloat(4, 3, 7, finite_nan=0x7F, digits=3),
    PrimitiveType.F8E4M3B11FNUZ: _MiniFloat(4, 3, 11, zero_is_nan_when_negative=True, digits=3),
    PrimitiveType.F8E5M2FNUZ: _MiniFloat(5, 2, 16, zero_is_nan_when_negative=True, digits=3),
    PrimitiveType.F8E4M3FNUZ: _MiniFloat(4, 3, 8, zero_is_nan_when_negative=True, digits=3),
    PrimitiveType.F8E8M0FNU: _MiniFloat(8, 0, 127, finite_nan=0xFF, signed=False, digits=3),
    PrimitiveType.F4E2M1FN: _MiniFloat(2, 1, 1, digits=3),
    PrimitiveType.F6E3M2FN: _MiniFloat(3, 2, 3, digits=3),
    PrimitiveType.F6E2M3FN: _MiniFloat(2, 3, 1, digits=3),
}


# ------------------------------------------------------------------------------------------
# Strings


def _escape_table() -> dict[int, str]:
    """``str.translate`` table of absl ``CEscape`` for code points 0-255, each standing
    for one byte of the UTF-8 text."""
    special = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}
    table = {}
    for b in range(256):
        if b in special:
            table[b] = special[b]
        elif not 0x20 <= b <= 0x7E:
            table[b] = f"\\{b:03o}"
    return table


_ESCAPES = _escape_table()


def escape(text: str) -> str:
    """absl ``CEscape`` of the UTF-8 bytes of ``text`` (as :func:`hlo_dedup.text.escape.c_escape`),
    with the byte loop done by ``str.translate``."""
    if text.isascii():
        if text.isprintable() and '"' not in text and "'" not in text and "\\" not in text:
            return text
        return text.translate(_ESCAPES)
    return text.encode("utf-8", "surrogateescape").decode("latin-1").translate(_ESCAPES)


_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\[^\n])*"')
_TRIVIA = re.compile(r"(?:[ \t\n\r]+|/\*.*?\*/|//[^\n\r]*)*", re.S)


def lexes_as_json_dict(text: str) -> bool:
    """XLA's ``LexesAsJsonDict``: ``{...}`` with braces balanced outside ``"..."``
    strings, and only whitespace or comments around it."""
    if "\x00" in text:
        return False
    pos = _TRIVIA.match(text).end()
    if pos >= len(text) or text[pos] != "{":
        return False
    depth = 0
    n = len(text)
    while pos < n:
        c = text[pos]
        if c == '"':
            m = _JSON_STRING.match(text, pos)
            if m is None:
                return False
            pos = m.end()
            continue
        pos += 1
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
    if depth != 0:
        return False
    return _TRIVIA.match(text, pos).end() == n


def raw_or_quoted(text: str) -> str:
    """A backend config or frontend attribute value: raw when it lexes as a JSON dict."""
    return text if lexes_as_json_dict(text) else '"' + escape(text) + '"'


def frontend_attributes(proto: Any) -> str:
    """``FrontendAttributesToString``: keys sorted, a later duplicate key wins."""
    entries = {e.key: e.value for e in proto.map}
    return "{" + ",".join(f"{k}={raw_or_quoted(entries[k])}" for k in sorted(entries)) + "}"


# OpMetadata fields in the order OpMetadataToString prints them, each with how its
# value prints (scheduling_name is quoted without escaping).
def _escaped(value: str) -> str:
    return '"' + escape(value) + '"'


_METADATA_FIELDS: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("op_type", _escaped), ("op_name", _escaped), ("source_file", _escaped),
    ("source_line", str), ("source_end_line", str), ("source_column", str), ("source_end_column", str),
    ("profile_type", lambda v: "{" + ",".join(map(str, v)) + "}"),
    ("deduplicated_name", _escaped), ("scheduling_name", lambda v: f'"{v}"'),
)  # fmt: skip


def op_metadata_parts(proto: Any) -> tuple[str, int, bool]:
    """``OpMetadataToString`` split for the stack-frame renumbering: the text of every
    set field but ``stack_frame_id`` (which XLA prints last), the frame id, and
    whether ``metadata={...}`` prints without a frame (op_type, op_name, source_file
    or scheduling_name set; ``source_line`` alone does not print)."""
    parts = []
    for field, text in _METADATA_FIELDS:
        value = getattr(proto, field)
        if value:
            parts.append(f"{field}={text(value)}")
    prints = bool(proto.op_type or proto.op_name or proto.source_file or proto.scheduling_name)
    return " ".join(parts), proto.stack_frame_id, prints


def op_metadata(proto: Any) -> str:
    """``OpMetadataToString``: the set fields, space separated, in XLA's order."""
    text, frame, _ = op_metadata_parts(proto)
    if frame:
        return f"{text} stack_frame_id={frame}" if text else f"stack_frame_id={frame}"
    return text


def original_value(proto: Any) -> str:
    """``OriginalValue::ToString``: the tuple tree its elements' shape indices describe,
    leaves ``{"name" {index}}`` (``{}`` when unknown), inner nodes ``(a, b)``."""
    if proto.is_synthetic_call:
        return "[synthetic_call]"
    root: dict[str, Any] = {"value": None, "children": {}}
    for element in proto.elements:
        node = root
        for i in element.shape_index:
            node = node["children"].setdefault(i, {"value": None, "children": {}})
        if element.HasField("original_array"):
            node["value"] = element.original_array

    def text(node: dict[str, Any]) -> str:
        children = node["children"]
        if not children:
            array = node["value"]
            if array is None:
                return "{}"
            index = " " + shape_index(array.shape_index) if len(array.shape_index) else ""
            return '{"' + array.instruction_name + '"' + index + "}"
        if min(children) < 0:
            raise InvalidProto("an original value has a negative shape index")
        empty: dict[str, Any] = {"value": None, "children": {}}
        return "(" + ", ".join(text(children.get(i, empty)) for i in range(max(children) + 1)) + ")"

    return text(root)
