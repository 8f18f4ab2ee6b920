"""Fuzz cases for the command: mutated real modules and crafted pathological inputs.

Each case is fully determined by (seed, index): `make_case(seed, index, scale)` draws a
family, builds the input bytes and picks the command-line flags. Families:

* `mutation` — a corpus module (../shared/corpus/xla-hlo), a test module (tests/data) or an
  example, edited one to four times: spans deleted, duplicated or truncated, lines swapped,
  HLO snippets, numbers, names and odd bytes inserted, attribute values damaged, two modules
  spliced.
* `crafted:<name>` — one of GENERATORS: the shapes that make a reader slow or deep (nesting,
  long chains, lines and lists, unterminated strings, huge iota groups, long call chains,
  numbers of thousands of digits...), at a size drawn up to `scale` times the nominal one.
* `proto` — a test module's HloModuleProto (binary or text), corrupted, named `.pb`,
  `.pbtxt` or `.hlo` (sniffed). Only with jax installed.
"""

from __future__ import annotations

import functools
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import support  # noqa: E402

REPO = support.REPO
#: Seeds bigger than this are not mutated (a case should take well under a second).
MAX_SEED_BYTES = 300_000

#: Flag sets a case runs with; `-o out.hlo` is always given (proto output is not fuzzed).
FLAG_SETS: tuple[tuple[str, ...], ...] = (
    (),
    ("--passes=",),
    ("--strict",),
    ("--passes=dce",),
    ("--passes=neuron_all_gather_duplicate_remover",),
    ("--passes=neuron-preprocess-kernel-duplicate-remover",),
    ("--split-input-file",),
    ("--no-spmd",),
    ("--report", "{dir}/report.json", "--dot", "{dir}/folds.dot"),
    ("--strict", "--split-input-file", "--report", "{dir}/report.json"),
    ("--max-peak-increase", "0", "--price-backend", "xla-cpu", "--html", "{dir}/page.html"),
    ("--price=none", "--report", "{dir}/report.json", "--html", "{dir}/page.html"),
)


@dataclass
class Case:
    index: int
    family: str
    detail: str
    data: bytes
    suffix: str = ".hlo"
    flags: tuple[str, ...] = ()
    #: HLO text in (not a proto): an error must be located (file:line:col).
    text_input: bool = True
    notes: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------ seeds
@functools.lru_cache(maxsize=None)
def seed_files() -> tuple[Path, ...]:
    found = sorted(support.CORPUS.glob("*.hlo")) if support.CORPUS.is_dir() else []
    found += sorted((REPO / "tests" / "data").rglob("*.hlo")) + sorted((REPO / "examples").glob("*.hlo"))
    return tuple(p for p in found if p.stat().st_size <= MAX_SEED_BYTES)


@functools.lru_cache(maxsize=512)
def seed_bytes(path: Path) -> bytes:
    return path.read_bytes()


def seed_name(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return "corpus/" + path.name


# -------------------------------------------------------------------------- mutations
SNIPPETS = (
    "{", "}", "(", ")", "[", "]", ",", "=", "%", "#", "#0", "#7", ":", "ROOT ", "ENTRY ", '"', "'",
    "/*", "*/", "//", "\n", "<=", "->", "...", "f32[]", "f32[2]{0} ", "(f32[], s32[])", "s32[<=4]",
    "f32[?]", "0", "-1", "99999999999999999999999", "parameter(0)", "parameter(-1)", "add(", "tuple(",
    "{{0,1},{2}}", "{{0,x}}", "[2,2]<=[3]", "[2,2]<=[2,2]T(1,0)", "[1,100000000]<=[100000000]",
    "{[0:-1:0]}", "{[0:2], [1:9:2]}", "\\", "\\x", '{a="\\q"}', "{}", "mesh['x'=2] {'x'}",
    "mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'a'}", "mesh['x'=2,'y'=2], device_ids=(0,2,1,3) {'x'}",
    ", device_ids=(",
    "calls=", "to_apply=", "index=", "channel_id=", "channel_id=abc", "dimensions={-1}",
    "control-predecessors={", "\u00e9", "\u2028", "\ufeff", "// -----\n", "/*index=5*/",
    "sharding={replicated}", "backend_config={\"a\":{}}", "is_scheduled=true", "\t", "\r\n",
    "HloModule m\n", "ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n",
)
ODD_BYTES = (b"\x00", b"\x01", b"\x07", b"\x1b", b"\x7f", b"\x80", b"\xc3", b"\xe9", b"\xff", b"\xef\xbb\xbf")
_ATTR_VALUE = re.compile(
    rb"(?:replica_groups|dimensions|channel_id|slice|custom_call_target|backend_config|index|"
    rb"frontend_attributes|sharding|calls|to_apply|condition|body|control-predecessors|"
    rb"use_global_device_ids|constrain_layout|metadata|replica_count|num_partitions)="
)
_NUMBER = re.compile(rb"-?\d+")
_NAME = re.compile(rb"%?[A-Za-z_][\w.\-]*")
_NUMBERS = (b"0", b"-1", b"1", b"2", b"7", b"-9223372036854775808", b"9223372036854775807",
            b"9223372036854775808", b"1" * 30, b"9" * 5000, b"00000000000000000000001")


def mutate(rng: random.Random, data: bytes, other: bytes) -> tuple[bytes, str]:
    """One random edit of `data` (`other`: a second seed, for splices); returns it and its name."""
    if not data:
        return rng.choice(SNIPPETS).encode(), "snippet"
    n = len(data)
    i = rng.randrange(n)
    j = min(n, i + rng.randrange(1, 32))
    kind = rng.randrange(13)
    if kind == 0:
        return data[:i] + data[j:], "delete"
    if kind == 1:
        return data[:i] + rng.choice(SNIPPETS).encode() + data[i:], "insert"
    if kind == 2:
        return data[:i] + data[i:j] * rng.choice((1, 2, 50)) + data[i:], "duplicate"
    if kind == 3:
        return data[:i], "truncate"
    if kind == 4:
        return data[:i] + rng.choice(ODD_BYTES) + data[i + 1 :], "odd byte"
    if kind == 5:
        return data[:i] + bytes([rng.randrange(32, 127)]) + data[i + 1 :], "char"
    if kind in (6, 7):
        lines = data.split(b"\n")
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        if kind == 6:
            lines[a], lines[b] = lines[b], lines[a]
            return b"\n".join(lines), "swap lines"
        lines.insert(a, lines[b])
        return b"\n".join(lines), "copy line"
    if kind == 8:
        hits = [m.end() for m in _ATTR_VALUE.finditer(data)]
        if hits:
            at = rng.choice(hits)
            end = min(n, at + rng.randrange(0, 16))
            damage = rng.choice((b"", rng.choice(SNIPPETS).encode(), data[end : end + 5], b"{{0,1}"))
            return data[:at] + damage + data[end:], "damage value"
        return data[:i] + data[j:], "delete"
    if kind == 9:
        numbers = list(_NUMBER.finditer(data))
        if numbers:
            m = rng.choice(numbers)
            return data[: m.start()] + rng.choice(_NUMBERS) + data[m.end() :], "number"
    if kind == 10:
        names = list(_NAME.finditer(data))
        if len(names) > 1:
            a, b = rng.choice(names), rng.choice(names)
            return data[: a.start()] + b.group() + data[a.end() :], "rename"
    if kind == 11 and other:
        k = rng.randrange(len(other))
        return data[:i] + other[k : k + rng.randrange(1, 4000)] + data[j:], "splice"
    return data[:i] + b"\n" + data[i:j].replace(b",", b",\n") + data[j:], "wrap"


# -------------------------------------------------------------------- crafted inputs
def _module(*lines: str, header: str = "HloModule m, replica_count=2") -> str:
    return "\n".join([header, "ENTRY e {", *("  " + line for line in lines), "}", ""])


def _size(rng: random.Random, nominal: int, scale: float) -> int:
    """A size around `nominal * scale`, sometimes tiny, sometimes at the limits of 200."""
    pick = rng.random()
    if pick < 0.15:
        return rng.choice((0, 1, 2, 199, 200, 201))
    return max(1, int(nominal * scale * rng.uniform(0.05, 1.0)))


def deep_nested_instructions(rng: random.Random, scale: float) -> str:
    d = _size(rng, 50_000, scale)
    return _module("p = f32[] parameter(0)", "ROOT a = f32[] " + "negate(" * d + "p" + ")" * d)


def deep_tuple_shapes(rng: random.Random, scale: float) -> str:
    d = _size(rng, 50_000, scale)
    deep = "(" * d + "f32[]" + ")" * d
    where = rng.randrange(4)
    if where == 0:
        return _module(f"p = {deep} parameter(0)", "ROOT g = f32[] get-tuple-element(p), index=0")
    if where == 1:
        return _module("p = f32[] parameter(0)", f"ROOT n = f32[] negate({deep} p)")
    if where == 2:
        return f"HloModule m\nENTRY e (p: {deep}) -> f32[] {{\n  p = {deep} parameter(0)\n  ROOT c = f32[] constant(0)\n}}\n"
    return _module("p = f32[] parameter(0)", f"ROOT a = {deep} all-gather(p), replica_groups={{}}, dimensions={{0}}")


def deep_attribute_braces(rng: random.Random, scale: float) -> str:
    d = _size(rng, 100_000, scale)
    key = rng.choice(("sharding", "backend_config", "frontend_attributes", "metadata", "dimensions", "replica_groups", "slice"))
    close = "}" * (d if rng.random() < 0.7 else d - 1)
    return _module("p = f32[4] parameter(0)", f"ROOT a = f32[4] negate(p), {key}=" + "{" * d + close)


def compact_gte_chain(rng: random.Random, scale: float) -> str:
    n = max(1, _size(rng, 100_000, scale))
    depth = min(n, rng.choice((1, 3, 50)))
    shape = "(" * depth + "f32[]" + ")" * depth
    uses = "".join(f"  u{k} = f32[] negate(p{'#0' * rng.randrange(1, n + 1)})\n" for k in range(rng.randrange(1, 4)))
    if rng.random() < 0.3:  # the chain hangs off a gather that is folded: its users are rewritten
        gathers = "".join(f"  {x} = {shape} all-gather(q), replica_groups={{}}, dimensions={{0}}\n" for x in ("a", "p"))
        return (f"HloModule m\nENTRY e {{\n  q = f32[] parameter(0)\n{gathers}{uses}"
                f"  ROOT n = ({shape}, f32[]) tuple(a, p{'#0' * n})\n}}\n")
    return f"HloModule m\nENTRY e {{\n  p = {shape} parameter(0)\n{uses}  ROOT n = f32[] negate(p{'#0' * n})\n}}\n"


def long_operand_list(rng: random.Random, scale: float) -> str:
    n = _size(rng, 200_000, scale)
    sep = rng.choice((", ", ",", ", /*c*/ ", ",\n  "))
    opcode = rng.choice(("tuple", "concatenate", "add", "all-gather", "custom-call"))
    shape = "(f32[])" if opcode == "tuple" else "f32[2]"
    return _module("p = f32[] parameter(0)", f"ROOT t = {shape} {opcode}({sep.join(['p'] * n)}), dimensions={{0}}")


def control_predecessors(rng: random.Random, scale: float) -> str:
    names = [f"c{i}" for i in range(max(1, _size(rng, 2_000, scale)))]
    n = _size(rng, 300_000, scale)
    listed = ", ".join(rng.choice(names) if rng.random() < 0.999 else "nope" for _ in range(n))
    lines = [f"{c} = f32[] constant(0)" for c in names]
    braces = ("{", "}") if rng.random() < 0.9 else ("", "")
    return _module(*lines, f"ROOT r = f32[] constant(1), control-predecessors={braces[0]}{listed}{braces[1]}")


def replica_groups(rng: random.Random, scale: float) -> str:
    form = rng.randrange(6)
    if form == 0:
        n = _size(rng, 50_000, scale)
        value = "{" + ",".join("{" + ",".join(map(str, range(k, k + 2))) + "}" for k in range(0, 2 * n, 2)) + "}"
    elif form == 1:
        g, s = rng.choice(((1, 100_000_000), (1 << 10, 1 << 10), (1 << 20, 1), (2, 3), (0, 5), (1, 1 << 20)))
        dims = rng.choice(([g * s], [s, g], [2] * 20, [1] * 1000 + [g * s]))
        perm = list(range(len(dims)))
        rng.shuffle(perm)
        value = f"[{g},{s}]<=[{','.join(map(str, dims))}]" + (f"T({','.join(map(str, perm))})" if len(dims) > 1 else "")
    elif form == 2:
        sizes = rng.choice(([100_000_000], [2] * 30, [1] * 5000, [1024, 1024, 2]))
        axes = ",".join(f"'a{i}'={s}" for i, s in enumerate(sizes))
        value = f"mesh[{axes}] {{{','.join(repr(f'a{i}') for i in range(min(len(sizes), 3000)))}}}"
    elif form == 3:
        value = "[" + "9" * _size(rng, 5000, scale) + ",1]<=[1]"
    elif form == 4:
        value = "[2,2]<=[" + ",".join(["1"] * _size(rng, 100_000, scale)) + "]T(" + ",".join(["0"] * 3) + ")"
    else:  # many gathers of one parameter with distinct big iota values: compared, not spelled out
        twice = rng.random() < 0.5  # then they fold, but the header bounds the devices: an error
        lines = ["p = f32[1] parameter(0)"]
        for k in range(_size(rng, 2_000, scale)):
            perm = list(range(20))
            rng.shuffle(perm)
            value = f"[1,1048576]<=[{','.join(['2'] * 20)}]T({','.join(map(str, perm))})"
            lines += [f"{x}{k} = f32[1048576] all-gather(p), replica_groups={value}, dimensions={{0}}" for x in "ab"[: 1 + twice]]
        return _module(*lines, "ROOT t = () tuple()", header="HloModule m, replica_count=2" if twice else "HloModule m")
    return _module("p = f32[2] parameter(0)", f"a = f32[4] all-gather(p), replica_groups={value}, dimensions={{0}}",
                   f"b = f32[4] all-gather(p), replica_groups={value}, dimensions={{0}}", "ROOT t = (f32[4], f32[4]) tuple(a, b)")


def long_strings(rng: random.Random, scale: float) -> str:
    n = _size(rng, 300_000, scale)
    unit = rng.choice(('\\"', "\\\\", "a", "\\x", "\\777", "\\u12", "'", "é", "\\n", "{", "}"))
    quote = rng.choice(('"', "'"))
    end = quote if rng.random() < 0.5 else ""
    key = rng.choice(("metadata={op_name=", "backend_config=", "custom_call_target=", "frontend_attributes={a="))
    tail = "}" if key.endswith("{a=") or key.startswith("metadata") else ""
    return _module("p = f32[] parameter(0)", f"ROOT n = f32[] custom-call(p), {key}{quote}{unit * n}{end}{tail}")


def unterminated_comments(rng: random.Random, scale: float) -> str:
    n = _size(rng, 300_000, scale)
    body = rng.choice(("*", "/", " ", "/*", "*/ /*", "a"))
    where = rng.randrange(3)
    if where == 0:
        return "HloModule m /*" + body * n
    if where == 1:
        return _module("p = f32[] parameter(0)", "ROOT a = f32[] negate(p /*" + body * n + ")")
    return _module("p = f32[] parameter(0)", "ROOT a = f32[] negate(p), dimensions={/*" + body * n + "}")


def long_names(rng: random.Random, scale: float) -> str:
    n = _size(rng, 500_000, scale)
    name = "x" + rng.choice(("a", ".", "-", "_", "1", ".1")) * n
    kind = rng.randrange(3)
    if kind == 0:
        return _module(f"{name} = f32[] parameter(0)", f"ROOT r = f32[] negate({name})")
    if kind == 1:
        return f"HloModule {name}\nENTRY e {{\n  ROOT p = f32[] parameter(0)\n}}\n"
    return f"HloModule m\n{name} {{\n  ROOT p = f32[] parameter(0)\n}}\nENTRY e {{\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply={name}\n}}\n"


def call_chain(rng: random.Random, scale: float) -> str:
    n = _size(rng, 20_000, scale)
    parts = ["HloModule m\n", "c0 {\n  ROOT p = f32[] parameter(0)\n}\n"]
    for k in range(1, n):
        effect = ", custom_call_has_side_effect=true" if k == 1 and rng.random() < 0.5 else ""
        parts.append(f"c{k} {{\n  p = f32[] parameter(0)\n  x = f32[] custom-call(p), custom_call_target=\"t\"{effect}\n"
                     f"  ROOT r = f32[] call(x), to_apply=c{k - 1}\n}}\n")
    parts.append(f"ENTRY e {{\n  p = f32[] parameter(0)\n  dead = f32[] call(p), to_apply=c{n - 1}\n  ROOT r = f32[] negate(p)\n}}\n")
    return "".join(parts)


def bare_shape_chain(rng: random.Random, scale: float) -> str:
    n = _size(rng, 50_000, scale)
    lines = ["a0 = f32[2] parameter(0)"] + [f"a{k} = negate(a{k - 1})" for k in range(1, n)]
    lines += [f"g = f32[4] all-gather(a{n - 1}), replica_groups={{}}, dimensions={{0}}",
              f"h = f32[4] all-gather(a{n - 1}), replica_groups={{}}, dimensions={{0}}", f"ROOT t = tuple(g, h, a{n - 1})"]
    return _module(*lines)


def fusion_dead_parameters(rng: random.Random, scale: float) -> str:
    n = _size(rng, 3_000, scale)
    params = "\n".join(f"  p{k} = f32[] parameter({k})" for k in range(n))
    body = f"fused {{\n{params}\n  ROOT r = f32[] negate(p0)\n}}\n"
    ops = ", ".join(f"q{k}" for k in range(n))
    entry = "\n".join(f"  q{k} = f32[] parameter({k})" for k in range(n))
    return f"HloModule m\n{body}ENTRY e {{\n{entry}\n  ROOT f = f32[] fusion({ops}), kind=kLoop, calls=fused\n}}\n"


def many_gathers(rng: random.Random, scale: float) -> str:
    n = _size(rng, 20_000, scale)
    groups = rng.choice(("{{0,1}}", "[1,2]<=[2]", "{}"))
    lines = ["p = (f32[2], f32[2]) parameter(0)", "e = f32[2] get-tuple-element(p), index=0"]
    lines += [f"a{k} = f32[4] all-gather(e), replica_groups={groups}, dimensions={{0}}" for k in range(n)]
    return _module(*lines, "ROOT t = tuple(" + ", ".join(f"a{k}" for k in range(n)) + ")")


def huge_numbers(rng: random.Random, scale: float) -> str:
    digits = "9" * _size(rng, 20_000, scale)
    where = rng.randrange(6)
    if where == 0:
        return _module(f"p = f32[{digits}] parameter(0)", "ROOT n = f32[2] negate(p)")
    if where == 1:
        return _module(f"p = f32[] parameter({digits})", "ROOT n = f32[] negate(p)")
    if where == 2:
        return _module("p = (f32[]) parameter(0)", f"ROOT n = f32[] negate(p#{digits})")
    if where == 3:
        return _module("p = f32[2] parameter(0)", f"ROOT a = f32[4] all-gather(p), replica_groups={{}}, dimensions={{0}}, channel_id={digits}")
    if where == 4:
        return _module("p = f32[] parameter(0)", "ROOT n = f32[] negate(p)", header=f"HloModule m, replica_count={digits}")
    return _module(f"p.{digits} = f32[] parameter(0)", f"p = f32[] negate(p.{digits})", f"ROOT n = f32[] negate(p.{digits})")


def split_markers(rng: random.Random, scale: float) -> str:
    n = _size(rng, 5_000, scale)
    one = "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
    return ("// -----\n" + one) * n if rng.random() < 0.5 else "// -----\n" * n


def whitespace_and_comments(rng: random.Random, scale: float) -> str:
    n = _size(rng, 300_000, scale)
    filler = rng.choice((" ", "\n", "\t", "\r\n", "/**/", "// c\n", "/* * */ "))
    return f"HloModule m{filler * n}\nENTRY e {{{filler * n}ROOT p = f32[]{filler * 3}parameter(0){filler * n}}}\n"


def token_soup(rng: random.Random, scale: float) -> str:
    n = _size(rng, 100_000, scale)
    unit = rng.choice(("a=", ",", "{,", "%", "-", "<=", "[:", "((", "a.", "#0", "ROOT ", "= ", "f32[", "{{0,"))
    where = rng.randrange(3)
    if where == 0:
        return _module("p = f32[] parameter(0)", f"ROOT a = f32[] negate(p), {unit * n}")
    if where == 1:
        return _module("p = f32[] parameter(0)", f"ROOT a = f32[] negate({unit * n})")
    return "HloModule m, " + unit * n


def many_computations(rng: random.Random, scale: float) -> str:
    n = _size(rng, 20_000, scale)
    comps = "".join(f"c{k} {{\n  ROOT p = f32[] parameter(0)\n}}\n" for k in range(n))
    return f"HloModule m\n{comps}ENTRY e {{\n  ROOT p = f32[] parameter(0)\n}}\n"


def many_attributes(rng: random.Random, scale: float) -> str:
    n = _size(rng, 50_000, scale)
    attrs = ", ".join(f"k{k % (n if rng.random() < 0.5 else 7)}=v" for k in range(n))
    return _module("p = f32[] parameter(0)", f"ROOT a = f32[] negate(p), {attrs}")


def long_shapes(rng: random.Random, scale: float) -> str:
    n = _size(rng, 100_000, scale)
    dims = ",".join(["1"] * n)
    layout = ",".join(map(str, range(n - 1, -1, -1)))
    shape = f"f32[{dims}]{{{layout}}}" if rng.random() < 0.5 else "(" + ", ".join(["f32[]"] * n) + ")"
    return _module(f"p = {shape} parameter(0)", f"ROOT c = {shape} copy(p)")


def nested_operands(rng: random.Random, scale: float) -> str:
    n = _size(rng, 20_000, scale)
    opcode = rng.choice(("constant(0)", "parameter(0)", "negate(f32[] constant(1))"))
    return _module("ROOT t = tuple(" + ", ".join(f"f32[] {opcode}" for _ in range(n)) + ")")


def line_regex_stress(rng: random.Random, scale: float) -> str:
    """Lines the one-line reader's regular expression might backtrack on."""
    n = _size(rng, 100_000, scale)
    unit = rng.choice((") a((", ") a(b) ", " ) x", "(f32[], ", "[", "{", "=", "\t"))
    return _module("p = f32[] parameter(0)", f"q = ({unit * n} parameter(1)", "ROOT r = f32[] negate(p)")


def stack_frames(rng: random.Random, scale: float) -> str:
    n = _size(rng, 50_000, scale)
    names = "\n".join(f'  {k} "f{k}.py"' for k in range(1, n))
    frames = "\n".join(f"  {k} {{file_location_id={k} parent_frame_id={k - 1}}}" for k in range(1, n))
    return f"HloModule m\n\nFileNames\n{names}\n\nStackFrames\n{frames}\n\nENTRY e {{\n  ROOT p = f32[] parameter(0)\n}}\n"


_GATHER = "all-gather({x}), replica_groups={{{{0,1}}}}, dimensions={{0}}"


def self_calling_computation(rng: random.Random, scale: float) -> str:
    """A computation that holds gathers and names itself: refused where it does, as XLA does."""
    call = rng.choice(("call(p), to_apply=c", "while(p), condition=k, body=c", "while(p), condition=c, body=c",
                       "conditional(b, p, p), true_computation=c, false_computation=c"))
    return (f"HloModule m, replica_count=2\nk {{\n  p = f32[2] parameter(0)\n  ROOT t = pred[] constant(true)\n}}\n"
            f"c {{\n  p = f32[2] parameter(0)\n  b = pred[] constant(true)\n  g0 = f32[4] {_GATHER.format(x='p')}\n"
            f"  g1 = f32[4] {_GATHER.format(x='p')}\n  x = f32[2] {call}\n  ROOT a = f32[4] add(g0, g1)\n}}\n"
            "ENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[4] call(p), to_apply=c\n}\n")


def deep_calls_with_gathers(rng: random.Random, scale: float) -> str:
    """A long acyclic chain of calls (or whiles) whose every level folds a duplicate gather."""
    n = max(2, _size(rng, 3_000, scale))
    looped = rng.random() < 0.5
    parts = ["HloModule m, replica_count=2\n", "k {\n  p = f32[2] parameter(0)\n  ROOT t = pred[] constant(false)\n}\n",
             f"c0 {{\n  p = f32[2] parameter(0)\n  g0 = f32[4] {_GATHER.format(x='p')}\n  g1 = f32[4] {_GATHER.format(x='p')}\n"
             "  a = f32[4] add(g0, g1)\n  ROOT s = f32[2] slice(a), slice={[0:2]}\n}\n"]
    for k in range(1, n):
        inner = f"while(p), condition=k, body=c{k - 1}" if looped else f"call(p), to_apply=c{k - 1}"
        parts.append(f"c{k} {{\n  p = f32[2] parameter(0)\n  g0 = f32[4] {_GATHER.format(x='p')}\n"
                     f"  g1 = f32[4] {_GATHER.format(x='p')}\n  i = f32[2] {inner}\n  a = f32[4] add(g0, g1)\n"
                     "  s = f32[2] slice(a), slice={[0:2]}\n  ROOT r = f32[2] add(s, i)\n}\n")
    parts.append(f"ENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] call(p), to_apply=c{n - 1}\n}}\n")
    return "".join(parts)


def gathers_after_a_long_walk(rng: random.Random, scale: float) -> str:
    """Many gathers whose walks share one long chain (converts, opt-barriers, gathers)."""
    n, m = max(2, _size(rng, 20_000, scale)), max(1, _size(rng, 2_000, scale))
    step = rng.choice(("convert", "opt-barrier", "gather"))
    lines = ["c0 = f32[2] parameter(0)"]
    for k in range(1, n):
        if step == "gather":
            lines.append(f"c{k} = f32[2] all-gather(c{k - 1}), replica_groups={{{{0}},{{1}}}}, dimensions={{0}}")
        else:
            lines.append(f"c{k} = f32[2] {step}(c{k - 1})")
    lines += [f"g{j} = f32[4] {_GATHER.format(x=f'c{n - 1}')}" for j in range(m)]
    return _module(*lines, "ROOT t = tuple(" + ", ".join(f"g{j}" for j in range(m)) + ")")


def huge_metadata(rng: random.Random, scale: float) -> str:
    """Metadata with numbers past int64 and strings of megabytes, on gathers that fold."""
    digits = "9" * _size(rng, 6_000, scale)
    text = "x" * _size(rng, 2_000_000, scale)
    where = rng.randrange(4)
    meta = (f'source_file="a.py" source_line={digits}', f"stack_frame_id={digits}", f'op_name="{text}"',
            f'op_name="{text[:1000]}\\\\" source_file="{text}"')[where]
    tables = f'FileNames\n  {digits} "a.py"\nStackFrames\n  1 {{file_location_id={digits} parent_frame_id=0}}\n\n'
    head = "HloModule m, replica_count=2\n\n" + (tables if rng.random() < 0.3 else "")
    return (head + f"ENTRY e {{\n  p = f32[2] parameter(0)\n  g0 = f32[4] {_GATHER.format(x='p')}, metadata={{{meta}}}\n"
            f"  g1 = f32[4] {_GATHER.format(x='p')}, metadata={{{meta}}}\n  ROOT a = f32[4] add(g0, g1)\n}}\n")


GENERATORS: dict[str, Callable[[random.Random, float], str]] = {
    f.__name__: f
    for f in (
        deep_nested_instructions, deep_tuple_shapes, deep_attribute_braces, compact_gte_chain, long_operand_list,
        control_predecessors, replica_groups, long_strings, unterminated_comments, long_names, call_chain,
        bare_shape_chain, fusion_dead_parameters, many_gathers, huge_numbers, split_markers,
        whitespace_and_comments, token_soup, many_computations, many_attributes, long_shapes, stack_frames,
        nested_operands, line_regex_stress, self_calling_computation, deep_calls_with_gathers,
        gathers_after_a_long_walk, huge_metadata,
    )
}


# ------------------------------------------------------------------------------ protos
@functools.lru_cache(maxsize=None)
def proto_seeds() -> tuple[bytes, ...]:
    """HloModuleProtos of the JAX test modules, by XLA itself (empty without jax)."""
    try:
        from jax._src.lib import xla_client as xc
    except ImportError:
        return ()
    out = []
    for path in sorted((REPO / "tests" / "data" / "jax").glob("*.hlo")):
        out.append(xc.hlo.hlo_module_from_text(path.read_text()).as_serialized_hlo_module_proto())
    return tuple(out)


def _deep_pbtxt(rng: random.Random, scale: float) -> str:
    d = _size(rng, 20_000, scale)
    return 'name: "m"\ncomputations {\n  shape ' + "{ tuple_shapes " * d + "{ element_type: F32 }" + " }" * d + "\n}\n"


def proto_case(rng: random.Random, scale: float) -> tuple[bytes, str, str] | None:
    seeds = proto_seeds()
    if not seeds:
        return None
    data = rng.choice(seeds)
    kind = rng.randrange(4)
    if kind == 3:
        return _deep_pbtxt(rng, scale).encode(), ".pbtxt", "deep text proto"
    if kind == 2:
        from hlo_dedup.io.proto import module_bytes_to_text_proto

        edited, how = mutate(rng, module_bytes_to_text_proto(data).encode(), b"")
        return edited, ".pbtxt", f"text proto, {how}"
    data = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(data))
        choice = rng.randrange(3)
        if choice == 0:
            data[at] = rng.randrange(256)
        elif choice == 1:
            del data[at:]
        else:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return bytes(data), rng.choice((".pb", ".hlo")), "binary proto, bytes flipped/cut/inserted"


def gzip_case(rng: random.Random, scale: float) -> tuple[bytes, str]:
    """A compressed input: a real module, cut or flipped gzip data, or a bomb."""
    import gzip

    kind = rng.randrange(5)
    module = seed_bytes(rng.choice(seed_files()))
    if kind == 0:
        return gzip.compress(module), "a module, compressed"
    if kind == 1:
        data = gzip.compress(module)
        return data[: rng.randrange(2, len(data))], "compressed data cut short"
    if kind == 2:
        return gzip.compress(module) + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9))), "trailing bytes"
    size = _size(rng, 256 << 20, scale)
    if kind == 3:
        return gzip.compress(b"\0" * size, compresslevel=1), f"a bomb of {size} NUL bytes"
    return gzip.compress(b"HloModule m\n" + b" " * size, compresslevel=1), f"a bomb of {size} blanks"


# -------------------------------------------------------------------------------- cases
def make_case(seed: int, index: int, scale: float = 1.0, *, protos: bool = True) -> Case:
    """Case `index` of the campaign `seed` (the same arguments give the same bytes)."""
    rng = random.Random(f"{seed}:{index}")
    flags = rng.choice(FLAG_SETS)
    pick = rng.random()
    if protos and pick < 0.04:
        made = proto_case(rng, scale)
        if made is not None:
            data, suffix, detail = made
            return Case(index, "proto", detail, data, suffix, flags, text_input=False)
    if pick < 0.35:
        name = rng.choice(sorted(GENERATORS))
        text = GENERATORS[name](rng, scale)
        return Case(index, f"crafted:{name}", name, text.encode("utf-8", "surrogateescape"), ".hlo", flags)
    if pick < 0.38:
        data, detail = gzip_case(rng, scale)
        return Case(index, "gzip", detail, data, ".hlo.gz", flags, text_input=False)  # gzip errors have no line
    files = seed_files()
    path = rng.choice(files)
    data = seed_bytes(path)
    other = seed_bytes(rng.choice(files))
    edits = []
    for _ in range(rng.randrange(1, 5)):
        data, how = mutate(rng, data, other)
        edits.append(how)
    return Case(index, "mutation", f"{seed_name(path)}: {', '.join(edits)}", data, ".hlo", flags)
