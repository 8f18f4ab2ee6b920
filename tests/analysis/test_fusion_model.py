"""The compiler-shaped buffer model of a module before optimizations, on hand-counted cases:
which instructions own a buffer after XLA's fusion and layout assignment."""

from __future__ import annotations

import pytest

import hlo_dedup
from hlo_dedup.analysis import analyze
from hlo_dedup.analysis.fusion_model import BITCAST, FUSED, FusionDecisions

GATHER = "channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true"
DOT = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"


def _entry(body: str, header: str = "HloModule m") -> hlo_dedup.HloModule:
    return hlo_dedup.load(f"{header}\n\nENTRY main {{\n{body}}}\n")


def _peaks(module: hlo_dedup.HloModule) -> tuple[int, int]:
    """The entry's peak under the compiler model and as written."""
    return analyze(module).peak_bytes, analyze(module, compiler_model=False).peak_bytes


def _kinds(module: hlo_dedup.HloModule) -> dict[str, int]:
    comp = module.entry
    kind = FusionDecisions(comp, comp.instructions).kind
    return {i.name: k for i in comp.instructions if (k := kind(i))}


# Bytes: w 2 KiB and x 2 KiB are static; a gathered f32[64,64] is 16 KiB; d f32[8,64] 2 KiB.
TRANSPOSE_INTO_DOT = f"""\
  w = f32[8,64]{{1,0}} parameter(0)
  x = f32[8,64]{{1,0}} parameter(1)
  g = f32[64,64]{{1,0}} all-gather(w), {GATHER}
  t = f32[64,64]{{1,0}} transpose(g), dimensions={{1,0}}
  ROOT d = f32[8,64]{{1,0}} dot(x, t), {DOT}
"""


def test_a_transpose_the_dot_reads_costs_nothing() -> None:
    module = _entry(TRANSPOSE_INTO_DOT)
    assert _kinds(module) == {"t": BITCAST}
    # At d: w, x, g and d; as written, the peak is at t: w, x, g and t.
    assert _peaks(module) == (2048 + 2048 + 16384 + 2048, 2048 + 2048 + 16384 + 16384)


def test_a_transpose_that_is_a_bitcast_under_its_layout_costs_nothing() -> None:
    # JAX writes w.T with the {0,1} layout: the same bytes, read as the transpose.
    module = _entry(TRANSPOSE_INTO_DOT.replace("t = f32[64,64]{1,0}", "t = f32[64,64]{0,1}")
                    .replace("ROOT d = f32[8,64]{1,0} dot(x, t)",
                             'ROOT d = f32[64,64]{1,0} custom-call(t), custom_call_target="f"'))
    assert _kinds(module) == {"t": BITCAST}
    assert _peaks(module)[0] == 2048 + 2048 + 16384 + 16384  # g and the root


def test_a_transpose_that_moves_elements_is_a_loop_fused_into_its_consumer() -> None:
    module = _entry(f"""\
  w = f32[8,64]{{1,0}} parameter(0)
  g = f32[64,64]{{1,0}} all-gather(w), {GATHER}
  t = f32[64,64]{{1,0}} transpose(g), dimensions={{1,0}}
  c = f32[64,64]{{1,0}} copy(t)
  s = f32[64,64]{{1,0}} custom-call(c), custom_call_target="f"
  ROOT o = (f32[64,64]{{1,0}}, f32[64,64]{{1,0}}) tuple(s, g)
""")
    # t and c fuse into one loop (c's consumer, the custom-call, is not fusible): c owns it.
    assert _kinds(module) == {"t": FUSED}
    at_c = [analyze(module, compiler_model=model).computation("main") for model in (True, False)]
    # At c: w, g and c; as written, t's 16 KiB too.
    assert [m.live_bytes[m.position[m.computation.instructions[3]]] for m in at_c] == [
        2048 + 16384 + 16384, 2048 + 3 * 16384]


@pytest.mark.parametrize("layout, kinds, peak", [
    ("{1,0}", {"r": BITCAST}, 2048 + 2048 + 16384 + 2048),  # row-major both sides: the same bytes
    ("{0,1}", {}, 2048 + 2048 + 16384 + 16384),  # column-major into row-major: a copy, live with g
])
def test_a_reshape_costs_a_buffer_only_when_it_is_not_a_bitcast(layout: str, kinds: dict, peak: int) -> None:
    module = _entry(f"""\
  w = f32[8,64]{{1,0}} parameter(0)
  x = f32[8,64]{{1,0}} parameter(1)
  g = f32[64,64]{layout} all-gather(w), {GATHER}
  r = f32[64,8,8]{{2,1,0}} reshape(g)
  ROOT d = f32[8,8,8]{{2,1,0}} dot(x, r), {DOT}
""")
    assert _kinds(module) == kinds
    assert _peaks(module)[0] == peak


def test_an_elementwise_chain_costs_one_buffer() -> None:
    module = _entry("""\
  a = f32[1024]{0} parameter(0)
  s = f32[] parameter(1)
  b = f32[1024]{0} broadcast(s), dimensions={}
  c = f32[1024]{0} convert(a)
  m = f32[1024]{0} multiply(c, b)
  n = f32[1024]{0} add(m, m)
  ROOT o = f32[1024]{0} subtract(n, a)
""")
    # The broadcast, the convert and m (read twice by n, but cheap to duplicate) fuse into
    # the root's loop: one 4 KiB buffer besides the static a and s.
    assert _kinds(module) == {"b": FUSED, "c": FUSED, "m": FUSED, "n": FUSED}
    assert _peaks(module) == (4096 + 4 + 4096, 4096 + 4 + 3 * 4096)


def test_an_expensive_producer_read_twice_is_not_duplicated() -> None:
    module = _entry("""\
  a = f32[1024]{0} parameter(0)
  e = f32[1024]{0} exponential(a)
  ROOT n = f32[1024]{0} add(e, e)
""")
    assert _kinds(module) == {}
    # e is not fused into n, but n, elementwise on e and its last reader, is written into
    # e's buffer: a and one 4 KiB buffer at n.
    assert _peaks(module)[0] == 2 * 4096


def test_an_elementwise_result_takes_the_buffer_of_an_operand_it_reads_last() -> None:
    # g dies at the fused step n (negate fused into add), read elementwise: n is written
    # into g's buffer. h is read again later, so it keeps its own.
    module = _entry(f"""\
  w = f32[128]{{0}} parameter(0)
  g = f32[1024]{{0}} all-gather(w), {GATHER}
  h = f32[1024]{{0}} all-gather(w), {GATHER.replace("channel_id=1", "channel_id=2")}
  m = f32[1024]{{0}} negate(g)
  n = f32[1024]{{0}} add(m, h)
  ROOT t = (f32[1024]{{0}}, f32[1024]{{0}}) tuple(n, h)
""")
    live = analyze(module).computation("main")
    g, n = (live.computation.get_instruction(x) for x in ("g", "n"))
    assert live.end_of(g) == live.position[n] - 1
    assert live.peak_bytes == 512 + 2 * 4096  # w, then g and h, then h and n


_ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"


@pytest.mark.parametrize(("body", "read", "why"), [
    ("  r = f32[] reduce(g, z), dimensions={0}, to_apply=add\n"
     "  x = f32[1024]{0} broadcast(r), dimensions={}\n"
     "  ROOT n = f32[1024]{0} add(x, y)\n", "g", "a reduce reads it"),
    ('  s = f32[32,32]{1,0} custom-call(g), custom_call_target="make"\n'
     "  x = f32[32,32]{1,0} transpose(s), dimensions={1,0}\n"
     "  ROOT n = f32[32,32]{1,0} add(x, s)\n", "s", "a fused transpose reads it too"),
    ("  x = f32[1024]{0} negate(g)\n"
     "  ROOT n = bf16[1024]{0} convert(x)\n", "g", "another shape"),
])
def test_a_result_that_does_not_read_an_operand_element_by_element_keeps_its_own_buffer(
        body: str, read: str, why: str) -> None:
    # Each buffer is read last by the root's step, but not only element by element in its shape.
    module = hlo_dedup.load("HloModule m\n\n" + _ADD + "ENTRY main {\n"
                            "  w = f32[128]{0} parameter(0)\n  z = f32[] constant(0)\n  y = f32[1024]{0} parameter(1)\n"
                            f"  g = f32[1024]{{0}} all-gather(w), {GATHER.replace('{{', '{').replace('}}', '}')}\n"
                            + body + "}\n")
    live = analyze(module).computation("main")
    assert not live.in_place, why
    b = live.computation.get_instruction(read)
    last_reader = max(p for p, step in enumerate(live.instructions) if b in live.reads(step))
    assert live.end_of(b) == last_reader
def test_a_producer_with_a_consumer_that_cannot_fuse_owns_its_buffer() -> None:
    module = _entry(f"""\
  w = f32[8,64]{{1,0}} parameter(0)
  x = f32[8,64]{{1,0}} parameter(1)
  n = f32[8,64]{{1,0}} negate(w)
  g = f32[64,64]{{1,0}} all-gather(n), {GATHER}
  ROOT e = f32[64,64]{{1,0}} exponential(g)
""")
    assert _kinds(module) == {}
    assert _peaks(module)[0] == 2048 + 2048 + 16384 + 16384  # at e: n is dead


def test_a_scheduled_module_is_priced_as_written() -> None:
    module = _entry(TRANSPOSE_INTO_DOT, header="HloModule m, is_scheduled=true")
    live = analyze(module)
    assert not live.compiler_model
    assert live.peak_bytes == _peaks(module)[1]
    assert live.computation(module.entry).schedule == "module's schedule"


def test_a_fused_group_stops_growing_at_its_read_limit() -> None:
    # s_i = add(s_{i-1}, negate(g_i)): every link fuses into the next, so one group would read
    # every gather; it stops at MAX_FUSED_READS and starts a group of its own, which keeps
    # the buffer lists (and the time to make them) linear in the chain.
    from hlo_dedup.analysis.fusion_model import MAX_FUSED_READS

    n = 3 * MAX_FUSED_READS
    lines = ["HloModule m, replica_count=2", "ENTRY e {", "  p = f32[4]{0} parameter(0)", "  s0 = f32[4]{0} negate(p)"]
    for i in range(1, n + 1):
        lines += [f"  q{i} = f32[4]{{0}} parameter({i})", f"  n{i} = f32[4]{{0}} negate(q{i})",
                  f"  s{i} = f32[4]{{0}} add(s{i - 1}, n{i})"]
    lines += [f"  ROOT r = f32[4]{{0}} copy(s{n})", "}"]
    module = hlo_dedup.parse_module("\n".join(lines) + "\n")
    decided = _kinds(module)
    roots = [i for i in range(1, n + 1) if decided.get(f"s{i}") != FUSED]
    assert roots and all(b - a <= MAX_FUSED_READS for a, b in zip([0, *roots], roots))
    assert all(decided.get(f"n{i}") == FUSED for i in range(1, n + 1))
