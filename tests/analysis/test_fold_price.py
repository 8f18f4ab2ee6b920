"""Pricing folds: hand-counted cases, incremental state against a from-scratch analysis of the
module the real pass writes, budgets, and the remat gathers the price is for."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import ACROSS_PEAK, JAX_DATA, jax_modules, scheduled_module

import hlo_dedup
from hlo_dedup.analysis import FoldPricer, analyze

DATA = Path(__file__).resolve().parent / "data"
REMAT_LAYERS = DATA / "fsdp_remat_layers.hlo"
GROUPS = "replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}"


def _module(body: str) -> hlo_dedup.HloModule:
    return hlo_dedup.load(scheduled_module(body))


# Bytes as in support.ACROSS_PEAK.
AFTER_PEAK = f"""\
  w = f32[2]{{0}} parameter(0)
  x = f32[128]{{0}} parameter(1)
  big = f32[256]{{0}} concatenate(x, x), dimensions={{0}}
  s = f32[16]{{0}} slice(big), slice={{[0:16]}}
  g1 = f32[16]{{0}} all-gather(w), {GROUPS}
  a = f32[16]{{0}} negate(g1)
  g2 = f32[16]{{0}} all-gather(w), {GROUPS}
  b = f32[16]{{0}} multiply(g2, a)
  ROOT c = f32[16]{{0}} add(b, s)
"""


def test_fold_that_keeps_the_gather_live_across_the_peak() -> None:
    pricer = FoldPricer(_module(ACROSS_PEAK))
    assert pricer.live_bytes("main") == [520, 520, 584, 648, 1608, 1672, 712, 776, 712]
    price = pricer.apply("main", "g1", "g2")
    # g1 was last read by a at 3; it now feeds b at 7 (4 points longer) and so is live at
    # s (5), the peak: +64. g2's own range [6, 7] is gone.
    assert (price.live_range_extension, price.peak_bytes_before, price.peak_bytes_after) == (4, 1672, 1736)
    assert price.crosses_peak and price.peak_instruction == "s" and not price.refused
    assert price.to_json() == {"computation": "main", "kept": "g1", "removed": "g2", "live_range_extension": 4,
                               "peak_bytes_before": 1672, "peak_bytes_after": 1736, "crosses_peak": True,
                               "peak_instruction": "s", "refused": False,
                               "schedule": "module's schedule", "extended_from": 4}
    assert pricer.live_bytes("main") == [520, 520, 584, 648, 1672, 1736, 712, 776, 712]


def test_fold_after_the_peak_extends_the_range_but_costs_nothing() -> None:
    pricer = FoldPricer(_module(AFTER_PEAK))
    before = pricer.live_bytes("main")
    assert before == [520, 520, 1544, 1608, 648, 712, 712, 776, 712]
    price = pricer.apply("main", "g1", "g2")
    # g1 now lives to 7 instead of 5, exactly where g2 lived: the profile does not move.
    assert (price.live_range_extension, price.peak_increase, price.crosses_peak) == (2, 0, False)
    assert price.extended_from == 6  # points 6 and 7: g2 and b, past a at 5
    assert pricer.live_bytes("main") == before


def test_dead_operand_chain_of_the_removed_instruction_is_freed() -> None:
    module = _module(f"""\
  w = f32[2]{{0}} parameter(0)
  g1 = f32[16]{{0}} all-gather(w), {GROUPS}
  n = f32[2]{{0}} negate(w)
  g2 = f32[16]{{0}} all-gather(n), {GROUPS}
  ROOT r = f32[16]{{0}} add(g1, g2)
""")
    pricer = FoldPricer(module)
    assert pricer.live_bytes("main") == [8, 72, 80, 144, 200]
    price = pricer.apply("main", "g1", "g2")
    # g2 goes, and with it n (read only by g2): 8 bytes on [2, 3]. g1 was read at 4 anyway.
    assert price.live_range_extension == 0
    assert pricer.live_bytes("main") == [8, 72, 72, 72, 136]
    assert (price.peak_bytes_before, price.peak_bytes_after) == (200, 136)


# g2 folds onto g1; then the readers of both fold onto r0: g1's value (and n, which only
# g1 reads) stays live while any reader of g1 or of g2 is left.
READERS_OF_FOLDED_VALUES = f"""\
  w = f32[2]{{0}} parameter(0)
  r0 = f32[16]{{0}} all-gather(w), {GROUPS}
  n = f32[2]{{0}} negate(w)
  g1 = f32[16]{{0}} all-gather(n), {GROUPS}
  m = f32[2]{{0}} negate(w)
  g2 = f32[16]{{0}} all-gather(m), {GROUPS}
  r1 = f32[16]{{0}} negate(g1)
  r2 = f32[16]{{0}} negate(g2)
  ROOT t = (f32[16]{{0}}, f32[16]{{0}}, f32[16]{{0}}) tuple(r0, r1, r2)
"""


@pytest.mark.parametrize("count", [1, 2, 3])
def test_a_kept_value_dies_with_the_last_reader_of_any_value_folded_into_it(count: int) -> None:
    folds = [("main", "g1", "g2"), ("main", "r0", "r1"), ("main", "r0", "r2")][:count]
    pricer = FoldPricer(_module(READERS_OF_FOLDED_VALUES))
    for fold in folds:
        pricer.apply(*fold)
    after = _module(READERS_OF_FOLDED_VALUES)
    _apply_to_module(after, folds)
    _assert_model_matches(pricer, after)
    assert ("g1" in [i.name for i in after.entry.instructions]) == (count < 3)


def test_collectives_stay_without_spmd_and_hold_their_buffer_only_where_defined() -> None:
    pricer = FoldPricer(_module(ACROSS_PEAK), spmd=False)
    pricer.apply("main", "g1", "g2")
    # As in SPMD, plus g2 (64) at its own point 6: read by nothing, not deleted.
    assert pricer.live_bytes("main") == [520, 520, 584, 648, 1672, 1736, 776, 776, 712]


def test_price_and_refused_folds_leave_the_model_untouched() -> None:
    pricer = FoldPricer(_module(ACROSS_PEAK))
    before = pricer.live_bytes("main")
    probe = pricer.price("main", "g1", "g2")
    assert pricer.live_bytes("main") == before and probe.peak_increase == 64
    refused = pricer.apply_within("main", "g1", "g2", budget=63)
    assert refused.refused and refused.peak_bytes_after == 1736
    assert pricer.live_bytes("main") == before
    accepted = pricer.apply_within("main", "g1", "g2", budget=64)
    assert not accepted.refused and pricer.peak_bytes("main") == 1736


def test_invalid_folds_are_errors_not_prices() -> None:
    pricer = FoldPricer(_module(ACROSS_PEAK))
    with pytest.raises(ValueError, match="comes later"):
        pricer.apply("main", "g2", "g1")
    with pytest.raises(ValueError, match="no instruction"):
        pricer.apply("main", "g1", "nope")
    with pytest.raises(ValueError, match="aliases"):
        FoldPricer(hlo_dedup.load(_ALIAS_REMOVED)).apply("main", "a", "b")
    pricer.apply("main", "g1", "g2")
    with pytest.raises(ValueError, match="already folded"):
        pricer.apply("main", "g1", "g2")
    assert pricer.peak_bytes("main") == 1736  # the failed attempts changed nothing


_ALIAS_REMOVED = """\
HloModule m, is_scheduled=true

ENTRY main {
  p = f32[4]{0} parameter(0)
  a = f32[4]{0} negate(p)
  b = f32[2,2]{1,0} bitcast(a)
  ROOT r = (f32[4]{0}, f32[2,2]{1,0}) tuple(a, b)
}
"""

# A called body whose root returns the removed gather: the result the caller holds changes.
RESULT_IN_CALLEE = f"""\
HloModule m, is_scheduled=true

body {{
  w = f32[2]{{0}} parameter(0)
  g1 = f32[16]{{0}} all-gather(w), {GROUPS}
  big = f32[64]{{0}} concatenate(g1, g1, g1, g1), dimensions={{0}}
  s = f32[16]{{0}} slice(big), slice={{[0:16]}}
  g2 = f32[16]{{0}} all-gather(w), {GROUPS}
  ROOT t = (f32[16]{{0}}, f32[16]{{0}}) tuple(s, g2)
}}

ENTRY main {{
  p = f32[2]{{0}} parameter(0)
  c = (f32[16]{{0}}, f32[16]{{0}}) call(p), to_apply=body
  ROOT r = f32[16]{{0}} get-tuple-element(c), index=1
}}
"""


def _apply_to_module(module: hlo_dedup.HloModule, folds: list[tuple[str, str, str]]) -> None:
    """Make the folds for real: re-point uses, then XLA's HloDCE."""
    for comp_name, kept, removed in folds:
        (comp,) = [c for c in module.computations if c.name == comp_name]
        by_name = {inst.name: inst for inst in comp.instructions}
        by_name[removed].replace_all_uses_with(by_name[kept])
    hlo_dedup.run_passes(module, ["dce"])


def _assert_model_matches(pricer: FoldPricer, after: hlo_dedup.HloModule) -> None:
    """Every computation the fresh analysis of `after` reaches: same peak, and the same live
    bytes at every instruction that survived."""
    for truth in analyze(after, compiler_model=pricer.liveness.compiler_model).analysed():
        comp = truth.computation
        model = dict(zip((i.name for i in pricer.liveness.computation(comp.name).instructions),
                         pricer.live_bytes(comp.name)))
        assert {i.name: model[i.name] for i in truth.instructions} == dict(
            zip((i.name for i in truth.instructions), truth.live_bytes)), comp.name
        assert pricer.peak_bytes(comp.name) == truth.peak_bytes, comp.name


def test_removed_result_of_a_called_body_is_replaced_by_the_kept_one() -> None:
    pricer = FoldPricer(hlo_dedup.load(RESULT_IN_CALLEE))
    price = pricer.apply("body", "g1", "g2")
    assert price.live_range_extension == 3  # g1: read by big at 2, now the root's, to 5
    after = hlo_dedup.load(RESULT_IN_CALLEE)
    _apply_to_module(after, [("body", "g1", "g2")])
    _assert_model_matches(pricer, after)


@pytest.mark.parametrize("path", jax_modules() + [REMAT_LAYERS], ids=lambda p: p.name)
def test_model_after_all_folds_equals_analysis_of_the_module_the_pass_writes(path: Path) -> None:
    after = hlo_dedup.load(path)
    folds = hlo_dedup.run_passes(after).folds
    # A fresh analysis of the folded module fuses and schedules it anew: the model's edits
    # are checked where both sides keep the text's buffers and order.
    pricer = FoldPricer(hlo_dedup.load(path), compiler_model=False)
    for fold in folds:
        if fold.replacement is None:  # the preprocess pass's folds are clones, not priced here
            pricer.apply(fold.computation, fold.kept, fold.removed)
    _assert_model_matches(pricer, after)


def test_remat_regathers_folded_onto_forward_gathers_live_longer() -> None:
    module = hlo_dedup.load(JAX_DATA / "fsdp_remat_grad.hlo")
    folds = hlo_dedup.run_passes(hlo_dedup.load(module.to_text())).folds
    pricer = FoldPricer(module)
    prices = [pricer.apply(f.computation, f.kept, f.removed) for f in folds]
    assert len(prices) == 2
    assert all(p.live_range_extension > 0 for p in prices)


def test_folding_remat_gathers_raises_the_peak_and_a_zero_budget_refuses_exactly_those() -> None:
    folds = hlo_dedup.run_passes(hlo_dedup.load(REMAT_LAYERS)).folds
    assert len(folds) == 6  # every layer's backward re-gather onto its forward gather
    pricer = FoldPricer(hlo_dedup.load(REMAT_LAYERS))
    prices = [pricer.apply(f.computation, f.kept, f.removed) for f in folds]
    assert all(p.live_range_extension > 0 for p in prices)
    raising = [p for p in prices if p.peak_increase > 0]
    assert len(raising) >= 4 and all(p.crosses_peak for p in raising)
    assert prices[-1].peak_bytes_after - prices[0].peak_bytes_before >= 4 * 128 * 128 * 4

    budgeted = FoldPricer(hlo_dedup.load(REMAT_LAYERS))
    decisions = [budgeted.apply_within(f.computation, f.kept, f.removed, budget=0) for f in folds]
    accepted = [(f.computation, f.kept, f.removed) for f, d in zip(folds, decisions) if not d.refused]
    assert 0 < len(accepted) < len(folds)
    assert all(d.peak_increase == 0 for d in decisions if not d.refused)
    assert all(d.peak_increase > 0 for d in decisions if d.refused)
    # The accepted folds, made for real, leave every computation's peak where it was.
    original = analyze(hlo_dedup.load(REMAT_LAYERS))
    after = hlo_dedup.load(REMAT_LAYERS)
    _apply_to_module(after, accepted)
    _assert_model_matches(budgeted, after)
    fresh = analyze(after)
    assert fresh.peak_bytes == original.peak_bytes
    assert fresh.computation(folds[0].computation).peak_bytes == original.computation(folds[0].computation).peak_bytes


def test_budget_limited_folding_computes_the_same_on_xla(xla_client) -> None:  # type: ignore[no-untyped-def]
    from hlo_dedup.equivalence import check_equivalence

    folds = hlo_dedup.run_passes(hlo_dedup.load(REMAT_LAYERS)).folds
    pricer = FoldPricer(hlo_dedup.load(REMAT_LAYERS))
    accepted = [(f.computation, f.kept, f.removed) for f in folds
                if not pricer.apply_within(f.computation, f.kept, f.removed, budget=0).refused]
    after = hlo_dedup.load(REMAT_LAYERS)
    _apply_to_module(after, accepted)
    report = check_equivalence(REMAT_LAYERS.read_text(), after.to_text())
    assert report.equal, report.summary()
    # The pass with --max-peak-increase=0 makes exactly those folds, and computes the same.
    budgeted = hlo_dedup.load(REMAT_LAYERS)
    result = hlo_dedup.run_passes(budgeted, max_peak_increase=0)
    assert [(f.computation, f.kept, f.removed) for f in result.folds] == accepted
    refused = [i for i in result.passes[-1].instructions if i.fate == "refused"]
    assert len(refused) == len(folds) - len(accepted) and all("--max-peak-increase" in i.reason for i in refused)
    assert check_equivalence(REMAT_LAYERS.read_text(), budgeted.to_text()).equal


@pytest.mark.parametrize("path", [REMAT_LAYERS, JAX_DATA / "mesh2d_nested.hlo", JAX_DATA / "fsdp_remat_grad.hlo"],
                         ids=lambda p: p.name)
def test_prices_are_the_same_when_the_pass_rewrites_the_module_between_folds(path: Path) -> None:
    """The pass will price each fold just before its ReplaceAllUsesWith, on the module it rewrites."""
    folds = hlo_dedup.run_passes(hlo_dedup.load(path)).folds
    untouched = FoldPricer(hlo_dedup.load(path))
    expected = [untouched.apply_within(f.computation, f.kept, f.removed, budget=0) for f in folds]
    module = hlo_dedup.load(path)
    rewritten = FoldPricer(module)
    comps = {c.name: c for c in module.computations}
    for fold, want in zip(folds, expected):
        comp = comps[fold.computation]
        by_name = {inst.name: inst for inst in comp.instructions}
        kept, removed = by_name[fold.kept], by_name[fold.removed]
        assert rewritten.apply_within(comp, kept, removed, budget=0) == want
        if not want.refused:
            removed.replace_all_uses_with(kept)
