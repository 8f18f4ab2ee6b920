"""The compiler-shaped model's program points: the steps a compiler runs, with aliases
placed at the last step they stand for, on hand-counted cases."""

from __future__ import annotations

import hlo_dedup
from hlo_dedup.analysis import FoldPricer, analyze

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
    # g now also feeds c through the bitcast r: from s (point 4) to c (point 6). Where g2
    # was, g is live instead (static 4608 + g + the result s); at c, g + s + c as before.
    assert price.live_range_extension == 2
    assert pricer.live_bytes(comp) == [4608, 4608, 8704, 12800, 16896, 12800, 16896, 12800]
    assert price.peak_bytes_before == price.peak_bytes_after == 4608 + 3 * 4096
