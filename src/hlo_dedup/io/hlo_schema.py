"""The HLO proto schema, for text protos (pbtxt) and the proto printer's message classes.

Text format names every field, so reading or writing a `pbtxt` module needs all of them.
jaxlib ships no `hlo_pb2`; `hlo_schema.txt` beside this module lists the messages and enums
reachable from `xla.HloSnapshot` (field names, numbers, types, labels and oneofs) as jaxlib
0.10.2 was built with them (OpenXLA's `xla/service/hlo.proto` and `xla/xla_data.proto`,
Apache-2.0). That table is generated, not hand-written: `tests/io/gen_hlo_schema.py` reads
it from the descriptors embedded in jaxlib, and `tests/io/test_formats.py` checks it is what
the generator writes and that text protos round-trip through jaxlib with it.

Notation (a subset of .proto, one item per line; `#` starts a comment line): `enum NAME`
then `VALUE = N` lines; `message NAME` then `[repeated |optional |oneof ONEOF ]TYPE FIELD = N`
lines. Nested types are written `Outer.Inner`. Map fields appear as their repeated
`...Entry` messages, which read and write the same in text and binary form.
"""

from __future__ import annotations

import functools
from typing import Any

from .descriptors import TYPE_ENUM, TYPE_MESSAGE, TYPE_NUMBERS, EnumSpec, FieldSpec, MessageSpec, encode_file


def package_data(name: str) -> bytes:
    """A generated file shipped beside this module, read through this package's loader
    (`importlib.resources` would cost a `.pb` run's start-up more than reading it: it
    imports zipfile, tempfile and more)."""
    import pkgutil

    data = pkgutil.get_data(__package__, name)
    if data is None:
        raise FileNotFoundError(f"{name} is missing from the installed package")
    return data


@functools.lru_cache(maxsize=None)
def schema_text() -> str:
    """The generated table (`hlo_schema.txt`, package data)."""
    return package_data("hlo_schema.txt").decode("utf-8")


@functools.lru_cache(maxsize=None)
def specs() -> tuple[tuple[MessageSpec, ...], tuple[EnumSpec, ...]]:
    """The table as message and enum specs (package ``xla``; nested names ``Outer.Inner``)."""
    messages: list[MessageSpec] = []
    enums: list[EnumSpec] = []
    for line in schema_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith(" "):
            kind, name = line.split()
            if kind == "enum":
                enums.append(EnumSpec(name))
            else:
                messages.append(MessageSpec(name))
            current = kind
            continue
        decl, _, number = line.partition("=")
        if current == "enum":
            enums[-1].values.append((decl.strip(), int(number)))
            continue
        words = decl.split()
        field = FieldSpec(words[-1], int(number), 0)
        if words[0] == "repeated":
            field.repeated = True
        elif words[0] == "optional":
            field.optional = True
        elif words[0] == "oneof":
            field.oneof = words[1]
        type_text = words[-2]
        messages[-1].fields.append(field)
        field.type = TYPE_NUMBERS.get(type_text, 0)
        if not field.type:
            field.type_name = ".xla." + type_text
    enum_names = {e.name for e in enums}
    for msg in messages:
        for field in msg.fields:
            if field.type_name:
                field.type = TYPE_ENUM if field.type_name[5:] in enum_names else TYPE_MESSAGE
    return tuple(messages), tuple(enums)


@functools.lru_cache(maxsize=None)
def file_descriptor_proto() -> Any:
    """A ``descriptor_pb2.FileDescriptorProto`` (package ``xla``) built from the table."""
    from google.protobuf import descriptor_pb2

    messages, enums = specs()
    return descriptor_pb2.FileDescriptorProto.FromString(
        encode_file("hlo_dedup/hlo_schema.proto", "xla", messages, enums)
    )
