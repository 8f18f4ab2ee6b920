"""Mutated corpus text: the parser raises HloParseError or succeeds, nothing else.

Also, on every module that does parse, every typed attribute accessor (and the printer)
either works or raises HloParseError, located in the file: never another ValueError,
IndexError, KeyError, TypeError, AttributeError or RecursionError (a pass meeting one would
report an internal error); the structural verifier raises only HloVerifyError.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import support
from hlo_dedup.ir.module import HloModule
from hlo_dedup.text import HloParseError, parse_module, split_module_texts
from hlo_dedup.syntax.lexer import ScanError, skip_trivia
from hlo_dedup.ir.verifier import HloVerifyError, verify_structure

pytestmark = pytest.mark.corpus

# Accessors a pass may call on any instruction.
ACCESSORS = (
    "shape",
    "replica_groups",
    "dimensions",
    "channel_id",
    "custom_call_target",
    "raw_backend_config",
    "frontend_attributes",
    "attributes",
    "tuple_index",
    "slice_starts",
    "slice_limits",
    "slice_strides",
    "parameter_number",
    "use_global_device_ids",
    "constrain_layout",
    "custom_call_has_side_effect",
    "all_gather_dimension",
)
SNIPPETS = (
    "{", "}", "(", ")", "[", "]", ",", "=", "%", "#", "#0", "#7", ":", "ROOT ", "ENTRY ", '"', "'",
    "/*", "*/", "//", "\n", "<=", "->", "...", "f32[]", "f32[2]{0} ", "(f32[], s32[])", "s32[<=4]",
    "0", "-1", "99999999999999999999999", "parameter(0)", "add(", "tuple(", "{{0,1},{2}}",
    "[2,2]<=[3]", "[2,2]<=[2,2]T(1,0)", "{[0:-1:0]}", "{[0:2], [1:9:2]}", "\\", "\\x", "{a=\"\\q\"}",
    "{}", "mesh['x'=2] {'x'}", "mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'a'}",
    "mesh['x'=2,'y'=2], device_ids=(0,2,1,3) {'x'}", ", device_ids=(", "calls=", "to_apply=", "index=",
    "channel_id=", "\u00e9",
)
ATTR_VALUE = re.compile(
    r"(?:replica_groups|dimensions|channel_id|slice|custom_call_target|backend_config|"
    r"frontend_attributes|index|sharding|calls|to_apply|control-predecessors|"
    r"use_global_device_ids|constrain_layout)="
)


_SEEDS: list[str] = []


def seeds() -> list[str]:
    """Small corpus modules (≤ 20 KB) to mutate."""
    if not _SEEDS:
        for path in support.corpus_files(every=True):
            if path.stat().st_size > 20_000:
                continue
            for _, piece in split_module_texts(path.read_text()):
                try:
                    has_hlo = skip_trivia(piece, 0) < len(piece)
                except ScanError:
                    has_hlo = True
                if has_hlo and len(piece) <= 20_000:
                    _SEEDS.append(piece)
        assert len(_SEEDS) > 300
    return _SEEDS


def mutate(rng: random.Random, text: str) -> str:
    """One random edit: delete, insert, duplicate, truncate, swap/duplicate lines, or
    damage an attribute value."""
    if not text:
        return rng.choice(SNIPPETS)
    kind = rng.randrange(10)
    i = rng.randrange(len(text))
    j = min(len(text), i + rng.randrange(1, 24))
    if kind >= 7:
        hits = [m.end() for m in ATTR_VALUE.finditer(text)]
        if hits:
            i = rng.choice(hits)
            j = min(len(text), i + rng.randrange(0, 16))
            if kind == 7:
                return text[:i] + text[j:]
            if kind == 8:
                return text[:i] + rng.choice(SNIPPETS) + text[j:]
            return text[:i] + text[j : j + 5] + text[i:]
        kind = 0
    if kind == 0:
        return text[:i] + text[j:]
    if kind == 1:
        return text[:i] + rng.choice(SNIPPETS) + text[i:]
    if kind == 2:
        return text[:i] + text[i:j] + text[i:]
    if kind == 3:
        return text[:i]
    if kind == 4:
        return text[:i] + chr(rng.randrange(32, 127)) + text[i + 1 :]
    lines = text.split("\n")
    a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
    if kind == 5:
        lines[a], lines[b] = lines[b], lines[a]
    else:
        lines.insert(a, lines[b])
    return "\n".join(lines)


def exercise(module: HloModule) -> None:
    """Typed accessors and the printer on a module that parsed."""
    for comp in module.computations:
        for inst in comp.instructions:
            for name in ACCESSORS:
                try:
                    getattr(inst, name)
                except HloParseError as e:
                    assert e.filename == "mutant.hlo" and e.line >= 1 and e.column >= 1, e
            try:
                inst.has_side_effect()
            except HloParseError:
                pass
    module.to_text()
    try:
        verify_structure(module)
    except HloVerifyError:
        pass


def check(text: str) -> bool:
    """Parse `text`; only HloParseError may escape. True if it parsed."""
    try:
        module = parse_module(text, "mutant.hlo")
    except HloParseError as e:
        assert e.filename == "mutant.hlo" and e.line >= 1 and e.column >= 1, e
        return False
    exercise(module)
    return True


def test_deterministic_mutations() -> None:
    rng = random.Random(20260822)
    pool = seeds()
    parsed = 0
    for _ in range(3000):
        text = rng.choice(pool)
        for _ in range(rng.randrange(1, 4)):
            text = mutate(rng, text)
        try:
            parsed += check(text)
        except AssertionError:
            raise
        except Exception as e:  # pragma: no cover - the failure message shows the input
            raise AssertionError(f"{type(e).__name__}: {e}\n--- input ---\n{text}") from e
    # Most mutants are broken, but a good share must parse, or the accessors go untested.
    assert 300 < parsed < 3000


@given(data=st.data())
def test_hypothesis_mutations(data: st.DataObject) -> None:
    pool = seeds()
    text = pool[data.draw(st.integers(0, len(pool) - 1), label="seed")]
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        op = data.draw(st.sampled_from(["delete", "insert", "duplicate", "truncate", "swap", "char"]))
        n = len(text)
        i = data.draw(st.integers(0, max(n - 1, 0)))
        j = min(n, i + data.draw(st.integers(1, 32)))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + data.draw(st.sampled_from(SNIPPETS) | st.text(max_size=4)) + text[i:]
        elif op == "duplicate":
            text = text[:i] + text[i:j] + text[i:]
        elif op == "truncate":
            text = text[:i]
        elif op == "swap":
            lines = text.split("\n")
            a = data.draw(st.integers(0, len(lines) - 1))
            b = data.draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
        else:
            text = text[:i] + data.draw(st.characters(min_codepoint=0, max_codepoint=0x2FF)) + text[i + 1 :]
    check(text)


@given(value=st.text(alphabet=st.sampled_from(list("{}[]()<=>,:T0123456789- x'\"\\%#.ab")), max_size=24))
def test_attribute_decoders_on_arbitrary_values(value: str) -> None:
    """Every typed accessor on an instruction whose attributes all hold `value`."""
    keys = ("replica_groups", "dimensions", "channel_id", "slice", "custom_call_target", "backend_config",
            "frontend_attributes", "index", "use_global_device_ids", "constrain_layout")  # fmt: skip
    from hlo_dedup.ir.instruction import HloInstruction

    for opcode in ("all-gather", "slice", "get-tuple-element", "custom-call"):
        inst = HloInstruction("x", opcode, "f32[2]", (), [(k, value) for k in keys])
        for name in ACCESSORS:
            if name in ("shape", "parameter_number"):
                continue
            try:
                getattr(inst, name)
            except HloParseError:
                pass


@pytest.mark.parametrize(
    "text",
    [
        "",
        "HloModule",
        "HloModule m",
        "HloModule m\nENTRY e {",
        "HloModule m\nENTRY e {\n}",
        "HloModule m\nENTRY e { ROOT x = f32[] parameter(0), sharding={",
        "HloModule m\nENTRY e { ROOT x = f32[] parameter(0) }}",
        "HloModule m\nENTRY e { ROOT x = f32[] parameter(0) /* }",
        "HloModule m\nENTRY e { ROOT x = f32[" + "9" * 40 + "] parameter(0) }",
        "HloModule m\nENTRY e { p = (f32[], f32[]) parameter(0)\n ROOT x = f32[] add(p#5, p#0) }",
        "HloModule m\nENTRY e { p = f32[] parameter(0)\n ROOT x = get-tuple-element(p), index=0 }",
        "HloModule m\nENTRY e { p = f32[] parameter(0)\n ROOT x = f32[] add(p, add(p, add(p, p" + ", p" * 3 + ")))" + " }",
    ],
)
def test_hand_made_breakage(text: str) -> None:
    check(text)


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    text = "HloModule m\nENTRY e { ROOT x = (" + "(" * 5000 + "f32[]" + ")" * 5000 + " parameter(0) }"
    with pytest.raises(HloParseError):
        parse_module(text)
