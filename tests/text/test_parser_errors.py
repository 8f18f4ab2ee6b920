"""Malformed HLO raises HloParseError at the right file:line:column with a clear message;
edge syntax from hand-written tests and old dumps parses and round-trips."""

from __future__ import annotations

import pytest

from hlo_dedup.ir.instruction import HloInstruction
from hlo_dedup.text import HloParseError, parse_module, parse_modules

H = "HloModule m\n\n"


def parse_error(text: str, filename: str = "bad.hlo") -> HloParseError:
    with pytest.raises(HloParseError) as info:
        parse_module(text, filename)
    err = info.value
    assert err.filename == filename
    assert str(err).startswith(f"{filename}:{err.line}:{err.column}: error: ")
    return err


def at(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based line and column of the nth occurrence of `needle` in `text`."""
    pos = -1
    for _ in range(nth + 1):
        pos = text.index(needle, pos + 1)
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


# ---------------------------------------------------------------------------- errors
def test_undefined_operand() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] add(p, q)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "q)")
    assert "undefined instruction 'q'" in err.message


def test_undefined_operand_in_multi_line_instruction() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] add(p,\n      %missing)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "%missing")
    assert "'missing'" in err.message


def test_duplicate_instruction_names() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  p = f32[] parameter(1)\n  ROOT a = f32[] add(p, p)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "p = f32[] parameter(1)")
    assert "duplicate instruction name 'p'" in err.message and "'e'" in err.message


def test_non_ascii_instruction_name_is_rejected_on_both_readers() -> None:
    """XLA's names are ASCII (its parser rejects `pé`): the XLA-printed-line reader must not
    accept what the careful reader refuses."""
    text = H + "ENTRY e {\n  p\u00e9 = f32[] parameter(0)\n  ROOT a = f32[] add(p\u00e9, p\u00e9)\n}\n"
    for fast_path in (True, False):
        with pytest.raises(HloParseError) as info:
            parse_module(text, "bad.hlo", fast_path=fast_path)
        assert (info.value.line, info.value.column) == (at(text, "\u00e9")[0], at(text, "\u00e9")[1])


def test_same_instruction_name_in_two_computations_is_fine() -> None:
    text = H + "c {\n  ROOT x = f32[] parameter(0)\n}\n\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT y = f32[] call(x), to_apply=c\n}\n"
    module = parse_module(text)
    assert module.to_text() == text
    assert module.entry.root.called_computations == [module.get_computation("c")]


def test_duplicate_computation_names() -> None:
    text = H + "c {\n  ROOT p = f32[] parameter(0)\n}\n\nc {\n  ROOT p = f32[] parameter(0)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "c {", 1)
    assert "duplicate computation name 'c'" in err.message


def test_unknown_computation_in_to_apply() -> None:
    text = H + "ENTRY e {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=nosuch\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "nosuch")
    assert "unknown computation 'nosuch'" in err.message


def test_computation_must_be_defined_before_use() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=%later\n}\n\nlater {\n  ROOT q = f32[] parameter(0)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "%later")
    assert "unknown computation 'later'" in err.message


@pytest.mark.parametrize("call", ["call(p), to_apply=c", "while(p), condition=c, body=c",
                                  "conditional(b, p, p), true_computation=d, false_computation=c"])
def test_a_computation_that_calls_itself_is_refused_as_xla_refuses_it(call: str) -> None:
    # XLA registers a computation once it is read: a call graph holds no cycle, and every
    # analysis walking it may rely on that.
    text = (H + "d {\n  ROOT q = f32[2] parameter(0)\n}\n\nc {\n  p = f32[2] parameter(0)\n  b = pred[] constant(true)\n"
            f"  ROOT r = f32[2] {call}\n}}\n\nENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] call(p), to_apply=c\n}}\n")
    err = parse_error(text)
    line = text.splitlines()[err.line - 1]
    assert line == f"  ROOT r = f32[2] {call}"
    assert line[err.column - 2:err.column] == "=c"  # the first name of c in the line
    assert err.message.startswith("computation 'c' calls itself (a call graph has no cycles)")


def test_unknown_opcode() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] frobnicate(p)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "frobnicate")
    assert "unknown opcode 'frobnicate'" in err.message


def test_unterminated_string() -> None:
    text = H + 'ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] custom-call(p), custom_call_target="foo\n}\n'
    err = parse_error(text)
    assert (err.line, err.column) == at(text, '"foo')
    assert "unterminated string" in err.message


def test_unterminated_comment() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] negate(p) /* never closed\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "/*")
    assert "unterminated /* comment" in err.message


def test_unbalanced_brace_in_attribute_swallows_the_computation() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] negate(p), sharding={{replicated}\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "ROOT a")
    assert "unbalanced brackets in instruction 'a'" in err.message


def test_mismatched_bracket() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] negate(p), sharding={replicated)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, ")\n}")
    assert "mismatched ')'" in err.message


def test_unclosed_operand_list() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] negate(p\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "}\n")
    assert "expected ',' or ')' in operand list" in err.message


def test_two_roots() -> None:
    text = H + "ENTRY e {\n  ROOT p = f32[] parameter(0)\n  ROOT a = f32[] negate(p)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "ROOT a")
    assert "more than one ROOT" in err.message and "'e'" in err.message


def test_duplicate_parameter_numbers() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  q = f32[] parameter(0)\n  ROOT a = f32[] add(p, q)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "q = ")
    assert "duplicate parameter number 0" in err.message


def test_parameter_numbers_must_be_dense() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  q = f32[] parameter(2)\n  ROOT a = f32[] add(p, q)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "q = ")
    assert "must be 0..1" in err.message and "'q'" in err.message


def test_missing_closing_brace() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] negate(p)\n"
    err = parse_error(text)
    assert (err.line, err.column) == (6, 1)  # end of input
    assert "missing '}' closing computation 'e' (opened on line 3)" in err.message


def test_missing_shape_where_xla_cannot_infer_it() -> None:
    text = H + "ENTRY e {\n  p = parameter(0)\n  ROOT a = f32[] negate(p)\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "parameter(0)")
    assert "missing result shape" in err.message


def test_unknown_control_predecessor() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] negate(p), control-predecessors={%zz}\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "%zz")
    assert "unknown control predecessor 'zz'" in err.message


def test_duplicate_attribute() -> None:
    text = H + "ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT a = f32[4] reverse(p), dimensions={0},\n    dimensions={0}\n}\n"
    err = parse_error(text)
    assert (err.line, err.column) == at(text, "dimensions", 1)
    assert "duplicate attribute 'dimensions'" in err.message


def test_errors_in_a_later_module_of_a_split_file_report_file_lines() -> None:
    first = H + "ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
    second = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] add(p, nope)\n}\n"
    text = first + "\n// -----\n\n" + second
    with pytest.raises(HloParseError) as info:
        parse_modules(text, "split.hlo")
    assert (info.value.line, info.value.column) == at(text, "nope")
    assert info.value.filename == "split.hlo"


def test_lazily_decoded_attribute_errors_are_located() -> None:
    text = H + "ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT a = f32[4] reverse(p), dimensions={x}\n}\n"
    module = parse_module(text, "lazy.hlo")
    with pytest.raises(HloParseError) as info:
        module.entry.root.dimensions
    assert info.value.filename == "lazy.hlo"
    assert (info.value.line, info.value.column) == at(text, "x}")  # where XLA's parser points


def test_shape_that_cannot_be_inferred_is_a_located_parse_error() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT g = get-tuple-element(p), index=0\n}\n"
    module = parse_module(text, "gte.hlo")
    with pytest.raises(HloParseError) as info:
        module.entry.root.shape
    assert (info.value.line, info.value.column) == at(text, "get-tuple-element(")
    assert "does not select an element of f32[]" in info.value.message


# ------------------------------------------------------------------------ edge syntax
def round_trip(text: str):  # type: ignore[no-untyped-def]
    module = parse_module(text)
    assert module.to_text() == text
    careful = parse_module(text, fast_path=False)
    assert careful.to_text() == text
    return module


def reparse_regenerated(module) -> str:  # type: ignore[no-untyped-def]
    """Force every line to be regenerated; our parser must read it back to the same IR."""
    for comp in module.computations:
        for inst in comp.instructions:
            inst.mark_changed()
    out = module.to_text()
    again = parse_module(out)
    for a, b in zip(module.computations, again.computations):
        visible = [(i.name, i.opcode, [o.name for o in i.operands]) for i in a.instructions]
        assert visible == [(i.name, i.opcode, [o.name for o in i.operands]) for i in b.instructions]
    return out


def xla_canonical(xc, text: str) -> str:  # type: ignore[no-untyped-def]
    return xc.hlo.hlo_module_from_text(text).to_string()


def test_headerless_module() -> None:
    text = (
        "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n\n"
        "main {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
        "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add\n}\n"
    )
    module = round_trip(text)
    assert module.name == "module_main"
    assert module.entry is module.get_computation("main")  # no ENTRY: the last computation
    reparse_regenerated(module)


def test_headerless_module_with_entry_keyword() -> None:
    text = "ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n\nother {\n  ROOT q = s32[] parameter(0)\n}\n"
    module = round_trip(text)
    assert module.name == "module_e" and module.entry.name == "e"


def test_missing_result_shape(xla_client) -> None:  # type: ignore[no-untyped-def]
    text = H + "ENTRY e {\n  p = f32[2] parameter(0)\n  t = (f32[2], f32[2]) tuple(p, p)\n  g = get-tuple-element(t), index=1\n  ROOT a = add(g, p)\n}\n"
    module = round_trip(text)
    root = module.entry.root
    assert root.shape_text is None and root.shape.to_text() == "f32[2]"
    assert module.entry.get_instruction("g").shape.to_text() == "f32[2]"
    out = reparse_regenerated(module)
    assert "ROOT a = add(g, p)" in out  # the left-out shape stays out; XLA infers it
    assert xla_canonical(xla_client, out) == xla_canonical(xla_client, text)


def test_nested_instruction_operands(xla_client) -> None:  # type: ignore[no-untyped-def]
    text = H + "ENTRY e {\n  ROOT r = f32[] add(f32[] parameter(0), f32[] multiply(f32[] parameter(1), f32[] constant(2)))\n}\n"
    module = round_trip(text)
    names = [i.name for i in module.entry.instructions]
    # XLA's names for nested instructions: <opcode>.anon, then .anon.1, ...
    assert names == ["parameter.anon", "parameter.anon.1", "constant.anon", "multiply.anon", "r"]
    assert [p.name for p in module.entry.parameters] == ["parameter.anon", "parameter.anon.1"]
    root = module.entry.root
    assert [o.name for o in root.operands] == ["parameter.anon", "multiply.anon"]
    assert module.entry.get_instruction("parameter.anon").shape_text == "f32[]"
    out = reparse_regenerated(module)
    assert xla_canonical(xla_client, out) == xla_canonical(xla_client, text)


def test_editing_a_nested_instruction_regenerates_its_host() -> None:
    text = H + "ENTRY e {\n  ROOT r = f32[] negate(f32[] constant(2))\n}\n"
    module = round_trip(text)
    const = module.entry.get_instruction("constant.anon")
    const._payload = "3"
    const.mark_changed()
    out = module.to_text()
    assert "constant(3)" in out and "constant(2)" not in out
    assert parse_module(out).entry.root.operands[0].payload == "3"


def test_old_operand_shapes(xla_client) -> None:  # type: ignore[no-untyped-def]
    text = H + "ENTRY %e (a: f32[2], b: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  %b = f32[2]{0} parameter(1)\n  ROOT %c = f32[2]{0} add(f32[2]{0} %a, f32[2]{0} %b)\n}\n"
    module = round_trip(text)
    root = module.entry.root
    assert [o.name for o in root.operands] == ["a", "b"] and root.span.operand_shapes
    out = reparse_regenerated(module)
    assert "add(f32[2]{0} %a, f32[2]{0} %b)" in out
    assert xla_canonical(xla_client, out) == xla_canonical(xla_client, text)


COMPACT = (
    H + "ENTRY %e (p: ((f32[2], s32[]), f32[2])) -> (f32[2], s32[]) {\n"
    "  %p = ((f32[2]{0}, s32[]), f32[2]{0}) parameter(0)\n"
    "  %a = f32[2]{0} add(%p#0#0, %p#1)\n"
    "  ROOT %t = (f32[2]{0}, s32[]) tuple(%a, %p#0#1)\n}\n"
)


def test_compact_gte() -> None:
    module = round_trip(COMPACT)
    comp = module.entry
    a = comp.get_instruction("a")
    g00, g1 = a.operands
    assert (g00.opcode, g00.tuple_index, g1.tuple_index) == ("get-tuple-element", 0, 1)
    g0 = g00.operands[0]
    assert g0.operands[0] is comp.get_instruction("p") and g0.tuple_index == 0
    assert g0.shape.to_text() == "(f32[2]{0}, s32[])" and g00.shape.to_text() == "f32[2]{0}"
    # `%p#0` is built once and shared by `%p#0#0` and `%p#0#1`.
    assert comp.root.operands[1].operands[0] is g0
    assert g0.users == [g00, comp.root.operands[1]]


def test_rauw_with_compact_gte_prints_parseable_text() -> None:
    module = parse_module(COMPACT)
    comp = module.entry
    p = comp.get_instruction("p")
    q = comp.add_instruction(HloInstruction("q", "copy", p.shape, [p]))
    p.replace_all_uses_with(q)
    out = module.to_text()
    assert "add(%q#0#0, %q#1)" in out and "tuple(%a, %q#0#1)" in out
    again = parse_module(out)
    a = again.entry.get_instruction("a")
    assert a.operands[0].operands[0].operands[0] is again.entry.get_instruction("q")


def test_rauw_of_a_compact_gte_itself() -> None:
    module = parse_module(COMPACT)
    comp = module.entry
    a = comp.get_instruction("a")
    g00 = a.operands[0]
    neg = comp.add_instruction(HloInstruction("n", "negate", g00.shape, [g00]))
    g00.replace_all_uses_with(neg)
    out = module.to_text()
    assert "%n = f32[2]{0} negate(%p#0#0)" in out and "add(%n, %p#1)" in out
    assert out.index("%n = ") < out.index("%a = ")
    parse_module(out)


def test_index_comments_in_operands_and_tuple_shapes() -> None:
    text = H + "ENTRY e {\n  a = f32[] parameter(0)\n  ROOT t = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) tuple(a, a, a, a, a, /*index=5*/a)\n}\n"
    module = round_trip(text)
    root = module.entry.root
    assert len(root.operands) == 6 and len(root.shape.tuple_shapes) == 6
    assert module.entry.get_instruction("a").users == [root]
    root.mark_changed()
    assert "tuple(a, a, a, a, a, /*index=5*/a)" in module.to_text()


def test_multi_line_hand_written_instruction() -> None:
    text = H + "ENTRY e {\n  p = f32[4]\n      parameter(0)\n  ROOT r = f32[2]\n    slice(p),\n    slice={[0:4:2]},  // a comment\n    metadata={op_name=\"x\"}\n}\n"
    module = round_trip(text)
    root = module.entry.root
    assert (root.slice_starts, root.slice_limits, root.slice_strides) == ((0,), (4,), (2,))
    assert [k for k, _ in root.attributes] == ["slice", "metadata"]
    reparse_regenerated(module)


def test_single_quoted_strings() -> None:
    text = H + "ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] custom-call(p), custom_call_target='it\\'s \"q\"', backend_config='cfg'\n}\n"
    module = round_trip(text)
    root = module.entry.root
    assert root.custom_call_target == "it's \"q\""
    assert root.raw_backend_config == "cfg"


def test_calls_with_several_computations() -> None:
    text = (
        H + "f1 {\n  ROOT a = f32[] parameter(0)\n}\n\nf2 {\n  ROOT b = f32[] parameter(0)\n}\n\n"
        "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] custom-call(p), custom_call_target=\"x\", calls=%f1, %f2, metadata={op_name=\"m\"}\n}\n"
    )
    module = round_trip(text)
    root = module.entry.root
    assert [c.name for c in root.called_computations] == ["f1", "f2"]
    assert root.attributes == [("custom_call_target", '"x"'), ("calls", "%f1, %f2"), ("metadata", '{op_name="m"}')]


def test_control_predecessors_round_trip() -> None:
    text = H + "ENTRY e {\n  p = f32[] parameter(0)\n  a = f32[] negate(p)\n  ROOT b = f32[] exponential(p), control-predecessors={%a}\n}\n"
    module = round_trip(text)
    a, b = module.entry.get_instruction("a"), module.entry.root
    assert b.control_predecessors == [a] and a.control_successors == [b]


def test_split_file_skips_comment_only_pieces() -> None:
    text = "// RUN: hlo-opt %s\n\n// -----\n\n" + H + "ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
    modules = parse_modules(text)
    assert len(modules) == 1 and modules[0].name == "m"
