"""The compiler-shaped model's program points: the steps a compiler runs, with aliases
placed at the last step they stand for, on hand-counted cases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hlo_dedup
from hlo_dedup.analysis import FoldPricer, analyze
from hlo_dedup.report.units import bytes_change

GATHER = "channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true"

# A gathered 4 KiB weight read by an elementwise chain (one fused step at `s`) and, through
# a reshape that is a bitcast, by a custom-call; the chain's other input comes later.
CHAIN = f"""\
HloModule m

ENTRY main {{
  w = f32[128]{{0}} parameter(0)
  x = f32[1024]{{0}} parameter(1)
  g = f32[1024]{{0}} all-gather(w), {GATHER}
  n = f32[1024]{{0}} negate(g)
  e = f32[1024]{{0}} custom-call(x), custom_call_target="make"
  m = f32[1024]{{0}} multiply(n, e)
  s = f32[1024]{{0}} add(m, x)
  r = f32[32,32]{{1,0}} reshape(g)
  c = f32[32,32]{{1,0}} custom-call(r), custom_call_target="use"
  ROOT t = (f32[1024]{{0}}, f32[32,32]{{1,0}}) tuple(s, c)
}}
"""


def test_program_points_are_the_steps_and_aliases_sit_at_their_last_input() -> None:
    live = analyze(hlo_dedup.load(CHAIN)).computation("main")
    names = [i.name for i in live.instructions]
    assert sorted(names) == ["c", "e", "g", "s", "t", "w", "x"]  # n, m fuse into s; r is a bitcast
    position = live.position
    at = {i.name: position[i] for i in live.computation.instructions}
    assert at["n"] == at["g"] and at["r"] == at["g"]  # one input: its step
    assert at["m"] == max(at["g"], at["e"])  # the later of the two steps it reads
    assert all(i in position for i in live.computation.instructions)
    # g lives until its last reader runs: the fused step s or the custom-call c.
    g = live.computation.get_instruction("g")
    assert live.end_of(g) == max(at["s"], at["c"])
    # Static w and x (512 B + 4 KiB); g, e and s are 4 KiB each and c 4 KiB: the most at
    # once is g, e and s (s reads both), or g held for c beside s and c.
    assert live.peak_bytes == 512 + 4096 + 3 * 4096


def test_a_fold_priced_on_steps_reads_through_fused_and_bitcast_readers() -> None:
    module = hlo_dedup.load(CHAIN.replace(
        '  r = f32[32,32]{1,0} reshape(g)',
        f'  g2 = f32[1024]{{0}} all-gather(w), {GATHER.replace("{{", "{").replace("}}", "}")}\n'
        '  r = f32[32,32]{1,0} reshape(g2)'))
    pricer = FoldPricer(module)
    comp = module.entry
    live = pricer.liveness.computation(comp)
    assert [i.name for i in live.instructions] == ["w", "x", "g", "e", "s", "g2", "c", "t"]
    price = pricer.apply(comp, "g", "g2")
    # g was read last by the fused step s, an elementwise chain of its shape, which writes
    # its result into g's buffer: g lived to point 3. Now it also feeds c through the
    # bitcast r, up to point 6: at s, g + e + s; where g2 was, g instead; at c as before.
    assert price.live_range_extension == 3 and price.extended_from == 4
    assert pricer.live_bytes(comp) == [4608, 4608, 8704, 12800, 16896, 12800, 16896, 12800]
    assert price.peak_bytes_before == price.peak_bytes_after == 4608 + 3 * 4096


# A remat train step, first and last layer tied (XLA's before-optimizations dump of
# benchmarks/price_vs_xla_dev.py's tied_remat_train(512)): six backward re-gathers fold.
TRAIN_STEP = Path(__file__).resolve().parents[1] / "data" / "price" / "tied_remat_train.hlo"


def test_the_folded_program_scheduled_anew_is_priced_as_a_fresh_model_of_it() -> None:
    module = hlo_dedup.load(TRAIN_STEP)
    result = hlo_dedup.run_passes(module)
    profiles = [c for p in result.passes for c in p.profiles]
    assert len(result.folds) == 6 and profiles
    after = analyze(module)  # the module as the pass left it, modelled from scratch
    for profile in profiles:
        assert profile.rescheduled == after.computation(profile.computation).peak_bytes
    # Priced fold by fold on the schedule made before the folds, the re-gathered weights
    # seem to live across the forward/backward boundary; scheduled anew they need less.
    (profile,) = profiles
    assert profile.peak_before.bytes < profile.rescheduled < profile.peak_after.bytes


def test_the_summary_leads_with_the_rescheduled_change_and_names_the_budgets_price(tmp_path: Path) -> None:
    module = hlo_dedup.load(TRAIN_STEP)
    (profile,) = [c for p in hlo_dedup.run_passes(module).passes for c in p.profiles]
    before = profile.peak_before.bytes
    proc = subprocess.run([sys.executable, "-m", "hlo_dedup", str(TRAIN_STEP), "-o", str(tmp_path / "out.hlo")],
                          capture_output=True, text=True, check=True)
    assert (f"peak {bytes_change(profile.rescheduled - before)} (est., memory-minimizing schedule of the "
            "folded program; "
            f"{bytes_change(profile.peak_after.bytes - before)} fold by fold on the schedule before them, "
            "as budgets price)") in proc.stderr
