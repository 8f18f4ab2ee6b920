"""Malformed, unusual and pathological HLO text through the whole command (issue 11 §4).

The contract: exit 0, or exactly one line `file:line:col: error: ...` with exit 2. A malformed
attribute value is reported where XLA's parser reports it (checked against XLA itself);
syntax XLA accepts is accepted; inputs built to be slow (long chains and lists, deep nesting,
huge iota device lists) are read in linear time and memory (the timings themselves are in
benchmarks/hostile_inputs.py; here each one runs at a size a quadratic reader could not).
"""

from __future__ import annotations

import io
import re
import tracemalloc
from pathlib import Path

import pytest

from hlo_dedup.cli import main
from hlo_dedup.io.formats import detect_format
from hlo_dedup.ir.replica_groups import ReplicaGroups
from hlo_dedup.text import HloParseError, parse_module

DATA = Path(__file__).resolve().parents[1] / "data"
KERNELS = (DATA / "neuron" / "both_substitutions.hlo").read_text()
ERROR_LINE = re.compile(r"^m\.hlo:(\d+):(\d+): error: [^\n]+\n$")


def command(tmp_path: Path, text: str | bytes, *flags: str) -> tuple[int, str, bytes]:
    """Run `hlo-dedup m.hlo -o out.hlo FLAGS` in-process: (status, stderr, output bytes)."""
    source = tmp_path / "m.hlo"
    source.write_bytes(text.encode() if isinstance(text, str) else text)
    out = tmp_path / "out.hlo"
    stderr = io.StringIO()
    status = main([str(source), "-o", str(out), *flags], stdout=io.StringIO(), stderr=stderr)
    return status, stderr.getvalue().replace(str(source), "m.hlo"), out.read_bytes() if out.exists() else b""


def located(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of `needle` in `text` (it must occur once)."""
    assert text.count(needle) == 1, needle
    pos = text.index(needle)
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def module(*lines: str, header: str = "HloModule m, replica_count=2") -> str:
    return "\n".join([header, "ENTRY e {", *("  " + line for line in lines), "}", ""])


GATHER = "a = f32[4,4] all-gather(p), replica_groups={{0,1}}, dimensions={0}"

#: (name, module, where the error is: a substring starting at the character XLA points to)
MALFORMED = [
    ("replica_groups", module("p = f32[2,4] parameter(0)", GATHER.replace("{0,1}", "{0,x}"), "ROOT t = (f32[4,4]) tuple(a)"), "x}}"),
    ("channel_id", module("p = f32[2,4] parameter(0)", GATHER + ", channel_id=abc", "ROOT t = (f32[4,4]) tuple(a)"), "abc"),
    ("negative dimension", module("p = f32[2,4] parameter(0)", GATHER.replace("f32[4,4]", "f32[-4,4]"), "ROOT t = (f32[-4,4]) tuple(a)"), "-4,4] all"),
    ("dimensions", module("p = f32[2,4] parameter(0)", GATHER.replace("{0}", "{0,}"), "ROOT t = (f32[4,4]) tuple(a)"), "}\n  ROOT"),
    ("use_global_device_ids", module("p = f32[2,4] parameter(0)", GATHER + ", channel_id=1, use_global_device_ids=yes", "ROOT t = (f32[4,4]) tuple(a)"), "yes"),
    ("get-tuple-element index", module("p = (f32[2,4]) parameter(0)", "g = f32[2,4] get-tuple-element(p), index=z", GATHER.replace("(p)", "(g)"), "ROOT t = (f32[4,4]) tuple(a)"), "z\n"),
    ("custom_call_target", module("p = f32[2] parameter(0)", "ROOT c = f32[2] custom-call(p), custom_call_target=Foo"), "Foo"),
    ("slice", KERNELS.replace("[64:128]}", "[64:1x8]}"), "x8]}"),
    ("parameter(-1)", module("p = f32[2,4] parameter(-1)", GATHER, "ROOT t = (f32[4,4]) tuple(a)"), "-1)"),
    ("parameter number", module("p = f32[2,4] parameter(+1)", GATHER, "ROOT t = (f32[4,4]) tuple(a)"), "+1)"),
]


@pytest.mark.parametrize(("text", "where"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
@pytest.mark.parametrize("flags", [(), ("--passes=dce",), ("--strict",)], ids=["default", "dce", "strict"])
def test_malformed_attribute_is_one_located_line_with_exit_2(tmp_path: Path, text: str, where: str, flags: tuple[str, ...]) -> None:
    status, stderr, out = command(tmp_path, text, *flags)
    if status == 0:
        # Decoded lazily: a pipeline that never reads the value leaves the text as it was.
        assert flags == ("--passes=dce",) and out == text.encode()
        return
    assert status == 2, stderr
    m = ERROR_LINE.match(stderr)
    assert m, stderr
    assert (int(m.group(1)), int(m.group(2))) == located(text, where)
    assert "internal error" not in stderr and not out


@pytest.mark.parametrize(("text", "where"), [c[1:] for c in MALFORMED if c[0] != "parameter(-1)"],
                         ids=[c[0] for c in MALFORMED if c[0] != "parameter(-1)"])
def test_xla_rejects_the_same_text_at_the_same_place(xla_hlo, text: str, where: str) -> None:  # type: ignore[no-untyped-def]
    """The oracle for the cases above (parameter(-1): XLA points after the number)."""
    with pytest.raises(Exception) as info:
        xla_hlo.hlo_module_from_text(text)
    found = re.search(r"was parsing (\d+):(\d+): error", str(info.value))
    if found:  # XLA's shape errors carry no position
        assert (int(found.group(1)), int(found.group(2))) == located(text, where)


# ------------------------------------------------------------------------ valid syntax
DYNAMIC = module(
    "p = f32[<=4,?]{1,0} parameter(0)",
    "a = f32[<=8,?]{1,0} all-gather(p), replica_groups={{0,1}}, dimensions={0}",
    "b = f32[<=8,?]{1,0} all-gather(p), replica_groups={{0,1}}, dimensions={0}",
    "ROOT t = (f32[<=8,?]{1,0}, f32[<=8,?]{1,0}) tuple(a, b)",
)
COMMENTS = module(
    "p = f32[2,4]{1,0} parameter(0/*c*/)",
    "q = f32[2,4]{1,0} parameter( /*d*/ 1 )",
    "s = f32[1,2]{1,0} slice(p), slice={[0:1], /*c*/ [0:2]}",
    "a = f32[4,4]{1,0} all-gather(q), replica_groups={{0,1} /*c*/}, dimensions={/*c*/0}",
    "b = f32[4,4]{1,0} all-gather(q), replica_groups={/*c*/{0, 1}}, dimensions={0 /*c*/}, channel_id=/*c*/1",
    "ROOT t = (f32[1,2]{1,0}, f32[4,4]{1,0}, f32[4,4]{1,0}) tuple(s, a, b)",
)


def test_dynamic_dimensions_on_all_gathers_fold(tmp_path: Path) -> None:
    status, stderr, out = command(tmp_path, DYNAMIC)
    assert status == 0, stderr
    assert "1 fold" in stderr and "b = " not in out.decode()


def test_comments_inside_values_are_read_as_xla_reads_them(tmp_path: Path) -> None:
    parsed = parse_module(COMMENTS, "m.hlo")
    comp = parsed.entry
    assert [p.parameter_number for p in comp.parameters] == [0, 1]
    s = comp.get_instruction("s")
    assert (s.slice_starts, s.slice_limits, s.slice_strides) == ((0, 0), (1, 2), (1, 1))
    a, b = comp.get_instruction("a"), comp.get_instruction("b")
    assert a.dimensions == b.dimensions == (0,) and a.replica_groups == b.replica_groups
    assert b.channel_id == 1
    status, stderr, out = command(tmp_path, COMMENTS)
    assert status == 0, stderr
    assert "1 fold" in stderr  # b folds onto a (a hazard: their collective modes differ)


@pytest.mark.parametrize("text", [DYNAMIC, COMMENTS], ids=["dynamic", "comments"])
def test_xla_accepts_what_we_accept(xla_hlo, tmp_path: Path, text: str) -> None:  # type: ignore[no-untyped-def]
    xla_hlo.hlo_module_from_text(text)
    status, _, out = command(tmp_path, text)
    assert status == 0
    xla_hlo.hlo_module_from_text(out.decode())


# ------------------------------------------------------------------- linear time, memory
def test_long_compact_gte_chain(tmp_path: Path) -> None:
    """`p#0#0...`: each level is one get-tuple-element, and names stay short (they used to
    grow with the depth: 60 KB took 100 s and 4.5 GB)."""
    depth = 50_000
    text = module("p = (f32[]) parameter(0)", "ROOT n = f32[] negate(p" + "#0" * depth + ")")
    parsed = parse_module(text, "m.hlo")
    gtes = [i for i in parsed.entry if i.opcode == "get-tuple-element"]
    assert len(gtes) == depth
    assert max(len(i.name) for i in gtes) <= 300
    assert len({i.name for i in gtes}) == depth
    with pytest.raises(HloParseError, match="does not select an element"):
        gtes[-1].shape  # inferred through 50,000 levels without recursion
    status, stderr, out = command(tmp_path, text, "--passes=")
    assert status == 0 and out == text.encode()


def test_every_instruction_of_a_broken_chain_reports_its_first_error() -> None:
    """The liveness scan asks every instruction its shape: each link past the broken one
    reports that link's error, and the chain is walked once, not once per link (20,000
    links asked one by one used to take minutes)."""
    depth = 20_000
    text = module("p = (f32[]) parameter(0)", "ROOT n = f32[] negate(p" + "#0" * depth + ")")
    parsed = parse_module(text, "m.hlo")
    messages = set()
    for inst in parsed.entry.instructions:
        try:
            inst.shape  # noqa: B018
        except HloParseError as e:
            messages.add(str(e))
    assert len(messages) == 1 and "index=0 does not select an element of f32[]" in messages.pop()


def test_folding_the_base_of_a_long_compact_chain(tmp_path: Path) -> None:
    """The fold rewrites every line that prints the chain; marking them is not recursive."""
    depth = 20_000
    text = module("p = f32[2] parameter(0)",
                  "a = (f32[4]) all-gather(p), replica_groups={{0,1}}, dimensions={0}",
                  "b = (f32[4]) all-gather(p), replica_groups={{0,1}}, dimensions={0}",
                  "n = f32[4] negate(b" + "#0" * depth + ")", "ROOT t = ((f32[4]), f32[4]) tuple(a, n)")
    status, stderr, out = command(tmp_path, text, "--passes=neuron_all_gather_duplicate_remover")
    assert status == 0, stderr
    assert "n = f32[4] negate(a" + "#0" * depth + ")" in out.decode() and "\n  b = " not in out.decode()


@pytest.mark.parametrize("operand", ["p#3", "f32[] negate(f32[] constant(1))"], ids=["compact GTE", "nested"])
def test_errors_in_instructions_without_a_line_are_located_at_the_line_holding_them(tmp_path: Path, operand: str) -> None:
    """A compact GTE or a nested operand is written inside another instruction's line: a
    value of it found bad is reported there (it was 0:0)."""
    text = module("p = (f32[2]) parameter(0)", f"c = f32[2] convert({operand})",
                  GATHER.replace("(p)", "(c)"), "ROOT t = (f32[4,4]) tuple(a)")
    parsed = parse_module(text, "m.hlo")
    hidden = next(i for i in parsed.entry if i.span.start < 0)
    with pytest.raises(HloParseError) as info:
        hidden.shape if operand == "p#3" else hidden.tuple_index  # noqa: B018 - no element 3; no index
    assert (info.value.line, info.value.column) == located(text, "c = f32[2]")
    status, stderr, _ = command(tmp_path, text)
    if operand == "p#3":  # the walk reads the convert's operand shape: p has no element 3
        assert status == 2 and ERROR_LINE.match(stderr) and located(text, "c = f32[2]") == tuple(
            map(int, ERROR_LINE.match(stderr).groups()))  # type: ignore[union-attr]


def test_unterminated_string_of_escaped_quotes(tmp_path: Path) -> None:
    text = module("p = f32[] parameter(0)", 'ROOT n = f32[] negate(p), metadata={op_name="' + '\\"' * 200_000)
    status, stderr, _ = command(tmp_path, text)
    assert status == 2
    m = ERROR_LINE.match(stderr)
    assert m and "unterminated string" in stderr
    line, column = located(text, 'op_name="')
    assert (int(m.group(1)), int(m.group(2))) == (line, column + len("op_name="))


def test_long_control_predecessors_list(tmp_path: Path) -> None:
    names = [f"c{i}" for i in range(3000)]
    lines = [f"{n} = f32[] constant(0)" for n in names]
    preds = ", ".join(names[i % len(names)] for i in range(200_000))  # every name many times
    text = module(*lines, f"ROOT r = f32[] constant(1), control-predecessors={{{preds}}}")
    parsed = parse_module(text, "m.hlo")
    root = parsed.entry.root
    assert [p.name for p in root.control_predecessors] == names  # one edge per name, as XLA
    assert all(parsed.entry.get_instruction(n).control_successors == [root] for n in names)
    status, _, out = command(tmp_path, text, "--passes=dce")
    assert status == 0 and out == text.encode()


def test_huge_iota_replica_groups_are_a_clear_error(tmp_path: Path) -> None:
    text = module("p = f32[2] parameter(0)", "ROOT a = f32[4] all-gather(p), replica_groups=[1,100000000]<=[100000000], dimensions={0}")
    status, stderr, _ = command(tmp_path, text)
    assert status == 2
    assert ERROR_LINE.match(stderr) and "more than 1048576 devices" in stderr


def test_iota_replica_groups_beyond_the_modules_devices_are_a_clear_error(tmp_path: Path) -> None:
    """replica_count x num_partitions bounds what a compact form may name (XLA's verifier
    rule); a header that does not say (1 x 1) leaves them unbounded, as in XLA."""
    gathers = [f"{x} = f32[1048576] all-gather(p), replica_groups=[1,1048576]<=[1024,1024]T(1,0), dimensions={{0}}" for x in "ab"]
    text = module("p = f32[1] parameter(0)", *gathers, "ROOT t = (f32[1048576], f32[1048576]) tuple(a, b)",
                  header="HloModule m, replica_count=4, num_partitions=2")
    status, stderr, _ = command(tmp_path, text)
    assert status == 2 and "name 1048576 devices, the module runs on 8" in stderr
    m = ERROR_LINE.match(stderr)
    assert m and (int(m.group(1)), int(m.group(2))) == located(text, "[1,1048576]<=[1024,1024]T(1,0), dimensions={0}\n  b")
    small = text.replace("1048576", "8").replace("[1024,1024]T(1,0)", "[2,4]T(1,0)")
    status, stderr, _ = command(tmp_path, small)
    assert status == 0 and "1 fold" in stderr
    status, stderr, _ = command(tmp_path, small.replace(", replica_count=4, num_partitions=2", ""))
    assert status == 0 and "1 fold" in stderr


def test_iota_replica_groups_compare_without_being_spelled_out() -> None:
    big = "[1,1048576]<=[1024,1024]T(1,0)"
    same = "[1,1048576]<=[2,512,1024]T(2,0,1)"  # the same groups, another spelling
    other = "[1,1048576]<=[1048576]"
    parsed = [ReplicaGroups.parse(t) for t in (big, same, other)]
    tracemalloc.start()
    try:
        assert parsed[0] == parsed[1] and hash(parsed[0]) == hash(parsed[1])
        assert parsed[0] != parsed[2]
        assert parsed[0].group_size() == 1_048_576
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000  # 1,048,576 ids spelled out would take tens of MB
    small = ReplicaGroups.parse("[2,4]<=[2,4]T(1,0)")
    assert small == ReplicaGroups.from_groups([[0, 4, 1, 5], [2, 6, 3, 7]])
    assert hash(small) == hash(ReplicaGroups.from_groups([[0, 4, 1, 5], [2, 6, 3, 7]]))


def test_many_nested_instructions_get_unique_names_in_linear_time() -> None:
    n = 20_000
    operands = ", ".join(f"f32[] parameter({i})" for i in range(n))
    parsed = parse_module(module(f"ROOT t = tuple({operands})"), "m.hlo")
    names = [p.name for p in parsed.entry.parameters]
    assert names[:3] == ["parameter.anon", "parameter.anon.1", "parameter.anon.2"]
    assert len(set(names)) == n


# ------------------------------------------------------------------------ deep nesting
@pytest.mark.parametrize(
    ("prefix", "opening", "rest"),
    [("ROOT a = f32[] ", "negate(", "p"), ("ROOT a = f32[] negate(", "(", "f32[]")],
    ids=["nested instructions", "tuple shape"],
)
def test_deep_nesting_is_reported_where_it_gets_too_deep(tmp_path: Path, prefix: str, opening: str, rest: str) -> None:
    """Not at the start of the computation (as a RecursionError was): at the opening of the
    first level past 200 (for instructions, the outermost one is the line's own opcode)."""
    line = prefix + opening * 5000 + rest + ")" * 5000 + (" p)" if opening == "(" else "")
    text = module("p = f32[] parameter(0)", line)
    status, stderr, _ = command(tmp_path, text)
    assert status == 2
    m = ERROR_LINE.match(stderr)
    assert m and "deeper than 200" in stderr, stderr
    levels_before = 201 if opening == "negate(" else 200
    assert (int(m.group(1)), int(m.group(2))) == (4, 3 + len(prefix) + levels_before * len(opening))


# ------------------------------------------------------------------------ text stays text
@pytest.mark.parametrize("byte", [b"\xe9", b"\x01", b"\x00", b"\x1b", b"\xff"])
@pytest.mark.parametrize("where", ["first byte", "comment", "string"])
def test_text_with_an_odd_byte_stays_text(tmp_path: Path, byte: bytes, where: str) -> None:
    base = DYNAMIC.encode()
    if where == "first byte":
        text = byte + b"\n" + base
    elif where == "comment":
        text = base.replace(b"ENTRY e {", b"// caf" + byte + b"\nENTRY e {")
    else:
        text = base.replace(b"dimensions={0}\n  b", b'dimensions={0}, metadata={op_name="' + byte + b'"}\n  b')
    assert detect_format("m.hlo", text) == "hlo"
    status, stderr, out = command(tmp_path, text, "--passes=")
    if where != "first byte":
        assert status == 0, stderr
        assert out == text
    else:  # not HLO, but read as HLO text: a located syntax error
        assert status == 2 and ERROR_LINE.match(stderr), stderr
