"""`neuron_all_gather_duplicate_remover` (neuronx-cc #106) against its spec: which gathers fold.

Spec: shared/spec/dedup-passes.txt, first half. Each test below targets one rule: a
FindRawParameter walk arm, a key column, a field that is deliberately NOT a key column
(folded, maybe with a hazard), the per-computation scope and keep-first. What a fold does
next (HloDCE, the log lines, hazards, records, atomicity, real JAX modules) is in
test_all_gather_fold_effects.py.
"""

from __future__ import annotations

import pytest
from gather_cases import (
    G4,
    P0,
    P01,
    SINGLETONS,
    assert_folded,
    assert_not_folded,
    entry,
    gathers,
    operands,
    pair,
    run,
)

from support import REPO, corpus_modules
from hlo_dedup import parse_module

# ------------------------------------------------------------- FindRawParameter walk arms


def test_walk_parameter_bottoms_out_and_folds(check_output) -> None:
    m = pair(P0, "p0", "p0")
    result = run(m)
    assert_folded(m, result)
    assert result.folds[0].key["parameter"] == "p0"
    check_output(m)


def test_walk_get_tuple_element_records_index() -> None:
    # Two distinct get-tuple-element instructions reading the same leaf of a tuple parameter.
    prelude = """
  p = (f32[2,4]{1,0}, f32[2,4]{1,0}) parameter(0)
  g0 = f32[2,4]{1,0} get-tuple-element(p), index=1
  g1 = f32[2,4]{1,0} get-tuple-element(p), index=1"""
    m = pair(prelude, "g0", "g1")
    result = run(m)
    assert_folded(m, result)
    assert result.folds[0].key["index_path"] == [1]


def test_walk_tuple_moves_to_the_indexed_element(check_output) -> None:
    # gte(tuple(p0, p1), 1) is p1 itself: the walk pops the index at the tuple and lands on
    # p1 with an empty path, the same key as a gather of p1 directly.
    prelude = P01 + """
  t = (f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(p0, p1)
  g = f32[2,4]{1,0} get-tuple-element(t), index=1"""
    m = pair(prelude, "g", "p1")
    result = run(m)
    assert_folded(m, result)
    assert result.folds[0].key["parameter"] == "p1"
    assert result.folds[0].key["index_path"] == []
    check_output(m)


@pytest.mark.parametrize(
    "prelude, operand",
    [
        # index 2 of a 2-element tuple: out of range, the walk gives up.
        (P01 + """
  t = (f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(p0, p1)
  g = f32[2,4]{1,0} get-tuple-element(t), index=2""", "g"),
        # a negative index is out of range too.
        (P01 + """
  t = (f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(p0, p1)
  g = f32[2,4]{1,0} get-tuple-element(t), index=-1""", "g"),
        # a tuple reached with no pending get-tuple-element index (idx stays -1).
        (P01 + """
  t = (f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(p0, p1)""", "t"),
    ],
    ids=["index-past-end", "negative-index", "no-index"],
)
def test_walk_tuple_out_of_range_skips_the_gather(prelude: str, operand: str) -> None:
    # Both gathers read the very same instruction, so they would share a key if the walk
    # reached a parameter; it must not, so neither is a candidate.
    m = pair(prelude, operand, operand)
    before = m.to_text()
    assert_not_folded(m, run(m), before)


def test_walk_opt_barrier_is_tunnelled(check_output) -> None:
    prelude = P01 + """
  t = (f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(p0, p1)
  ob = (f32[2,4]{1,0}, f32[2,4]{1,0}) opt-barrier(t)
  g = f32[2,4]{1,0} get-tuple-element(ob), index=0"""
    m = pair(prelude, "g", "p0")
    result = run(m)
    assert_folded(m, result)
    assert result.folds[0].key["parameter"] == "p0"
    check_output(m)


def test_walk_same_shape_convert_is_tunnelled(check_output) -> None:
    prelude = P0 + "\n  c = f32[2,4]{1,0} convert(p0)"
    m = pair(prelude, "c", "p0")
    assert_folded(m, run(m))
    check_output(m)


@pytest.mark.parametrize(
    "convert, out",
    [
        ("c = bf16[2,4]{1,0} convert(p0)", "bf16[8,4]{1,0}"),  # dtype change
        ("c = f32[2,4]{0,1} convert(p0)", "f32[8,4]{1,0}"),  # layout change: not Shape::Equal
    ],
    ids=["dtype", "layout"],
)
def test_walk_shape_changing_convert_stops_the_walk(convert: str, out: str) -> None:
    m = pair(P0 + "\n  " + convert, "c", "c", out_a=out)
    before = m.to_text()
    assert_not_folded(m, run(m), before)


def test_walk_nested_all_gather_is_tunnelled(check_output) -> None:
    prelude = P0 + "\n  inner = f32[4,4]{1,0} all-gather(p0), replica_groups={{0,1},{2,3}}, dimensions={0}"
    m = pair(prelude, "inner", "inner", attrs_a="replica_groups={{0,2},{1,3}}, dimensions={0}")
    result = run(m)
    assert_folded(m, result)
    assert result.folds[0].key["parameter"] == "p0"
    assert result.hazards == []  # both walks crossed the same inner gather
    assert gathers(m) == ["inner", "ag_a"]
    check_output(m)


def test_walk_all_gather_start_is_tunnelled(check_output) -> None:
    # get-tuple-element(all-gather-start(p0), 1): the walk records index 1, crosses the start
    # to p0, so both outer gathers key on (p0, path [1]).
    prelude = P0 + """
  ags = (f32[2,4]{1,0}, f32[8,4]{1,0}) all-gather-start(p0), replica_groups={{0,1,2,3}}, dimensions={0}
  agd = f32[8,4]{1,0} all-gather-done(ags)
  g = f32[8,4]{1,0} get-tuple-element(ags), index=1"""
    m = pair(prelude, "g", "g", out_a="f32[32,4]{1,0}")
    result = run(m)
    assert_folded(m, result)
    assert result.folds[0].key["parameter"] == "p0"
    assert result.folds[0].key["index_path"] == [1]
    assert gathers(m, "all-gather-start") == ["ags"]
    assert gathers(m, "all-gather-done") == ["agd"]  # side-effecting: DCE keeps it
    check_output(m)


@pytest.mark.parametrize(
    "op",
    [
        "n = f32[2,4]{1,0} negate(p0)",
        "n = f32[2,4]{1,0} copy(p0)",
        "n = f32[2,4]{1,0} bitcast(p0)",
        "n = f32[2,4]{1,0} reshape(p0)",
        "n = f32[2,4]{1,0} add(p0, p0)",
        "n = f32[2,4]{1,0} bitcast-convert(p0)",
    ],
    ids=lambda s: s.split()[3].split("(")[0],
)
def test_walk_any_other_op_stops_and_skips_the_gather(op: str) -> None:
    m = pair(P0 + "\n  " + op, "n", "n")
    before = m.to_text()
    assert_not_folded(m, run(m), before)


# --------------------------------------------------------------------------- key columns


def test_key_parameter_identity() -> None:
    m = pair(P01, "p0", "p1")  # same shape, same config, different parameter
    before = m.to_text()
    assert_not_folded(m, run(m), before)


LEAF = "f32[2,4]{1,0}"
INNER = f"({LEAF}, {LEAF})"
NESTED = f"""
  p = ({INNER}, {INNER}) parameter(0)
  p_0 = {INNER} get-tuple-element(p), index=0
  p_1 = {INNER} get-tuple-element(p), index=1
  t = ({INNER}, {INNER}) tuple(p_0, p_1)"""


def _leaf(name: str, base: str, i: int, j: int) -> str:
    """`name` = get-tuple-element(get-tuple-element(base, i), j), with its own two instructions."""
    return (f"\n  {name}_mid = {INNER} get-tuple-element({base}), index={i}"
            f"\n  {name} = {LEAF} get-tuple-element({name}_mid), index={j}")


def test_key_index_path_flat_tuple_leaves_never_collide() -> None:
    prelude = f"""
  p = ({LEAF}, {LEAF}) parameter(0)
  g0 = {LEAF} get-tuple-element(p), index=0
  g1 = {LEAF} get-tuple-element(p), index=1"""
    m = pair(prelude, "g0", "g1")
    before = m.to_text()
    assert_not_folded(m, run(m), before)


@pytest.mark.parametrize(
    "x, y",
    [((0, 1), (1, 0)), ((0, 0), (1, 0)), ((1, 1), (1, 0))],
    ids=["swapped", "outer-differs", "inner-differs"],
)
def test_key_index_path_nested_leaves_never_collide(x: tuple[int, int], y: tuple[int, int]) -> None:
    m = pair(NESTED + _leaf("x", "p", *x) + _leaf("y", "p", *y), "x", "y")
    before = m.to_text()
    assert_not_folded(m, run(m), before)


@pytest.mark.parametrize("base_y", ["p", "t"], ids=["same-route", "through-tuple"])
def test_key_index_path_same_leaf_folds(base_y: str) -> None:
    # p{1}{0} read twice; through t = tuple(p_0, p_1) the tuple arm pops index 1 and lands on
    # p_1 = get-tuple-element(p, 1), so the path is again [0, 1].
    m = pair(NESTED + _leaf("x", "p", 1, 0) + _leaf("y", base_y, 1, 0), "x", "y")
    result = run(m)
    assert_folded(m, result)
    # root first: [index into p, index into p{1}] reaches p{1}{0}
    assert result.folds[0].key["index_path"] == [1, 0]


def test_key_element_type() -> None:
    # Same parameter, path, dimensions and groups; only the declared element type differs.
    m = pair(P0, "p0", "p0", out_a="f32[8,4]{1,0}", out_b="bf16[8,4]{1,0}")
    before = m.to_text()
    assert_not_folded(m, run(m), before)


@pytest.mark.parametrize(
    "out_a, out_b, folds",
    [
        ("f32[8,4]{1,0}", "f32[8,4]{0,1}", False),  # different layouts: layout-sensitive key
        ("f32[8,4]", "f32[8,4]{1,0}", True),  # no layout == the default layout
        ("f32[8,4]", "f32[8,4]{0,1}", False),  # no layout != a non-default layout
        ("f32[8,4]{1,0}", "f32[4,8]{1,0}", False),  # different dimensions
    ],
)
def test_key_shape_is_layout_sensitive(out_a: str, out_b: str, folds: bool) -> None:
    m = pair(P0, "p0", "p0", out_a=out_a, out_b=out_b)
    before = m.to_text()
    result = run(m)
    if folds:
        assert_folded(m, result)
    else:
        assert_not_folded(m, result, before)


@pytest.mark.parametrize(
    "groups_a, groups_b",
    [
        ("{{0,1},{2,3}}", "{{0,2},{1,3}}"),  # same group size, different members
        ("{{0,1},{2,3}}", "{{1,0},{2,3}}"),  # order within a group is the gather order
        ("{}", "{{0,1,2,3}}"),  # empty (all devices) is not the explicit list
        # the same mesh and axis over two device orders
        ("mesh['a'=2,'b'=2] {'a'}", "mesh['a'=2,'b'=2], device_ids=([2,2]T(1,0)) {'a'}"),
    ],
)
def test_key_replica_groups(groups_a: str, groups_b: str) -> None:
    out = "f32[8,4]{1,0}" if "0,1,2,3" in groups_b else "f32[4,4]{1,0}"
    m = pair(P0, "p0", "p0", out_a=out, attrs_a=f"replica_groups={groups_a}, dimensions={{0}}",
             attrs_b=f"replica_groups={groups_b}, dimensions={{0}}")
    before = m.to_text()
    assert_not_folded(m, run(m), before)


@pytest.mark.parametrize(
    "iota, explicit",
    [
        ("[2,2]<=[4]", "{{0,1},{2,3}}"),
        ("[2,2]<=[2,2]T(1,0)", "{{0,2},{1,3}}"),
        # mesh axes (XLA's newest form, as in gspmd_post_opt.hlo): grouping a 2x2 mesh
        # along 'b' joins devices that share 'a', and vice versa
        ("mesh['a'=2,'b'=2] {'b'}", "{{0,1},{2,3}}"),
        ("mesh['a'=2,'b'=2] {'a'}", "{{0,2},{1,3}}"),
        # a mesh over a device order of its own: `, device_ids=` belongs to the groups
        ("mesh['a'=2,'b'=2], device_ids=([2,2]T(1,0)) {'a'}", "{{0,1},{2,3}}"),
        ("mesh['a'=2,'b'=2], device_ids=(0,2,1,3) {'b'}", "{{0,2},{1,3}}"),
    ],
)
def test_key_iota_and_explicit_replica_groups_fold(iota: str, explicit: str, check_output) -> None:
    m = pair(P0, "p0", "p0", out_a="f32[4,4]{1,0}", attrs_a=f"replica_groups={iota}, dimensions={{0}}",
             attrs_b=f"replica_groups={explicit}, dimensions={{0}}")
    result = run(m)
    assert_folded(m, result)
    assert result.hazards == []
    check_output(m)


# ------------------------------------------------------ not key columns: fold, maybe hazard



def test_gather_dimension_is_not_a_column_but_is_a_hazard(check_output) -> None:
    m = pair(P0, "p0", "p0", out_a="f32[2,4]{1,0}",
             attrs_a=f"{SINGLETONS}, dimensions={{0}}", attrs_b=f"{SINGLETONS}, dimensions={{1}}")
    result = run(m)
    assert_folded(m, result)
    assert result.folds[0].hazardous
    [hazard] = result.hazards
    assert (hazard.kept, hazard.removed, hazard.refused) == ("ag_a", "ag_b", False)
    assert any("all_gather_dimension" in r for r in hazard.reasons)
    check_output(m)


def test_constrain_layout_is_not_a_column() -> None:
    # constrain_layout pins the layout, which the (layout-sensitive) shape column already
    # compares; the values are the same, so no hazard either.
    m = pair(P0, "p0", "p0", attrs_a=G4 + ", constrain_layout=true", attrs_b=G4)
    result = run(m)
    assert_folded(m, result)
    assert result.hazards == []


def test_use_global_device_ids_is_not_a_column_but_is_a_hazard(check_output) -> None:
    # With a channel id, use_global_device_ids=true is flattened-id mode and false is
    # cross-replica-and-partition: the same replica_groups name different devices.
    m = pair(P0, "p0", "p0", attrs_a="channel_id=1, " + G4 + ", use_global_device_ids=true",
             attrs_b="channel_id=1, " + G4)
    result = run(m)
    assert_folded(m, result)
    [hazard] = result.hazards
    assert any("collective modes" in r for r in hazard.reasons)
    check_output(m)


def test_channel_id_values_are_not_a_column() -> None:
    # Different channel ids, same mode (both present): folded, and not a hazard.
    m = pair(P0, "p0", "p0", attrs_a="channel_id=1, " + G4 + ", use_global_device_ids=true",
             attrs_b="channel_id=2, " + G4 + ", use_global_device_ids=true")
    result = run(m)
    assert_folded(m, result)
    assert result.hazards == []


def test_channel_id_present_vs_absent_folds_with_a_hazard(check_output) -> None:
    m = pair(P0, "p0", "p0", attrs_a="channel_id=1, " + G4, attrs_b=G4)
    result = run(m)
    assert_folded(m, result)
    [hazard] = result.hazards
    assert any("cross_replica" in r and "channel_id" in r for r in hazard.reasons)
    check_output(m)


def test_gather_folds_onto_its_own_operand(check_output) -> None:
    # Group size 1: outer = all-gather(inner) has inner's key (p0, f32[2,4], singletons), so
    # it folds onto its own operand. The walks differ (outer crossed inner), so it is
    # reported; the values agree since a group of one gathers nothing.
    body = P0 + f"""
  inner = f32[2,4]{{1,0}} all-gather(p0), {SINGLETONS}, dimensions={{0}}
  outer = f32[2,4]{{1,0}} all-gather(inner), {SINGLETONS}, dimensions={{0}}
  ROOT out = f32[2,4]{{1,0}} negate(outer)"""
    m = entry(body)
    result = run(m)
    assert [(f.kept, f.removed) for f in result.folds] == [("inner", "outer")]
    assert [h.reasons for h in result.hazards] and "inner all-gathers" in result.hazards[0].reasons[0]
    assert operands(m, "out") == ["inner"]
    assert gathers(m) == ["inner"]
    check_output(m)


# ------------------------------------------------------------------- scope and candidates


WHILE_MODULE = """HloModule m

body {
  bp = (s32[], f32[2,4]{1,0}) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  w = f32[2,4]{1,0} get-tuple-element(bp), index=1
  ag_b0 = f32[8,4]{1,0} all-gather(w), replica_groups={{0,1,2,3}}, dimensions={0}
  ag_b1 = f32[8,4]{1,0} all-gather(w), replica_groups={{0,1,2,3}}, dimensions={0}
  sl0 = f32[2,4]{1,0} slice(ag_b0), slice={[0:2], [0:4]}
  sl1 = f32[2,4]{1,0} slice(ag_b1), slice={[2:4], [0:4]}
  sum = f32[2,4]{1,0} add(sl0, sl1)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], f32[2,4]{1,0}) tuple(i1, sum)
}

cond {
  cp = (s32[], f32[2,4]{1,0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}

ENTRY main {
  p0 = f32[2,4]{1,0} parameter(0)
  ag_e = f32[8,4]{1,0} all-gather(p0), replica_groups={{0,1,2,3}}, dimensions={0}
  zero = s32[] constant(0)
  init = (s32[], f32[2,4]{1,0}) tuple(zero, p0)
  loop = (s32[], f32[2,4]{1,0}) while(init), condition=cond, body=body
  lw = f32[2,4]{1,0} get-tuple-element(loop), index=1
  ROOT out = (f32[8,4]{1,0}, f32[2,4]{1,0}) tuple(ag_e, lw)
}
"""


def test_dedup_is_per_computation(check_output) -> None:
    # The body gathers the loop-carried copy of p0 twice (one fold inside the body); the
    # entry gathers p0 itself. The body's gathers key on the body's own parameter, and the
    # map is rebuilt per computation: nothing crosses into the entry.
    m = parse_module(WHILE_MODULE)
    result = run(m)
    assert [(f.computation, f.kept, f.removed) for f in result.folds] == [("body", "ag_b0", "ag_b1")]
    assert result.folds[0].key["index_path"] == [1]
    assert gathers(m) == ["ag_b0", "ag_e"]
    assert operands(m, "sl1", "body") == ["ag_b0"]
    check_output(m)


def test_computations_whose_text_holds_no_gather_are_skipped_only_while_read_as_is() -> None:
    # The pass skips a computation of an unchanged module when its lines never say
    # all-gather; once the module was edited, every computation is scanned.
    from hlo_dedup.ir import HloInstruction

    m = entry(P0 + "\n  ROOT n = f32[2,4]{1,0} negate(p0)")
    assert run(m).folds == []
    comp = m.entry
    p0 = comp.get_instruction("p0")
    made = [comp.add_instruction(HloInstruction(name, "all-gather", "f32[8,4]{1,0}", [p0],
                                                [("replica_groups", "{{0,1,2,3}}"), ("dimensions", "{0}")]))
            for name in ("ag_a", "ag_b")]
    root = comp.add_instruction(HloInstruction("out", "tuple", "(f32[8,4]{1,0}, f32[8,4]{1,0})", made))
    comp.set_root(root, accept_different_shape=True)
    result = run(m)
    assert [(f.kept, f.removed) for f in result.folds] == [("ag_a", "ag_b")]


def test_the_text_search_finds_every_computation_s_gathers() -> None:
    from hlo_dedup.passes.all_gather_duplicate_remover import _MENTION, _by_computation
    from hlo_dedup.passes.raw_parameter_walk import GATHERS as _GATHERS

    seen = 0
    for path, m in corpus_modules():
        assert m.is_pristine()
        scanned = {c: g for c in m.computations if (g := [i for i in c if i.opcode in _GATHERS])}
        found = _by_computation(m, _GATHERS, _MENTION)
        assert found == scanned and list(found) == list(scanned), path.name
        seen += len(scanned)
    assert seen


def test_the_text_search_finds_every_layout_constrained_all_reduce() -> None:
    # What torch-xla's pin_layout gathers are; the survey looks at no other all-reduce.
    from hlo_dedup.passes.all_gather_duplicate_remover import _by_computation

    seen = 0
    for path in sorted((REPO / "tests" / "data" / "torch_xla").glob("*.hlo")):
        m, name = parse_module(path.read_text()), path.name
        pinned = [i for c in m.computations for i in c if i.opcode == "all-reduce" and i.constrain_layout]
        found = [i for insts in _by_computation(m, ("all-reduce",), "constrain_layout=true").values() for i in insts]
        assert set(pinned) <= set(found), name
        seen += len(pinned)
    assert seen


def test_all_gather_start_is_never_a_candidate() -> None:
    body = P0 + f"""
  st0 = (f32[2,4]{{1,0}}, f32[8,4]{{1,0}}) all-gather-start(p0), {G4}
  d0 = f32[8,4]{{1,0}} all-gather-done(st0)
  st1 = (f32[2,4]{{1,0}}, f32[8,4]{{1,0}}) all-gather-start(p0), {G4}
  d1 = f32[8,4]{{1,0}} all-gather-done(st1)
  ag = f32[8,4]{{1,0}} all-gather(p0), {G4}
  ROOT out = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(d0, d1, ag)"""
    m = entry(body)
    before = m.to_text()
    result = run(m)
    assert not result.changed and result.folds == []
    assert m.to_text() == before


def test_keep_first_in_instruction_order(check_output) -> None:
    # Names are deliberately not in instruction order: "z" comes first and is kept.
    body = P0 + f"""
  z = f32[8,4]{{1,0}} all-gather(p0), {G4}
  a = f32[8,4]{{1,0}} all-gather(p0), {G4}
  na = f32[8,4]{{1,0}} negate(a)
  m = f32[8,4]{{1,0}} all-gather(p0), {G4}
  nm = f32[8,4]{{1,0}} negate(m)
  ROOT out = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(z, na, nm)"""
    mod = entry(body)
    result = run(mod)
    assert [(f.kept, f.removed) for f in result.folds] == [("z", "a"), ("z", "m")]
    assert operands(mod, "na") == ["z"]
    assert operands(mod, "nm") == ["z"]
    assert operands(mod, "out") == ["z", "na", "nm"]
    assert gathers(mod) == ["z"]
    check_output(mod)
