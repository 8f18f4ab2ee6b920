"""Regenerate `src/hlo_dedup/io/hlo_schema.py` from the schema jaxlib itself was built with.

    python tests/io/gen_hlo_schema.py    # prints the table; paste it into hlo_schema.SCHEMA

jaxlib ships no `hlo_pb2` (shared/reference/ecosystem.md §2), but its C++ protobuf code embeds
the serialized `FileDescriptorProto`s of `xla/service/hlo.proto` and `xla/xla_data.proto`.
This development tool finds them in `libjax_common.so` (each is a FileDescriptorProto that
starts with its file name and ends with `syntax = "proto3"`), keeps the messages and enums
reachable from `HloSnapshot`, and prints them in the small `.proto`-like notation that
`hlo_dedup.io.hlo_schema` reads. It is not used at run time.
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf import descriptor_pb2

FILES = ("xla/xla_data.proto", "xla/service/hlo.proto")
ROOT = "xla.HloSnapshot"

SCALARS = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
    8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
    17: "sint32", 18: "sint64",
}


def jaxlib_library() -> Path:
    import jaxlib

    return Path(jaxlib.__file__).parent / "libjax_common.so"


def embedded_descriptor(data: bytes, name: str) -> descriptor_pb2.FileDescriptorProto:
    head = b"\x0a" + bytes([len(name)]) + name.encode()
    start = data.find(head)
    if start < 0:
        raise SystemExit(f"{name}: not found in jaxlib")
    tail = b"b\x06proto3"
    end = start
    while True:
        end = data.find(tail, end + 1)
        if end < 0:
            raise SystemExit(f"{name}: end not found")
        chunk = data[start : end + len(tail)]
        try:
            fd = descriptor_pb2.FileDescriptorProto.FromString(chunk)
        except Exception:
            continue
        if fd.SerializeToString() == chunk and fd.name == name:
            return fd


def collect(fds: list[descriptor_pb2.FileDescriptorProto]) -> tuple[dict, dict]:
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}
    enums: dict[str, descriptor_pb2.EnumDescriptorProto] = {}

    def walk(prefix: str, msg: descriptor_pb2.DescriptorProto) -> None:
        full = f"{prefix}.{msg.name}"
        messages[full] = msg
        for nested in msg.nested_type:
            walk(full, nested)
        for enum in msg.enum_type:
            enums[f"{full}.{enum.name}"] = enum

    for fd in fds:
        for msg in fd.message_type:
            walk(f".{fd.package}", msg)
        for enum in fd.enum_type:
            enums[f".{fd.package}.{enum.name}"] = enum
    return messages, enums


def main() -> None:
    data = jaxlib_library().read_bytes()
    fds = [embedded_descriptor(data, name) for name in FILES]
    messages, enums = collect(fds)
    keep_m: list[str] = []
    keep_e: set[str] = set()
    todo = ["." + ROOT]
    while todo:
        name = todo.pop()
        if name in keep_m:
            continue
        keep_m.append(name)
        for field in messages[name].field:
            if field.type == 11:
                if field.type_name not in messages:
                    raise SystemExit(f"{name}.{field.name}: {field.type_name} is outside {FILES}")
                todo.append(field.type_name)
            elif field.type == 14:
                keep_e.add(field.type_name)

    def short(type_name: str) -> str:
        return type_name.removeprefix(".xla.")

    out = sys.stdout
    for name in sorted(keep_e):
        out.write(f"enum {short(name)}\n")
        for value in enums[name].value:
            out.write(f"  {value.name} = {value.number}\n")
    for name in sorted(keep_m):
        msg = messages[name]
        out.write(f"message {short(name)}\n")
        for field in msg.field:
            if field.type in SCALARS:
                type_text = SCALARS[field.type]
            elif field.type in (11, 14):
                type_text = short(field.type_name)
            else:
                raise SystemExit(f"{name}.{field.name}: unsupported field type {field.type}")
            label = "repeated " if field.label == 3 else ""
            if field.HasField("oneof_index"):
                oneof = msg.oneof_decl[field.oneof_index].name
                label = "optional " if field.proto3_optional else f"oneof {oneof} "
            out.write(f"  {label}{type_text} {field.name} = {field.number}\n")


if __name__ == "__main__":
    main()
