"""What the all-gather pass's tests share: small modules around one or two gathers, and
the assertions about what the pass did to them."""

from __future__ import annotations

from hlo_dedup import HloModule, parse_module
from hlo_dedup.passes import NeuronAllGatherDuplicateRemover, PassResult

# All-gather attributes used throughout: 4 devices in one group gathering dim 0, so a
# f32[2,4] shard becomes f32[8,4].
G4 = "replica_groups={{0,1,2,3}}, dimensions={0}"

# Group size 1 ({{0},{1},{2},{3}}) keeps the output shape equal to the operand's whatever
# the gather dimension, so two gathers can differ in dimension and still share a key.
SINGLETONS = "replica_groups={{0},{1},{2},{3}}"


def entry(body: str, *, spmd: bool = True, before: str = "") -> HloModule:
    """A module whose ENTRY computation is `body` (indented instruction lines)."""
    return parse_module(f"HloModule m\n{before}\nENTRY main {{\n{body.strip(chr(10))}\n}}\n", spmd=spmd)


def run(module: HloModule, *, strict: bool = False) -> PassResult:
    return NeuronAllGatherDuplicateRemover(strict=strict).run_with_result(module)


def gathers(module: HloModule, opcode: str = "all-gather") -> list[str]:
    return [i.name for c in module.computations for i in c.instructions if i.opcode == opcode]


def operands(module: HloModule, name: str, comp: str = "main") -> list[str]:
    computation = module.get_computation(comp)
    assert computation is not None
    inst = computation.get_instruction(name)
    assert inst is not None, f"{name} is gone"
    return [o.name for o in inst.operands]


def pair(prelude: str, a: str, b: str, *, out_a: str = "f32[8,4]{1,0}", out_b: str | None = None,
         attrs_a: str = G4, attrs_b: str | None = None, spmd: bool = True) -> HloModule:
    """`prelude`, then ag_a = all-gather(a) and ag_b = all-gather(b), both used by the root."""
    out_b = out_b or out_a
    body = f"""{prelude.strip(chr(10))}
  ag_a = {out_a} all-gather({a}), {attrs_a}
  ag_b = {out_b} all-gather({b}), {attrs_b or attrs_a}
  ROOT out = ({out_a}, {out_b}) tuple(ag_a, ag_b)"""
    return entry(body, spmd=spmd)


def assert_folded(module: HloModule, result: PassResult) -> None:
    """ag_b was folded onto ag_a: the root now reads ag_a twice and ag_b is gone."""
    assert result.changed
    assert [(f.kept, f.removed) for f in result.folds] == [("ag_a", "ag_b")]
    assert operands(module, "out") == ["ag_a", "ag_a"]
    assert module.entry.get_instruction("ag_b") is None


def assert_not_folded(module: HloModule, result: PassResult, before: str) -> None:
    assert not result.changed
    assert result.folds == []
    assert operands(module, "out") == ["ag_a", "ag_b"]
    assert module.to_text() == before


P0 = "  p0 = f32[2,4]{1,0} parameter(0)"
P01 = P0 + "\n  p1 = f32[2,4]{1,0} parameter(1)"
