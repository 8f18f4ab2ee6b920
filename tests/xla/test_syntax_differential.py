"""A differential test of our reader against XLA's own parser and printer, on seeded
collectives in every form XLA writes (tests/xla/syntax_cases.py).

XLA parses each generated case (what it refuses is dropped and counted) and prints modules
of many cases; then

* our reader reads XLA's text and prints it back byte for byte (the library and the
  command's `--passes=`);
* every attribute the passes read decodes to what XLA's proto of the module says: replica
  groups (spelled out here from the proto with numpy, independently of our decoder, and
  checked against XLA's own spelled-out groups), dimensions, channel_id,
  use_global_device_ids, constrain_layout, op_name, and the shape with its layout;
* our proto printer prints XLA's proto as XLA prints it (meshes with device orders and named
  shardings included);
* two gathers of one parameter whose groups are spelled differently fold exactly when
  XLA's groups are equal.
"""

from __future__ import annotations

import io
import math
import random
import re
from typing import Any, Iterator

import numpy as np
import pytest

import syntax_cases
import support
from support import IN_CI
from hlo_dedup import parse_module
from hlo_dedup.cli import main
from hlo_dedup.io import proto as proto_io
from hlo_dedup.io.proto_fields import message_classes
from hlo_dedup.ir.shape import Layout

SEED = 20260
#: Cases drawn, and cases per module (one XLA parse and print per module).
CASES = 1200 if IN_CI else 150
PER_MODULE = 150
COLLECTIVES = frozenset({"all-gather", "all-gather-start", "all-reduce", "all-reduce-start", "reduce-scatter",
                         "all-to-all", "collective-broadcast"})


@pytest.fixture(scope="module")
def printed(xla_client) -> list[tuple[str, bytes]]:  # type: ignore[no-untyped-def]
    """(XLA's text, XLA's HloModuleProto) of modules of every generated case XLA accepts."""
    hlo = xla_client.hlo
    cases = syntax_cases.generate(SEED, CASES)
    accepted = []
    for case in cases:
        try:
            hlo.hlo_module_from_text(syntax_cases.module_text([case]))
        except Exception as exc:  # XLA's parser refuses groups of one device, maximal and empty meshes
            assert "more than one device per group" in str(exc), str(exc)
            continue
        accepted.append(case)
    assert 0.8 * len(cases) <= len(accepted) < len(cases)
    options = hlo.HloPrintOptions()
    options.print_large_constants = True
    out = []
    for start in range(0, len(accepted), PER_MODULE):
        text = syntax_cases.module_text(accepted[start : start + PER_MODULE], f"m{start}")
        module = hlo.hlo_module_from_text(text)
        out.append((module.to_string(options), module.as_serialized_hlo_module_proto()))
    return out


# ------------------------------------------------------------------------------------------
# (a) XLA's text reads and prints back byte for byte


def test_xla_text_prints_back_byte_for_byte(printed: list[tuple[str, bytes]]) -> None:
    for text, _ in printed:
        assert parse_module(text).to_text() == text


def test_the_command_prints_xla_text_back(printed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for k, (text, _) in enumerate(printed):
        source, out = tmp_path / f"m{k}.hlo", tmp_path / f"m{k}.out.hlo"
        source.write_text(text)
        stderr = io.StringIO()
        status = main([str(source), "--passes=", "-o", str(out)], stdout=io.StringIO(), stderr=stderr)
        assert status == 0, stderr.getvalue()
        assert out.read_text() == text


# ------------------------------------------------------------------------------------------
# (b) what the passes read is what XLA means


def _iota(dims: list[int], perm: list[int]) -> np.ndarray:
    return np.arange(math.prod(dims)).reshape(dims).transpose(perm).reshape(-1)


def _mesh_groups(groups: Any) -> list[list[int]]:
    """XLA's MeshAxesReplicaGroupList spelled out: the mesh's device array (its device_ids,
    its iota transform, or the plain iota) shaped by its axes, each referenced axis split at
    its sub-axes' boundaries (pre-size: the part major to it), the referenced pieces moved
    last in reference order, and runs of the group size taken as groups."""
    mesh = groups.mesh
    sizes = [a.size for a in mesh.axes]
    if not sizes:
        return [[mesh.device_ids[0]]] if mesh.device_ids else []
    if mesh.device_ids:
        devices = np.array(mesh.device_ids)
    elif mesh.iota_transform.reshape_dims:
        devices = _iota(list(mesh.iota_transform.reshape_dims), list(mesh.iota_transform.transpose_perm))
    else:
        devices = np.arange(math.prod(sizes))
    pieces: list[int] = []  # sizes of the split axes, major to minor
    where: dict[int, int] = {}  # reference -> its piece
    for axis, size in enumerate(sizes):
        refs = sorted((r.sub_axis_info.pre_size if r.HasField("sub_axis_info") else 1,
                       r.sub_axis_info.size if r.HasField("sub_axis_info") else size, k)
                      for k, r in enumerate(groups.axes) if r.mesh_axis_index == axis)
        covered = 1
        for pre, part, k in refs:
            if pre > covered:
                pieces.append(pre // covered)
            where[k] = len(pieces)
            pieces.append(part)
            covered = pre * part
        if covered < size:
            pieces.append(size // covered)
    grouped = [where[k] for k in range(len(groups.axes))]
    order = [p for p in range(len(pieces)) if p not in grouped] + grouped
    group_size = math.prod(pieces[p] for p in grouped)
    return devices.reshape(pieces).transpose(order).reshape(-1, group_size).tolist()


def reference_groups(ins: Any) -> list[list[int]]:
    """The groups an HloInstructionProto names, spelled out from whichever form it holds."""
    which = ins.WhichOneof("replica_group_list")
    if which == "iota_collective_device_list":
        iota = ins.iota_collective_device_list
        flat = _iota(list(iota.iota_reshape_dims), list(iota.iota_transpose_perm))
        return flat.reshape(iota.num_replica_groups, iota.num_devices_per_group).tolist()
    if which == "mesh_axes_replica_group_list":
        return _mesh_groups(ins.mesh_axes_replica_group_list)
    listed = ins.collective_device_list.replica_groups if which == "collective_device_list" else ins.replica_groups
    return [list(g.replica_ids) for g in listed]


def _explicit(groups: list[list[int]]) -> str:
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def _proto_shape(shape: Any, types: Any) -> Any:
    if shape.tuple_shapes:
        return tuple(_proto_shape(s, types) for s in shape.tuple_shapes)
    layout = shape.layout
    tiles = tuple(tuple(t.dimensions) for t in layout.tiles)
    return (types.values_by_number[shape.element_type].name.lower(), tuple(shape.dimensions),
            tuple(shape.is_dynamic_dimension), tuple(layout.minor_to_major), tiles, layout.element_size_in_bits,
            layout.memory_space)


def _our_shape(shape: Any) -> Any:
    if shape.tuple_shapes is not None:
        return tuple(_our_shape(s) for s in shape.tuple_shapes)
    layout = shape.layout if shape.layout is not None else Layout.default(len(shape.dimensions))  # scalars
    return (shape.element_type.value, shape.dimensions, shape.dynamic, layout.minor_to_major,
            tuple(t.dimensions for t in layout.tiles), layout.element_size_in_bits, layout.memory_space)


def _proto_module(data: bytes) -> Any:
    return message_classes(False)["HloModuleProto"].FromString(data)


def _printed_instructions(module: Any) -> Iterator[tuple[Any, Any]]:
    """(instruction, the instruction whose attributes it prints) for every instruction XLA
    prints: an `async-start` prints its wrapped computation's root as `<op>-start`, and the
    wrapped computations are not printed."""
    computations = {c.id: c for c in module.computations}
    wrapped = {c for ins in (i for c in module.computations for i in c.instructions) if ins.opcode == "async-start"
               for c in ins.called_computation_ids}
    for computation in module.computations:
        if computation.id in wrapped:
            continue
        for ins in computation.instructions:
            if ins.opcode != "async-start":
                yield ins, ins
                continue
            called = computations[ins.called_computation_ids[0]]
            yield ins, next(i for i in called.instructions if i.id == called.root_id)


def test_attributes_decode_to_what_xla_means(printed: list[tuple[str, bytes]]) -> None:
    types = message_classes(False)["ShapeProto"].DESCRIPTOR.fields_by_name["element_type"].enum_type
    kinds: set[str] = set()
    for text, data in printed:
        ours = {i.name: i for c in parse_module(text).computations for i in c.instructions}
        for ins, held in _printed_instructions(_proto_module(data)):
            inst = ours[ins.name]
            assert _our_shape(inst.shape) == _proto_shape(ins.shape, types), inst.to_text()
            assert inst.metadata.op_name == held.metadata.op_name, inst.to_text()
            if held.opcode not in COLLECTIVES:
                continue
            kinds.add(held.WhichOneof("replica_group_list"))
            assert [list(g) for g in inst.replica_groups.groups] == reference_groups(held), inst.to_text()
            assert inst.dimensions == tuple(held.dimensions), inst.to_text()
            assert (inst.channel_id or 0) == held.channel_id, inst.to_text()
            assert inst.use_global_device_ids == held.use_global_device_ids, inst.to_text()
            assert inst.constrain_layout == held.constrain_layout, inst.to_text()
    assert kinds == {"collective_device_list", "iota_collective_device_list", "mesh_axes_replica_group_list"}


_GROUPS = re.compile(r"replica_groups=(\{\}|\{\{.*?\}\})")
_INSTRUCTION_LINE = re.compile(r"  (?:ROOT )?[%A-Za-z_]")  # not a nested computation's (deeper, braced)


def _entry_lines(text: str) -> list[str]:
    entry = text[text.index("\nENTRY ") :].splitlines()[1:]
    return [line for line in entry if _INSTRUCTION_LINE.match(line)]


def test_the_reference_groups_are_the_ones_xla_spells_out(xla_client, printed) -> None:  # type: ignore[no-untyped-def]
    """XLA's fingerprint print spells every group list out (and prints the reducers nested):
    its entry lines follow the plain print's."""
    hlo = xla_client.hlo
    for text, data in printed:
        module = hlo.HloModule.from_serialized_hlo_module_proto(data)
        by_name = {ins.name: held for ins, held in _printed_instructions(_proto_module(data))}
        plain = _entry_lines(module.to_string())
        spelled = _entry_lines(module.to_string(hlo.HloPrintOptions.fingerprint()))
        assert len(plain) == len(spelled)
        checked = 0
        for line, full in zip(plain, spelled):
            m = _GROUPS.search(full)
            if m is None:
                continue
            name = line.split(" = ", 1)[0].split()[-1].lstrip("%")
            groups = reference_groups(by_name[name])
            assert _explicit(groups) == m.group(1), line
            checked += 1
        assert checked > 0


def test_the_reference_groups_meet_the_expectations_xla_printed(xla_client) -> None:  # type: ignore[no-untyped-def]
    """The mesh expectations of tests/ir/test_replica_groups.py were printed by XLA."""
    from ir.test_replica_groups import MESH_CASES  # type: ignore[import-not-found]

    groups = _groups_by_xla(xla_client.hlo, [text for text, _ in MESH_CASES])
    assert [(text, _explicit(groups[text])) for text, _ in MESH_CASES] == MESH_CASES


# ------------------------------------------------------------------------------------------
# (c) the proto path prints XLA's proto as XLA does


def test_xla_proto_prints_as_xla_prints_it(xla_client, printed) -> None:  # type: ignore[no-untyped-def]
    """Byte for byte, and the IR built from the printer's pieces is the text reader's."""
    from hlo_dedup.io import proto_ir
    from hlo_dedup.text import parse_module as read_text

    options = xla_client.hlo.HloPrintOptions()
    options.print_large_constants = True
    for _, data in printed:
        expected = xla_client.hlo.HloModule.from_serialized_hlo_module_proto(data).to_string(options)
        ours = proto_io.print_module_bytes(data)
        assert ours.text == expected
        built = proto_ir.module_from_printed(ours, "m.pb", "HloModuleProto", spmd=True)
        reread = read_text(ours.text, "m.pb", spmd=True)
        assert support.ir_layout(built) == support.ir_layout(reread)


# ------------------------------------------------------------------------------------------
# The all-gather pass folds by XLA's groups, however they are spelled


def _spellings(rng: random.Random) -> list[str]:
    """Several replica-groups texts over one device count with one group size (more than
    one device), in mesh and iota forms: some name the same groups, most do not."""
    n = rng.choice([4, 8, 16])
    drawn = [syntax_cases.mesh_groups(rng, n) for _ in range(12)] + [syntax_cases.iota_groups(rng, n) for _ in range(4)]
    by_size: dict[int, list[str]] = {}
    for groups in drawn:
        if groups.group_size and groups.group_size > 1:
            by_size.setdefault(groups.group_size, []).append(groups.text)
    return max(by_size.values(), key=len)


def test_the_gather_pass_folds_exactly_the_gathers_xla_groups_alike(xla_client) -> None:  # type: ignore[no-untyped-def]
    """Pairs of one spelling against another (judged by XLA's groups, spelled out by
    `reference_groups`) and of one against its own groups spelled out, each pair on a
    parameter of its own."""
    from hlo_dedup.passes import NeuronAllGatherDuplicateRemover

    hlo = xla_client.hlo
    rng = random.Random(SEED)
    pairs: list[tuple[str, str | None]] = []
    while len(pairs) < (200 if IN_CI else 60):
        forms = _spellings(rng)
        pairs += [tuple(rng.sample(forms, 2)) for _ in range(3)] if len(forms) > 1 else []
        pairs.append((forms[0], None))
    reference = _groups_by_xla(hlo, [g for pair in pairs for g in pair if g is not None])
    lines, roots, expected = [], [], {}
    for k, (a, b) in enumerate(pairs):
        if b is None:
            b = _explicit(reference[a])
            reference[b] = reference[a]
        out = f"f32[{2 * len(reference[a][0])},4]{{1,0}}"
        lines += [f"  p{k} = f32[2,4]{{1,0}} parameter({k})",
                  f"  a{k} = {out} all-gather(p{k}), replica_groups={a}, dimensions={{0}}",
                  f"  b{k} = {out} all-gather(p{k}), replica_groups={b}, dimensions={{0}}"]
        roots += [f"a{k}", f"b{k}"]
        expected[f"b{k}"] = reference[a] == reference[b]
    shapes = ", ".join(_shape_of(lines, r) for r in roots)
    text = (f"HloModule folds, num_partitions={syntax_cases.DEVICES}\n\nENTRY e {{\n" + "\n".join(lines)
            + f"\n  ROOT t = ({shapes}) tuple({', '.join(roots)})\n}}\n")
    module = parse_module(hlo.hlo_module_from_text(text).to_string())
    result = NeuronAllGatherDuplicateRemover().run_with_result(module)
    folded = {f.removed: f.kept for f in result.folds}
    assert {name: name in folded for name in expected} == expected
    assert all(kept == "a" + removed[1:] for removed, kept in folded.items())
    alike_spelled_apart = sum(expected[f"b{k}"] for k, (_, b) in enumerate(pairs) if b is not None)
    assert 0 < alike_spelled_apart < sum(b is not None for _, b in pairs)


def _shape_of(lines: list[str], name: str) -> str:
    line = next(line for line in lines if line.startswith(f"  {name} = "))
    return line.split(" = ", 1)[1].split(" ", 1)[0]


def _groups_by_xla(hlo: Any, texts: list[str]) -> dict[str, list[list[int]]]:
    """Each replica-groups text's groups, spelled out (`reference_groups`) from XLA's proto
    of an all-reduce over it."""
    unique = sorted(set(texts))
    body = "".join(f"  r{k} = f32[2] all-reduce(p), replica_groups={t}, to_apply=add\n" for k, t in enumerate(unique))
    root = f"({', '.join(['f32[2]'] * len(unique))}) tuple({', '.join(f'r{k}' for k in range(len(unique)))})"
    text = f"HloModule g\n\n{syntax_cases.ADD}\nENTRY e {{\n  p = f32[2] parameter(0)\n{body}  ROOT t = {root}\n}}\n"
    module = _proto_module(hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto())
    by_name = {i.name: i for c in module.computations for i in c.instructions}
    return {t: reference_groups(by_name[f"r{k}"]) for k, t in enumerate(unique)}
