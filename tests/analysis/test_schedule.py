"""The memory-minimizing schedule of a module before optimizations, and the fold prices
it gives, on hand-counted cases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hlo_dedup
from hlo_dedup.analysis import analyze
from hlo_dedup.analysis.liveness import MEMORY_MINIMIZING, TEXT_ORDER
from hlo_dedup.analysis.schedule import Steps, list_schedule

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


def test_the_list_scheduler_on_hand_made_steps() -> None:
    # Steps 0 and 1 make 4 KiB each, 2 and 3 reduce them to 4 bytes, 4 holds both results.
    steps = Steps(inputs=[[], [], [0], [1], [2, 3]], reads=[(), (), ("a",), ("b",), ()],
                  defines=[("a",), ("b",), ("ra",), ("rb",), ()], users=[1, 1, 1, 1, 0],
                  size={"a": 4096, "b": 4096, "ra": 4, "rb": 4}, held={"ra", "rb"})
    order, listed, text = list_schedule(steps)
    assert order == [0, 2, 1, 3, 4]  # a is reduced (and freed) before b is made
    assert (listed, text) == (4 + 4096 + 4, 4096 + 4096 + 4)
    # Ties go to the most users, then the text: making b first costs the same as a.
    more = Steps(steps.inputs, steps.reads, steps.defines, [1, 2, 1, 1, 0], steps.size, steps.held)
    assert list_schedule(more)[0][:2] == [1, 3]
    # Other buffers over the same steps (a folded program): b, made after a (as gathers
    # chain), is merged into a and its step emptied; a lives until both reductions ran,
    # and the order graph is the one built for the program before.
    chained = Steps([[], [0], [0], [1], [2, 3]], steps.reads, steps.defines, steps.users, steps.size, steps.held)
    assert list_schedule(chained)[1] == 4 + 4096 + 4  # a reduced and freed before b is made
    merged = chained.with_buffers([(), (), ("a",), ("a",), ()], [("a",), (), ("ra",), ("rb",), ()], {"ra", "rb"}, {})
    order, listed, text = list_schedule(merged)
    assert merged.graph() is chained.graph()
    assert order == [0, 1, 2, 3, 4] and listed == text == 4096 + 4 + 4
    cyclic = Steps([[1], [0]], [(), ()], [("x",), ("y",)], [1, 1], {"x": 1, "y": 1}, set())
    try:
        list_schedule(cyclic)
    except ValueError as e:
        assert "cycle" in str(e)
    else:
        raise AssertionError("a cycle was scheduled")


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
    names = [i.name for i in analyze(module).computation("main").instructions]
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


# XLA:CPU compiles a module in a child process whose XLA_FLAGS pick the memory-minimizing
# scheduler (a flag read once per process), with CSE off so it keeps both gathers, and
# prints the live-range peak of its dump.
_XLA_PEAK = """\
import os, sys
os.environ["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=8"
                           " --xla_cpu_enable_concurrency_optimized_scheduler=false")
os.environ["JAX_PLATFORMS"] = "cpu"
from pathlib import Path
import jax, jaxlib, numpy as np
from jax._src import xla_bridge
from jax._src.lib import xla_client as xc
from hlo_dedup.analysis.xla_dump import read_xla_memory
from hlo_dedup.xla.oracle import text_to_module_proto
text, dump = Path(sys.argv[1]).read_text(), sys.argv[2]
options = xc.CompileOptions()
build = options.executable_build_options
options.num_partitions = build.num_partitions = 8
build.use_spmd_partitioning = True
build.device_assignment = xc.DeviceAssignment.create(np.arange(8).reshape(1, 8))
build.debug_options.xla_dump_to = dump
build.debug_options.xla_disable_hlo_passes = "cse_barrier_expander,cse"
backend = xla_bridge.get_backend("cpu")
backend.compile_and_load(jaxlib._jax.mlir.hlo_to_stablehlo(text_to_module_proto(text)),
                         xc.DeviceList(tuple(backend.devices()[:8])), options)
(path,) = Path(dump).glob("*cpu_after_optimizations.txt")
print(read_xla_memory(path).live_range_peak)
"""


def _xla_peak(text: str, tmp_path: Path, name: str) -> int:
    (tmp_path / f"{name}.hlo").write_text(text)
    done = subprocess.run([sys.executable, "-c", _XLA_PEAK, str(tmp_path / f"{name}.hlo"), str(tmp_path / name)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_the_tied_weight_fold_price_is_xla_cpus(xla_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = TIED.replace("HloModule m", "HloModule m, num_partitions=8")
    module = hlo_dedup.load(text)
    (fold,) = hlo_dedup.run_passes(module).folds
    before, after = _xla_peak(text, tmp_path, "before"), _xla_peak(module.to_text(), tmp_path, "after")
    assert (fold.memory["peak_bytes_before"], fold.memory["peak_bytes_after"]) == (before, after)


def test_a_result_written_into_the_buffer_it_reads_last_counts_once() -> None:
    # Step 1 reads a (4 KiB) and may write its 4 KiB result b into a's buffer; step 2
    # reads a too, so only under an order with 1 last is the buffer shared.
    def steps(shares: dict) -> Steps:
        return Steps(inputs=[[], [0], [0], [1, 2]], reads=[(), ("a",), ("a",), ("b", "c")],
                     defines=[("a",), ("b",), ("c",), ("d",)], users=[2, 1, 1, 0],
                     size={"a": 4096, "b": 4096, "c": 4, "d": 4}, held={"d"}, shares=shares)

    order, listed, text = list_schedule(steps({1: ("a",)}))
    assert order == [0, 2, 1, 3]  # c frees nothing either way; it goes first by the text
    # Text order: at 1, a and b (a is still read by 2); then a + b + c at 2.
    # The list order: a + c at 2, b written into a's buffer at 1, then b + c + d at 3.
    assert (listed, text) == (4096 + 4 + 4, 4096 + 4096 + 4)
    assert list_schedule(steps({}))[1] == 4096 + 4096 + 4  # without sharing b needs its own
