"""Message classes built at run time from a schema held as plain data.

A ``FileDescriptorProto`` is encoded here directly (a handful of fields of
``descriptor.proto``), so making classes needs neither ``descriptor_pb2`` nor the
Python descriptor machinery: with the ``upb`` runtime the classes come straight
from its C extension, which starts several times faster than importing
``descriptor_pool``. Other runtimes take the public ``descriptor_pool`` /
``message_factory`` route.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..plain import Record

# FieldDescriptorProto.Type / .Label values.
TYPE_NUMBERS = {
    "double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7,
    "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16,
    "sint32": 17, "sint64": 18,
}  # fmt: skip
TYPE_MESSAGE, TYPE_ENUM, TYPE_BYTES = 11, 14, 12
LABEL_OPTIONAL, LABEL_REPEATED = 1, 3


class FieldSpec(Record):
    """One field: `type_name` is ".package.Outer.Inner" for messages and enums, `oneof`
    a real oneof's name, `optional` proto3 ``optional`` (a synthetic oneof)."""

    __slots__ = ("name", "number", "type", "type_name", "repeated", "oneof", "optional")

    def __init__(self, name: str, number: int, type: int, type_name: str = "", repeated: bool = False,  # noqa: A002
                 oneof: str = "", optional: bool = False) -> None:
        self.name = name
        self.number = number
        self.type = type
        self.type_name = type_name
        self.repeated = repeated
        self.oneof = oneof
        self.optional = optional


class MessageSpec:
    """A message (`name` is "Outer.Inner" when nested) and its fields. (Not a `Record`:
    its `fields` are a field, not `Record.fields()`.)"""

    __slots__ = ("name", "fields")

    def __init__(self, name: str, fields: list[FieldSpec] | None = None) -> None:
        self.name = name
        self.fields = [] if fields is None else fields


class EnumSpec:
    """An enum and its (name, number) values."""

    __slots__ = ("name", "values")

    def __init__(self, name: str, values: list[tuple[str, int]] | None = None) -> None:
        self.name = name
        self.values = [] if values is None else values


# ------------------------------------------------------------------------------------------
# Wire encoding of descriptor.proto


def varint(value: int) -> bytes:
    """Base-128 varint; a negative value as its 64-bit two's complement (as int64 fields)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def length_delimited(number: int, payload: bytes) -> bytes:
    """Field ``number`` holding ``payload`` (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _str(number: int, text: str) -> bytes:
    return length_delimited(number, text.encode("utf-8"))


def varint_field(number: int, value: int) -> bytes:
    """Field ``number`` holding ``value`` (wire type 0)."""
    return varint(number << 3) + varint(value)


def _field(spec: FieldSpec, oneof_index: int | None) -> bytes:
    # Constant parts are precomputed: a `.pb` run encodes some 650 fields before it reads
    # anything.
    out = _str(1, spec.name) + _NUMBER_TAG + varint(spec.number) + _LABELS[spec.repeated] + _TYPES[spec.type]
    if spec.type_name:
        out += _str(6, spec.type_name)
    if oneof_index is not None:
        out += _ONEOF_TAG + varint(oneof_index)
    if spec.optional:
        out += _PROTO3_OPTIONAL
    return out


_NUMBER_TAG, _ONEOF_TAG = varint(3 << 3), varint(9 << 3)
_LABELS = {False: varint_field(4, LABEL_OPTIONAL), True: varint_field(4, LABEL_REPEATED)}
_TYPES = {number: varint_field(5, number) for number in range(1, 19)}
_PROTO3_OPTIONAL = varint_field(17, 1)


def _enum(spec: EnumSpec) -> bytes:
    parts = [_str(1, spec.name.rpartition(".")[2])]
    for name, number in spec.values:
        parts.append(length_delimited(2, _str(1, name) + varint_field(2, number)))
    return b"".join(parts)


def encode_file(name: str, package: str, messages: Iterable[MessageSpec], enums: Iterable[EnumSpec]) -> bytes:
    """A serialized proto3 ``FileDescriptorProto`` (nested names as ``Outer.Inner``)."""
    children: dict[str, list[MessageSpec]] = {}
    for spec in messages:
        children.setdefault(spec.name.rpartition(".")[0], []).append(spec)
    nested_enums: dict[str, list[EnumSpec]] = {}
    for enum in enums:
        nested_enums.setdefault(enum.name.rpartition(".")[0], []).append(enum)

    def encode(spec: MessageSpec) -> bytes:
        real = list(dict.fromkeys(f.oneof for f in spec.fields if f.oneof))
        oneofs = {oneof: k for k, oneof in enumerate(real)}
        parts = [_str(1, spec.name.rpartition(".")[2])]
        for f in spec.fields:
            if f.oneof:
                index: int | None = oneofs[f.oneof]
            elif f.optional:  # a synthetic oneof, declared after the real ones
                index = len(real)
                real.append("_" + f.name)
            else:
                index = None
            parts.append(length_delimited(2, _field(f, index)))
        parts.extend(length_delimited(3, encode(child)) for child in children.get(spec.name, ()))
        parts.extend(length_delimited(4, _enum(enum)) for enum in nested_enums.get(spec.name, ()))
        parts.extend(length_delimited(8, _str(1, oneof)) for oneof in real)
        return b"".join(parts)

    parts = [_str(1, name), _str(2, package)]
    parts.extend(length_delimited(4, encode(spec)) for spec in children.get("", ()))
    parts.extend(length_delimited(5, _enum(enum)) for enum in nested_enums.get("", ()))
    parts.append(_str(12, "proto3"))
    return b"".join(parts)


# ------------------------------------------------------------------------------------------
# Classes


class MessageClasses(dict):
    """Message classes of one serialized file by name (``Outer.Inner`` for nested ones),
    each made on first use."""

    def __init__(self, serialized: bytes, package: str) -> None:
        super().__init__()
        self._package = package
        try:
            from google._upb import _message  # the C runtime: no Python descriptor layer
            from google.protobuf import message

            self._pool = _message.DescriptorPool()
            self._pool.AddSerializedFile(serialized)
            self._make = lambda d: _message.MessageMeta(d.name, (message.Message,), {"DESCRIPTOR": d, "__module__": None})
        except (ImportError, AttributeError, TypeError):
            from google.protobuf import descriptor_pool, message_factory

            self._pool = descriptor_pool.DescriptorPool()
            self._pool.AddSerializedFile(serialized)
            self._make = message_factory.GetMessageClass

    def __missing__(self, name: str) -> Any:
        cls = self[name] = self._make(self._pool.FindMessageTypeByName(f"{self._package}.{name}"))
        return cls
