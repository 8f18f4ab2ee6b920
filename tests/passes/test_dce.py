"""`dce`: XLA's HloDCE with its default flags (xla-semantics §1, mirroring hlo_dce_test.cc).

Each test builds a small module, runs the pass and checks exactly which instructions and
computations survive, what the rewritten ones look like, and the `changed` bit (§1.9).
Every output is also re-parsed by XLA.
"""

from __future__ import annotations

import pytest

from hlo_dedup import HloModule, parse_module
from hlo_dedup.passes import HloDCE, create_pass, run_dce

V = "f32[4]{0}"  # the one array shape most tests use


def module(text: str, *, spmd: bool = True) -> HloModule:
    return parse_module(text, spmd=spmd)


def entry(body: str, *, before: str = "", spmd: bool = True) -> HloModule:
    return module(f"HloModule m\n{before}\nENTRY main {{\n{body.strip(chr(10))}\n}}\n", spmd=spmd)


def names(m: HloModule, comp: str = "main") -> list[str]:
    c = m.get_computation(comp)
    assert c is not None, f"computation {comp} is gone"
    return [i.name for i in c.instructions]


def computations(m: HloModule) -> list[str]:
    return [c.name for c in m.computations]


def dce(m: HloModule) -> bool:
    return HloDCE().run(m)


def inst(m: HloModule, name: str, comp: str = "main"):
    c = m.get_computation(comp)
    assert c is not None
    found = c.get_instruction(name)
    assert found is not None, f"{name} is gone"
    return found


P01 = f"""
  p0 = {V} parameter(0)
  p1 = {V} parameter(1)"""


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


# ------------------------------------------------------------------- Sharding custom-call


@pytest.mark.parametrize(
    "lines, kept",
    [
        # operand used only by the Sharding annotation: both go
        (f"  a = {V} negate(p0)\n  s = {V} custom-call(a), custom_call_target=\"Sharding\", sharding={{replicated}}\n"
         f"  ROOT r = {V} abs(p0)", set()),
        # operand used elsewhere too: the annotation stays
        (f"  a = {V} negate(p0)\n  s = {V} custom-call(a), custom_call_target=\"Sharding\", sharding={{replicated}}\n"
         f"  ROOT r = {V} abs(a)", {"a", "s"}),
        # operand is a parameter
        (f"  s = {V} custom-call(p0), custom_call_target=\"Sharding\", sharding={{replicated}}\n"
         f"  ROOT r = {V} abs(p0)", {"s"}),
        # operand is the root
        (f"  s = {V} custom-call(a), custom_call_target=\"Sharding\", sharding={{replicated}}\n"
         f"  ROOT a = {V} negate(p0)", {"a", "s"}),
    ],
    ids=["sole-user", "shared-operand", "parameter-operand", "root-operand"],
)
def test_sharding_custom_call_rule(lines: str, kept: set[str], check_output) -> None:
    text = f"  p0 = {V} parameter(0)\n" + lines
    if "ROOT a" in lines:  # the root must be defined before its user in XLA text
        text = f"  p0 = {V} parameter(0)\n  ROOT a = {V} negate(p0)\n" \
               f"  s = {V} custom-call(a), custom_call_target=\"Sharding\", sharding={{replicated}}"
    m = entry(text)
    dce(m)
    present = set(names(m)) - {"p0", "r"}
    assert present == kept
    check_output(m)


# ------------------------------------------------- xla_allow_dce_side_effecting_op attribute

ALLOW = "frontend_attributes={{xla_allow_dce_side_effecting_op=\"{}\"}}"


def test_allow_false_keeps_even_a_pure_instruction() -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  n = {V} negate(p0), {ALLOW.format("false")}
  ROOT r = {V} abs(p0)""")
    assert dce(m) is False
    assert names(m) == ["p0", "n", "r"]


@pytest.mark.parametrize(
    "target, removed",
    [("tpu_custom_call", True), ("foo", False)],
)
def test_allow_true_removes_only_tpu_custom_calls(target: str, removed: bool) -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  x = {V} custom-call(p0), custom_call_target="{target}", custom_call_has_side_effect=true, {ALLOW.format("true")}
  ROOT r = {V} abs(p0)""")
    assert dce(m) is removed
    assert (m.entry.get_instruction("x") is None) == removed


def test_allowed_side_effect_that_dies_mid_walk_is_removed(check_output) -> None:
    # XLA walks the whole reverse post order: n goes first (its recursion must skip the
    # side-effecting x), then x is reached, is dead by now, and is allowed to go.
    m = entry(f"""
  p0 = {V} parameter(0)
  x = {V} custom-call(p0), custom_call_target="tpu_custom_call", custom_call_has_side_effect=true, {ALLOW.format("true")}
  n = {V} negate(x)
  ROOT r = {V} abs(p0)""")
    assert dce(m) is True
    assert names(m) == ["p0", "r"]
    check_output(m)


def test_allow_true_does_not_make_all_gather_start_removable(check_output) -> None:
    # Only async-start/-update/-done (IsAsynchronous) and tpu_custom_call honour "true";
    # all-gather-start/-done are collectives with their own opcodes, so both stay.
    m = entry(f"""
  p0 = {V} parameter(0)
  s = ({V}, f32[16]{{0}}) all-gather-start(p0), replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}, {ALLOW.format("true")}
  d = f32[16]{{0}} all-gather-done(s), {ALLOW.format("true")}
  ROOT r = {V} abs(p0)""")
    assert dce(m) is False
    assert names(m) == ["p0", "s", "d", "r"]
    check_output(m)


@pytest.mark.parametrize(
    "flag, kept",
    [("custom_call_has_side_effect=true", True), ("", False)],
    ids=["side-effecting", "pure"],
)
def test_async_sugar_takes_the_side_effect_of_the_wrapped_op(flag: str, kept: bool, check_output) -> None:
    # `custom-call-start` is XLA's text sugar for an async-start wrapping a custom-call; the
    # wrapped op's side effect makes the async pair side-effecting (HasSideEffect recurses
    # into the wrapped computation), so a dead pair stays.
    attrs = 'custom_call_target="foo"' + (f", {flag}" if flag else "")
    m = entry(f"""
  p0 = {V} parameter(0)
  s = (({V}), {V}, s32[]) custom-call-start(p0), {attrs}
  d = {V} custom-call-done(s)
  ROOT r = {V} abs(p0)""")
    assert dce(m) is (not kept)
    assert names(m) == (["p0", "s", "d", "r"] if kept else ["p0", "r"])
    check_output(m)


def test_allow_true_removes_an_async_sugar_pair(check_output) -> None:
    # IsAsynchronous holds for the sugar, and "true" on the start covers the done through
    # async_chain_start(): the done goes first, then the start it leaves dead.
    m = entry(f"""
  p0 = {V} parameter(0)
  s = (({V}), {V}, s32[]) custom-call-start(p0), custom_call_target="foo", custom_call_has_side_effect=true, {ALLOW.format("true")}
  d = {V} custom-call-done(s)
  ROOT r = {V} abs(p0)""")
    assert dce(m) is True
    assert names(m) == ["p0", "r"]
    check_output(m)
