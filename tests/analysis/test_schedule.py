"""The memory-minimizing schedule of a module before optimizations, and the fold prices
it gives, on hand-counted cases."""

from __future__ import annotations

import hlo_dedup
from hlo_dedup.analysis import analyze
from hlo_dedup.analysis.liveness import MEMORY_MINIMIZING, TEXT_ORDER
from hlo_dedup.analysis.schedule import list_schedule

GATHER = "channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true"

# Two 4 KiB values, each reduced to 4 bytes; the text makes both before either reduction.
TWO_PRODUCERS = """\
HloModule m

ENTRY main {
  p = f32[4]{0} parameter(0)
  a = f32[1024]{0} custom-call(p), custom_call_target="make"
  b = f32[1024]{0} custom-call(p), custom_call_target="make"
  ra = f32[1]{0} custom-call(a), custom_call_target="sum"
  rb = f32[1]{0} custom-call(b), custom_call_target="sum"
  ROOT t = (f32[1]{0}, f32[1]{0}) tuple(ra, rb)
}
"""


def test_the_schedule_frees_a_large_buffer_before_making_the_next() -> None:
    module = hlo_dedup.load(TWO_PRODUCERS)
    written = analyze(module, compiler_model=False).computation("main")
    assert written.peak_bytes == 16 + 4096 + 4096 + 4  # at ra: a, b and ra
    live = analyze(module).computation("main")
    # a, ra (which frees a), then b, rb: one 4 KiB value at a time.
    assert [i.name for i in live.instructions] == ["p", "a", "ra", "b", "rb", "t"]
    assert live.peak_bytes == 16 + 4 + 4096 + 4  # at rb: ra, b and rb
    assert live.schedule == MEMORY_MINIMIZING


def test_the_text_order_is_kept_when_the_list_schedule_is_no_better() -> None:
    module = hlo_dedup.load(TWO_PRODUCERS.replace("""  b = f32[1024]{0} custom-call(p), custom_call_target="make"
  ra = f32[1]{0} custom-call(a), custom_call_target="sum"
""", """  ra = f32[1]{0} custom-call(a), custom_call_target="sum"
  b = f32[1024]{0} custom-call(p), custom_call_target="sum"
"""))
    live = analyze(module).computation("main")
    assert [i.name for i in live.instructions] == ["p", "a", "ra", "b", "rb", "t"]
    assert live.peak_bytes == 16 + 4 + 4096 + 4
    assert analyze(module, compiler_model=False).computation("main").schedule == TEXT_ORDER


def test_gathers_keep_their_text_order() -> None:
    # g2 is needed first, but the pass keeps the first gather in the text: g1 stays first.
    module = hlo_dedup.load(f"""\
HloModule m

ENTRY main {{
  w = f32[8]{{0}} parameter(0)
  g1 = f32[64]{{0}} all-gather(w), {GATHER}
  g2 = f32[64]{{0}} all-gather(w), {GATHER}
  s2 = f32[64]{{0}} custom-call(g2), custom_call_target="f"
  s1 = f32[64]{{0}} custom-call(g1, s2), custom_call_target="f"
  ROOT t = (f32[64]{{0}}) tuple(s1)
}}
""")
    names = [i.name for i in list_schedule(analyze(module, compiler_model=False).computation("main"))]
    assert names.index("g1") < names.index("g2")


# A weight tied between the first and the last layer of inference, the last use through
# JAX's w.T (a bitcast under its {0,1} layout). Weights are 16 KiB gathered.
TIED = f"""\
HloModule m

ENTRY main {{
  w = f32[8,64]{{1,0}} parameter(0)
  u = f32[8,64]{{1,0}} parameter(1)
  x = f32[4,64]{{1,0}} parameter(2)
  g1 = f32[64,64]{{1,0}} all-gather(w), {GATHER}
  h1 = f32[4,64]{{1,0}} dot(x, g1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t1 = f32[4,64]{{1,0}} tanh(h1)
  g2 = f32[64,64]{{1,0}} all-gather(u), {GATHER}
  h2 = f32[4,64]{{1,0}} dot(t1, g2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t2 = f32[4,64]{{1,0}} tanh(h2)
  g3 = f32[64,64]{{1,0}} all-gather(w), {GATHER}
  tr = f32[64,64]{{0,1}} transpose(g3), dimensions={{1,0}}
  ROOT out = f32[4,64]{{1,0}} dot(t2, tr), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""


def test_folding_a_tied_weight_in_inference_costs_one_whole_weight() -> None:
    (fold,) = hlo_dedup.run_passes(hlo_dedup.load(TIED)).folds
    assert (fold.kept, fold.removed) == ("g1", "g3")
    memory = fold.memory
    # Before: one gathered weight at a time (2 KiB w, 2 KiB u, 1 KiB x static; 1 KiB
    # activations). After: g1 lives through the second layer, beside g2.
    assert memory["peak_bytes_after"] - memory["peak_bytes_before"] == 16384
    assert memory["schedule"] == MEMORY_MINIMIZING
    # Priced as written, the transpose's own 16 KiB beside g3 made a baseline peak that hid
    # all but 1 KiB of the fold.
    as_written = hlo_dedup.load(TIED.replace("HloModule m", "HloModule m, is_scheduled=true"))
    (written,) = hlo_dedup.run_passes(as_written).folds
    assert written.memory["peak_bytes_after"] - written.memory["peak_bytes_before"] == 1024
