"""`neuron_all_gather_duplicate_remover` (neuronx-cc #106): what a fold does next.

Spec: shared/spec/dedup-passes.txt, first half: the changed-gated trailing HloDCE, the
`--v=2` log lines, the hazards this implementation reports on top of the faithful key (and
`--strict`), the fold records, and atomicity on failure. The last part runs the pass over
every real JAX module in tests/data/jax and checks the output with XLA itself (re-parse, and
a bitwise-equal XLA:CPU execution before and after). Which gathers fold is in
test_all_gather_duplicate_remover.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gather_cases import (
    G4,
    P0,
    P01,
    SINGLETONS,
    assert_folded,
    entry,
    gathers,
    operands,
    pair,
    run,
)

from hlo_dedup import HloModule, HloParseError, parse_module
from hlo_dedup.passes import FoldRecord, PassResult

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
PASS = "neuron_all_gather_duplicate_remover"


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


def test_fold_record_shows_each_rewired_user_before_and_after() -> None:
    module = pair(P0, "p0", "p0")
    (fold,) = run(module).folds
    assert fold.removed_text == "ag_b = f32[8,4]{1,0} all-gather(p0), replica_groups={{0,1,2,3}}, dimensions={0}"
    assert fold.rewired == (("out", "ROOT out = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(ag_a, ag_b)",
                             "ROOT out = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(ag_a, ag_a)"),)


def test_fold_records_of_a_wide_user_are_excerpts_around_the_rewired_operand() -> None:
    """Thousands of gathers folded into one tuple: each record shows the operands next to the
    one re-pointed, not the whole line (which made recording quadratic: 13,000 folds, 158 s)."""
    n = 40
    body = P0 + "".join(f"\n  g{i} = f32[8,4]{{1,0}} all-gather(p0), {G4}" for i in range(n))
    body += f"\n  ROOT t = ({', '.join(['f32[8,4]{1,0}'] * n)}) tuple({', '.join(f'g{i}' for i in range(n))})"
    folds = run(entry(body)).folds
    assert len(folds) == n - 1
    assert folds[9].rewired == (("t", "t = tuple(…, g0, g10, g11, …) /* 40 operands */",
                                 "t = tuple(…, g0, g0, g11, …) /* 40 operands */"),)
    assert folds[-1].rewired[0][2] == "t = tuple(…, g0, g0) /* 40 operands */"


def test_fold_key_spells_out_small_replica_groups_and_keeps_large_ones_compact() -> None:
    small = run(pair(P0, "p0", "p0")).folds[0].key["replica_groups"]
    assert small == [[0, 1, 2, 3]]
    iota = "replica_groups=[1,8192]<=[8192], dimensions={0}"  # spelled out: 8,192 numbers per record
    module = pair("  p0 = f32[1]{0} parameter(0)", "p0", "p0", out_a="f32[8192]{0}", attrs_a=iota)
    (fold,) = run(module).folds
    assert fold.key["replica_groups"] == "[1,8192]<=[8192]"


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
    # Partitioned GSPMD grad under remat: the backward re-gathers ws[1] and ws[0] through
    # get-tuple-element(opt-barrier(...)) (channel_id 3, 4) onto the forward's (1, 2).
    "gspmd_remat_after_spmd.hlo": 2,
    # The 2-D-mesh training step (generate_mesh2d.py). Parameters: 0 w_down (kept [32,2] per
    # device: columns over both axes), 1 w_in (tied), 2 w_up, 3 x, 4 y. No gather before
    # partitioning in the jit programs: the partitioner writes them all.
    "mesh2d_gspmd_before_optimizations.hlo": 0,
    "mesh2d_shardy_before_optimizations.hlo": 0,
    # Remat makes the backward pass gather again what the forward pass gathered, from
    # get-tuple-element(opt-barrier(...)) of the same parameter: all-gather.6 and .7 re-gather
    # w_up like all-gather.2 (.7 spells the same groups as mesh['axis_0'=4,'axis_1'=2]
    # {'axis_0'}), .8 re-gathers w_down like .1 (both mesh groups with device_ids), .10 w_in
    # like all-gather. The tied use of w_in gathers its transpose (all-gather.3, and .4/.5 in
    # the backward pass, both on get-tuple-element.2): walks stop at the transpose, no fold.
    "mesh2d_gspmd_after_spmd.hlo": 4,
    # The same four under Shardy: .8/.9 re-gather w_up like .4, .10 w_down like .1, .14 w_in
    # like all-gather. .13 gathers w_down over all eight devices (device_ids groups) into
    # [32,16], which no forward gather does.
    "mesh2d_shardy_after_spmd.hlo": 4,
    # After XLA's optimizations the opt-barriers are gone and the re-gathers read the
    # parameters: .10 repeats all-gather (w_in), .6 and .7 repeat .2 (w_up). The w_down
    # gathers (.1/.8) and the tied transpose's (.3/.4/.5) read a copy fusion or a bitcast of
    # one, where the walk stops.
    "mesh2d_gspmd_post_opt.hlo": 3,
    "mesh2d_shardy_post_opt.hlo": 3,  # .14 onto all-gather (w_in), .8 and .9 onto .4 (w_up)
    # shard_map writes the gathers itself: the tied w_in is gathered for the first layer
    # (all_gather.4) and again for the output projection (.7); the backward body does the same
    # (.12 and .15, through two different remat opt-barriers).
    "mesh2d_shardmap_before_optimizations.hlo": 2,
    # Partitioning already merged the forward pair (all_gather.16 feeds both uses); in the
    # backward body all_gather.23 still repeats .20 (w_in).
    "mesh2d_shardmap_after_spmd.hlo": 1,
    "mesh2d_shardmap_post_opt.hlo": 0,  # XLA's CSE merged the last pair
    # no collectives at all
    "conv.hlo": 0,
    "sort.hlo": 0,
    "linalg.hlo": 0,
    "cond.hlo": 0,
    "while_loop.hlo": 0,
}

# XLA:CPU cannot run these even as `verify` makes text runnable: post-optimization text of
# the 2-D-mesh step has layout bitcasts that lose their layouts on the way (tests/test_equivalence.py).
NOT_RUNNABLE = {"mesh2d_gspmd_post_opt.hlo", "mesh2d_shardy_post_opt.hlo"}


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
    # compare a text with itself; every module that changes is run before and after, as
    # `verify` runs them (mesh replica groups spelled out: see cpu_runnable_text).
    from hlo_dedup.equivalence import cpu_runnable_text
    from hlo_dedup.xla.oracle import compare_results, run_module

    text, module, result = _run_jax(name)
    assert result.changed
    before = run_module(cpu_runnable_text(text), seed=0)
    after = run_module(cpu_runnable_text(module.to_text()), seed=0)
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
