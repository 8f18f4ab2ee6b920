"""`dce`: XLA's HloDCE with its default flags (xla-semantics §1, mirroring hlo_dce_test.cc).

Each test builds a small module, runs the pass and checks exactly which instructions and
computations survive, what the rewritten ones look like, and the `changed` bit (§1.9).
Every output is also re-parsed by XLA. The rules that decide which side effects may go
(the Sharding custom-call, `xla_allow_dce_side_effecting_op`, async pairs) are in
test_dce_side_effect_rules.py.
"""

from __future__ import annotations

import pytest
from dce_cases import P01, V, computations, dce, entry, inst, names

from hlo_dedup import HloModule
from hlo_dedup.passes import HloDCE, create_pass, run_dce


def test_registered_as_dce() -> None:
    assert HloDCE.name == "dce"
    assert isinstance(create_pass("dce"), HloDCE)


# ------------------------------------------------------------------------ dead roots


def test_dead_code_is_removed_transitively(check_output) -> None:
    m = entry(P01 + f"""
  a = {V} add(p0, p1)
  n = {V} negate(a)
  e = {V} exponential(n)
  ROOT r = {V} multiply(p0, p1)""")
    assert dce(m) is True
    assert names(m) == ["p0", "p1", "r"]
    check_output(m)
    assert dce(m) is False  # nothing left to do


def test_operand_still_used_elsewhere_stays() -> None:
    m = entry(P01 + f"""
  a = {V} add(p0, p1)
  n = {V} negate(a)
  ROOT r = {V} multiply(a, p1)""")
    assert dce(m) is True
    assert names(m) == ["p0", "p1", "a", "r"]


def test_root_is_kept_even_without_users() -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  ROOT c = f32[] constant(1)""")
    before = m.to_text()
    assert dce(m) is False
    assert m.to_text() == before


def test_dead_entry_parameter_stays_its_dead_user_goes(check_output) -> None:
    # hlo_dce_test DeadParameters
    m = entry(P01 + f"""
  n = {V} negate(p1)
  ROOT r = {V} abs(p0)""")
    assert dce(m) is True
    assert names(m) == ["p0", "p1", "r"]
    assert m.entry.num_parameters == 2
    check_output(m)


def test_dead_parameter_of_a_called_computation_stays() -> None:
    # Without call analysis only fusion parameters can be removed.
    m = entry(f"""
  p0 = {V} parameter(0)
  ROOT c = {V} call(p0, p0), to_apply=callee""", before=f"""
callee {{
  a = {V} parameter(0)
  b = {V} parameter(1)
  ROOT n = {V} negate(a)
}}
""")
    assert dce(m) is False
    assert names(m, "callee") == ["a", "b", "n"]
    assert len(inst(m, "c").operands) == 2


# ---------------------------------------------------------------------- side effects

SUM = """
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""

SIDE_EFFECTS = {
    # name: (dead instruction lines, spmd, kept?)
    "infeed": (f"""
  tok = token[] after-all()
  x = (({V}), token[]) infeed(tok)""", True, True),
    "outfeed": (f"""
  tok = token[] after-all()
  x = token[] outfeed(p0, tok), outfeed_shape={V}""", True, True),
    "custom-call-side-effect": (f"""
  x = {V} custom-call(p0), custom_call_target="foo", custom_call_has_side_effect=true""", True, True),
    "custom-call-pure": (f"""
  x = {V} custom-call(p0), custom_call_target="foo\"""", True, False),
    "rng": (f"""
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  x = {V} rng(lo, hi), distribution=rng_uniform""", True, True),
    "all-gather-channel-non-spmd": ("""
  x = f32[16]{0} all-gather(p0), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}""",
                                    False, True),
    "all-gather-channel-spmd": ("""
  x = f32[16]{0} all-gather(p0), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}""",
                                True, False),
    "all-gather-no-channel-non-spmd": ("""
  x = f32[16]{0} all-gather(p0), replica_groups={{0,1,2,3}}, dimensions={0}""", False, False),
    "all-gather-constrain-layout": ("""
  x = f32[16]{0} all-gather(p0), replica_groups={{0,1,2,3}}, constrain_layout=true, dimensions={0}""",
                                    True, True),
    "all-reduce-channel-non-spmd": (f"""
  x = {V} all-reduce(p0), channel_id=1, replica_groups={{}}, to_apply=sum""", False, True),
    "all-reduce-channel-spmd": (f"""
  x = {V} all-reduce(p0), channel_id=1, replica_groups={{}}, to_apply=sum""", True, False),
    "collective-permute-channel-non-spmd": (f"""
  x = {V} collective-permute(p0), channel_id=1, source_target_pairs={{{{0,1}},{{1,0}}}}""", False, True),
    "all-gather-start-done": (f"""
  s = ({V}, f32[16]{{0}}) all-gather-start(p0), replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}
  x = f32[16]{{0}} all-gather-done(s)""", True, True),
    "call-of-side-effecting-computation": (f"""
  x = {V} call(p0), to_apply=effect""", True, True),
    "call-of-pure-computation": (f"""
  x = {V} call(p0), to_apply=pure""", True, False),
}

CALLEES = SUM + f"""
effect {{
  a = {V} parameter(0)
  ROOT c = {V} custom-call(a), custom_call_target="bar", custom_call_has_side_effect=true
}}

pure {{
  a = {V} parameter(0)
  ROOT c = {V} negate(a)
}}
"""


@pytest.mark.parametrize("case", sorted(SIDE_EFFECTS))
def test_side_effecting_dead_instruction_is_kept(case: str, check_output) -> None:
    lines, spmd, kept = SIDE_EFFECTS[case]
    m = entry(f"  p0 = {V} parameter(0)" + lines + f"\n  ROOT r = {V} negate(p0)", before=CALLEES, spmd=spmd)
    dce(m)
    present = m.entry.get_instruction("x") is not None
    assert present == kept
    if not kept:
        assert names(m) == ["p0", "r"]  # and its operands went with it
    if case.startswith("call-"):
        assert (m.get_computation("effect") is not None) == kept
    check_output(m)


def test_operands_of_a_kept_side_effect_stay() -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  n = {V} negate(p0)
  x = {V} custom-call(n), custom_call_target="foo", custom_call_has_side_effect=true
  ROOT r = {V} abs(p0)""")
    assert dce(m) is False
    assert names(m) == ["p0", "n", "x", "r"]


def test_side_effecting_operand_of_a_dead_instruction_stays(check_output) -> None:
    # The recursion never deletes a side-effecting operand (other than where it started).
    m = entry(f"""
  p0 = {V} parameter(0)
  x = {V} custom-call(p0), custom_call_target="foo", custom_call_has_side_effect=true
  n = {V} negate(x)
  ROOT r = {V} abs(p0)""")
    assert dce(m) is True
    assert names(m) == ["p0", "x", "r"]
    check_output(m)


# ------------------------------------------------------------------ control dependencies


def test_control_dependencies_keep_dead_instructions() -> None:
    m = entry(P01 + f"""
  a = {V} negate(p0)
  b = {V} exponential(p1), control-predecessors={{a}}
  c = {V} sine(p1)
  ROOT r = {V} add(p0, p1), control-predecessors={{c}}""")
    assert dce(m) is False
    assert names(m) == ["p0", "p1", "a", "b", "c", "r"]


def test_operand_with_control_edge_stays_when_its_user_goes(check_output) -> None:
    m = entry(P01 + f"""
  a = {V} negate(p0)
  b = {V} exponential(a)
  ROOT r = {V} add(p0, p1), control-predecessors={{a}}""")
    assert dce(m) is True
    assert names(m) == ["p0", "p1", "a", "r"]
    check_output(m)


# -------------------------------------------------------------------------- computations


def test_unreachable_computation_is_removed(check_output) -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  ROOT r = {V} negate(p0)""", before=f"""
orphan {{
  a = {V} parameter(0)
  ROOT n = {V} negate(a)
}}
""")
    assert dce(m) is True  # removing only a computation is a change
    assert computations(m) == ["main"]
    check_output(m)


def test_dead_reduce_takes_its_to_apply_along(check_output) -> None:
    # hlo_dce_test RemoveDeadSubcomputation
    m = entry(f"""
  p0 = {V} parameter(0)
  zero = f32[] constant(0)
  red = f32[] reduce(p0, zero), dimensions={{0}}, to_apply=sum
  ROOT r = {V} negate(p0)""", before=SUM)
    assert dce(m) is True
    assert names(m) == ["p0", "r"]
    assert computations(m) == ["main"]
    check_output(m)


def test_shared_to_apply_is_kept_while_used(check_output) -> None:
    # hlo_dce_test KeepUsedSubcomputation
    m = entry(f"""
  p0 = {V} parameter(0)
  zero = f32[] constant(0)
  dead = f32[] reduce(p0, zero), dimensions={{0}}, to_apply=sum
  ROOT live = f32[] reduce(p0, zero), dimensions={{0}}, to_apply=sum""", before=SUM)
    assert dce(m) is True
    assert names(m) == ["p0", "zero", "live"]
    assert computations(m) == ["sum", "main"]
    check_output(m)


def test_nested_dead_computations_are_removed(check_output) -> None:
    # hlo_dce_test RemovedNestedDeadComputations: an unreachable caller and its exclusive
    # callees go; a callee also used by live code stays.
    m = entry(f"""
  p0 = {V} parameter(0)
  c = {V} call(p0), to_apply=shared
  dead = {V} call(p0), to_apply=outer
  ROOT r = {V} negate(c)""", before=f"""
inner {{
  a = {V} parameter(0)
  ROOT n = {V} negate(a)
}}

shared {{
  a = {V} parameter(0)
  ROOT n = {V} abs(a)
}}

outer {{
  a = {V} parameter(0)
  b = {V} call(a), to_apply=inner
  ROOT c = {V} call(b), to_apply=shared
}}

unreachable {{
  a = {V} parameter(0)
  ROOT b = {V} call(a), to_apply=inner
}}
""")
    assert dce(m) is True
    assert names(m) == ["p0", "c", "r"]
    assert computations(m) == ["shared", "main"]
    check_output(m)


# ------------------------------------------------------------------------------- while

WHILE_PARTS = f"""
cond {{
  cp = (s32[], {V}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(ci, n), direction=LT
}}

body {{
  bp = (s32[], {V}) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  v = {V} get-tuple-element(bp), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  v1 = {V} negate(v)
  BODY_EXTRA
  ROOT r = (s32[], {V}) tuple(i1, v1)
}}
"""


def _while_module(body_extra: str = "", while_attrs: str = "") -> HloModule:
    return entry(f"""
  p0 = {V} parameter(0)
  zero = s32[] constant(0)
  init = (s32[], {V}) tuple(zero, p0)
  w = (s32[], {V}) while(init), condition=cond, body=body{while_attrs}
  ROOT r = {V} negate(p0)""", before=WHILE_PARTS.replace("BODY_EXTRA", body_extra))


def test_dead_pure_while_is_removed_with_its_computations(check_output) -> None:
    m = _while_module()
    assert dce(m) is True
    assert names(m) == ["p0", "r"]
    assert computations(m) == ["main"]
    check_output(m)


def test_dead_while_with_side_effecting_body_is_kept(check_output) -> None:
    # hlo_dce_test CalledComputationWithSideEffect
    m = _while_module("tok = token[] after-all()\n  feed = ((f32[]), token[]) infeed(tok)")
    assert dce(m) is False
    assert names(m) == ["p0", "zero", "init", "w", "r"]
    assert computations(m) == ["cond", "body", "main"]
    check_output(m)


@pytest.mark.parametrize(
    "value, kept",
    [("true", True), ("TRUE", True), ("1", True), ("yes", True), ("false", False), ("0", False)],
)
def test_disable_while_loop_dce_attribute(value: str, kept: bool) -> None:
    m = _while_module(while_attrs=f', frontend_attributes={{xla_disable_while_loop_dce="{value}"}}')
    dce(m)
    assert (m.entry.get_instruction("w") is not None) == kept
    assert ("body" in computations(m)) == kept


# ------------------------------------------------------------------------------ fusion


def test_dead_fusion_parameter_is_removed_with_the_fusion_operand(check_output) -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  p1 = {V} parameter(1)
  n1 = {V} negate(p1)
  ROOT f = {V} fusion(p0, n1, p1), kind=kLoop, calls=fused""", before=f"""
fused {{
  fp0 = {V} parameter(0)
  fp1 = {V} parameter(1)
  fp2 = {V} parameter(2)
  ROOT fa = {V} add(fp0, fp2)
}}
""")
    assert dce(m) is True
    fused = m.get_computation("fused")
    assert [(p.name, p.parameter_number) for p in fused.parameters] == [("fp0", 0), ("param_1", 1)]
    assert [o.name for o in inst(m, "fa", "fused").operands] == ["fp0", "param_1"]
    assert [o.name for o in inst(m, "f").operands] == ["p0", "p1"]
    assert names(m) == ["p0", "p1", "f"]  # n1 lost its only user and went too
    check_output(m)


MOF = f"""
fused {{
  fp0 = {V} parameter(0)
  fp1 = {V} parameter(1)
  fp2 = {V} parameter(2)
  fa = {V} add(fp0, fp1)
  fm = {V} multiply(fp0, fp1)
  fs = {V} negate(fp2)
  ROOT ft = ({V}, {V}, {V}) tuple(fa, fm, fs)
}}
"""


def _mof(users: str, *, kind: str = "kLoop", fusion_root: bool = False) -> HloModule:
    root = "ROOT " if fusion_root else ""
    return entry(f"""
  p0 = {V} parameter(0)
  p1 = {V} parameter(1)
  p2 = {V} parameter(2)
  {root}f = ({V}, {V}, {V}) fusion(p0, p1, p2), kind={kind}, calls=fused
{users}""", before=MOF)


def test_multi_output_fusion_drops_unused_outputs(check_output) -> None:
    m = _mof(f"""  g0 = {V} get-tuple-element(f), index=0
  g1 = {V} get-tuple-element(f), index=1
  g2 = {V} get-tuple-element(f), index=2
  ROOT r = ({V}, {V}) tuple(g0, g2)""")
    assert dce(m) is True
    f = inst(m, "f")
    assert f.shape.to_text() == f"({V}, {V})"
    assert [(g, inst(m, g).tuple_index) for g in ("g0", "g2")] == [("g0", 0), ("g2", 1)]
    assert m.entry.get_instruction("g1") is None
    fused = m.get_computation("fused")
    root = fused.root
    assert (root.name, [o.name for o in root.operands]) == ("ft", ["fa", "fs"])
    assert names(m, "fused") == ["fp0", "fp1", "fp2", "fa", "fs", "ft"]
    check_output(m)


def test_multi_output_fusion_down_to_one_output(check_output) -> None:
    # Only output 2 (negate(fp2)) is read: the fusion becomes non-tuple, its GTE is replaced
    # by the fusion itself, and fp0/fp1 die with their fusion operands (hlo_dce_test
    # MultiOutputFusionRemoveUnusedTupleElementsRemoveTuple).
    m = _mof(f"""  g2 = {V} get-tuple-element(f), index=2
  ROOT r = {V} abs(g2)""")
    assert dce(m) is True
    f = inst(m, "f")
    assert f.shape.to_text() == V
    assert [o.name for o in inst(m, "r").operands] == ["f"]
    assert [o.name for o in f.operands] == ["p2"]
    fused = m.get_computation("fused")
    assert fused.root.name == "fs"
    assert [p.name for p in fused.parameters] == ["param_0"]
    assert names(m, "fused") == ["param_0", "fs"]
    assert [o.name for o in fused.root.operands] == ["param_0"]
    assert names(m) == ["p0", "p1", "p2", "f", "r"]
    check_output(m)


@pytest.mark.parametrize(
    "users, kind, fusion_root",
    [
        # the fusion is the root: it keeps its tuple shape (DceWithSideEffectingDebugLog)
        ("", "kLoop", True),
        # a non-GTE user sees the whole tuple
        (f"  g0 = {V} get-tuple-element(f), index=0\n"
         f"  ROOT r = (({V}, {V}, {V}), {V}) tuple(f, g0)", "kLoop", False),
        # custom fusions are never rewritten
        (f"  g0 = {V} get-tuple-element(f), index=0\n  ROOT r = {V} abs(g0)", "kCustom", False),
    ],
    ids=["fusion-is-root", "non-gte-user", "custom-fusion"],
)
def test_multi_output_fusion_is_left_alone(users: str, kind: str, fusion_root: bool) -> None:
    m = _mof(users, kind=kind, fusion_root=fusion_root)
    dce(m)
    assert inst(m, "f").shape.to_text() == f"({V}, {V}, {V})"
    assert names(m, "fused") == ["fp0", "fp1", "fp2", "fa", "fm", "fs", "ft"]


def test_multi_output_fusion_keeps_side_effecting_outputs(check_output) -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  f = ({V}, {V}, {V}) fusion(p0), kind=kLoop, calls=fused
  g0 = {V} get-tuple-element(f), index=0
  ROOT r = {V} abs(g0)""", before=f"""
fused {{
  fp0 = {V} parameter(0)
  a = {V} negate(fp0)
  b = {V} sine(fp0)
  c = {V} custom-call(fp0), custom_call_target="log", custom_call_has_side_effect=true
  ROOT ft = ({V}, {V}, {V}) tuple(a, b, c)
}}
""")
    assert dce(m) is True
    assert inst(m, "f").shape.to_text() == f"({V}, {V})"
    assert [o.name for o in m.get_computation("fused").root.operands] == ["a", "c"]
    check_output(m)


# ---------------------------------------------------------------------------- changed


def test_changed_is_false_when_nothing_is_removable() -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  p1 = {V} parameter(1)
  x = {V} custom-call(p0), custom_call_target="foo", custom_call_has_side_effect=true
  ROOT r = {V} negate(p0)""")
    before = m.to_text()
    assert run_dce(m) is False
    assert m.to_text() == before


def test_changed_by_a_fusion_parameter_alone(check_output) -> None:
    # No dead root anywhere: only the fused parameter count decreases.
    m = entry(f"""
  p0 = {V} parameter(0)
  p1 = {V} parameter(1)
  ROOT f = {V} fusion(p0, p1), kind=kLoop, calls=fused""", before=f"""
fused {{
  fp0 = {V} parameter(0)
  fp1 = {V} parameter(1)
  ROOT n = {V} negate(fp0)
}}
""")
    assert run_dce(m) is True
    assert [o.name for o in inst(m, "f").operands] == ["p0"]
    assert m.get_computation("fused").num_parameters == 1
    check_output(m)
