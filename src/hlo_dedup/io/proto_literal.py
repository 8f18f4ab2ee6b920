"""XLA's text of a ``LiteralProto``: the operand of ``constant(...)`` and custom-call
``literal=`` (``LiteralBase::PrintWithoutShapeOneline`` / ``PrintWithLayoutOneline``).

Elements are stored in the proto in the literal's layout order; they print in
logical row-major order, in XLA's nested-brace form, each element formatted as
``LiteralBase::GetAsString`` does.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Callable, Sequence

from ..ir.shape import PrimitiveType, Shape
from .proto_values import NARROW_FLOATS, InvalidProto, UnsupportedProto, f32_text, f64_text, shape_of, without_layout

_P = PrimitiveType

# LiteralProto field holding each element type, and how its values decode.
_BYTE_FIELDS: dict[PrimitiveType, str] = {
    _P.S8: "s8s", _P.U8: "u8s", _P.S4: "s4s", _P.U4: "u4s", _P.S2: "s2s", _P.U2: "u2s",
    _P.S1: "s1s", _P.U1: "u1s", _P.F8E5M2: "f8e5m2s", _P.F8E4M3: "f8e4m3s",
    _P.F8E4M3FN: "f8e4m3fns", _P.F8E4M3B11FNUZ: "f8e4m3b11fnuzs", _P.F8E3M4: "f8e3m4s",
    _P.F8E5M2FNUZ: "f8e5m2fnuzs", _P.F8E4M3FNUZ: "f8e4m3fnuzs", _P.F8E8M0FNU: "f8e8m0fnus",
    _P.F4E2M1FN: "f4e2m1fns", _P.F6E3M2FN: "f6e3m2fns", _P.F6E2M3FN: "f6e2m3fns",
}  # fmt: skip
_SUB_BYTE_BITS = {_P.S4: 4, _P.U4: 4, _P.S2: 2, _P.U2: 2, _P.S1: 1, _P.U1: 1}
_SCALAR_FIELDS = {
    _P.S32: "s32s", _P.S64: "s64s", _P.U32: "u32s", _P.U64: "u64s", _P.F32: "f32s", _P.F64: "f64s",
}


def _int_texts(values: Sequence[int]) -> list[str]:
    return [str(v) for v in values]


def _sub_byte(bits: int, signed: bool) -> Callable[[bytes], list[str]]:
    mask = (1 << bits) - 1
    sign = 1 << (bits - 1)

    def decode(data: bytes) -> list[str]:
        if signed:
            return [str((b & mask) - ((b & sign) << 1)) for b in data]
        return [str(b & mask) for b in data]

    return decode


def _narrow(pt: PrimitiveType) -> Callable[[bytes], list[str]]:
    fmt = NARROW_FLOATS[pt]
    table = [fmt.text(b) for b in range(256)] if pt not in (_P.F16, _P.BF16) else None

    def decode(data: bytes) -> list[str]:
        if table is not None:
            return [table[b] for b in data]
        if len(data) % 2:
            raise InvalidProto(f"{pt.value} literal data has an odd byte count")
        return [fmt.text(v) for v in struct.unpack(f"<{len(data) // 2}H", data)]

    return decode


def _element_texts(proto: Any, pt: PrimitiveType, count: int, rank: int) -> list[str]:
    """Every element of an array literal as text, in storage order."""
    if pt is _P.PRED:
        values = proto.preds
        texts = ["1" if v else "0" for v in values] if rank else ["true" if v else "false" for v in values]
    elif pt in _SCALAR_FIELDS:
        values = getattr(proto, _SCALAR_FIELDS[pt])
        if pt is _P.F32:
            texts = [f32_text(v) for v in values]
        elif pt is _P.F64:
            texts = [f64_text(v) for v in values]
        else:
            texts = _int_texts(values)
    elif pt is _P.S8:
        data = proto.s8s
        texts = _int_texts(struct.unpack(f"<{len(data)}b", data))
    elif pt is _P.U8:
        texts = _int_texts(proto.u8s)
    elif pt in _SUB_BYTE_BITS:
        texts = _sub_byte(_SUB_BYTE_BITS[pt], pt.is_signed_integral)(getattr(proto, _BYTE_FIELDS[pt]))
    elif pt in (_P.S16, _P.U16):
        data = proto.s16s if pt is _P.S16 else proto.u16s
        if len(data) % 2:
            raise InvalidProto(f"{pt.value} literal data has an odd byte count")
        texts = _int_texts(struct.unpack(f"<{len(data) // 2}{'h' if pt is _P.S16 else 'H'}", data))
    elif pt in (_P.F16, _P.BF16):
        texts = _narrow(pt)(proto.f16s if pt is _P.F16 else proto.bf16s)
    elif pt in _BYTE_FIELDS:
        texts = _narrow(pt)(getattr(proto, _BYTE_FIELDS[pt]))
    elif pt in (_P.C64, _P.C128):
        values = proto.c64s if pt is _P.C64 else proto.c128s
        part = f32_text if pt is _P.C64 else f64_text
        texts = [f"({part(values[i])}, {part(values[i + 1])})" for i in range(0, len(values), 2)]
    else:
        raise UnsupportedProto("LiteralProto", f"{pt.value} literals")
    if len(texts) != count:
        raise InvalidProto(f"{pt.value} literal holds {len(texts)} values, its shape needs {count}")
    return texts


def _logical_order(texts: list[str], dims: tuple[int, ...], minor_to_major: tuple[int, ...]) -> list[str]:
    """Storage order (layout) to row-major order."""
    rank = len(dims)
    if rank <= 1 or minor_to_major == tuple(range(rank - 1, -1, -1)):
        return texts
    strides = [0] * rank
    stride = 1
    for d in minor_to_major:
        strides[d] = stride
        stride *= dims[d]
    out: list[str] = []
    index = [0] * rank

    def walk(axis: int, offset: int) -> None:
        if axis == rank:
            out.append(texts[offset])
            return
        step = strides[axis]
        for i in range(dims[axis]):
            walk(axis + 1, offset + i * step)

    walk(0, 0)
    del index
    return out


def _dense_text(texts: list[str], dims: tuple[int, ...]) -> str:
    """``DenseArrayPrintHelper`` with ``oneline``: nested braces, XLA's spacing and
    ``/*iN=M*/`` markers for rank > 3."""
    rank = len(dims)
    if rank == 0:
        return texts[0]
    if rank == 1:
        return "{" + ", ".join(texts) + "}"
    out: list[str] = []
    pos = 0

    def walk(depth: int, accum: list[int]) -> None:
        nonlocal pos
        size = dims[depth]
        innermost = depth == rank - 1
        if innermost:
            out.append("{" if size <= 1 else "{ ")
            out.append(", ".join(texts[pos : pos + size]))
            pos += size
            out.append("}" if size <= 1 else " }")
            return
        if rank > 3 and accum:
            out.append(f"{{ /*i{len(accum) - 1}={accum[-1]}*/" + (" " if size > 0 else ""))
        else:
            out.append("{ ")
        for i in range(size):
            accum.append(i)
            walk(depth + 1, accum)
            accum.pop()
            if i < size - 1:
                out.append(", ")
        out.append(" }")

    walk(0, [])
    return "".join(out)


def _array_text(proto: Any, shape: Shape) -> str:
    pt = shape.element_type
    assert pt is not None
    if shape.is_dynamic:
        raise UnsupportedProto("LiteralProto.dynamic_sizes", "dynamic literals")
    if shape.layout is None:
        raise InvalidProto("literal shape has no layout")
    if shape.layout.tiles:
        raise UnsupportedProto("LiteralProto.shape.layout.tiles", "tiled literals")
    dims = shape.dimensions
    count = math.prod(dims)
    texts = _element_texts(proto, pt, count, len(dims))
    return _dense_text(_logical_order(texts, dims, shape.layout.minor_to_major), dims)


def _print(proto: Any, shape: Shape, with_shape: bool) -> str:
    if shape.tuple_shapes is not None:
        elements = proto.tuple_literals
        if len(elements) != len(shape.tuple_shapes):
            raise InvalidProto("tuple literal element count differs from its shape")
        parts = [_print(e, s, with_shape) for e, s in zip(elements, shape.tuple_shapes)]
        return "( " + ", ".join(parts) + " )"
    if shape.element_type is _P.TOKEN:
        return "token"
    if shape.element_type is _P.OPAQUE:
        raise UnsupportedProto("LiteralProto", "opaque literals")
    body = _array_text(proto, shape)
    return f"{shape.to_text()} {body}" if with_shape else body


def literal_text(proto: Any) -> str:
    """``PrintWithoutShapeOneline``: the operand of ``constant(...)``."""
    if not proto.HasField("shape"):
        raise InvalidProto("literal has no shape")
    return _print(proto, shape_of(proto.shape), with_shape=False)


def literal_with_shape_text(proto: Any) -> str:
    """``PrintWithLayoutOneline``: custom-call ``literal=``."""
    if not proto.HasField("shape"):
        raise InvalidProto("literal has no shape")
    return _print(proto, shape_of(proto.shape), with_shape=True)


__all__ = ["literal_text", "literal_with_shape_text", "without_layout"]
