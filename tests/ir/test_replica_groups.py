"""Tests for hlo_dedup.ir.replica_groups: the three text forms, XLA's group
materialisation (checked against XLA where marked ``oracle``), errors, corpus."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from support import corpus_files
from hlo_dedup.ir.replica_groups import ReplicaGroups, ReplicaGroupsError, parse_replica_groups


def xla_groups(hlo, text: str) -> str:  # type: ignore[no-untyped-def]
    """XLA's fully expanded list form of ``replica_groups=text``."""
    module = hlo.hlo_module_from_text(
        "HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
        "  ROOT c = f32[] add(a, b)\n}\nENTRY e {\n  p = f32[8] parameter(0)\n"
        f"  ROOT r = f32[8] all-reduce(p), replica_groups={text}, to_apply=add\n}}\n"
    )
    printed = module.to_string(hlo.HloPrintOptions.fingerprint())
    m = re.search(r"replica_groups=(\{.*?\}\}|\{\}), to_apply", printed)
    assert m, printed
    return m.group(1)


def reference_iota_groups(num_groups: int, size: int, dims: list[int], perm: list[int]) -> list[list[int]]:
    """Independent reference: place each device id at its transposed position."""
    total = math.prod(dims)
    transposed_dims = [dims[p] for p in perm]
    flat = [0] * total
    for device in range(total):
        coords, rest = [], device
        for d in reversed(dims):
            coords.append(rest % d)
            rest //= d
        coords.reverse()
        position = 0
        for c, d in zip((coords[p] for p in perm), transposed_dims):
            position = position * d + c
        flat[position] = device
    return [flat[g * size : (g + 1) * size] for g in range(num_groups)]


# ----------------------------------------------------------------------------
# Forms
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("{}", ()),
        ("{ }", ()),
        ("{{0,1},{2,3}}", ((0, 1), (2, 3))),
        ("{{0,1}, {2,3}}", ((0, 1), (2, 3))),
        ("{\n  {0, 1},\n  {2, 3}\n}", ((0, 1), (2, 3))),
        ("{{0,2,4},{1,3,5,6}}", ((0, 2, 4), (1, 3, 5, 6))),
        ("{{}}", ((),)),
        ("{{0,1},{}}", ((0, 1), ())),
        ("{{-1,2}}", ((-1, 2),)),
        ("[2,4]<=[8]", ((0, 1, 2, 3), (4, 5, 6, 7))),
        ("[4,2]<=[2,4]T(1,0)", ((0, 4), (1, 5), (2, 6), (3, 7))),
        ("[8,2]<=[2,8]T(1,0)", tuple((i, i + 8) for i in range(8))),
        ("[2,4]<=[2,4]T(0,1)", ((0, 1, 2, 3), (4, 5, 6, 7))),
        ("[1,8]<=[8]", (tuple(range(8)),)),
        ("[0,0]<=[0]", ()),
        ("[ 2 , 4 ] <= [ 8 ]", ((0, 1, 2, 3), (4, 5, 6, 7))),
    ],
)
def test_list_and_iota_forms(text: str, groups: tuple[tuple[int, ...], ...]) -> None:
    rg = ReplicaGroups.parse(text)
    assert rg.groups == groups
    assert rg.raw == text and rg.to_text() == text


# Expected groups were printed by XLA (jaxlib 0.10.2, print_full_replica_group_list).
MESH_CASES = [
    ("mesh['axis_0'=2,'axis_1'=2] {'axis_1'}", "{{0,1},{2,3}}"),
    ("mesh['a'=2,'b'=4] {'b'}", "{{0,1,2,3},{4,5,6,7}}"),
    ("mesh['a'=2,'b'=4] {'a'}", "{{0,4},{1,5},{2,6},{3,7}}"),
    ("mesh['a'=2,'b'=4] {'b','a'}", "{{0,4,1,5,2,6,3,7}}"),
    ("mesh['a'=8] {'a':(2)2}", "{{0,2},{1,3},{4,6},{5,7}}"),
    ("mesh['a'=4] {'a':(1)2}", "{{0,2},{1,3}}"),
    ("mesh['a'=8,'b'=2] {'a':(1)2,'a':(4)2}", "{{0,2,8,10},{1,3,9,11},{4,6,12,14},{5,7,13,15}}"),
    ("mesh['a'=8,'b'=2] {'a':(4)2,'b', 'a':(1)2}", "{{0,8,1,9,2,10,3,11},{4,12,5,13,6,14,7,15}}"),
    ("mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'b'}", "{{0,2,4,6},{1,3,5,7}}"),
    ("mesh['x'=2,'y'=2], device_ids=([2,2]T(1,0)) {'y'}", "{{0,2},{1,3}}"),
    ("mesh['x'=2,'y'=2], device_ids=(0,2,1,3) {'x'}", "{{0,1},{2,3}}"),
    ("mesh['x'=2,'y'=2], device_ids=([4]) {'x'}", "{{0,2},{1,3}}"),
    ("mesh['x'=2,'y'=2] {'x', 'y'}", "{{0,1,2,3}}"),
    ('mesh["x"=2,\'y\'=2] {\'x\'}', "{{0,2},{1,3}}"),
]


@pytest.mark.parametrize(("text", "expected"), MESH_CASES)
def test_mesh_form_materialises_like_xla(text: str, expected: str) -> None:
    rg = ReplicaGroups.parse(text)
    assert rg.kind == "mesh"
    assert ReplicaGroups.from_groups(rg.groups).to_text() == expected
    assert rg.to_text() == text


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("maximal_mesh[device_id=1] {}", ((1,),)),
        ("mesh[x=2,y=4] {y}", ((0, 1, 2, 3), (4, 5, 6, 7))),  # older unquoted spelling
        ("mesh['x'=2,'y'=4] {1}", ((0, 1, 2, 3), (4, 5, 6, 7))),  # axis by index
        ("mesh['x'=2,'y'=4] {'x':(1)2}", None),  # sub-axis must be smaller than the axis
        ("mesh['x'=2,'y'=2] {}", ((0,), (1,), (2,), (3,))),
        ("mesh['a\\'b'=2] {'a\\'b'}", ((0, 1),)),
        # XLA prints a proto's mesh without axes so (its parser refuses it): no groups, all devices
        ("mesh[] {}", ()),
        ("maximal_mesh[device_id=-2] {}", ((-2,),)),
    ],
)
def test_mesh_variants(text: str, groups: tuple[tuple[int, ...], ...] | None) -> None:
    if groups is None:
        with pytest.raises(ReplicaGroupsError):
            ReplicaGroups.parse(text)
    else:
        assert ReplicaGroups.parse(text).groups == groups


@pytest.mark.parametrize(("text", "expected"), MESH_CASES + [("[4,2]<=[2,4]T(1,0)", "{{0,4},{1,5},{2,6},{3,7}}")])
def test_mesh_expectations_still_match_xla(xla_hlo, text: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    assert xla_groups(xla_hlo, text) == expected


# ----------------------------------------------------------------------------
# Iota materialisation
# ----------------------------------------------------------------------------


@st.composite
def iota_specs(draw: st.DrawFn) -> tuple[int, int, list[int], list[int]]:
    dims = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    perm = draw(st.permutations(range(len(dims)))) if len(dims) > 1 else [0]
    total = math.prod(dims)
    size = draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
    return total // size, size, dims, list(perm)


def iota_text(groups: int, size: int, dims: list[int], perm: list[int]) -> str:
    text = f"[{groups},{size}]<=[{','.join(map(str, dims))}]"
    return text + (f"T({','.join(map(str, perm))})" if len(dims) > 1 else "")


@given(iota_specs())
def test_iota_matches_reference(spec: tuple[int, int, list[int], list[int]]) -> None:
    rg = ReplicaGroups.parse(iota_text(*spec))
    assert rg.kind == "iota"
    assert [list(g) for g in rg.groups] == reference_iota_groups(*spec)


@given(iota_specs())
def test_iota_matches_xla(xla_hlo, spec: tuple[int, int, list[int], list[int]]) -> None:  # type: ignore[no-untyped-def]
    text = iota_text(*spec)
    assert xla_groups(xla_hlo, text) == ReplicaGroups.from_groups(ReplicaGroups.parse(text).groups).to_text()


@st.composite
def mesh_texts(draw: st.DrawFn) -> str:
    sizes = draw(st.lists(st.sampled_from([2, 3, 4, 8]), min_size=1, max_size=3))
    names = [f"ax{i}" for i in range(len(sizes))]
    refs: list[str] = []
    for i in draw(st.permutations(range(len(sizes)))):
        choice = draw(st.sampled_from(["skip", "full", "sub"]))
        if choice == "full":
            refs.append(f"'{names[i]}'")
        elif choice == "sub" and sizes[i] == 8:
            subs = [[(1, 2)], [(2, 2)], [(4, 2)], [(1, 4)], [(2, 4)], [(1, 2), (4, 2)]]
            for pre, size in draw(st.sampled_from(subs)):
                refs.append(f"'{names[i]}':({pre}){size}")
    refs = draw(st.permutations(refs))
    devices = ""
    if len(sizes) > 1 and draw(st.booleans()):
        perm = draw(st.permutations(range(len(sizes))))
        devices = f", device_ids=([{','.join(map(str, sizes))}]T({','.join(map(str, perm))}))"
    axes = ",".join(f"'{n}'={s}" for n, s in zip(names, sizes))
    return f"mesh[{axes}]{devices} {{{','.join(refs)}}}"


@given(mesh_texts())
def test_generated_meshes_partition_the_devices(text: str) -> None:
    try:
        rg = ReplicaGroups.parse(text)
    except ReplicaGroupsError:
        return
    total = math.prod(int(s) for s in re.findall(r"=(\d+)", text.split("]")[0]))
    assert sorted(d for g in rg.groups for d in g) == list(range(total))
    assert len({len(g) for g in rg.groups}) == 1


@given(mesh_texts())
def test_generated_meshes_match_xla(xla_hlo, text: str) -> None:  # type: ignore[no-untyped-def]
    try:
        rg = ReplicaGroups.parse(text)
    except ReplicaGroupsError:
        assume(False)
        raise
    assume(rg.group_size() > 1)  # this XLA rejects groups of one device
    assert xla_groups(xla_hlo, text) == ReplicaGroups.from_groups(rg.groups).to_text()


# ----------------------------------------------------------------------------
# API
# ----------------------------------------------------------------------------


def test_equality_and_hash_use_materialised_groups() -> None:
    a = ReplicaGroups.parse("[2,4]<=[8]")
    b = ReplicaGroups.parse("{{0,1,2,3},{4,5,6,7}}")
    c = ReplicaGroups.from_groups([[0, 1, 2, 3], [4, 5, 6, 7]])
    d = ReplicaGroups.parse("mesh['a'=2,'b'=4] {'b'}")
    assert a == b == c == d and len({a, b, c, d}) == 1
    assert a != ReplicaGroups.parse("[4,2]<=[8]")
    assert a != "[2,4]<=[8]"
    assert (a.kind, b.kind, c.kind, d.kind) == ("iota", "list", "list", "mesh")


def test_iota_lists_compare_by_canonical_form_exactly_when_their_groups_are_equal() -> None:
    """Every iota over up to four dimensions of size 1..4 in every transpose: two compare
    equal (without spelling their groups out) exactly when their spelled-out groups are."""
    import itertools

    from hlo_dedup.ir.device_groups import DeviceGroups

    by_groups: dict[tuple, DeviceGroups] = {}
    for rank in range(1, 5):
        for dims in itertools.product((1, 2, 3, 4), repeat=rank):
            total = math.prod(dims)
            for perm in itertools.permutations(range(rank)):
                compact = DeviceGroups.iota(1, total, dims, perm)
                spelled = tuple(reference_iota_groups(1, total, list(dims), list(perm))[0])
                seen = by_groups.setdefault((spelled,), compact)
                assert seen == compact and hash(seen) == hash(compact)
                assert repr(seen).startswith("DeviceGroups(iota")  # neither was spelled out
                assert DeviceGroups.iota(1, total, dims, perm) == ((spelled,))
                for size in (d for d in (1, 2, 3, total) if total % d == 0):  # hashes agree across forms
                    chunks = [spelled[i : i + size] for i in range(0, total, size)]
                    assert hash(DeviceGroups.iota(total // size, size, dims, perm)) == hash(DeviceGroups.of(chunks))
    groups = list(by_groups.values())
    assert all(a != b for a, b in zip(groups, groups[1:]))
    assert len({hash(g) for g in groups}) > 0.99 * len(groups)  # the hash tells them apart too


def test_to_text_prints_xla_list_form_when_built_from_groups() -> None:
    assert ReplicaGroups.from_groups([[0, 1], [2, 3]]).to_text() == "{{0,1},{2,3}}"
    assert ReplicaGroups.from_groups([]).to_text() == "{}"
    assert ReplicaGroups.from_groups([[]]).to_text() == "{{}}"
    assert str(ReplicaGroups.parse("{{0, 1}}")) == "{{0, 1}}"


def test_group_size() -> None:
    assert ReplicaGroups.parse("[2,4]<=[8]").group_size() == 4
    assert ReplicaGroups.parse("{{0,1,2},{3,4,5}}").group_size(64) == 3
    empty = ReplicaGroups.parse("{}")
    assert empty.is_empty and empty.group_size(16) == 16
    with pytest.raises(ValueError, match="total_devices"):
        empty.group_size()


def test_parse_is_memoised() -> None:
    assert ReplicaGroups.parse("[4,4]<=[16]") is ReplicaGroups.parse("[4,4]<=[16]")
    assert parse_replica_groups.cache_info().maxsize


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected"),
        ("{{0,1}", "expected '}'"),
        ("{{0,1},}", "expected '{'"),
        ("{0,1}", "expected '{'"),
        ("{{0,1}} x", "unexpected text"),
        ("{{0,1.5}}", "expected '}'"),
        ("{{99999999999999999999}}", "int64"),
        ("[2,4]", "expected '<='"),
        ("[8]<=[8]", "exactly"),
        ("[2,4]<=[2,4]", "T("),
        ("[8,1]<=[8]T(0)", "unexpected text"),
        ("[2,2]<=[2,3]T(1,0)", "hold 6 devices"),
        ("[2,4]<=[2,4]T(0,0)", "permutation"),
        ("[2,4]<=[2,4]T(0,2)", "permutation"),
        ("[2,4]<=[]", "empty"),
        ("mesh[] {'a'}", "end the grouped mesh axes of an empty mesh"),
        ("mesh[], device_ids=(0) {}", "expected '{'"),
        ("mesh['a'=2,'a'=2] {'a'}", "duplicate"),
        ("mesh['a'=0] {'a'}", "positive"),
        ("mesh['a'=2] {'b'}", "unknown mesh axis"),
        ("mesh['a'=2] {5}", "unknown mesh axis"),
        ("mesh['a'=2]", "expected '{'"),
        ("mesh['a'=8] {'a':(1)2,'a':(2)2}", "merged"),
        ("mesh['a'=8] {'a':(1)4,'a':(2)2}", "overlap"),
        ("mesh['a'=8] {'a','a':(2)2}", "overlap"),
        ("mesh['a'=8] {'a':(1)8}", "not smaller"),
        ("mesh['a'=8] {'a':(3)2}", "does not divide"),
        ("mesh['a'=8] {'a':(1)1}", "size > 1"),
        ("mesh['a'=8] {'a':2}", "expected '('"),
        ("mesh['x'=2,'y'=2], device_ids=(0,1,2,3) {'x'}", "identity"),
        ("mesh['x'=2,'y'=2], device_ids=(0,1,2) {'x'}", "lists 3"),
        ("mesh['x'=2,'y'=2], device_ids=(0,1,1,3) {'x'}", "permutation"),
        ("mesh['x'=2,'y'=2], device_ids=([8]) {'x'}", "holds 8 devices"),
        ("mesh['x'=2,'y'=2], ids=(0) {'x'}", "device_ids"),
        ("mesh['a\\q'=2] {}", "bad escape"),
        ("maximal_mesh[device_id=1] {'a'}", "unknown mesh axis"),
        ("maximal_mesh[id=1] {}", "device_id"),
        ("grid[2]", "expected"),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(ReplicaGroupsError, match=re.escape(message)) as info:
        ReplicaGroups.parse(text)
    assert isinstance(info.value, ValueError)


@given(st.text("{}[]<=T(),0123456789 mesh'ax=:_", max_size=40))
def test_arbitrary_text_only_raises_replica_groups_error(text: str) -> None:
    try:
        ReplicaGroups.parse(text)
    except ReplicaGroupsError:
        pass


# ----------------------------------------------------------------------------
# Corpus
# ----------------------------------------------------------------------------

_VALUE_RE = re.compile(
    r"replica_groups=(\[[0-9,]*\]<=\[[0-9,]*\](?:T\([0-9,]*\))?"
    r"|(?:maximal_)?mesh\[[^\]]*\](?:,\s*device_ids=\((?:[^()]|\([^()]*\))*\))?\s*\{[^}]*\}"
    r"|\{)"
)


def replica_group_values(text: str) -> list[str]:
    values = []
    for m in _VALUE_RE.finditer(text):
        if m.group(1) != "{":
            values.append(m.group(1))
            continue
        depth, end = 0, m.start(1)
        for end in range(m.start(1), len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        values.append(text[m.start(1) : end + 1])
    return values


@pytest.mark.corpus
def test_every_corpus_replica_groups_value_parses() -> None:
    values: set[str] = set()
    for path in corpus_files(every=True):
        values.update(replica_group_values(path.read_text(encoding="utf-8", errors="surrogateescape")))
    assert len(values) > 20
    kinds = {ReplicaGroups.parse(v).kind for v in values}
    assert kinds == {"list", "iota", "mesh"}
