"""Reading an HloModuleProto without jax (`hlo_dedup.io.proto_text`, `proto_ir`).

* every corpus and JAX module's proto prints as jaxlib's own printer prints it, byte for byte,
  and so do protos written in ways XLA's writer never uses (a field split over records);
* the IR built from the printer's pieces is the one the text reader builds from that text;
* a `.pb` run of the command never imports jax or jaxlib;
* a cut or corrupted proto is read (as XLA may read it) or one `file: error:` line with
  exit 2, never a traceback.

The protos come from XLA's parser (the `xla_client` fixture), so these are oracle tests.
"""

from __future__ import annotations

import io
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

import support
from hlo_dedup import cli
from hlo_dedup.io import proto
from hlo_dedup.text import split_module_texts

FSDP = support.JAX_DATA / "fsdp_shard_map.hlo"
#: Protos larger than this are left out of the per-module comparison: one corpus module
#: (launch_dimensions' `LargeConstant`, an f32[10000,10000] `constant(0)`) becomes 400 MB of
#: proto and 300 MB of text, about 80 s to print; benchmarks/proto_input.py --files times it.
LARGEST_COMPARED = 64 << 20


@pytest.fixture(scope="module")
def oracle(xla_client):  # type: ignore[no-untyped-def]
    from hlo_dedup.xla import oracle

    return oracle


@pytest.fixture(scope="module")
def fsdp_proto(oracle) -> bytes:  # type: ignore[no-untyped-def]
    return oracle.text_to_module_proto(FSDP.read_text())


def module_protos(oracle, path: Path) -> list[tuple[int, bytes]]:  # type: ignore[no-untyped-def]
    """(first line, HloModuleProto) of every module in `path` XLA's parser accepts (some corpus
    pieces are XLA's own negative parser tests)."""
    from hlo_dedup.xla import XlaError

    out = []
    for first_line, piece in split_module_texts(path.read_text()):
        try:
            out.append((first_line, oracle.text_to_module_proto(piece)))
        except XlaError:
            continue
    return out


#: An instruction line the next line continues (a backend config XLA prints over lines).
_CONTINUED_LINE = re.compile(r"\n  (?:ROOT )?%[^\n]*\n(?!  (?:ROOT )?%|\})")


@pytest.mark.corpus
@pytest.mark.parametrize(
    "path", support.corpus_files() + support.jax_modules(), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_proto_prints_as_jaxlib_and_builds_the_readers_ir(oracle, path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The text is jaxlib's, and the IR built from the printer's pieces is the text reader's;
    the text is read instead only where a line goes on over several (which the direct
    build does not lay out)."""
    from hlo_dedup.io import proto_ir

    read = proto_ir.parse_module
    fallbacks = []
    monkeypatch.setattr(proto_ir, "parse_module", lambda text, *a, **k: fallbacks.append(text) or read(text, *a, **k))
    for first_line, data in module_protos(oracle, path):
        if len(data) > LARGEST_COMPARED:
            continue
        printed = proto.print_module_bytes(data)
        assert printed.text == oracle.module_proto_to_text(data), f"the module at line {first_line}"
        built = proto_ir.module_from_printed(printed, "m.pb", "HloModuleProto", spmd=True)
        reread = read(printed.text, "m.pb (HloModuleProto as XLA text)")
        reread.filename = "m.pb"
        a, b = support.ir_layout(built), support.ir_layout(reread)
        assert a == b, f"the module at line {first_line}: {support.first_difference(a, b)}"
    assert all(_CONTINUED_LINE.search(text) for text in fallbacks)


# ---------------------------------------------------------------------------------------------
# Encodings XLA's writer never produces, which XLA's reader accepts


def _length_delimited(number: int, payload: bytes) -> bytes:
    from hlo_dedup.io.descriptors import length_delimited

    return length_delimited(number, payload)


def _rewrite_instruction(data: bytes, edit) -> bytes:  # type: ignore[no-untyped-def]
    """`data` with the first instruction `edit` returns new bytes for (given the decoded
    instruction and its encoding) re-encoded in place; the rest of the module keeps its bytes."""
    from hlo_dedup.io.proto_fields import message_classes

    views, full = message_classes(True), message_classes(False)
    module = views["HloModuleProtoView"].FromString(data)
    for computation in module.computations:
        for k, encoding in enumerate(computation.instructions):
            new = edit(full["HloInstructionProto"].FromString(encoding), encoding)
            if new is not None:
                computation.instructions[k] = new
                return module.SerializeToString()
    raise AssertionError("no instruction to edit")


def _split_field(field: str):  # type: ignore[no-untyped-def]
    """An edit writing the message field `field` as two records, its set fields alternating
    between them: protobuf merges them back into one message."""

    def edit(ins, encoding: bytes) -> bytes | None:  # type: ignore[no-untyped-def]
        if not ins.HasField(field) or len(getattr(ins, field).ListFields()) < 2:
            return None
        value = getattr(ins, field)
        halves = [type(value)(), type(value)()]
        for k, (descriptor, item) in enumerate(value.ListFields()):
            half = halves[k % 2]
            if descriptor.is_repeated:
                getattr(half, descriptor.name).extend(item)
            elif descriptor.message_type is not None:
                getattr(half, descriptor.name).CopyFrom(item)
            else:
                setattr(half, descriptor.name, item)
        rest = type(ins)()
        rest.CopyFrom(ins)
        rest.ClearField(field)
        number = ins.DESCRIPTOR.fields_by_name[field].number
        return rest.SerializeToString() + b"".join(_length_delimited(number, h.SerializeToString()) for h in halves)

    return edit


def _rename(ins, encoding: bytes) -> bytes:  # type: ignore[no-untyped-def]
    """The name written a second time: the last record wins."""
    return encoding + _length_delimited(ins.DESCRIPTOR.fields_by_name["name"].number, b"renamed.7")


@pytest.mark.parametrize(
    "module, edit",
    [
        ("fsdp_shard_map", _split_field("shape")),
        ("gspmd_after_spmd", _split_field("metadata")),
        ("fsdp_shard_map", _split_field("dot_dimension_numbers")),
        ("conv", _split_field("convolution_dimension_numbers")),
        ("fsdp_shard_map", _rename),
    ],
    ids=["shape", "metadata", "dot_dimension_numbers", "convolution_dimension_numbers", "name twice"],
)
def test_fields_split_over_records_read_as_xla_reads_them(oracle, module: str, edit) -> None:  # type: ignore[no-untyped-def]
    data = _rewrite_instruction(oracle.text_to_module_proto((support.JAX_DATA / f"{module}.hlo").read_text()), edit)
    assert proto.module_bytes_to_hlo_text(data) == oracle.module_proto_to_text(data)


def test_names_with_line_breaks_are_sanitized_as_xla_does(oracle) -> None:  # type: ignore[no-untyped-def]
    """A line break is no name character: XLA prints `_` for it, in an instruction's name
    and in a computation's (and a line never breaks inside a name)."""
    from hlo_dedup.io.proto_fields import message_classes

    module = message_classes(False)["HloModuleProto"].FromString(oracle.text_to_module_proto(FSDP.read_text()))
    module.computations[0].name = "a\nb"
    module.computations[-1].instructions[0].name = "\n"
    module.computations[-1].instructions[1].name = "c\n"
    data = module.SerializeToString()
    ours = proto.module_bytes_to_hlo_text(data)
    assert ours == oracle.module_proto_to_text(data)
    assert "%a_b" in ours and "%c_ " in ours


MESH_MODULE = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  p = f32[8] parameter(0)
  ROOT r = f32[8] all-reduce(p), channel_id=1, replica_groups=GROUPS, use_global_device_ids=true, to_apply=add
}
"""


@pytest.mark.parametrize("groups", [
    "mesh['x'=2,'y'=2], device_ids=(0,2,1,3) {'x'}",  # a list
    "mesh['x'=2,'y'=2], device_ids=(3,2,1,0) {'y'}",
    "mesh['a'=2,'b'=2,'c'=2], device_ids=([2,2,2]T(0,2,1)) {'a'}",  # a transposed iota
    "mesh['x'=2,'y'=2], device_ids=([2,1,2]T(2,1,0)) {'y'}",  # XLA keeps it as [2,2]T(1,0)
    "mesh['x'=2,'y'=2], device_ids=([4]) {'x'}",  # iota order: no field, no device_ids
])
def test_mesh_groups_with_device_ids_print_as_xla_prints_them(oracle, groups: str) -> None:  # type: ignore[no-untyped-def]
    data = oracle.text_to_module_proto(MESH_MODULE.replace("GROUPS", groups))
    assert proto.module_bytes_to_hlo_text(data) == oracle.module_proto_to_text(data)


def _renumbered(data: bytes, local_id) -> bytes:  # type: ignore[no-untyped-def]
    """`data` with the k-th of n instructions of each computation given local id
    `local_id(k, n)` (the high half of its id kept), references and schedule following."""
    from hlo_dedup.io.proto_fields import message_classes

    module = message_classes(False)["HloModuleProto"].FromString(data)
    for computation in module.computations:
        n = len(computation.instructions)
        new = {ins.id: ins.id >> 32 << 32 | local_id(k, n) for k, ins in enumerate(computation.instructions)}
        for ins in computation.instructions:
            ins.id = new[ins.id]
            ins.operand_ids[:] = [new[x] for x in ins.operand_ids]
            ins.control_predecessor_ids[:] = [new[x] for x in ins.control_predecessor_ids]
        computation.root_id = new[computation.root_id]
        if computation.id in module.schedule.sequences:
            sequence = module.schedule.sequences[computation.id].instruction_ids
            sequence[:] = [new[x] for x in sequence]
    return module.SerializeToString()


@pytest.mark.parametrize(
    "module",
    ["while_loop", "cond", "conv", "sort", "linalg", "scan_layers", "fsdp_remat_grad", "fsdp_shard_map",
     "mesh2d_nested", "pytree_weights", "while_gather", "gspmd_transformer_after_spmd"],
)  # fmt: skip
@pytest.mark.parametrize(
    "local_id",
    [lambda k, n: 3 * (n - k) + 5, lambda k, n: k // 2 + 1 if k % 2 else n + k],
    ids=["reversed, with gaps", "odd ones first"],
)
def test_ids_out_of_proto_order_read_as_xla_reads_them(oracle, module: str, local_id) -> None:  # type: ignore[no-untyped-def]
    """XLA's writer numbers each computation's instructions 0, 1, ... in proto order; its
    reader orders them by local id, which decides the post order lines print in (and,
    with collectives sharing a channel, shows that channels add no edge to it)."""
    data = _renumbered(oracle.text_to_module_proto((support.JAX_DATA / f"{module}.hlo").read_text()), local_id)
    assert proto.module_bytes_to_hlo_text(data) == oracle.module_proto_to_text(data)


_SHARED_CHANNEL = """HloModule m, replica_count=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  x = f32[4] negate(p1)
  ar1 = f32[4] all-reduce(p0), channel_id=1, replica_groups={{0,1}}, to_apply=add
  ar2 = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, to_apply=add
  ROOT t = (f32[4], f32[4]) tuple(ar2, ar1)
}
"""


@pytest.mark.parametrize("computations", [0, 1, 2], ids=lambda c: f"{c} computations in the device assignment")
def test_collectives_sharing_a_channel_print_in_operand_order(oracle, computations: int) -> None:  # type: ignore[no-untyped-def]
    """jaxlib's post order puts ar1 after ar2's operands whatever the device assignment:
    a channel ties no collective to another."""
    from hlo_dedup.io.proto_fields import message_classes

    module = message_classes(False)["HloModuleProto"].FromString(oracle.text_to_module_proto(_SHARED_CHANNEL))
    if computations:
        assignment = module.device_assignment
        assignment.replica_count, assignment.computation_count = 2, computations
        for c in range(computations):
            assignment.computation_devices.add().replica_device_ids.extend([2 * c, 2 * c + 1])
    data = module.SerializeToString()
    ours = proto.module_bytes_to_hlo_text(data)
    assert ours == oracle.module_proto_to_text(data)
    assert ours.index("%ar2 = ") < ours.index("%p0 = ")


def test_an_operand_id_of_minus_one_is_refused_as_xla_refuses_it(oracle) -> None:  # type: ignore[no-untyped-def]
    """-1 separates the instructions' id lists when they are read together: an id of -1
    is read instruction by instruction instead, and names no instruction."""
    from hlo_dedup.io.proto_fields import message_classes
    from hlo_dedup.xla import XlaError

    text = "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  x = f32[4] negate(p)\n  ROOT y = f32[4] add(x, p)\n}\n"
    module = message_classes(False)["HloModuleProto"].FromString(oracle.text_to_module_proto(text))
    root = module.computations[0].instructions[2]
    root.operand_ids[:] = [-1, root.operand_ids[1]]
    data = module.SerializeToString()
    with pytest.raises(XlaError):
        oracle.module_proto_to_text(data)
    with pytest.raises(proto.ProtoError, match="y names operand id -1, which is not an earlier instruction of e"):
        proto.module_bytes_to_hlo_text(data)


_MESH_GATHER = """HloModule m, num_partitions=8

ENTRY e {
  p = f32[2] parameter(0)
  ROOT g = f32[8] all-gather(p), channel_id=1, replica_groups=mesh['a'=4,'b'=2] {'a'}, dimensions={0}
}
"""


def _mesh_edit(iota=None, ids=None, axes=True, refs=True):  # type: ignore[no-untyped-def]
    """An edit of the gather's MeshProto: an iota transform, device ids, its axes or axis refs dropped."""

    def edit(groups) -> None:  # type: ignore[no-untyped-def]
        if iota is not None:
            groups.mesh.iota_transform.reshape_dims[:], groups.mesh.iota_transform.transpose_perm[:] = iota
        if ids is not None:
            groups.mesh.device_ids[:] = ids
        if not axes:
            del groups.mesh.axes[:]
        if not refs:
            del groups.axes[:]

    return edit


def _mesh_module(oracle, edit) -> bytes:  # type: ignore[no-untyped-def]
    from hlo_dedup.io.proto_fields import message_classes

    module = message_classes(False)["HloModuleProto"].FromString(oracle.text_to_module_proto(_MESH_GATHER))
    edit(module.computations[0].instructions[1].mesh_axes_replica_group_list)
    return module.SerializeToString()


@pytest.mark.parametrize("edit, printed", [
    (_mesh_edit(iota=([2, 2, 2], [2, 0, 1])), "mesh['a'=4,'b'=2], device_ids=([4,2]T(1,0)) {'a'}"),
    (_mesh_edit(iota=([2, 2, 2], [0, 2, 1])), "mesh['a'=4,'b'=2], device_ids=([2,2,2]T(0,2,1)) {'a'}"),
    (_mesh_edit(iota=([4, 2], [0, 1])), "mesh['a'=4,'b'=2] {'a'}"),  # the plain iota once canonical
    (_mesh_edit(iota=([4], [0])), "mesh['a'=4,'b'=2] {'a'}"),  # one dimension: XLA checks no size
    (_mesh_edit(iota=([], [])), "mesh['a'=4,'b'=2] {'a'}"),
    (_mesh_edit(ids=[0, 4, 1, 5, 2, 6, 3, 7]), "mesh['a'=4,'b'=2], device_ids=(0,4,1,5,2,6,3,7) {'a'}"),
    (_mesh_edit(axes=False, refs=False), "mesh[] {}"),
    (_mesh_edit(axes=False, refs=False, iota=([2, 2], [1, 0])), "mesh[] {}"),
    (_mesh_edit(axes=False, refs=False, ids=[3]), "maximal_mesh[device_id=3] {}"),
    (_mesh_edit(axes=False, refs=False, ids=[-2]), "maximal_mesh[device_id=-2] {}"),
], ids=["iota", "3-d iota", "plain iota", "1-d iota", "empty iota", "ids", "empty", "empty with iota", "maximal",
        "maximal, negative"])  # fmt: skip
def test_mesh_device_orders_print_as_xla_prints_them(oracle, xla_client, edit, printed: str) -> None:  # type: ignore[no-untyped-def]
    """`Mesh::FromProto` then `ToString`: the device order unless it is the plain iota; a
    mesh without axes is empty or one device. The IR's groups are the ones XLA spells out."""
    from hlo_dedup.io.proto_ir import module_from_printed
    from hlo_dedup.ir.replica_groups import ReplicaGroups

    data = _mesh_module(oracle, edit)
    ours = proto.module_bytes_to_hlo_text(data)
    assert ours == oracle.module_proto_to_text(data)
    assert f"replica_groups={printed}, dimensions" in ours
    gather = module_from_printed(proto.print_module_bytes(data), "m.pb", "HloModuleProto", spmd=True).entry.root
    hlo = xla_client.hlo
    spelled = hlo.HloModule.from_serialized_hlo_module_proto(data).to_string(hlo.HloPrintOptions.fingerprint())
    xla_groups = re.search(r"replica_groups=(\{\}|\{\{.*?\}\}), dimensions", spelled)
    assert xla_groups and ReplicaGroups.from_groups(gather.replica_groups.groups).to_text() == xla_groups.group(1)


def _halves_of_a(groups) -> None:  # type: ignore[no-untyped-def]
    """Axis 'a' (4 devices) referred to by its two halves in order, which XLA wants merged."""
    del groups.axes[:]
    groups.axes.add(mesh_axis_index=0, sub_axis_info={"pre_size": 1, "size": 2})
    groups.axes.add(mesh_axis_index=0, sub_axis_info={"pre_size": 2, "size": 2})


@pytest.mark.parametrize("edit, reason", [
    (_mesh_edit(ids=list(range(8))), "other than the identity"),
    (_mesh_edit(ids=[1, 0, 2, 3]), "permutation"),
    (_mesh_edit(ids=[0, 2, 4, 6, 1, 3, 5, 7], iota=([2, 4], [1, 0])), "both device_ids and an iota_transform"),
    (_mesh_edit(axes=False, refs=False, ids=[1, 0]), "more than one device"),
    (_mesh_edit(axes=False), "index out of range"),
    (_halves_of_a, "can be merged"),
], ids=["identity", "too few", "ids and iota", "two devices, no axes", "refs, no axes", "mergeable sub-axes"])
def test_meshes_xla_aborts_on_are_refused(oracle, edit, reason: str) -> None:  # type: ignore[no-untyped-def]
    from hlo_dedup.xla import XlaError, isolated

    data = _mesh_module(oracle, edit)
    with pytest.raises(XlaError):
        isolated.module_proto_to_text(data)  # XLA's loader CHECK-fails: in a child process
    with pytest.raises(proto.ProtoError, match=reason):
        proto.module_bytes_to_hlo_text(data)


@pytest.mark.parametrize("edit, reason", [
    (_mesh_edit(iota=([2, 2], [1, 0])), "another number of devices"),
    (_mesh_edit(iota=([4, 2], [0, 0])), "permutation of its reshape dims"),
], ids=["4 of 8 devices", "not a permutation"])
def test_mesh_iotas_xla_cannot_spell_out_are_refused(oracle, edit, reason: str) -> None:  # type: ignore[no-untyped-def]
    # XLA prints these (`device_ids=([2,2]T(1,0))` for 8 devices), then aborts spelling out the groups.
    with pytest.raises(proto.ProtoError, match=reason):
        proto.module_bytes_to_hlo_text(_mesh_module(oracle, edit))


_NAMED = """HloModule m, num_partitions=8

ENTRY e {
  ROOT p = f32[8,4] parameter(0), sharding={mesh['a'=4,'b'=2], [{'a':(1)2}, {'b', ?}], replicated={'a':(2)2}}
}
"""


def _named_edit(edit):  # type: ignore[no-untyped-def]
    """`_NAMED`'s proto with `edit` applied to its NamedShardingProto."""

    def module(oracle) -> bytes:  # type: ignore[no-untyped-def]
        from hlo_dedup.io.proto_fields import message_classes

        proto_module = message_classes(False)["HloModuleProto"].FromString(oracle.text_to_module_proto(_NAMED))
        edit(proto_module.computations[0].instructions[0].sharding.named_sharding)
        return proto_module.SerializeToString()

    return module


def _swap_first_dim_and_replicated(named) -> None:  # type: ignore[no-untyped-def]
    first, replicated = named.dim_shardings[0].axes[0], named.replicated_axes[0]
    first.sub_axis_info.pre_size, replicated.sub_axis_info.pre_size = 2, 1


@pytest.mark.parametrize("edit, printed", [
    (lambda named: None, "{mesh['a'=4,'b'=2], [{'a':(1)2}, {'b', ?}], replicated={'a':(2)2}}"),
    (_swap_first_dim_and_replicated, "{mesh['a'=4,'b'=2], [{'a':(2)2}, {'b', ?}], replicated={'a':(1)2}}"),
    (lambda named: named.mesh.device_ids.extend([0, 2, 4, 6, 1, 3, 5, 7]),
     "{mesh['a'=4,'b'=2], device_ids=(0,2,4,6,1,3,5,7), [{'a':(1)2}, {'b', ?}], replicated={'a':(2)2}}"),
    (lambda named: named.ClearField("dim_shardings"), "{mesh['a'=4,'b'=2], [], replicated={'a':(2)2}}"),
    (lambda named: [named.ClearField(f) for f in ("dim_shardings", "replicated_axes")], "{mesh['a'=4,'b'=2], replicated}"),
    (lambda named: (named.ClearField("dim_shardings"), named.ClearField("replicated_axes"),
                    named.manual_axes.add(mesh_axis_index=0), named.manual_axes.add(mesh_axis_index=1)),
     "{mesh['a'=4,'b'=2], manual}"),
    (lambda named: (named.ClearField("dim_shardings"), named.ClearField("replicated_axes"),
                    named.unreduced_axes.add(mesh_axis_index=1)), "{mesh['a'=4,'b'=2], [], unreduced={'b'}}"),
    (lambda named: named.dim_shardings[0].ClearField("is_closed"),
     "{mesh['a'=4,'b'=2], [{'a':(1)2, ?}, {'b', ?}], replicated={'a':(2)2}}"),
    (lambda named: setattr(named.dim_shardings[1], "is_closed", True),
     "{mesh['a'=4,'b'=2], [{'a':(1)2}, {'b'}], replicated={'a':(2)2}}"),
], ids=["as parsed", "sub-axes swapped", "device ids", "no dimensions", "replicated", "manual", "unreduced",
        "open", "closed"])  # fmt: skip
def test_named_shardings_print_as_xla_prints_them(oracle, edit, printed: str) -> None:  # type: ignore[no-untyped-def]
    data = _named_edit(edit)(oracle)
    ours = proto.module_bytes_to_hlo_text(data)
    assert ours == oracle.module_proto_to_text(data)
    assert f"sharding={printed}" in ours


def _replicate_b_first(named) -> None:  # type: ignore[no-untyped-def]
    """'b' moved from the second dimension to the replicated axes, ahead of 'a':(2)2."""
    named.dim_shardings[1].ClearField("axes")
    a = type(named.replicated_axes[0])()
    a.CopyFrom(named.replicated_axes[0])
    del named.replicated_axes[:]
    named.replicated_axes.add(mesh_axis_index=1)
    named.replicated_axes.append(a)


@pytest.mark.parametrize("edit, reason", [
    (lambda named: named.replicated_axes.add(mesh_axis_index=0), "overlap"),
    (lambda named: named.dim_shardings[0].axes.add(mesh_axis_index=0, sub_axis_info={"pre_size": 2, "size": 2}),
     "can be merged"),
    (_replicate_b_first, "not sorted"),
    (lambda named: setattr(named.dim_shardings[0].axes[0].sub_axis_info, "size", 3), "invalid sub-axis"),
    (lambda named: named.dim_shardings[0].axes.add(mesh_axis_index=2), "out of range"),
], ids=["overlap", "mergeable", "unsorted", "sub-axis", "index"])
def test_named_shardings_xla_aborts_on_are_refused(oracle, edit, reason: str) -> None:  # type: ignore[no-untyped-def]
    from hlo_dedup.xla import XlaError, isolated

    data = _named_edit(edit)(oracle)
    with pytest.raises(XlaError):
        isolated.module_proto_to_text(data)
    with pytest.raises(proto.ProtoError, match=reason):
        proto.module_bytes_to_hlo_text(data)


# ---------------------------------------------------------------------------------------------
# The command


def test_a_pb_run_imports_no_jax_and_no_dataclasses(tmp_path: Path, fsdp_proto: bytes) -> None:
    src = tmp_path / "m.hlo.pb"
    src.write_bytes(fsdp_proto)
    out = tmp_path / "out.hlo"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hlo_dedup", str(src), "--passes=", "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert "hlo_dedup.io.proto_text" in imported  # the measurement sees the reader's imports
    assert [name for name in imported if name.split(".")[0] in ("jax", "jaxlib")] == []
    # Start-up: the schema table is read through the package's loader, not importlib.resources
    # (which would import zipfile, tempfile and more on every .pb run).
    assert {"importlib.resources", "zipfile", "tempfile"}.isdisjoint(imported)
    # Nor dataclasses (with inspect, ast, dis, tokenize): the reader's records are plain ones.
    assert {"dataclasses", "inspect"}.isdisjoint(imported)
    assert out.read_text() == proto.module_bytes_to_hlo_text(fsdp_proto)


def run_command(src: Path, tmp_path: Path) -> tuple[int, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    status = cli.main([str(src), "--passes=", "-o", str(tmp_path / "out.hlo")], stdout=stdout, stderr=stderr)
    return status, stderr.getvalue()


def assert_one_error_line(status: int, stderr: str, src: Path) -> None:
    assert status == 2, stderr
    assert stderr.count("\n") == 1 and stderr.startswith(f"{src}: error: "), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr


def test_cut_protos_are_read_or_refused_in_one_line(tmp_path: Path, fsdp_proto: bytes) -> None:
    """A copy that stopped early: a cut at a field boundary may still be a module (XLA
    reads one too, without its last fields); any other cut is one error line."""
    src = tmp_path / "cut.pb"
    cuts = sorted(set(range(1, len(fsdp_proto), max(1, len(fsdp_proto) // 300))) | {len(fsdp_proto) - 1})
    refused = 0
    for cut in cuts:
        src.write_bytes(fsdp_proto[:cut])
        status, stderr = run_command(src, tmp_path)
        if status != 0:
            assert_one_error_line(status, stderr, src)
            refused += 1
    assert refused > len(cuts) // 2


def test_corrupted_protos_are_read_or_refused_in_one_line(tmp_path: Path, fsdp_proto: bytes) -> None:
    """Bytes flipped at random: XLA's reader might accept some (a changed name or number),
    and so may we; anything else is one error line."""
    src = tmp_path / "corrupt.pb"
    rng = random.Random(20260)
    refused = 0
    for _ in range(300):
        data = bytearray(fsdp_proto)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        src.write_bytes(bytes(data))
        status, stderr = run_command(src, tmp_path)
        if status != 0:
            assert_one_error_line(status, stderr, src)
            refused += 1
    assert refused > 0
