"""FindRawParameter's walk, remembered: the same answers as the hop-by-hop walk, each
instruction walked once however many gathers share it, and long walks summarised."""

from __future__ import annotations

import pytest
from support import corpus_modules, jax_modules

from hlo_dedup import parse_module, run_passes
from hlo_dedup.passes.raw_parameter_walk import SHOWN_HOPS, GATHERS, RawParameterWalker, walk_to_parameter


def _chain_module(converts: int, gathers: int) -> str:
    lines = ["HloModule m, replica_count=4", "ENTRY e {", "  c0 = f32[8]{0} parameter(0)"]
    lines += [f"  c{i} = f32[8]{{0}} convert(c{i - 1})" for i in range(1, converts + 1)]
    lines += [f"  g{j} = f32[32]{{0}} all-gather(c{converts}), replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}"
              for j in range(gathers)]
    shapes = ",".join(["f32[32]{0}"] * gathers)
    lines += [f"  ROOT t = ({shapes}) tuple({','.join(f'g{j}' for j in range(gathers))})", "}"]
    return "\n".join(lines) + "\n"


def _nested_module(depth: int) -> str:
    lines = ["HloModule m, replica_count=1", "ENTRY e {", "  a0 = f32[1]{0} parameter(0)"]
    lines += [f"  a{i} = f32[1]{{0}} all-gather(a{i - 1}), replica_groups={{{{0}}}}, dimensions={{0}}"
              for i in range(1, depth + 1)]
    lines += [f"  ROOT r = f32[1]{{0}} add(a{depth}, a{depth})", "}"]
    return "\n".join(lines) + "\n"


def test_gathers_after_one_long_chain_walk_it_once() -> None:
    module = parse_module(_chain_module(3000, 200))
    walker = RawParameterWalker()
    trails = [walker.walk(g.operands[0]) for g in module.entry if g.opcode == "all-gather"]
    assert len(walker._trails) == 3001  # one trail per instruction of the chain, not per gather
    assert all(t is trails[0] for t in trails)
    assert trails[0].raw_param.name == "c0" and trails[0].length == 3001


def test_a_long_walk_shows_its_ends_and_counts_the_rest() -> None:
    module = parse_module(_chain_module(100, 1))
    trail = RawParameterWalker().walk(module.entry.get_instruction("g0").operands[0])
    hops = trail.hops()
    assert len(hops) == 2 * SHOWN_HOPS + 1
    assert hops[0] == ("convert", "c100") and hops[-1] == ("parameter", "c0")
    assert hops[SHOWN_HOPS] == ("...", f"{101 - 2 * SHOWN_HOPS} hops")
    assert [name for _, name in hops[:SHOWN_HOPS]] == [f"c{100 - i}" for i in range(SHOWN_HOPS)]
    assert [name for _, name in hops[SHOWN_HOPS + 1:]] == [f"c{SHOWN_HOPS - 1 - i}" for i in range(SHOWN_HOPS)]


@pytest.mark.parametrize("converts", [0, 1, SHOWN_HOPS - 1, SHOWN_HOPS, 2 * SHOWN_HOPS - 2, 2 * SHOWN_HOPS - 1])
def test_a_walk_of_at_most_twice_the_shown_hops_is_shown_whole(converts: int) -> None:
    module = parse_module(_chain_module(converts, 1))
    start = module.entry.get_instruction("g0").operands[0]
    expected = tuple((h.opcode, h.name) for h in walk_to_parameter(start, ())[3])
    assert RawParameterWalker().walk(start).hops() == expected


def test_nested_gathers_count_what_they_tunnel_through() -> None:
    module = parse_module(_nested_module(50))
    walker = RawParameterWalker()
    trail = walker.walk(module.entry.get_instruction("a50").operands[0])
    assert trail.gather_count == 49  # a49 .. a1, each forwarding to its operand
    assert [t.node.name for t in trail.tunnelled()][:3] == ["a49", "a48", "a47"]
    assert len(walker._trails) == 50


def test_nested_gathers_fold_in_linear_work() -> None:
    module = parse_module(_nested_module(400))
    result = run_passes(module)
    folds = result.passes[-1].folds
    # All 400 trace to a0 with the same key; each later one folds onto a1 and differs in
    # how many inner gathers it tunnelled through (a hazard, reported).
    assert len(folds) == 399 and all(f.kept == "a1" for f in folds)
    assert len(result.passes[-1].hazards) == 399


def _walk_answers(module):  # type: ignore[no-untyped-def]
    walker = RawParameterWalker()
    for comp in module.computations:
        for inst in comp:
            if inst.opcode in GATHERS and inst.operands:
                raw, path, stop, hops = walk_to_parameter(inst.operands[0], ())
                trail = walker.walk(inst.operands[0])
                yield (raw, path, stop, len(hops)), (trail.raw_param, trail.path, trail.stop, trail.length)


def test_the_remembered_walk_answers_as_the_plain_one_on_real_modules() -> None:
    checked = 0
    modules = [parse_module(p.read_text(), str(p)) for p in jax_modules()] + [m for _, m in corpus_modules()]
    for module in modules:
        for plain, remembered in _walk_answers(module):
            assert plain == remembered
            checked += 1
    assert checked > 50


def test_strict_nested_gathers_refuse_in_linear_work() -> None:
    # Each nested gather tunnels through a different number of inner gathers: under --strict
    # none may fold onto another, and finding that must not compare each with all before it.
    module = parse_module(_nested_module(3000))
    result = run_passes(module, strict=True)
    gather_pass = result.passes[-1]
    assert gather_pass.folds == []
    assert len(gather_pass.hazards) == 2999 and all(h.refused for h in gather_pass.hazards)


def test_strict_mode_still_folds_onto_a_later_entry_alike(check_output) -> None:
    # g1 differs from g0 in its gather dimension (a hazard): refused under --strict; g2 is
    # like g1 in everything the hazards compare and folds onto it, not onto g0.
    text = """HloModule m, replica_count=4
ENTRY e {
  p = f32[4,4]{1,0} parameter(0)
  g0 = f32[4,4]{1,0} all-gather(p), replica_groups={{0},{1},{2},{3}}, dimensions={0}
  g1 = f32[4,4]{1,0} all-gather(p), replica_groups={{0},{1},{2},{3}}, dimensions={1}
  g2 = f32[4,4]{1,0} all-gather(p), replica_groups={{0},{1},{2},{3}}, dimensions={1}
  ROOT t = (f32[4,4]{1,0}, f32[4,4]{1,0}, f32[4,4]{1,0}) tuple(g0, g1, g2)
}
"""
    module = parse_module(text)
    result = run_passes(module, strict=True)
    assert [(f.kept, f.removed) for f in result.folds] == [("g1", "g2")]
    check_output(module)
