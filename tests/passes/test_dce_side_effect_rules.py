"""`dce`: which side-effecting instructions XLA's HloDCE may still remove (xla-semantics §1):
the Sharding custom-call rule, the `xla_allow_dce_side_effecting_op` attribute and the
async wrappers that take the side effect of the op they wrap. Every output is re-parsed by XLA.
"""

from __future__ import annotations

import pytest
from dce_cases import V, dce, entry, names

# ------------------------------------------------------------------- Sharding custom-call


@pytest.mark.parametrize(
    "lines, kept",
    [
        # operand used only by the Sharding annotation: both go
        (f"  a = {V} negate(p0)\n  s = {V} custom-call(a), custom_call_target=\"Sharding\", sharding={{replicated}}\n"
         f"  ROOT r = {V} abs(p0)", set()),
        # operand used elsewhere too: the annotation stays
        (f"  a = {V} negate(p0)\n  s = {V} custom-call(a), custom_call_target=\"Sharding\", sharding={{replicated}}\n"
         f"  ROOT r = {V} abs(a)", {"a", "s"}),
        # operand is a parameter
        (f"  s = {V} custom-call(p0), custom_call_target=\"Sharding\", sharding={{replicated}}\n"
         f"  ROOT r = {V} abs(p0)", {"s"}),
        # operand is the root
        (f"  s = {V} custom-call(a), custom_call_target=\"Sharding\", sharding={{replicated}}\n"
         f"  ROOT a = {V} negate(p0)", {"a", "s"}),
    ],
    ids=["sole-user", "shared-operand", "parameter-operand", "root-operand"],
)
def test_sharding_custom_call_rule(lines: str, kept: set[str], check_output) -> None:
    text = f"  p0 = {V} parameter(0)\n" + lines
    if "ROOT a" in lines:  # the root must be defined before its user in XLA text
        text = f"  p0 = {V} parameter(0)\n  ROOT a = {V} negate(p0)\n" \
               f"  s = {V} custom-call(a), custom_call_target=\"Sharding\", sharding={{replicated}}"
    m = entry(text)
    dce(m)
    present = set(names(m)) - {"p0", "r"}
    assert present == kept
    check_output(m)


# ------------------------------------------------- xla_allow_dce_side_effecting_op attribute

ALLOW = "frontend_attributes={{xla_allow_dce_side_effecting_op=\"{}\"}}"


def test_allow_false_keeps_even_a_pure_instruction() -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  n = {V} negate(p0), {ALLOW.format("false")}
  ROOT r = {V} abs(p0)""")
    assert dce(m) is False
    assert names(m) == ["p0", "n", "r"]


@pytest.mark.parametrize(
    "target, removed",
    [("tpu_custom_call", True), ("foo", False)],
)
def test_allow_true_removes_only_tpu_custom_calls(target: str, removed: bool) -> None:
    m = entry(f"""
  p0 = {V} parameter(0)
  x = {V} custom-call(p0), custom_call_target="{target}", custom_call_has_side_effect=true, {ALLOW.format("true")}
  ROOT r = {V} abs(p0)""")
    assert dce(m) is removed
    assert (m.entry.get_instruction("x") is None) == removed


def test_allowed_side_effect_that_dies_mid_walk_is_removed(check_output) -> None:
    # XLA walks the whole reverse post order: n goes first (its recursion must skip the
    # side-effecting x), then x is reached, is dead by now, and is allowed to go.
    m = entry(f"""
  p0 = {V} parameter(0)
  x = {V} custom-call(p0), custom_call_target="tpu_custom_call", custom_call_has_side_effect=true, {ALLOW.format("true")}
  n = {V} negate(x)
  ROOT r = {V} abs(p0)""")
    assert dce(m) is True
    assert names(m) == ["p0", "r"]
    check_output(m)


def test_allow_true_does_not_make_all_gather_start_removable(check_output) -> None:
    # Only async-start/-update/-done (IsAsynchronous) and tpu_custom_call honour "true";
    # all-gather-start/-done are collectives with their own opcodes, so both stay.
    m = entry(f"""
  p0 = {V} parameter(0)
  s = ({V}, f32[16]{{0}}) all-gather-start(p0), replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}, {ALLOW.format("true")}
  d = f32[16]{{0}} all-gather-done(s), {ALLOW.format("true")}
  ROOT r = {V} abs(p0)""")
    assert dce(m) is False
    assert names(m) == ["p0", "s", "d", "r"]
    check_output(m)


@pytest.mark.parametrize(
    "flag, kept",
    [("custom_call_has_side_effect=true", True), ("", False)],
    ids=["side-effecting", "pure"],
)
def test_async_sugar_takes_the_side_effect_of_the_wrapped_op(flag: str, kept: bool, check_output) -> None:
    # `custom-call-start` is XLA's text sugar for an async-start wrapping a custom-call; the
    # wrapped op's side effect makes the async pair side-effecting (HasSideEffect recurses
    # into the wrapped computation), so a dead pair stays.
    attrs = 'custom_call_target="foo"' + (f", {flag}" if flag else "")
    m = entry(f"""
  p0 = {V} parameter(0)
  s = (({V}), {V}, s32[]) custom-call-start(p0), {attrs}
  d = {V} custom-call-done(s)
  ROOT r = {V} abs(p0)""")
    assert dce(m) is (not kept)
    assert names(m) == (["p0", "s", "d", "r"] if kept else ["p0", "r"])
    check_output(m)


def test_allow_true_removes_an_async_sugar_pair(check_output) -> None:
    # IsAsynchronous holds for the sugar, and "true" on the start covers the done through
    # async_chain_start(): the done goes first, then the start it leaves dead.
    m = entry(f"""
  p0 = {V} parameter(0)
  s = (({V}), {V}, s32[]) custom-call-start(p0), custom_call_target="foo", custom_call_has_side_effect=true, {ALLOW.format("true")}
  d = {V} custom-call-done(s)
  ROOT r = {V} abs(p0)""")
    assert dce(m) is True
    assert names(m) == ["p0", "r"]
    check_output(m)
