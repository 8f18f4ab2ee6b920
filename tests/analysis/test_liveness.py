"""The liveness model: hand-counted modules, XLA's own live ranges as the oracle, invariants.

Hand cases use f32 vectors whose sizes (4 bytes an element) make every sum unambiguous; the
expected profiles were counted by hand from the rules in `hlo_dedup.analysis.liveness`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import jax_modules

import hlo_dedup
from hlo_dedup.analysis import analyze
from hlo_dedup.analysis.xla_dump import read_xla_memory

DATA = Path(__file__).resolve().parent / "data"

ALIASING = """\
HloModule aliasing, is_scheduled=true

ENTRY main {
  p0 = f32[8]{0} parameter(0)
  a = f32[8]{0} negate(p0)
  b = f32[4]{0} slice(p0), slice={[0:4]}
  t = (f32[8]{0}, f32[4]{0}) tuple(a, b)
  c = f32[2]{0} slice(p0), slice={[0:2]}
  g0 = f32[8]{0} get-tuple-element(t), index=0
  bc = f32[2,4]{1,0} bitcast(g0)
  d = f32[2,4]{1,0} multiply(bc, bc)
  g1 = f32[4]{0} get-tuple-element(t), index=1
  e = f32[4]{0} negate(g1)
  ROOT r = (f32[2,4]{1,0}, f32[4]{0}) tuple(d, e)
}
"""


def test_tuple_gte_bitcast_alias_and_a_get_tuple_element_reads_only_its_element() -> None:
    live = analyze(hlo_dedup.load(ALIASING)).computation("main")
    ranges = {b.instruction: (b.start, b.end, b.bytes) for b in live.buffers()}
    # Only definers own buffers; t, g0, bc, g1 and the root tuple alias a, b, d, e.
    assert ranges == {
        "p0": (0, 10, 32),  # a parameter: live throughout
        "a": (1, 7, 32),  # read through t -> g0 -> bc by d at 7
        "b": (2, 9, 16),  # read through t -> g1 by e at 9
        "c": (4, 4, 8),  # nothing reads it: live at its definition only
        "d": (7, 10, 32),  # root leaves live to the end
        "e": (9, 10, 16),
    }
    # At 8, g1 reads element 1 of t only: a (element 0) is already dead.
    assert live.live_bytes == [32, 64, 80, 80, 88, 80, 80, 112, 80, 96, 80]
    assert (live.peak_bytes, live.peak_instruction.name) == (112, "d")


WHILE = """\
HloModule loop, is_scheduled=true

cond {
  p = (s32[], f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[16]{0} get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  big = f32[64]{0} concatenate(v, v, v, v), dimensions={0}
  s = f32[16]{0} slice(big), slice={[0:16]}
  ROOT t = (s32[], f32[16]{0}) tuple(i2, s)
}

ENTRY main {
  x = f32[16]{0} parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[16]{0}) tuple(zero, x)
  w = (s32[], f32[16]{0}) while(init), condition=cond, body=body
  ROOT r = f32[16]{0} get-tuple-element(w), index=1
}
"""


def test_while_body_peak_adds_at_the_call_point_without_its_state_or_result() -> None:
    liveness = analyze(hlo_dedup.load(WHILE))
    body = liveness.computation("body")
    # Static: the state parameter (4 + 64) and the constant (4) = 72. i2 (4) lives from 4,
    # big (256) on [5, 6], s (64) from 6; both i2 and s are the root's (the result).
    assert body.live_bytes == [72, 72, 72, 72, 76, 332, 396, 140]
    # What the body adds over its caller: 396 - 68 (state) - 68 (result live at 6) = 260.
    assert liveness.nested_bytes(body.computation) == 260
    # cond: state 68, constant 4, the predicate 1 (its result): adds the constant.
    assert liveness.nested_bytes(liveness.computation("cond").computation) == 4
    entry = liveness.computation("main")
    # x and zero are static (68); the while aliases its operand; max(260, 4) at the while.
    assert entry.live_bytes == [68, 68, 68, 328, 68]
    assert entry.peak_instruction.name == "w"


FUSION_AND_CALL = """\
HloModule called, is_scheduled=true

fused {
  a = f32[16]{0} parameter(0)
  b = f32[64]{0} concatenate(a, a, a, a), dimensions={0}
  ROOT s = f32[16]{0} slice(b), slice={[0:16]}
}

callee {
  p = f32[16]{0} parameter(0)
  big = f32[64]{0} concatenate(p, p, p, p), dimensions={0}
  ROOT s = f32[16]{0} slice(big), slice={[0:16]}
}

ENTRY main {
  x = f32[16]{0} parameter(0)
  f = f32[16]{0} fusion(x), kind=kLoop, calls=fused
  c = f32[16]{0} call(f), to_apply=callee
  ROOT n = f32[16]{0} negate(c)
}
"""


def test_fusion_bodies_are_not_buffers_and_a_call_adds_its_temporaries() -> None:
    liveness = analyze(hlo_dedup.load(FUSION_AND_CALL))
    entry = liveness.computation("main")
    # The fusion allocates its 64-byte result only (its 256-byte concatenate is a loop).
    # The call's result c (64) is the caller's; the callee adds big (256) on top.
    assert entry.live_bytes == [64, 128, 64 + 64 + 64 + 256, 192]
    assert liveness.nested_bytes(liveness.computation("callee").computation) == 256
    assert [c.computation.name for c in liveness.analysed()] == ["callee", "main"]


ASYNC = """\
HloModule async, is_scheduled=true

ENTRY main {
  p = f32[4]{0} parameter(0)
  x = f32[4]{0} negate(p)
  ags = (f32[4]{0}, f32[32]{0}) all-gather-start(x), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  y = f32[4]{0} negate(p)
  agd = f32[32]{0} all-gather-done(ags)
  ROOT z = f32[32]{0} add(agd, agd)
}
"""


def test_all_gather_start_aliases_its_operand_and_done_its_destination() -> None:
    live = analyze(hlo_dedup.load(ASYNC)).computation("main")
    ranges = {(b.instruction, b.index): (b.start, b.end, b.bytes) for b in live.buffers()}
    # start's element 0 is x, element 1 a new 128-byte destination; done is that destination.
    assert ranges == {
        ("p", ()): (0, 5, 16),
        ("x", ()): (1, 4, 16),  # read through ags by agd
        ("ags", (1,)): (2, 5, 128),
        ("y", ()): (3, 3, 16),
        ("z", ()): (5, 5, 128),
    }
    assert live.live_bytes == [16, 32, 160, 176, 160, 272]


def test_profile_equals_the_sum_of_the_buffer_ranges_on_every_jax_module() -> None:
    for path in jax_modules() + [DATA / "fsdp_remat_layers.hlo"]:
        for live in analyze(hlo_dedup.load(path)).analysed():
            comp = live.computation
            expected = [live.nested.get(p, 0) for p in range(len(live.instructions))]
            for b in live.buffers():
                for p in range(b.start, b.end + 1):
                    expected[p] += b.bytes
            assert live.live_bytes == expected, (path.name, comp.name)


# --- XLA's own buffer assignment as the oracle (dump files XLA:CPU wrote) ---------------------


def test_live_ranges_equal_xla_hlo_live_range_on_a_compiled_transformer_step() -> None:
    path = DATA / "transformer_step.txt"
    xla = read_xla_memory(path)
    module = hlo_dedup.load(path)
    live = analyze(module).computation(module.entry)
    n = len(live.instructions)
    compared = 0
    for b in live.buffers():
        start, end = xla.ranges[(b.instruction, b.index)]
        if b.static and b.instruction.startswith("constant"):
            continue  # XLA gives constants def-to-last-use ranges; here they are static
        # XLA ends a live-out value one past the last instruction.
        assert (b.start, b.end) == (start, min(end, n - 1)), b
        compared += 1
    assert compared > 150
    # Same peak up to the 4-byte scalar constants and the output tuple's index table.
    assert abs(live.peak_bytes - xla.live_range_peak) <= 16
    assert xla.in_use_peak == xla.live_range_peak


def test_while_loop_step_within_one_percent_of_xla_in_use_peak() -> None:
    """Band for modules with while loops (documented in benchmarks/memory_vs_xla.py): the
    nested-bytes rule is an estimate of how XLA overlaps a loop body with its caller."""
    path = DATA / "scan_step.txt"
    xla = read_xla_memory(path)
    ours = analyze(hlo_dedup.load(path)).peak_bytes
    assert 1.0 <= ours / xla.in_use_peak <= 1.01
    assert ours <= xla.total_allocation * 1.01


@pytest.mark.parametrize("stem", ["transformer_step", "scan_step"])
def test_xla_reported_peak_is_not_above_its_own_live_range_maximum(stem: str) -> None:
    xla = read_xla_memory(DATA / f"{stem}.txt")
    assert xla.reported_peak is not None
    assert xla.reported_peak <= xla.live_range_peak
    assert xla.in_use_peak <= xla.total_allocation


@pytest.mark.parametrize("path", sorted((DATA.parents[1] / "data" / "neuron").glob("*_substitution*.hlo")),
                         ids=lambda p: p.name)
def test_instructions_a_pass_appended_after_their_users_are_placed_as_the_printer_writes_them(path: Path) -> None:
    module = hlo_dedup.load(path)
    result = hlo_dedup.run_passes(module, ["neuron-preprocess-kernel-duplicate-remover"])
    assert any(f.replacement for f in result.folds)  # a clone was appended at the end
    live = analyze(module).computation(module.entry)
    reparsed = hlo_dedup.load(module.to_text())
    printed = analyze(reparsed).computation(reparsed.entry)
    assert [i.name for i in live.instructions] == [i.name for i in printed.instructions]
    assert live.live_bytes == printed.live_bytes


def test_an_instruction_whose_shape_cannot_be_known_counts_zero_and_is_listed() -> None:
    module = hlo_dedup.load("""\
HloModule m

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}

ENTRY main {
  x = f32[2,8]{1,0} parameter(0)
  c = f32[] constant(0)
  w = reduce-window(x, c), window={size=1x2 stride=1x2}, to_apply=max
  ROOT n = f32[2,4]{1,0} negate(w)
}
""")
    live = analyze(module).computation("main")
    assert [i.name for i in live.unsized] == ["w"]
    assert live.live_bytes == [68, 68, 68, 100]  # x 64 and c 4 static; n 32; w unknown
