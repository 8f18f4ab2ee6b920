"""IR operations against XLA's rules (xla-semantics §2-§7)."""

from __future__ import annotations

import pytest

from hlo_dedup.ir.computation import HloComputation
from hlo_dedup.ir.instruction import HloInstruction, HloIrError
from hlo_dedup.ir.shape_reader import parse_shape
from hlo_dedup.text import parse_module

H = "HloModule m\n\n"


def module_of(body: str, *, extra: str = "", spmd: bool = True):  # type: ignore[no-untyped-def]
    return parse_module(H + extra + "ENTRY e {\n" + body + "\n}\n", spmd=spmd)


def inst(module, name: str) -> HloInstruction:  # type: ignore[no-untyped-def]
    for comp in module.computations:
        found = comp.get_instruction(name)
        if found is not None:
            return found
    raise KeyError(name)


# ------------------------------------------------------------------------------ RAUW
def test_rauw_accepts_a_different_float_precision() -> None:
    m = module_of(
        "  p = f32[4]{0} parameter(0)\n  q = bf16[4]{0} parameter(1)\n"
        "  a = f32[4]{0} negate(p)\n  ROOT r = f32[4]{0} add(a, a)"
    )
    a, q, r = inst(m, "a"), inst(m, "q"), inst(m, "r")
    a.replace_all_uses_with(q)
    assert r.operands == [q, q]
    assert a.users == [] and q.users == [r]
    assert "add(q, q)" in m.to_text()


@pytest.mark.parametrize(
    "other",
    ["f32[5]{0}", "f32[2,2]{1,0}", "s32[4]{0}", "(f32[4]{0})"],
)
def test_rauw_rejects_a_shape_change(other: str) -> None:
    m = module_of(f"  p = f32[4]{{0}} parameter(0)\n  q = {other} parameter(1)\n  ROOT r = f32[4]{{0}} negate(p)")
    p, q, r = inst(m, "p"), inst(m, "q"), inst(m, "r")
    with pytest.raises(HloIrError, match="shape doesn't match"):
        p.replace_all_uses_with(q, "test-trigger")
    assert r.operands == [p] and p.users == [r] and q.users == []


def test_rauw_ignores_layout() -> None:
    m = module_of("  p = f32[2,3]{1,0} parameter(0)\n  q = f32[2,3]{0,1} parameter(1)\n  ROOT r = f32[2,3]{1,0} negate(p)")
    inst(m, "p").replace_all_uses_with(inst(m, "q"))
    assert inst(m, "r").operands == [inst(m, "q")]


def test_rauw_moves_the_root_and_leaves_control_edges() -> None:
    m = module_of(
        "  p = f32[] parameter(0)\n  c = f32[] exponential(p)\n"
        "  a = f32[] negate(p), control-predecessors={c}\n  ROOT b = f32[] sine(a)"
    )
    comp = m.entry
    b, c = comp.root, inst(m, "c")
    n = comp.add_instruction(HloInstruction("n", "cosine", b.shape, [inst(m, "p")]))
    b.add_control_dependency_to(n)
    b.replace_all_uses_with(n)
    assert comp.root is n and not b.is_root and n.is_root
    assert b.control_successors == [n] and n.control_predecessors == [b]  # untouched
    a = inst(m, "a")
    a.replace_all_uses_with(inst(m, "p"))
    assert a.control_predecessors == [c] and c.control_successors == [a]
    assert b.operands == [inst(m, "p")]
    out = m.to_text()
    assert "ROOT n = f32[] cosine(p), control-predecessors={b}" in out
    assert "\n  b = f32[] sine(p)" in out
    parse_module(out)


def test_rauw_skips_the_new_producer_itself() -> None:
    m = module_of("  p = f32[] parameter(0)\n  a = f32[] negate(p)\n  ROOT r = f32[] add(a, p)")
    a, p = inst(m, "a"), inst(m, "p")
    p.replace_all_uses_with(a)  # a uses p: it keeps doing so (no cycle)
    assert a.operands == [p] and inst(m, "r").operands == [a, a]
    assert p.users == [a] and a.users == [inst(m, "r")]


def test_users_are_ordered_and_deduplicated() -> None:
    m = module_of(
        "  x = f32[] parameter(0)\n  u1 = f32[] add(x, x)\n  u2 = f32[] negate(x)\n"
        "  u3 = f32[] multiply(u1, x)\n  ROOT t = (f32[], f32[], f32[]) tuple(u1, u2, u3)"
    )
    x = inst(m, "x")
    assert x.users == [inst(m, "u1"), inst(m, "u2"), inst(m, "u3")]
    assert x.user_count == 3
    # Replacing one of two uses keeps the user; replacing the second drops it.
    u1 = inst(m, "u1")
    y = m.entry.add_instruction(HloInstruction("y", "parameter", parse_shape("f32[]"), payload="1"))
    u1.replace_operand_with(0, y)
    assert u1 in x.users and x.users.index(u1) == 0
    u1.replace_operand_with(1, y)
    assert u1 not in x.users and y.users == [u1]


def test_replace_operand_with() -> None:
    m = module_of("  p = f32[4] parameter(0)\n  q = bf16[4] parameter(1)\n  s = f32[5] parameter(2)\n  ROOT r = f32[4] add(p, p)")
    p, q, s, r = inst(m, "p"), inst(m, "q"), inst(m, "s"), inst(m, "r")
    r.replace_operand_with(1, q)  # fp precision is ignored
    assert r.operands == [p, q] and p.users == [r] and q.users == [r]
    with pytest.raises(HloIrError):
        r.replace_operand_with(0, s)
    assert r.operands == [p, q]
    assert "add(p, q)" in m.to_text()


# -------------------------------------------------------------- add / remove
def test_add_instruction_makes_unique_names() -> None:
    m = module_of("  p = f32[] parameter(0)\n  add.5 = f32[] add(p, p)\n  ROOT r = f32[] negate(add.5)", extra="c {\n  ROOT q = f32[] parameter(0)\n}\n\n")
    comp = m.entry
    p = inst(m, "p")
    a = comp.add_instruction(HloInstruction("p", "negate", p.shape, [p]))
    b = comp.add_instruction(HloInstruction("p", "negate", p.shape, [p]))
    assert (a.name, b.name) == ("p.1", "p.2")
    c = comp.add_instruction(HloInstruction("add.5", "negate", p.shape, [p]))
    d = comp.add_instruction(HloInstruction("q", "negate", p.shape, [p]))  # q is in computation c
    e = comp.add_instruction(HloInstruction("fresh", "negate", p.shape, [p]))
    assert c.name.startswith("add.") and c.name != "add.5"
    assert d.name == "q.1" and e.name == "fresh"
    names = [i.name for comp in m.computations for i in comp.instructions]
    assert len(names) == len(set(names))
    assert comp.get_instruction("p.1") is a
    with pytest.raises(HloIrError):
        comp.add_instruction(a)  # already in a computation


def test_remove_instruction_preconditions() -> None:
    m = module_of(
        "  p = f32[] parameter(0)\n  a = f32[] negate(p)\n  dead = f32[] exponential(p)\n"
        "  dep = f32[] sine(p), control-predecessors={dead}\n  ROOT r = f32[] add(a, dep)"
    )
    comp = m.entry
    with pytest.raises(HloIrError, match="IsDead"):
        comp.remove_instruction(inst(m, "a"))  # has a user
    with pytest.raises(HloIrError, match="IsDead"):
        comp.remove_instruction(comp.root)
    with pytest.raises(HloIrError, match="control"):
        comp.remove_instruction(inst(m, "dead"))  # dead but has a control successor
    p = inst(m, "p")
    lonely = comp.add_instruction(HloInstruction("lonely", "cosine", p.shape, [p]))
    assert p.users[-1] is lonely
    comp.remove_instruction(lonely)
    assert lonely.parent is None and lonely not in p.users and comp.get_instruction("lonely") is None
    unused = module_of("  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT r = f32[] negate(p)")
    with pytest.raises(HloIrError, match="IsSafelyRemovable"):
        unused.entry.remove_instruction(inst(unused, "q"))  # entry parameters stay
    other = HloComputation("other")
    with pytest.raises(HloIrError):
        other.remove_instruction(inst(m, "a"))


def test_remove_instruction_and_unused_operands_is_transitive() -> None:
    m = module_of(
        "  p = f32[] parameter(0)\n  a = f32[] negate(p)\n  b = f32[] exponential(a)\n"
        "  c = f32[] add(b, a)\n  keep = f32[] sine(p)\n  ROOT r = f32[] cosine(keep)"
    )
    comp = m.entry
    comp.remove_instruction_and_unused_operands(inst(m, "c"))
    assert [i.name for i in comp.instructions] == ["p", "keep", "r"]
    assert inst(m, "p").users == [inst(m, "keep")]  # entry parameter stays
    with pytest.raises(HloIrError):
        comp.remove_instruction_and_unused_operands(comp.root)
    with pytest.raises(HloIrError):
        comp.remove_instruction_and_unused_operands(inst(m, "keep"))  # not dead
    assert parse_module(m.to_text()).entry.instruction_count == 3


def test_a_removed_instruction_keeps_its_text_until_edited() -> None:
    """As in XLA, removing an instruction does not change what it prints: an unedited line
    stays as written (odd spacing and all) once it has left its module; an edit after the
    removal regenerates it; a line edited before the removal stays regenerated."""
    m = module_of("  p = f32[] parameter(0)\n  a = f32[]   negate( p ),  metadata={op_name=\"x\"}\n"
                  "  b = f32[] exponential(p)\n  ROOT r = f32[] sine(p)")
    a, b = inst(m, "a"), inst(m, "b")
    written = a.to_text()
    assert written == 'a = f32[]   negate( p ),  metadata={op_name="x"}'
    b.set_attr("metadata", '{op_name="y"}')
    m.entry.remove_instruction(a)
    m.entry.remove_instruction(b)
    assert a.parent is None and a.to_text() == written
    assert b.to_text() == 'b = f32[] exponential(p), metadata={op_name="y"}'
    a.set_attr("metadata", None)
    assert a.to_text() == "a = f32[] negate(p)"


def test_remove_instruction_and_unused_operands_keeps_side_effecting_operands() -> None:
    m = module_of(
        '  p = f32[] parameter(0)\n  se = f32[] custom-call(p), custom_call_target="io", custom_call_has_side_effect=true\n'
        "  pure = f32[] negate(p)\n  dead = f32[] add(se, pure)\n  ROOT r = f32[] sine(p)"
    )
    comp = m.entry
    comp.remove_instruction_and_unused_operands(inst(m, "dead"))
    assert [i.name for i in comp.instructions] == ["p", "se", "r"]
    # The starting instruction itself may have a side effect.
    comp.remove_instruction_and_unused_operands(inst(m, "se"))
    assert [i.name for i in comp.instructions] == ["p", "r"]


def test_remove_dead_fusion_parameter_through_the_fusion() -> None:
    m = module_of(
        "  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  y2 = f32[] negate(y)\n"
        "  ROOT f = f32[] fusion(x, y2), kind=kLoop, calls=fused",
        extra="fused {\n  p0 = f32[] parameter(0)\n  p1 = f32[] parameter(1)\n  u = f32[] negate(p1)\n  d = f32[] add(u, p1)\n  ROOT r = f32[] exponential(p0)\n}\n\n",
    )
    fused = m.get_computation("fused")
    assert fused.remove_instruction_and_unused_operands(inst(m, "d")) is True
    f = m.entry.root
    assert [o.name for o in f.operands] == ["x"] and [p.name for p in fused.parameters] == ["p0"]
    assert m.entry.get_instruction("y2") is None  # dead caller operand removed too
    assert inst(m, "y").users == []
    parse_module(m.to_text())


# ------------------------------------------------------------------------- clone
def test_clone_custom_call_with_new_operands() -> None:
    m = module_of(
        "  p = f32[4]{0} parameter(0)\n  q = f32[4]{0} parameter(1)\n  c = f32[4]{0} negate(p)\n"
        '  ROOT cc = f32[4]{0} custom-call(p, q), custom_call_target="my\\"target", custom_call_has_side_effect=true,'
        " operand_layout_constraints={f32[4]{0}, f32[4]{0}}, api_version=API_VERSION_STATUS_RETURNING,"
        ' frontend_attributes={a="b"}, backend_config={"k":1}, control-predecessors={c}',
    )
    cc = m.entry.root
    clone = cc.clone_with_new_operands(parse_shape("f32[4]{0}"), [inst(m, "q")], suffix="clone")
    assert clone.parent is None and clone.users == [] and clone.control_predecessors == []
    assert clone.opcode == "custom-call" and clone.operands == [inst(m, "q")]
    assert clone.name == "cc.clone"
    want = [(k, v) for k, v in cc.attributes if k != "control-predecessors"]
    assert clone.attributes == want  # every attribute copied (layout constraints kept verbatim)
    assert clone.custom_call_target == 'my"target' and clone.custom_call_has_side_effect
    assert clone.raw_backend_config == '{"k":1}' and clone.frontend_attributes == {"a": "b"}
    m.entry.add_instruction(clone)
    assert inst(m, "q").users == [cc, clone]
    assert "ROOT" not in clone.to_text()
    more = cc.clone_with_new_operands(cc.shape, [inst(m, "p"), inst(m, "q"), inst(m, "p")])
    assert len(more.operands) == 3  # the operand count may change


# ---------------------------------------------------------------------- identical
IDENT = (
    "  p = f32[4]{0} parameter(0)\n  q = f32[4]{0} parameter(1)\n"
    "  a1 = f32[4]{0} add(p, q), metadata={op_name=\"one\"}\n  a2 = f32[4]{0} add(p, q), metadata={op_name=\"two\"}\n"
    "  a3 = f32[4]{0} add(q, p)\n  p2 = f32[4]{0} copy(p)\n  a4 = f32[4]{0} add(p2, q)\n"
    "  l1 = f32[2,2]{1,0} reshape(p)\n  l2 = f32[2,2]{0,1} reshape(p)\n"
    '  b1 = f32[4]{0} custom-call(p), custom_call_target="t", backend_config="{\\"x\\":1}"\n'
    '  b2 = f32[4]{0} custom-call(p), custom_call_target="t", backend_config={"x":1}\n'
    '  b3 = f32[4]{0} custom-call(p), custom_call_target="t", backend_config={"x": 1}\n'
    "  ROOT t = (f32[4]{0}) tuple(a1)"
)


def test_identical_rules() -> None:
    m = module_of(IDENT)
    g = lambda n: inst(m, n)  # noqa: E731
    assert g("a1").identical(g("a1"))
    assert g("a1").identical(g("a2"))  # names and metadata are not compared
    assert not g("a1").identical(g("a3"))  # operand order matters (no commutative option here)
    assert not g("a1").identical(g("a4"))  # operands compared by pointer, not by value
    assert not g("l1").identical(g("l2"))  # layout sensitive by default
    assert g("l1").identical(g("l2"), layout_sensitive=False)
    assert g("b1").identical(g("b2"))  # same raw backend config string
    assert not g("b2").identical(g("b3"))  # raw text differs (XLA compares the raw strings)


REPLICA = (
    "  p = f32[2]{0} parameter(0)\n"
    "  g1 = f32[8]{0} all-gather(p), channel_id=1, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true\n"
    "  g2 = f32[8]{0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true\n"
    "  g3 = f32[8]{0} all-gather(p), channel_id=2, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true\n"
    "  g4 = f32[8]{0} all-gather(p), channel_id=1, replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}, use_global_device_ids=true\n"
    "  g5 = f32[8]{0} all-gather(p), channel_id=1, replica_groups={{0,4},{1,5},{2,6},{3,7}}, dimensions={0}, use_global_device_ids=true\n"
    "  ROOT t = (f32[8]{0}) tuple(g1)"
)


def test_iota_and_explicit_replica_groups_compare_equal() -> None:
    m = module_of(REPLICA)
    g = lambda n: inst(m, n)  # noqa: E731
    assert g("g1").replica_groups == g("g2").replica_groups
    assert g("g1").replica_groups.groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert g("g4").replica_groups.groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert g("g1").identical(g("g2")) and g("g4").identical(g("g5"))
    assert not g("g1").identical(g("g4"))
    assert not g("g2").identical(g("g3"))  # channel id values
    assert g("g2").identical(g("g3"), ignore_channel_id_values=True)


# ----------------------------------------------------------------------- post order
def test_post_order_operands_before_users_control_predecessors_first() -> None:
    m = module_of(
        "  p = f32[] parameter(0)\n  a = f32[] negate(p)\n  b = f32[] exponential(p)\n"
        "  c = f32[] sine(a), control-predecessors={b}\n  ROOT r = f32[] add(c, b)"
    )
    order = [i.name for i in m.entry.post_order()]
    # XLA's DFS pushes control predecessors last, so they come out before the operands.
    assert order == ["p", "b", "a", "c", "r"]


def test_post_order_starts_from_every_user_less_instruction_in_list_order() -> None:
    m = module_of(
        "  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  a = f32[] negate(p)\n  b = f32[] exponential(p)\n"
        "  c = f32[] sine(p), control-predecessors={b}\n  dead = f32[] cosine(q)\n  ROOT r = f32[] add(a, c)"
    )
    order = [i.name for i in m.entry.post_order()]
    assert sorted(order) == sorted(i.name for i in m.entry.instructions)
    pos = {n: i for i, n in enumerate(order)}
    for i in m.entry.instructions:
        assert all(pos[o.name] < pos[i.name] for o in [*i.operands, *i.control_predecessors])
    # b has no users (only a control successor), so it starts a DFS of its own.
    assert order == ["p", "b", "q", "dead", "a", "c", "r"]


def test_post_order_reports_a_cycle() -> None:
    m = module_of("  p = f32[] parameter(0)\n  a = f32[] negate(p)\n  ROOT b = f32[] exponential(a)")
    a, b = inst(m, "a"), inst(m, "b")
    a._replace_operand_unchecked(0, b)
    with pytest.raises(HloIrError, match="cycle"):
        m.entry.post_order()


# ---------------------------------------------------------------------- side effects
AG = "  p = f32[2]{0} parameter(0)\n  ROOT g = f32[4]{0} all-gather(p), ATTRSreplica_groups={{0,1}}, dimensions={0}"


@pytest.mark.parametrize("opcode", ["all-gather", "all-reduce", "all-to-all", "reduce-scatter"])
def test_channel_id_collective_side_effect_follows_spmd(opcode: str) -> None:
    attrs = "to_apply=sum, " if opcode in ("all-reduce", "reduce-scatter") else ""
    extra = "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
    body = f"  p = f32[4]{{0}} parameter(0)\n  ROOT g = f32[4]{{0}} {opcode}(p), channel_id=3, replica_groups={{{{0,1}}}}, dimensions={{0}}, {attrs}use_global_device_ids=true"
    m = module_of(body, extra=extra, spmd=True)
    g = m.entry.root
    assert not g.has_side_effect()
    m.use_spmd_partitioning = False  # XLA's default config: channel ids are sensitive
    assert g.has_side_effect_no_recurse() and g.has_side_effect()


def test_collective_without_channel_id_has_no_side_effect() -> None:
    m = module_of(AG.replace("ATTRS", ""), spmd=False)
    assert not m.entry.root.has_side_effect()


def test_constrain_layout_is_a_side_effect_even_in_spmd() -> None:
    m = module_of(AG.replace("ATTRS", "constrain_layout=true, "), spmd=True)
    assert m.entry.root.has_side_effect()


def test_collective_permute_channel_rule_and_always_side_effecting_ops() -> None:
    m = module_of(
        "  p = f32[2]{0} parameter(0)\n  cp = f32[2]{0} collective-permute(p), channel_id=1, source_target_pairs={{0,1}}\n"
        "  t = token[] after-all()\n  inf = ((f32[2]{0}), token[]) infeed(t)\n  ROOT r = f32[2]{0} negate(cp)",
        spmd=False,
    )
    assert inst(m, "cp").has_side_effect() and inst(m, "inf").has_side_effect()
    assert not inst(m, "t").has_side_effect()
    m.use_spmd_partitioning = True
    assert not inst(m, "cp").has_side_effect()


def test_custom_call_side_effect_and_recursion_through_calls() -> None:
    extra = (
        'inner {\n  x = f32[] parameter(0)\n  ROOT y = f32[] custom-call(x), custom_call_target="io", custom_call_has_side_effect=true\n}\n\n'
        "outer {\n  a = f32[] parameter(0)\n  ROOT b = f32[] call(a), to_apply=inner\n}\n\n"
        "pure {\n  c = f32[] parameter(0)\n  ROOT d = f32[] negate(c)\n}\n\n"
    )
    m = module_of(
        "  p = f32[] parameter(0)\n  c1 = f32[] call(p), to_apply=outer\n  c2 = f32[] call(p), to_apply=pure\n"
        '  cc = f32[] custom-call(p), custom_call_target="pure"\n  ROOT r = f32[] add(c1, c2)',
        extra=extra,
    )
    assert inst(m, "y").has_side_effect_no_recurse()
    c1 = inst(m, "c1")
    assert not c1.has_side_effect_no_recurse() and c1.has_side_effect()  # two levels down
    assert not inst(m, "c2").has_side_effect() and not inst(m, "cc").has_side_effect()
    assert m.get_computation("outer").has_side_effect()


# ------------------------------------------------------------------- typed accessors
def test_typed_accessors() -> None:
    m = module_of(
        "  p = f32[8,9]{1,0} parameter(0)\n"
        "  s1 = f32[2,9]{1,0} slice(p), slice={[0:2], [0:9]}\n"
        "  s2 = f32[3,3]{1,0} slice(p), slice={[1:7:2], [0:9:3]}\n"
        "  t = (f32[2,9]{1,0}, f32[3,3]{1,0}) tuple(s1, s2)\n"
        "  g = f32[3,3]{1,0} get-tuple-element(t), index=1\n"
        '  c1 = f32[] custom-call(), custom_call_target="a\\"b\\\\c\\n\\101\\x41"\n'
        '  c2 = f32[] custom-call(), custom_call_target="t", backend_config="{\\"q\\":\\"v\\"} tail"\n'
        '  c3 = f32[] custom-call(), custom_call_target="t", backend_config={"q":"v", "n":{"m":[1,2]}}\n'
        "  ag = f32[16,9]{1,0} all-gather(p), channel_id=7, replica_groups={{0,1}}, dimensions={0}\n"
        "  ROOT r = f32[3,3]{1,0} negate(g)"
    )
    g = lambda n: inst(m, n)  # noqa: E731
    assert (g("s1").slice_starts, g("s1").slice_limits, g("s1").slice_strides) == ((0, 0), (2, 9), (1, 1))
    assert (g("s2").slice_starts, g("s2").slice_limits, g("s2").slice_strides) == ((1, 0), (7, 9), (2, 3))
    assert g("g").tuple_index == 1
    assert g("ag").channel_id == 7 and g("p").channel_id is None
    assert g("ag").all_gather_dimension == 0 and g("ag").dimensions == (0,)
    assert g("c1").custom_call_target == 'a"b\\c\nAA'
    assert g("c2").raw_backend_config == '{"q":"v"} tail'  # quoted: unescaped
    assert g("c3").raw_backend_config == '{"q":"v", "n":{"m":[1,2]}}'  # raw JSON: verbatim
    assert g("r").raw_backend_config == "" and g("c3").custom_call_target == "t"
    assert g("p").parameter_number == 0
    assert g("p").shape.to_text() == "f32[8,9]{1,0}"


@pytest.mark.parametrize("attributes, expected", [
    # a mesh's axis names are strings ahead of the key: stepped over, the value read directly
    ("replica_groups=mesh['axis_0'=2] {'axis_0'}, dimensions={1}", "{1}"),
    # a mesh's device ids follow a top-level comma and still belong to the replica groups
    ("replica_groups=mesh['a'=2], device_ids=([2]T(0)) {'a'}, dimensions={1}", "{1}"),
    # the same words inside a bracketed value or a string are not the attribute
    ('frontend_attributes={a="1", dimensions="2"}, dimensions={1}', "{1}"),
    ('metadata={op_name=", dimensions={0}"}, dimensions={1}', "{1}"),
])
def test_attr_finds_the_top_level_attribute(attributes: str, expected: str) -> None:
    text = ("HloModule m, num_partitions=2\nENTRY e {\n  p = f32[2,2]{1,0} parameter(0)\n"
            f"  ROOT g = f32[2,4]{{1,0}} all-gather(p), channel_id=1, {attributes}, use_global_device_ids=true\n}}\n")
    gather = parse_module(text).entry.root
    assert gather.attr("dimensions") == expected
    assert gather.dimensions == (1,)
