"""hlo_dedup.io.formats / proto: format detection, the three proto containers, text protos."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hlo_dedup
from hlo_dedup.io import formats, proto
from hlo_dedup.io.proto_fields import message_classes
from hlo_dedup.io.formats import (
    FormatError,
    detect_format,
    module_texts_from_bytes,
    output_format_for,
    read_modules,
    write_module,
)
from hlo_dedup.text import HloParseError

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FSDP = DATA / "fsdp_shard_map.hlo"
JAX_MODULES = sorted(DATA.glob("*.hlo"))



def module_proto(xc, path: Path) -> bytes:
    return xc.hlo.hlo_module_from_text(path.read_text()).as_serialized_hlo_module_proto()


def field1(payload: bytes) -> bytes:
    from google.protobuf import wrappers_pb2

    return wrappers_pb2.BytesValue(value=payload).SerializeToString()


def containers(module: bytes) -> dict[str, bytes]:
    return {"HloModuleProto": module, "HloProto": field1(module), "HloSnapshot": field1(field1(module))}


# ---------------------------------------------------------------------------------------------
# Detection


def test_detect_format_by_extension_and_content() -> None:
    text = FSDP.read_bytes()
    assert detect_format("m.hlo", text) == "hlo"
    assert detect_format("m.txt", text) == "hlo"
    assert detect_format("-", text) == "hlo"
    assert detect_format("m.pb", text) == "pb"  # the extension wins where it is unambiguous
    assert detect_format("m.hlo.pb", b"") == "pb"
    assert detect_format("m.pbtxt", text) == "pbtxt"
    assert detect_format("m.textproto", b"") == "pbtxt"
    assert detect_format("graph.hlo", b"\n\x05jit_f\x12\x06main.2\x1a\x00") == "pb"
    assert detect_format("-", b'name: "jit_f"\ncomputations {\n') == "pbtxt"
    assert detect_format("-", b"# comment\nhlo_module {\n") == "pbtxt"
    assert detect_format("x", "HloModule m\n// caf\u00e9\n".encode()) == "hlo"
    assert detect_format("x", b"HloModule m\n// caf\xe9 \x01\n") == "hlo"  # not UTF-8, still text
    assert detect_format("x", b"\n\x05jit_f\x12\x06main.2\x1a\x40") == "pb"  # cut short: a proto


def test_texts_with_an_odd_byte_and_protos_are_told_apart(xc) -> None:
    """Every test module with one odd byte put anywhere in its first 4 KiB stays text; its
    HloModuleProto (whole, or cut after its first field) is a proto."""
    import random

    rng = random.Random(11)
    for path in sorted(DATA.parent.rglob("*.hlo")):
        text = path.read_bytes()
        for byte in (0x00, 0x01, 0x1B, 0x80, 0xE9, 0xFF):
            at = rng.randrange(min(len(text), 4096))
            assert detect_format("m.hlo", text[:at] + bytes([byte]) + text[at + 1 :]) == "hlo", (path, at)
        proto_bytes = module_proto(xc, path)
        assert detect_format("m.hlo", proto_bytes) == "pb"
        assert detect_format("m.hlo", proto_bytes[: len(proto_bytes) // 2]) == "pb"


def test_output_format_for() -> None:
    assert output_format_for("-") == "hlo"
    assert output_format_for("out.hlo") == "hlo"
    assert output_format_for("out.hlo_module.pb") == "pb"
    assert output_format_for("out.pbtxt") == "pbtxt"
    assert output_format_for("out.hlo", "pb") == "pb"
    with pytest.raises(FormatError):
        output_format_for("out.hlo", "json")


# ---------------------------------------------------------------------------------------------
# Binary containers


def test_the_module_is_located_in_each_container(xc) -> None:
    module = module_proto(xc, FSDP)
    for name, data in containers(module).items():
        container, found = proto.locate_module(data)
        assert (container, bytes(found)) == (name, module)


def _tiny_module(name: bytes) -> bytes:
    """An HloModuleProto as far as the container probe looks: a name and one named computation."""
    from hlo_dedup.io.descriptors import length_delimited

    return length_delimited(1, name) + length_delimited(3, length_delimited(1, b"c"))


@pytest.mark.parametrize("layout", ["plain", "other fields around", "module twice", "a group beside it"])
def test_an_hloproto_module_is_located_in_place_as_protobuf_reads_it(layout: str) -> None:
    """An HloProto's module is a view of the input (not a copy held beside it while it is
    printed), and it is the record protobuf reads: the last of field 1, other fields skipped."""
    from hlo_dedup.io.descriptors import length_delimited, varint, varint_field

    first, module = _tiny_module(b"first"), _tiny_module(b"kept")
    data = {
        "plain": length_delimited(1, module),
        "other fields around": varint_field(2, 7) + length_delimited(3, b"x" * 300) + length_delimited(1, module)
        + varint(4 << 3 | 1) + b"8 bytes!" + varint(5 << 3 | 5) + b"four",
        "module twice": length_delimited(1, first) + length_delimited(1, module),
        "a group beside it": length_delimited(1, module) + varint(6 << 3 | 3) + varint_field(1, 1) + varint(6 << 3 | 4),
    }[layout]
    container, located = proto.locate_module(data)
    assert (container, bytes(located)) == ("HloProto", module)
    assert isinstance(located, memoryview) == (layout != "a group beside it")  # a group: copied out by protobuf


_RECORDS = st.lists(st.tuples(st.sampled_from([1, 1, 1, 2, 17, 2**20]), st.sampled_from([2, 2, 2, 0, 1, 5]),
                               st.binary(max_size=12), st.integers(0, 2**64 - 1)), max_size=8)
_TAILS = st.sampled_from([b"", b"", b"", b"\xff", b"\x0a\x05ab", b"\x08"])  # nothing, broken records


@given(_RECORDS, _TAILS)
def test_the_in_place_module_is_the_bytes_protobuf_reads(records, tail: bytes) -> None:  # type: ignore[no-untyped-def]
    """Any top-level records (and trailing junk, which protobuf may refuse): where protobuf
    decodes the HloProto, the module seen in place is its `hlo_module`, byte for byte."""
    from hlo_dedup.io.descriptors import length_delimited, varint, varint_field

    parts = []
    for number, wire, payload, value in records:
        if wire == 0:
            parts.append(varint_field(number, value))
        elif wire == 2:
            parts.append(length_delimited(number, payload))
        else:
            parts.append(varint(number << 3 | wire) + (payload * 8)[: 8 if wire == 1 else 4].ljust(8 if wire == 1 else 4, b"."))
    data = b"".join(parts) + tail
    decoded = proto._decode(proto._wire_classes()["HloProto"], data)
    found = proto._module_bytes_in("HloProto", data)
    assert (found is None) == (decoded is None)
    if decoded is not None:
        assert bytes(found) == decoded.hlo_module  # type: ignore[arg-type]


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00", b"\xff\xfe\xfd\xfc", b"hello world", b"\n\x03abc"])
def test_locating_a_module_rejects_non_modules(data: bytes) -> None:
    with pytest.raises(proto.ProtoError):
        proto.locate_module(data)


def test_looks_like_module_needs_named_computations(xc) -> None:
    module = module_proto(xc, FSDP)
    assert proto.looks_like_module(module)
    assert not proto.looks_like_module(b"\n\x05jit_f")  # a name and no computation
    assert not proto.looks_like_module(field1(module)[:10])


@pytest.mark.parametrize("container", ["HloModuleProto", "HloProto", "HloSnapshot"])
def test_read_modules_from_each_container(tmp_path: Path, xc, container: str) -> None:
    src = tmp_path / "m.pb"
    src.write_bytes(containers(module_proto(xc, FSDP))[container])
    (module,) = read_modules(src)
    assert module.name == "jit__fsdp_forward"
    assert module.filename == str(src)
    assert module.use_spmd_partitioning is True
    (module,) = read_modules(src, spmd=False)
    assert module.use_spmd_partitioning is False


def test_bad_module_bytes_in_a_valid_wrapper(tmp_path: Path, xc) -> None:
    # A wrapper around a "module" whose computations are not HLO: XLA rejects it, one clean error.
    from google.protobuf import descriptor_pb2  # noqa: F401  (protobuf present)

    fake = b"\n\x01m\x1a\x03\n\x01c"  # name "m", one computation named "c", no instructions
    src = tmp_path / "m.pb"
    src.write_bytes(field1(fake))
    with pytest.raises(FormatError) as info:
        read_modules(src)
    assert info.value.format().startswith(f"{src}: error: ")


# ---------------------------------------------------------------------------------------------
# Text protos: the schema table must cover every module jax gives us


@pytest.mark.parametrize("path", JAX_MODULES, ids=lambda p: p.stem)
def test_text_proto_round_trips_exactly(xc, path: Path) -> None:
    module = module_proto(xc, path)
    text = proto.module_bytes_to_text_proto(module)
    # Python's protobuf leaves a map entry's key out when it is 0 (the schedule's sequence of
    # computation 0 in post-optimization text); XLA's C++ writes it. Same message, and the
    # bytes Python's protobuf writes for it.
    python_bytes = message_classes(False)["HloModuleProto"].FromString(module).SerializeToString()
    assert proto.parse_text_proto(text) == ("HloModuleProto", python_bytes)


def test_text_proto_containers(xc) -> None:
    module = module_proto(xc, FSDP)
    text = proto.module_bytes_to_text_proto(module)
    indented = "".join("  " + line + "\n" for line in text.splitlines())
    hlo_proto = "hlo_module {\n" + indented + "}\n"
    snapshot = "hlo {\n" + "".join("  " + line + "\n" for line in hlo_proto.splitlines()) + "}\n"
    snapshot += 'execution_platform: "Host"\n'
    assert proto.parse_text_proto(hlo_proto) == ("HloProto", module)
    assert proto.parse_text_proto(snapshot) == ("HloSnapshot", module)


def test_text_proto_error_has_a_location(tmp_path: Path) -> None:
    src = tmp_path / "m.pbtxt"
    src.write_text('name: "m"\ncomputations {\n  name: "c"\n  bogus_field: 3\n}\n')
    with pytest.raises(FormatError) as info:
        read_modules(src)
    assert info.value.line == 4
    assert info.value.format().startswith(f"{src}:4:")


@pytest.mark.parametrize("depth", [150, 20_000])
def test_deep_text_proto_is_a_located_error(tmp_path: Path, depth: int) -> None:
    """Deeper than XLA's protobuf reads (and than Python's stack): a clear error where the
    101st level opens, never a RecursionError."""
    src = tmp_path / "m.pbtxt"
    opening = "  shape { tuple_shapes " + "{ tuple_shapes " * depth
    src.write_text('name: "m"\ncomputations {\n' + opening + "{ element_type: F32 }" + " }" * (depth + 2) + "\n}\n")
    with pytest.raises(FormatError) as info:
        read_modules(src)
    # `computations {` is level 1, `shape {` level 2: level 101 is the 99th `{ tuple_shapes`.
    assert (info.value.line, info.value.column) == (3, len("  shape { tuple_shapes ") + 98 * len("{ tuple_shapes ") + 1)
    assert "deeper than 100" in info.value.message


def test_schema_table_matches_jaxlib(xc) -> None:
    """The generated table is what tests/io/gen_hlo_schema.py reads from this jaxlib."""
    import contextlib
    import io
    import runpy

    out = io.StringIO()
    gen = Path(__file__).with_name("gen_hlo_schema.py")
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(str(gen), run_name="__main__")
        except SystemExit as exc:  # descriptor not found in this jaxlib build
            pytest.skip(f"cannot read jaxlib's embedded schema: {exc}")
    from hlo_dedup.io import hlo_schema

    assert out.getvalue() == hlo_schema.schema_text()


# ---------------------------------------------------------------------------------------------
# Text input and writing


def test_split_and_marker_rules(tmp_path: Path) -> None:
    two = tmp_path / "two.hlo"
    two.write_text(FSDP.read_text() + "// -----\n" + (DATA / "cond.hlo").read_text())
    assert [m.name for m in read_modules(two)] == ["jit__fsdp_forward", "jit_f"]
    with pytest.raises(HloParseError) as info:
        read_modules(two, split_input_file=False)
    assert info.value.line == FSDP.read_text().count("\n") + 1


def test_module_texts_are_the_modules_unparsed(xc) -> None:
    """What `hlo-dedup verify` hands to XLA: each module's text as written, a proto's as XLA prints it."""
    first, second = FSDP.read_text(), (DATA / "cond.hlo").read_text()
    both = (first + "// -----\n" + second).encode()
    texts = module_texts_from_bytes(both, "two.hlo")
    assert texts == [first, "\n" + second]  # the split keeps every byte after the marker line
    pb = module_proto(xc, FSDP)
    (printed,) = module_texts_from_bytes(pb, "graph.hlo")  # sniffed as a binary proto
    assert printed == xc.hlo.HloModule.from_serialized_hlo_module_proto(pb).to_string()
    assert module_texts_from_bytes(b"HloModule broken\nENTRY {", "x.hlo") == ["HloModule broken\nENTRY {"]


def test_missing_file_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError) as info:
        read_modules(tmp_path / "absent.hlo")
    assert info.value.format() == f"{tmp_path / 'absent.hlo'}: error: No such file or directory"


def test_write_module_formats(tmp_path: Path, xc) -> None:
    (module,) = read_modules(FSDP)
    write_module(module, tmp_path / "m.hlo")
    assert (tmp_path / "m.hlo").read_bytes() == FSDP.read_bytes()
    write_module(module, tmp_path / "m.pb")
    write_module(module, tmp_path / "m.pbtxt")
    write_module(module, tmp_path / "m.bin", format="pb")
    assert proto.locate_module((tmp_path / "m.pb").read_bytes())[0] == "HloModuleProto"
    # XLA numbers each module it creates (the `id` field), so compare what the bytes say.
    assert proto.module_bytes_to_hlo_text((tmp_path / "m.bin").read_bytes()) == \
        proto.module_bytes_to_hlo_text((tmp_path / "m.pb").read_bytes())
    for name in ("m.pb", "m.pbtxt"):
        (back,) = read_modules(tmp_path / name)
        assert back.name == module.name
        assert len(back.computations) == len(module.computations)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "m.hlo", "m.pb", "m.pbtxt"]


def test_render_joins_text_modules_with_the_split_marker(tmp_path: Path) -> None:
    """hlo-opt joins modules with a bare newline, which cannot be read back; we put the
    `// -----` line between them, so the output splits into the same modules again."""
    mods = read_modules(FSDP) + read_modules(DATA / "cond.hlo")
    out = formats.render_modules(mods, "hlo").decode()
    assert out == FSDP.read_text() + "// -----\n" + (DATA / "cond.hlo").read_text()
    (tmp_path / "two.hlo").write_text(out)
    back = read_modules(tmp_path / "two.hlo")
    assert [m.to_text().strip() for m in back] == [m.to_text().strip() for m in mods]
    assert formats.join_module_texts(["a}", "b"]) == "a}\n// -----\nb"
    assert formats.join_module_texts(["a}\n\n", "\n\nb"]) == "a}\n\n// -----\n\nb"
    with pytest.raises(FormatError):
        formats.render_modules(mods, "pb")


def test_public_api_load_all_and_save(tmp_path: Path, xc) -> None:
    import hlo_dedup

    module = hlo_dedup.load(FSDP)
    # A string is HLO text when it spans lines or starts as a module does, else a path.
    assert hlo_dedup.load(str(FSDP)).to_text() == hlo_dedup.load(FSDP.read_text()).to_text() == module.to_text()
    with pytest.raises(HloParseError, match="expected at least one computation"):
        hlo_dedup.load("HloModule m, entry_computation_layout={()->f32[]}")
    result = hlo_dedup.run_passes(module)
    assert result.changed and len(result.folds) == 1
    hlo_dedup.save(module, tmp_path / "out.pb")
    assert hlo_dedup.load(tmp_path / "out.pb").name == "jit__fsdp_forward"


def _folded_module(gathers: int) -> str:
    """An entry of `gathers` all-gathers of one parameter, each read by its own negate: the
    pass folds all but the first, so the entry is printed instruction by instruction."""
    lines = ["HloModule many_gathers, entry_computation_layout={(f32[4,8]{1,0})->f32[32,8]{1,0}}", "",
             "ENTRY main {", "  p = f32[4,8]{1,0} parameter(0)"]
    for i in range(gathers):
        lines.append(f"  ag{i} = f32[32,8]{{1,0}} all-gather(p), channel_id={i + 1}, "
                     "replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true, "
                     f'metadata={{op_name="jit(train_step)/layer_{i}/all_gather" source_file="model.py" '
                     f"source_line={i + 10}}}")
        lines.append(f"  neg{i} = f32[32,8]{{1,0}} negate(ag{i}), "
                     f'metadata={{op_name="jit(train_step)/layer_{i}/neg" source_file="model.py" source_line={i + 11}}}')
    lines.append(f"  ROOT t = ({', '.join(['f32[32,8]{1,0}'] * gathers)}) "
                 f"tuple({', '.join(f'neg{i}' for i in range(gathers))})")
    return "\n".join(lines) + "\n}\n\n"


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_streamed_text_is_the_joined_text(monkeypatch, chunk: int) -> None:
    """Text output is printed and encoded a chunk at a time; whatever the chunk size, the
    bytes are those of the whole text: unchanged modules, a rewritten one, the split marker
    between them, and gzip's bytes for a `.gz` name."""
    import gzip

    from hlo_dedup.passes import DEFAULT_PIPELINE, Pipeline
    from hlo_dedup.text import parse_module

    folded = parse_module(_folded_module(20))
    assert Pipeline.from_names(DEFAULT_PIPELINE).run(folded).changed
    mods = read_modules(FSDP) + [folded] + read_modules(DATA / "cond.hlo")
    whole = formats.join_module_texts([m.to_text() for m in mods]).encode()
    monkeypatch.setattr(formats, "_CHUNK_CHARS", chunk)
    chunks = list(formats.render_chunks(mods, "hlo"))
    assert b"".join(chunks) == whole
    assert len(chunks) > 1
    assert b"".join(formats.compress_for("out.hlo.gz", iter(chunks))) == gzip.compress(whole, mtime=0)


def test_a_rewritten_module_is_written_without_its_whole_text_in_memory(tmp_path: Path, monkeypatch) -> None:
    """A million-instruction module's text is hundreds of MB: writing it must not hold that
    text (nor its bytes) beside the IR. The traced peak while writing stays far below it."""
    import tracemalloc

    from hlo_dedup.passes import DEFAULT_PIPELINE, Pipeline
    from hlo_dedup.text import parse_module

    module = parse_module(_folded_module(3000))
    Pipeline.from_names(DEFAULT_PIPELINE).run(module)
    size = len(module.to_text())
    monkeypatch.setattr(formats, "_CHUNK_CHARS", 16384)
    tracemalloc.start()
    try:
        written = formats.write_output(formats.render_chunks([module], "hlo"), tmp_path / "out.hlo")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written == size == (tmp_path / "out.hlo").stat().st_size
    assert (tmp_path / "out.hlo").read_text() == module.to_text()
    assert peak < size / 2, (peak, size)  # the text and its bytes would be 2 * size


def test_standard_output_without_a_buffer_gets_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook's or a test's sys.stdout is a text stream with no bytes underneath."""
    import io

    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    assert formats.write_output([b"HloModule m\n", "caf\u00e9\n".encode()], "-") == 18
    assert out.getvalue() == "HloModule m\ncaf\u00e9\n"


def _misnamed(tmp_path: Path, name: str, data: bytes, message: str, held: str) -> None:
    """`data` saved as `name` fails with `message` at its end, and reads as `held`."""
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(FormatError) as caught:
        read_modules(path)
    assert str(caught.value).endswith(message), str(caught.value)
    (module,) = read_modules(path, format=held)
    assert module.entry.name == hlo_dedup.load(FSDP.read_text()).entry.name


def test_hlo_text_under_a_proto_extension_is_named_for_what_it_holds(tmp_path: Path) -> None:
    # The extension decides how the file is read; the error says what it holds and how to
    # read it so.
    text = FSDP.read_bytes()
    _misnamed(tmp_path, "text.pb", text, "not a binary HloSnapshot, HloProto or HloModuleProto (no module with "
              "computations found); the file holds HLO text: name it .hlo or give --format=hlo", "hlo")
    _misnamed(tmp_path, "text.pbtxt", text, 'has no field named "HloModule"; the file holds HLO text: name it '
              ".hlo or give --format=hlo", "hlo")
    garbage = tmp_path / "garbage.pb"
    garbage.write_bytes(b"neither text nor a proto \x00\x01")
    with pytest.raises(FormatError) as caught:
        read_modules(garbage)
    assert "the file holds" not in str(caught.value)  # nothing to say it is instead


def test_a_binary_proto_named_pbtxt_is_named_for_what_it_holds(xc, tmp_path: Path) -> None:  # noqa: ANN001
    _misnamed(tmp_path, "binary.pbtxt", module_proto(xc, FSDP),
              "; the file holds a binary HLO proto: name it .pb or give --format=pb", "pb")
