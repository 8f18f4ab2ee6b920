"""What the HloDCE tests share: small modules and what survives in them."""

from __future__ import annotations

from hlo_dedup import HloModule, parse_module
from hlo_dedup.passes import HloDCE

V = "f32[4]{0}"  # the one array shape most tests use


def module(text: str, *, spmd: bool = True) -> HloModule:
    return parse_module(text, spmd=spmd)


def entry(body: str, *, before: str = "", spmd: bool = True) -> HloModule:
    return module(f"HloModule m\n{before}\nENTRY main {{\n{body.strip(chr(10))}\n}}\n", spmd=spmd)


def names(m: HloModule, comp: str = "main") -> list[str]:
    c = m.get_computation(comp)
    assert c is not None, f"computation {comp} is gone"
    return [i.name for i in c.instructions]


def computations(m: HloModule) -> list[str]:
    return [c.name for c in m.computations]


def dce(m: HloModule) -> bool:
    return HloDCE().run(m)


def inst(m: HloModule, name: str, comp: str = "main"):
    c = m.get_computation(comp)
    assert c is not None
    found = c.get_instruction(name)
    assert found is not None, f"{name} is gone"
    return found


P01 = f"""
  p0 = {V} parameter(0)
  p1 = {V} parameter(1)"""
