"""The descriptor files the proto reader encodes itself (`hlo_dedup.io.descriptors`) are what
protobuf's own descriptor API builds from the same message specs, and protobuf accepts them."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool

from hlo_dedup.io import hlo_schema, proto_fields
from hlo_dedup.io.descriptors import TYPE_ENUM, TYPE_MESSAGE, TYPE_NUMBERS, EnumSpec, FieldSpec, MessageSpec, encode_file


def built_by_protobuf(name: str, package: str, messages, enums) -> descriptor_pb2.FileDescriptorProto:  # type: ignore[no-untyped-def]
    """The same file through `descriptor_pb2`'s message API: messages and enums nested by
    their dotted names, real oneofs declared first, then one synthetic oneof per proto3
    `optional` field."""
    file = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    built: dict[str, descriptor_pb2.DescriptorProto] = {}
    for spec in sorted(messages, key=lambda m: m.name.count(".")):  # parents before children
        parent, _, short = spec.name.rpartition(".")
        message = (built[parent].nested_type if parent else file.message_type).add(name=short)
        built[spec.name] = message
        real = list(dict.fromkeys(f.oneof for f in spec.fields if f.oneof))
        synthetic = ["_" + f.name for f in spec.fields if f.optional]
        for f in spec.fields:
            field = message.field.add(name=f.name, number=f.number, type=f.type)
            field.label = field.LABEL_REPEATED if f.repeated else field.LABEL_OPTIONAL
            if f.type_name:
                field.type_name = f.type_name
            if f.oneof:
                field.oneof_index = real.index(f.oneof)
            elif f.optional:
                field.oneof_index = len(real) + synthetic.index("_" + f.name)
                field.proto3_optional = True
        for oneof in real + synthetic:
            message.oneof_decl.add(name=oneof)
    for enum_spec in enums:
        parent, _, short = enum_spec.name.rpartition(".")
        enum = (built[parent].enum_type if parent else file.enum_type).add(name=short)
        for value, number in enum_spec.values:
            enum.value.add(name=value, number=number)
    return file


def assert_encoded_as_protobuf_builds_it(name: str, package: str, messages, enums) -> None:  # type: ignore[no-untyped-def]
    ours = descriptor_pb2.FileDescriptorProto.FromString(encode_file(name, package, messages, enums))
    assert ours == built_by_protobuf(name, package, messages, enums)
    descriptor_pool.DescriptorPool().Add(ours)  # and protobuf takes it as a valid file


def test_the_hlo_schema_encodes_as_protobuf_builds_it() -> None:
    messages, enums = hlo_schema.specs()
    assert len(messages) > 50 and any("." in m.name for m in messages)  # nested messages included
    assert_encoded_as_protobuf_builds_it("hlo_dedup/hlo_schema.proto", "xla", messages, enums)


def test_oneofs_and_optionals_interleaved_keep_their_indices() -> None:
    """Synthetic oneofs (proto3 `optional`) come after every real oneof, whatever the field
    order, and nested messages and enums land in their parent."""
    int64, string = TYPE_NUMBERS["int64"], TYPE_NUMBERS["string"]
    messages = [
        MessageSpec("Outer", [
            FieldSpec("a", 1, int64, optional=True),
            FieldSpec("b", 2, string, oneof="x"),
            FieldSpec("c", 3, int64, optional=True),
            FieldSpec("d", 4, TYPE_MESSAGE, ".p.Outer.Inner", oneof="x"),
            FieldSpec("e", 5, int64, oneof="y"),
            FieldSpec("f", 6, int64, repeated=True),
        ]),
        MessageSpec("Outer.Inner", [FieldSpec("g", 1, TYPE_ENUM, ".p.Outer.Kind", optional=True)]),
        MessageSpec("Other", [FieldSpec("h", 200_000, TYPE_MESSAGE, ".p.Outer", repeated=True)]),
    ]  # fmt: skip
    enums = [EnumSpec("Outer.Kind", [("ZERO", 0), ("BIG", 1 << 20)]), EnumSpec("Top", [("T", 0)])]
    assert_encoded_as_protobuf_builds_it("t.proto", "p", messages, enums)


def test_the_shipped_supported_schema_is_the_one_the_table_encodes_to() -> None:
    """A `.pb` run reads the supported schema as shipped bytes: they must be what the table
    and `SUPPORTED` encode to now (else run tests/io/gen_supported_schema.py), and a file
    protobuf takes."""
    shipped = proto_fields.shipped_supported_file()
    assert shipped == proto_fields.supported_file(), "stale: run python tests/io/gen_supported_schema.py"
    descriptor_pool.DescriptorPool().Add(descriptor_pb2.FileDescriptorProto.FromString(shipped))
