"""`neuron_all_gather_duplicate_remover` (neuronx-cc #106) against its spec.

Spec: shared/spec/dedup-passes.txt, first half. Each test below targets one rule: a
FindRawParameter walk arm, a key column, a field that is deliberately NOT a key column,
the per-computation scope, keep-first, the changed-gated trailing HloDCE, the `--v=2`
log lines, the hazards this implementation reports on top of the faithful key, the fold
records, and atomicity on failure. The last part runs the pass over every real JAX module
in tests/data/jax and checks the output with XLA itself (re-parse, and a bitwise-equal
XLA:CPU execution before and after).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hlo_dedup import HloModule, HloParseError, parse_module
from hlo_dedup.passes import FoldRecord, NeuronAllGatherDuplicateRemover, PassResult

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
PASS = "neuron_all_gather_duplicate_remover"

# All-gather attributes used throughout: 4 devices in one group gathering dim 0, so a
# f32[2,4] shard becomes f32[8,4].
G4 = "replica_groups={{0,1,2,3}}, dimensions={0}"


# --------------------------------------------------------------------------- helpers


def entry(body: str, *, spmd: bool = True, before: str = "") -> HloModule:
    """A module whose ENTRY computation is `body` (indented instruction lines)."""
    return parse_module(f"HloModule m\n{before}\nENTRY main {{\n{body.strip(chr(10))}\n}}\n", spmd=spmd)


def run(module: HloModule, *, strict: bool = False) -> PassResult:
    return NeuronAllGatherDuplicateRemover(strict=strict).run_with_result(module)


def gathers(module: HloModule, opcode: str = "all-gather") -> list[str]:
    return [i.name for c in module.computations for i in c.instructions if i.opcode == opcode]


def operands(module: HloModule, name: str, comp: str = "main") -> list[str]:
    computation = module.get_computation(comp)
    assert computation is not None
    inst = computation.get_instruction(name)
    assert inst is not None, f"{name} is gone"
    return [o.name for o in inst.operands]


def pair(prelude: str, a: str, b: str, *, out_a: str = "f32[8,4]{1,0}", out_b: str | None = None,
         attrs_a: str = G4, attrs_b: str | None = None, spmd: bool = True) -> HloModule:
    """`prelude`, then ag_a = all-gather(a) and ag_b = all-gather(b), both used by the root."""
    out_b = out_b or out_a
    body = f"""{prelude.strip(chr(10))}
  ag_a = {out_a} all-gather({a}), {attrs_a}
  ag_b = {out_b} all-gather({b}), {attrs_b or attrs_a}
  ROOT out = ({out_a}, {out_b}) tuple(ag_a, ag_b)"""
    return entry(body, spmd=spmd)


def assert_folded(module: HloModule, result: PassResult) -> None:
    """ag_b was folded onto ag_a: the root now reads ag_a twice and ag_b is gone."""
    assert result.changed
    assert [(f.kept, f.removed) for f in result.folds] == [("ag_a", "ag_b")]
    assert operands(module, "out") == ["ag_a", "ag_a"]
    assert module.entry.get_instruction("ag_b") is None


def assert_not_folded(module: HloModule, result: PassResult, before: str) -> None:
    assert not result.changed
    assert result.folds == []
    assert operands(module, "out") == ["ag_a", "ag_b"]
    assert module.to_text() == before


P0 = "  p0 = f32[2,4]{1,0} parameter(0)"
P01 = P0 + "\n  p1 = f32[2,4]{1,0} parameter(1)"


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

# Group size 1 ({{0},{1},{2},{3}}) keeps the output shape equal to the operand's whatever
# the gather dimension, so two gathers can differ in dimension and still share a key.
SINGLETONS = "replica_groups={{0},{1},{2},{3}}"


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


# ----------------------------------------------------------------- changed-gated HloDCE


def test_no_fold_keeps_dead_code() -> None:
    body = P01 + f"""
  dead = f32[2,4]{{1,0}} negate(p0)
  ag_a = f32[8,4]{{1,0}} all-gather(p0), {G4}
  ag_b = f32[8,4]{{1,0}} all-gather(p1), {G4}
  ROOT out = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(ag_a, ag_b)"""
    m = entry(body)
    before = m.to_text()
    result = run(m)
    assert not result.changed
    assert m.entry.get_instruction("dead") is not None
    assert m.to_text() == before


def test_fold_runs_dce_over_the_whole_module(check_output) -> None:
    before_comp = """
unused {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
"""
    body = P01 + f"""
  dead = f32[2,4]{{1,0}} negate(p1)
  dead2 = f32[2,4]{{1,0}} exponential(dead)
  ag_a = f32[8,4]{{1,0}} all-gather(p0), {G4}
  ag_b = f32[8,4]{{1,0}} all-gather(p0), {G4}
  ROOT out = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(ag_a, ag_b)"""
    m = entry(body, before=before_comp)
    result = run(m)
    assert_folded(m, result)
    names = [i.name for i in m.entry.instructions]
    assert names == ["p0", "p1", "ag_a", "out"]  # unrelated dead code went too
    assert m.get_computation("unused") is None  # and the unreachable computation
    check_output(m)


@pytest.mark.parametrize(
    "attrs, spmd",
    [
        ("channel_id=1, " + G4, False),  # non-SPMD: a channel id makes a collective side-effecting
        (G4 + ", constrain_layout=true", True),  # constrain_layout is always side-effecting
    ],
    ids=["channel-id-non-spmd", "constrain-layout"],
)
def test_side_effecting_duplicate_is_repointed_but_stays(attrs: str, spmd: bool, check_output) -> None:
    m = pair(P0, "p0", "p0", attrs_a=attrs, spmd=spmd)
    result = run(m)
    assert result.changed
    assert [(f.kept, f.removed) for f in result.folds] == [("ag_a", "ag_b")]
    assert operands(m, "out") == ["ag_a", "ag_a"]
    ag_b = m.entry.get_instruction("ag_b")
    assert ag_b is not None and ag_b.user_count == 0  # HloDCE may not delete it
    check_output(m)


def test_channel_id_duplicate_is_removed_in_spmd_module() -> None:
    # The control for the test above: the same module as an SPMD program loses ag_b.
    m = pair(P0, "p0", "p0", attrs_a="channel_id=1, " + G4, spmd=True)
    assert_folded(m, run(m))


# ------------------------------------------------------------------------------- logging

LOG_MODULE = """
  p0 = f32[2,4]{1,0} parameter(0)
  p1 = f32[2,4]{1,0} parameter(1)
  t = (f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(p0, p1)
  ob = (f32[2,4]{1,0}, f32[2,4]{1,0}) opt-barrier(t)
  g = f32[2,4]{1,0} get-tuple-element(ob), index=0
  c = f32[2,4]{1,0} convert(g)
  inner = f32[4,4]{1,0} all-gather(c), replica_groups={{0,1},{2,3}}, dimensions={0}
  ag0 = f32[8,4]{1,0} all-gather(inner), replica_groups={{0,2},{1,3}}, dimensions={0}
  ag1 = f32[8,4]{1,0} all-gather(inner), replica_groups={{0,2},{1,3}}, dimensions={0}
  n = f32[2,4]{1,0} negate(p1)
  ag2 = f32[8,4]{1,0} all-gather(n), replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT r = (f32[8,4]{1,0}, f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(ag0, ag1, ag2)
"""

_WALK_FROM_C = [
    "Finding raw parameter for instruction: c = f32[2,4]{1,0} convert(g)",
    "Found convert operation, moving to its input",
    "Finding raw parameter for instruction: g = f32[2,4]{1,0} get-tuple-element(ob), index=0",
    "Found get-tuple-element at index: 0",
    "Finding raw parameter for instruction: ob = (f32[2,4]{1,0}, f32[2,4]{1,0}) opt-barrier(t)",
    "Found optimization barrier, moving to its input",
    "Finding raw parameter for instruction: t = (f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(p0, p1)",
    "Found tuple, moving to element at index: 0",
    "Finding raw parameter for instruction: p0 = f32[2,4]{1,0} parameter(0)",
]
_INNER = "inner = f32[4,4]{1,0} all-gather(c), replica_groups={{0,1},{2,3}}, dimensions={0}"
_AG0 = "ag0 = f32[8,4]{1,0} all-gather(inner), replica_groups={{0,2},{1,3}}, dimensions={0}"
_AG1 = "ag1 = f32[8,4]{1,0} all-gather(inner), replica_groups={{0,2},{1,3}}, dimensions={0}"
EXPECTED_V2 = [
    "Running NeuronDuplicateParameterAllGatherRemover pass",
    "Processing computation: main",
    *_WALK_FROM_C,
    "Found all-gather instruction: " + _INNER,
    "Storing all-gather result for future use",
    "Finding raw parameter for instruction: " + _INNER,
    "Found all-gather operation, moving to its input",
    *_WALK_FROM_C,
    "Found all-gather instruction: " + _AG0,
    "Storing all-gather result for future use",
    "Finding raw parameter for instruction: " + _INNER,
    "Found all-gather operation, moving to its input",
    *_WALK_FROM_C,
    "Found all-gather instruction: " + _AG1,
    "Replacing all-gather with previous result: " + _AG0,
    # ag2: the walk stops at the negate, the gather is skipped without further lines
    "Finding raw parameter for instruction: n = f32[2,4]{1,0} negate(p1)",
    "NeuronDuplicateParameterAllGatherRemover pass complete",
]


def test_v2_logs_the_spec_lines_in_order(vlog) -> None:
    cap = vlog(2)
    m = entry(LOG_MODULE)
    result = run(m)
    assert [(f.kept, f.removed) for f in result.folds] == [("ag0", "ag1")]
    assert cap.messages() == EXPECTED_V2


def test_vmodule_enables_the_pass_lines(vlog) -> None:
    from hlo_dedup import logs

    cap = vlog(0)
    logs.configure(v=0, vmodule="neuron_all_gather_duplicate_remover=2", stream=cap.stream)
    run(entry(LOG_MODULE))
    assert cap.messages() == EXPECTED_V2


@pytest.mark.parametrize("v", [0, 1])
def test_nothing_logged_below_v2(vlog, v: int) -> None:
    cap = vlog(v)
    result = run(entry(LOG_MODULE))
    assert result.changed  # the pass did work, silently
    assert cap.raw == ""


# ------------------------------------------------------------------------------- hazards

HAZARDS = {
    # Two-operand gathers keyed on operand(0) only: the second outputs gather p1 vs p2.
    "multi-operand": (P01 + """
  p2 = f32[2,4]{1,0} parameter(2)
  ag_a = (f32[8,4]{1,0}, f32[8,4]{1,0}) all-gather(p0, p1), replica_groups={{0,1,2,3}}, dimensions={0}
  ag_b = (f32[8,4]{1,0}, f32[8,4]{1,0}) all-gather(p0, p2), replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT out = ((f32[8,4]{1,0}, f32[8,4]{1,0}), (f32[8,4]{1,0}, f32[8,4]{1,0})) tuple(ag_a, ag_b)""",
                      "beyond operand(0)"),
    # Inner gathers over different groups: device 0 gets [p0;p1;p0;p1] vs [p0;p2;p1;p3].
    "inner-groups": (P0 + """
  i1 = f32[4,4]{1,0} all-gather(p0), replica_groups={{0,1},{2,3}}, dimensions={0}
  i2 = f32[4,4]{1,0} all-gather(p0), replica_groups={{0,2},{1,3}}, dimensions={0}
  ag_a = f32[8,4]{1,0} all-gather(i1), replica_groups={{0,1},{2,3}}, dimensions={0}
  ag_b = f32[8,4]{1,0} all-gather(i2), replica_groups={{0,1},{2,3}}, dimensions={0}
  ROOT out = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(ag_a, ag_b)""", "inner all-gathers"),
    # Inner gathers along different dimensions, outer ones too: same f32[4,8] output.
    "inner-dims": (P0 + """
  i1 = f32[4,4]{1,0} all-gather(p0), replica_groups={{0,1},{2,3}}, dimensions={0}
  i2 = f32[2,8]{1,0} all-gather(p0), replica_groups={{0,1},{2,3}}, dimensions={1}
  ag_a = f32[4,8]{1,0} all-gather(i1), replica_groups={{0,2},{1,3}}, dimensions={1}
  ag_b = f32[4,8]{1,0} all-gather(i2), replica_groups={{0,2},{1,3}}, dimensions={0}
  ROOT out = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(ag_a, ag_b)""", "inner all-gathers"),
    "channel-presence": (P0 + f"""
  ag_a = f32[8,4]{{1,0}} all-gather(p0), channel_id=1, {G4}
  ag_b = f32[8,4]{{1,0}} all-gather(p0), {G4}
  ROOT out = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(ag_a, ag_b)""", "collective modes"),
    "dimension": (P0 + f"""
  ag_a = f32[2,4]{{1,0}} all-gather(p0), {SINGLETONS}, dimensions={{0}}
  ag_b = f32[2,4]{{1,0}} all-gather(p0), {SINGLETONS}, dimensions={{1}}
  ROOT out = (f32[2,4]{{1,0}}, f32[2,4]{{1,0}}) tuple(ag_a, ag_b)""", "all_gather_dimension"),
}


@pytest.mark.parametrize("case", sorted(HAZARDS))
def test_hazard_is_folded_and_reported(case: str, check_output) -> None:
    body, reason = HAZARDS[case]
    m = entry(body)
    result = run(m)
    assert_folded(m, result)
    assert result.folds[0].hazardous
    [hazard] = result.hazards
    assert (hazard.computation, hazard.kept, hazard.removed, hazard.refused) == ("main", "ag_a", "ag_b", False)
    assert any(reason in r for r in hazard.reasons), hazard.reasons
    check_output(m)


@pytest.mark.parametrize("case", sorted(HAZARDS))
def test_strict_refuses_hazardous_folds(case: str) -> None:
    body, reason = HAZARDS[case]
    m = entry(body)
    before = m.to_text()
    result = run(m, strict=True)
    assert not result.changed and result.folds == []
    [hazard] = result.hazards
    assert (hazard.kept, hazard.removed, hazard.refused) == ("ag_a", "ag_b", True)
    assert any(reason in r for r in hazard.reasons)
    assert m.to_text() == before


def test_strict_still_folds_safe_duplicates(check_output) -> None:
    # a (dim 0), b (dim 1), c (dim 1): b may not fold onto a, but c folds onto b.
    body = P0 + f"""
  a = f32[2,4]{{1,0}} all-gather(p0), {SINGLETONS}, dimensions={{0}}
  b = f32[2,4]{{1,0}} all-gather(p0), {SINGLETONS}, dimensions={{1}}
  c = f32[2,4]{{1,0}} all-gather(p0), {SINGLETONS}, dimensions={{1}}
  d = f32[2,4]{{1,0}} all-gather(p0), {SINGLETONS}, dimensions={{0}}
  ROOT out = (f32[2,4]{{1,0}}, f32[2,4]{{1,0}}, f32[2,4]{{1,0}}, f32[2,4]{{1,0}}) tuple(a, b, c, d)"""
    m = entry(body)
    result = run(m, strict=True)
    assert [(f.kept, f.removed, f.hazardous) for f in result.folds] == [("b", "c", False), ("a", "d", False)]
    assert [(h.kept, h.removed, h.refused) for h in result.hazards] == [("a", "b", True), ("a", "c", True)]
    assert operands(m, "out") == ["a", "b", "b", "a"]
    check_output(m)


def test_identical_multi_operand_gathers_are_not_a_hazard() -> None:
    body = P01 + """
  ag_a = (f32[8,4]{1,0}, f32[8,4]{1,0}) all-gather(p0, p1), replica_groups={{0,1,2,3}}, dimensions={0}
  ag_b = (f32[8,4]{1,0}, f32[8,4]{1,0}) all-gather(p0, p1), replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT out = ((f32[8,4]{1,0}, f32[8,4]{1,0}), (f32[8,4]{1,0}, f32[8,4]{1,0})) tuple(ag_a, ag_b)"""
    m = entry(body)
    result = run(m, strict=True)
    assert_folded(m, result)
    assert result.hazards == []


# -------------------------------------------------------------------------- fold records


def test_fold_record_fields_and_bytes() -> None:
    prelude = """
  p = (f32[2,4]{1,0}, f32[2,4]{1,0}) parameter(0)
  g0 = f32[2,4]{1,0} get-tuple-element(p), index=1
  g1 = f32[2,4]{1,0} get-tuple-element(p), index=1"""
    m = pair(prelude, "g0", "g1", attrs_a="replica_groups=[1,4]<=[4], dimensions={0}")
    [rec] = run(m).folds
    assert isinstance(rec, FoldRecord)
    assert (rec.pass_name, rec.computation, rec.kept, rec.removed) == (PASS, "main", "ag_a", "ag_b")
    assert rec.key == {
        "parameter": "p",
        "index_path": [1],
        "element_type": "f32",
        "shape": "f32[8,4]{1,0}",
        "replica_groups": [[0, 1, 2, 3]],  # the iota form, materialised
    }
    # f32[8,4]: 32 elements x 4 bytes = 128 bytes of output; each device already holds its
    # own f32[2,4] shard (1 of 4), so the removed gather would have moved 3/4 of it: 96.
    assert (rec.bytes_output, rec.bytes_per_device) == (128, 96)
    assert not rec.hazardous
    json.dumps(rec.key)  # the key is plain JSON data


@pytest.mark.parametrize(
    "prelude, a, out, attrs, expected",
    [
        # bf16[16,16]: 256 x 2 = 512 bytes; 8 shards, 7 of them received: 448.
        ("  p0 = bf16[2,16]{1,0} parameter(0)", "p0", "bf16[16,16]{1,0}",
         "replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}", (512, 448)),
        # s8[4,6] gathered along dim 1 from s8[4,3], 2 shards: 24 bytes, 12 received.
        ("  p0 = s8[4,3]{1,0} parameter(0)", "p0", "s8[4,6]{1,0}",
         "replica_groups={{0,1},{2,3}}, dimensions={1}", (24, 12)),
        # pred[8] from pred[2]: 8 one-byte elements, 4 shards: 8 and 6.
        ("  p0 = pred[2]{0} parameter(0)", "p0", "pred[8]{0}", G4, (8, 6)),
    ],
)
def test_fold_record_bytes(prelude: str, a: str, out: str, attrs: str, expected: tuple[int, int]) -> None:
    m = pair(prelude, a, a, out_a=out, attrs_a=attrs)
    [rec] = run(m).folds
    assert (rec.bytes_output, rec.bytes_per_device) == expected


def test_fold_record_bytes_of_a_tuple_gather() -> None:
    # Two f32[8,4] outputs = 256 bytes; 4 shards of each, 3 received: 192.
    body = P01 + """
  ag_a = (f32[8,4]{1,0}, f32[8,4]{1,0}) all-gather(p0, p1), replica_groups={{0,1,2,3}}, dimensions={0}
  ag_b = (f32[8,4]{1,0}, f32[8,4]{1,0}) all-gather(p0, p1), replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT out = ((f32[8,4]{1,0}, f32[8,4]{1,0}), (f32[8,4]{1,0}, f32[8,4]{1,0})) tuple(ag_a, ag_b)"""
    [rec] = run(entry(body)).folds
    assert (rec.bytes_output, rec.bytes_per_device) == (256, 192)
    assert rec.key["element_type"] == "tuple"  # XLA's element_type() of a tuple shape
    assert rec.key["shape"] == "(f32[8,4]{1,0}, f32[8,4]{1,0})"


# ------------------------------------------------------------- failures leave no trace

FOLDABLE = f"""
  p0 = f32[2,4]{{1,0}} parameter(0)
  p1 = f32[2,4]{{1,0}} parameter(1)
  ag_a = f32[8,4]{{1,0}} all-gather(p0), {G4}
  ag_b = f32[8,4]{{1,0}} all-gather(p0), {G4}
  dead = f32[2,4]{{1,0}} negate(p1)"""


@pytest.mark.parametrize(
    "extra, root_extra",
    [
        # met while keying a later gather
        ("bad = f32[8,4]{1,0} all-gather(p1), replica_groups={{0,1},{2,x}}, dimensions={0}", "bad"),
        ("bad = f32[8,4]{1,0} all-gather(p1), replica_groups=[2,2]<=[5], dimensions={0}", "bad"),
        ("bad = f32[8,4]{1,0} all-gather(p1), replica_groups={{0,1,2,3}}, dimensions={x}", "bad"),
        ("bad = f32[8,4]{1,0} all-gather(p1), channel_id=one, replica_groups={{0,1,2,3}}, dimensions={0}", "bad"),
        ("bad = f32[8,4]{1,0} all-gather(p1), replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=yes",
         "bad"),
        # met on the walk
        ("t = (f32[2,4]{1,0}) tuple(p1)\n  g = f32[2,4]{1,0} get-tuple-element(t), index=z\n"
         "  bad = f32[8,4]{1,0} all-gather(g), replica_groups={{0,1,2,3}}, dimensions={0}", "bad"),
        # met by the trailing HloDCE: the dead instruction's attributes
        ("dead2 = f32[2,4]{1,0} custom-call(p1), custom_call_target=\"foo\", custom_call_has_side_effect=maybe",
         None),
        ("dead2 = f32[2,4]{1,0} exponential(p1), frontend_attributes={a}", None),
    ],
    ids=["groups-syntax", "groups-iota-size", "dimensions", "channel-id", "global-ids", "gte-index",
         "dce-side-effect-flag", "dce-frontend-attributes"],
)
def test_failure_leaves_the_module_text_unchanged(extra: str, root_extra: str | None) -> None:
    root_ops = "ag_a, ag_b" + (f", {root_extra}" if root_extra else "")
    root_shape = "f32[8,4]{1,0}, f32[8,4]{1,0}" + (", f32[8,4]{1,0}" if root_extra else "")
    m = entry(FOLDABLE + f"\n  {extra}\n  ROOT out = ({root_shape}) tuple({root_ops})")
    before = m.to_text()
    with pytest.raises(HloParseError):
        run(m)
    assert m.to_text() == before
    # and the module is still usable: fix nothing, but the pass can be asked again
    with pytest.raises(HloParseError):
        run(m)
    assert m.to_text() == before


def test_failure_on_the_removed_duplicate_in_dce_leaves_text_unchanged() -> None:
    # ag_b is folded, then HloDCE asks whether it is side-effecting and meets a malformed
    # constrain_layout: the fold must be undone.
    m = pair(P0, "p0", "p0", attrs_b=G4 + ", constrain_layout=maybe")
    before = m.to_text()
    with pytest.raises(HloParseError):
        run(m)
    assert m.to_text() == before


def test_failure_in_a_later_computation_undoes_earlier_folds() -> None:
    # `first` is folded before the entry is even looked at; the malformed flag on the
    # entry's dead custom-call is only read by the trailing HloDCE.
    text = f"""HloModule m

first {{
  q = f32[2,4]{{1,0}} parameter(0)
  a = f32[8,4]{{1,0}} all-gather(q), {G4}
  b = f32[8,4]{{1,0}} all-gather(q), {G4}
  ROOT s = f32[8,4]{{1,0}} add(a, b)
}}

ENTRY main {{
  p0 = f32[2,4]{{1,0}} parameter(0)
  c = f32[8,4]{{1,0}} call(p0), to_apply=first
  bad = f32[2,4]{{1,0}} custom-call(p0), custom_call_target="x", custom_call_has_side_effect=1
  ROOT out = f32[8,4]{{1,0}} negate(c)
}}
"""
    m = parse_module(text)
    before = m.to_text()
    with pytest.raises(HloParseError, match="custom_call_has_side_effect"):
        run(m)
    assert m.to_text() == before
    assert [i.name for i in m.get_computation("first").instructions] == ["q", "a", "b", "s"]


# --------------------------------------------------------------------- real JAX modules

MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["modules"]

# Folds per module, read off the HLO by hand (gather names are the module's own):
EXPECTED_FOLDS = {
    # all_gather.4 and all_gather.6 both gather shard_map.9 = parameter(0) (the tied w1) with
    # identical f32[16,16] output and groups; .5 / .7 gather parameters 1 and 2.
    "fsdp_shard_map.hlo": 1,
    # Forward body: all_gather.6 repeats all_gather.4 on parameter(0) (1 fold). Backward body
    # (manual_computation_body_0.6): every gather reads get-tuple-element(opt-barrier(tuple(...)),
    # 0); walking gte 0 -> opt-barrier -> tuple element 0 gives parameter 6 (all_gather.12),
    # 1 (.13), 3 (.14) and 1 again (.15, through a different opt-barrier): .15 folds onto .13.
    "fsdp_remat_grad.hlo": 2,
    # all_gather.11 (the output projection's transpose input) gathers shard_map.17 =
    # parameter(4), the tied embedding, like all_gather.6; the four block weights differ.
    "pytree_weights.hlo": 1,
    # all_gather.6/.9 read f32->bf16 converts of parameter 0 and .7/.10 bf16->f32 converts of
    # parameter 1: dtype-changing converts stop the walk, so those four are skipped. Only
    # all_gather.11 (parameter 1 directly) folds onto all_gather.8.
    "bf16_cast.hlo": 1,
    # closed_call.2: all_gather.5 repeats all_gather.3 on Arg_0.3 = parameter(0) (the shared
    # weight); all_gather.4 gathers parameter 2 (this layer's slice).
    "scan_layers.hlo": 1,
    # region_0.2 (while body): all_gather.5 repeats all_gather.3 on get-tuple-element(arg_tuple,
    # 2) (path [2]); all_gather.4 reads call.1 (a dynamic slice), where the walk stops.
    "while_gather.hlo": 1,
    # all_gather.10 repeats all_gather.6 (parameter 0, [16,4], groups {{0,4},...}); once it
    # is re-pointed, all_gather.11 walks through all_gather.6 to parameter 0 with all_gather.7's
    # key ([16,16], groups {{0,1,2,3},{4,5,6,7}}) and folds too. wb's chain (.8/.9) differs.
    "mesh2d_nested.hlo": 2,
    # Partitioned GSPMD text: the partitioner already reuses w1's gather; the two gathers
    # read different parameters (param.1, param.2).
    "gspmd_after_spmd.hlo": 0,
    "gspmd_transformer_after_spmd.hlo": 0,  # every gather reads a reshape of a parameter
    "gspmd_post_opt.hlo": 0,
    # no collectives at all
    "conv.hlo": 0,
    "sort.hlo": 0,
    "linalg.hlo": 0,
    "cond.hlo": 0,
    "while_loop.hlo": 0,
}

# XLA:CPU cannot recompile its own post-optimization text (see tests/xla/test_oracle.py).
NOT_RUNNABLE = {"gspmd_post_opt.hlo"}


def test_expected_folds_cover_every_jax_module() -> None:
    assert sorted(EXPECTED_FOLDS) == sorted(p.name for p in DATA.glob("*.hlo")) == sorted(MANIFEST)


def _run_jax(name: str) -> tuple[str, HloModule, PassResult]:
    text = (DATA / name).read_text()
    module = parse_module(text, str(DATA / name))
    return text, module, run(module)


@pytest.mark.parametrize("name", sorted(EXPECTED_FOLDS))
def test_jax_module_fold_counts(name: str, check_output, xla_client) -> None:
    text, module, result = _run_jax(name)
    before = MANIFEST[name]["all_gathers_total"]
    assert len(result.folds) == EXPECTED_FOLDS[name]
    assert result.changed == bool(EXPECTED_FOLDS[name])
    assert result.hazards == []  # JAX's duplicates are exact copies
    assert len(gathers(module)) == before - EXPECTED_FOLDS[name]
    assert all(f.bytes_output > f.bytes_per_device > 0 for f in result.folds)
    out = check_output(module)
    xla_client.hlo.hlo_module_from_text(out)
    if not result.changed:
        assert out == text  # untouched modules come back byte for byte


_EXEC = sorted(n for n in EXPECTED_FOLDS if n not in NOT_RUNNABLE and EXPECTED_FOLDS[n])


@pytest.mark.parametrize("name", _EXEC)
def test_jax_module_executes_bitwise_equal(name: str, xla_client) -> None:
    # Modules with no fold come back byte-identical (test above), so running them twice would
    # compare a text with itself; every module that changes is run before and after.
    from hlo_dedup.xla.oracle import compare_results, run_module

    text, module, result = _run_jax(name)
    assert result.changed
    before = run_module(text, seed=0)
    after = run_module(module.to_text(), seed=0)
    comparison = compare_results(before, after)
    assert comparison.equal, comparison.message


# A walk's inner multi-operand gather: the index path selects operand 1, which differs.
INNER_OPERANDS = """
  p = f32[2,4]{1,0} parameter(0)
  q = f32[2,4]{1,0} parameter(1)
  r = f32[2,4]{1,0} parameter(2)
  i0 = (f32[4,4]{1,0}, f32[4,4]{1,0}) all-gather(p, q), replica_groups={{0,1}}, dimensions={0}
  i1 = (f32[4,4]{1,0}, f32[4,4]{1,0}) all-gather(p, INNER1), replica_groups={{0,1}}, dimensions={0}
  e0 = f32[4,4]{1,0} get-tuple-element(i0), index=1
  e1 = f32[4,4]{1,0} get-tuple-element(i1), index=1
  o0 = f32[8,4]{1,0} all-gather(e0), replica_groups={{0,1}}, dimensions={0}
  o1 = f32[8,4]{1,0} all-gather(e1), replica_groups={{0,1}}, dimensions={0}
  ROOT t = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(o0, o1)"""


def test_hazard_of_an_inner_gathers_other_operands_survives_the_inner_fold() -> None:
    # Faithful mode folds i1 onto i0 first (hazard: q vs r); that re-points e1 at i0, but
    # o1 <- o0 is judged on the program as written, where o1 reads r's gather.
    m = entry(INNER_OPERANDS.replace("INNER1", "r"))
    result = run(m)
    assert [(f.kept, f.removed, f.hazardous) for f in result.folds] == [("i0", "i1", True), ("o0", "o1", True)]
    assert "operands after operand(0)" in result.hazards[1].reasons[0]


def test_strict_refuses_a_walk_through_a_different_inner_operand() -> None:
    m = entry(INNER_OPERANDS.replace("INNER1", "r"))
    before = m.to_text()
    result = run(m, strict=True)
    assert result.folds == [] and m.to_text() == before
    assert [(h.kept, h.removed, h.refused) for h in result.hazards] == [("i0", "i1", True), ("o0", "o1", True)]


def test_a_hazard_free_inner_fold_keeps_the_outer_fold_hazard_free() -> None:
    # i1 = all-gather(p, q) is an exact duplicate of i0: after it folds, the walks of o0 and
    # o1 differ only by instructions known to hold the same value.
    m = entry(INNER_OPERANDS.replace("INNER1", "q"))
    result = run(m, strict=True)
    assert [(f.kept, f.removed, f.hazardous) for f in result.folds] == [("i0", "i1", False), ("o0", "o1", False)]
    assert result.hazards == []
