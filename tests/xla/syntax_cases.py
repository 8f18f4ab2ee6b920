"""Seeded HLO collectives in every form XLA writes their attributes, for the differential
syntax test (test_syntax_differential.py) and the pass check beside it.

Each case is one collective (an async pair is two lines) over its own parameters, with a
`replica_groups` value in one of XLA's forms — explicit lists (`{}`, singletons), iota
`[G,S]<=[n]` and transposed iotas over two or three dimensions, meshes with and without
`device_ids=(iota)` / `device_ids=(list)`, whole axes, sub-axes and several axes per group,
`maximal_mesh` and the empty mesh (which XLA's parser refuses: the test counts them) — and
result shapes with layouts (tiles, memory spaces, element sizes, dynamic dimensions) and the
attributes the passes read (dimensions, channel_id, use_global_device_ids, constrain_layout,
metadata), and some named (mesh) shardings. Many cases make one module, so XLA parses and
prints few texts.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

#: The devices every module is declared over; groups name at most this many.
DEVICES = 16
ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
#: Axis names, some with what separates attributes or values in a line (XLA quotes them, unescaped).
_AXIS_NAMES = ("a", "b", "x", "data", "model", "axis_0", "z.1", "axis 1", "p,q", "{y}", "c=1", "T(0)")


@dataclass(frozen=True)
class Groups:
    """A `replica_groups` value and the devices per group it means (None: all devices, `{}`)."""

    text: str
    group_size: int | None


@dataclass(frozen=True)
class Case:
    """One collective: its parameters' shapes and its instruction lines, where `@N` stands for
    the case's name and `@0`, `@1` for its parameters."""

    parameters: tuple[str, ...]
    lines: tuple[str, ...]


def _factorizations(n: int, parts: int) -> list[tuple[int, ...]]:
    if parts == 1:
        return [(n,)] if n > 1 else []
    return [(d, *rest) for d in range(2, n + 1) if n % d == 0 for rest in _factorizations(n // d, parts - 1)]


def _rank(rng: random.Random, n: int) -> int:
    """One, two (most often) or three dimensions over `n` devices, as many as `n` allows."""
    return rng.choice([r for r in (1, 2, 2, 3) if _factorizations(n, r)])


def _iota_order(rng: random.Random, sizes: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """A transposed iota over `sizes` (a permutation of their axes)."""
    perm = list(range(len(sizes)))
    while perm == sorted(perm) and len(perm) > 1:
        rng.shuffle(perm)
    return list(sizes), perm


def _iota_text(dims: list[int], perm: list[int]) -> str:
    text = "[" + ",".join(map(str, dims)) + "]"
    return text + ("T(" + ",".join(map(str, perm)) + ")" if len(dims) > 1 else "")


def list_groups(rng: random.Random, n: int) -> Groups:
    """`{}`, singletons, or shuffled devices in groups of one size."""
    shape = rng.random()
    if shape < 0.15:
        return Groups("{}", None)
    devices = list(range(n))
    rng.shuffle(devices)
    if shape < 0.25:
        size = 1  # singletons
    else:
        size = rng.choice([d for d in range(2, n + 1) if n % d == 0])
    groups = [devices[i : i + size] for i in range(0, n, size)]
    return Groups("{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}", size)


def iota_groups(rng: random.Random, n: int) -> Groups:
    """`[G,S]<=[n]`, or over two or three transposed dimensions."""
    size = rng.choice([d for d in range(1, n + 1) if n % d == 0])
    rank = _rank(rng, n)
    dims = rng.choice(_factorizations(n, rank))
    reshape, perm = _iota_order(rng, dims) if rank > 1 else ([n], [0])
    return Groups(f"[{n // size},{size}]<=" + _iota_text(reshape, perm), size)


_SUB_AXES = {4: [[(1, 2)], [(2, 2)]], 8: [[(1, 2)], [(2, 2)], [(4, 2)], [(1, 4)], [(2, 4)], [(1, 2), (4, 2)]],
             16: [[(1, 4)], [(4, 2)], [(2, 2), (8, 2)], [(1, 2), (4, 4)]]}


def mesh_groups(rng: random.Random, n: int) -> Groups:
    """A mesh of one to three axes, in the plain device order or its own (an iota or a list),
    grouped along some of its axes or sub-axes in any order (sometimes none)."""
    rank = _rank(rng, n)
    sizes = rng.choice(_factorizations(n, rank))
    names = rng.sample(_AXIS_NAMES, rank)
    mesh = "mesh[" + ",".join(f"'{a}'={s}" for a, s in zip(names, sizes)) + "]"
    order = rng.random()
    if order < 0.3 and rank > 1:
        mesh += ", device_ids=(" + _iota_text(*_iota_order(rng, sizes)) + ")"
    elif order < 0.5:
        devices = list(range(n))
        while devices == sorted(devices):
            rng.shuffle(devices)
        mesh += ", device_ids=(" + ",".join(map(str, devices)) + ")"
    elif order < 0.55:
        mesh += f", device_ids=([{n}])"  # the plain iota spelled out: XLA drops it
    refs: list[str] = []
    group_size = 1
    for axis in rng.sample(range(rank), rng.randint(1, rank)):
        subs = _SUB_AXES.get(sizes[axis])
        if subs and rng.random() < 0.4:
            for pre, size in rng.choice(subs):
                refs.append(f"'{names[axis]}':({pre}){size}")
                group_size *= size
        else:
            refs.append(f"'{names[axis]}'")
            group_size *= sizes[axis]
    rng.shuffle(refs)
    if rng.random() < 0.1:
        return Groups(f"{mesh} {{}}", 1)  # groups of one device: XLA's parser refuses them
    return Groups(f"{mesh} {{{','.join(refs)}}}", group_size)


def degenerate_groups(rng: random.Random, n: int) -> Groups:
    """What XLA's printer writes but its parser refuses (one device per group)."""
    return rng.choice([Groups(f"maximal_mesh[device_id={rng.randrange(n)}] {{}}", 1), Groups("mesh[] {}", None)])


def any_groups(rng: random.Random) -> Groups:
    """Replica groups in any form, meshes most often."""
    n = rng.choice([2, 4, 8, 16])
    kind = rng.random()
    if kind < 0.25:
        return list_groups(rng, n)
    if kind < 0.45:
        return iota_groups(rng, n)
    if kind < 0.97:
        return mesh_groups(rng, n)
    return degenerate_groups(rng, n)


# ------------------------------------------------------------------------------------------
# Shapes and attributes


def _layout(rng: random.Random, rank: int, element: str) -> str:
    """None, a plain one (any dimension order), or one with tiles, element sizes, memory spaces."""
    minor_to_major = list(range(rank - 1, -1, -1))
    if rng.random() < 0.2:
        rng.shuffle(minor_to_major)
    m2m = ",".join(map(str, minor_to_major))
    pick = rng.random()
    if pick < 0.4:
        return "{" + m2m + "}" if rng.random() < 0.7 else ""
    ext = []
    if pick < 0.7:
        ext.append(rng.choice(["T(8,128)", "T(2,128)(2,1)", "T(4)", "T(8,128)(4,1)"]))
    if element == "s4" or rng.random() < 0.2:
        ext.append("E(4)" if element == "s4" else "E(16)")
    if rng.random() < 0.4:
        ext.append(f"S({rng.choice([1, 2, 5])})")
    return "{" + m2m + ":" + "".join(ext) + "}" if ext else "{" + m2m + "}"


def _shape(rng: random.Random, element: str, dims: list[int], dynamic: bool) -> str:
    shown = [f"<={d}" if dynamic and i == 0 else str(d) for i, d in enumerate(dims)]
    return f"{element}[{','.join(shown)}]" + _layout(rng, len(dims), element)


def _metadata(rng: random.Random) -> str:
    op = rng.choice(["jit(f)/all_gather", "pjit(step)/psum", "x", 'a "quoted", name=1'])
    escaped = op.replace("\\", "\\\\").replace('"', '\\"')
    line = f" source_line={rng.randint(1, 900)}" if rng.random() < 0.5 else ""
    return f'metadata={{op_name="{escaped}" source_file="model.py"{line}}}'


def named_sharding(rng: random.Random) -> str:
    """A named (mesh) sharding of a rank-2 value: each axis (or a half of it) goes to a
    dimension, the replicated, unreduced or manual axes, or nowhere; or a special form."""
    n = rng.choice([2, 4, 8])
    if rng.random() < 0.1:
        return f"{{maximal_mesh[device_id={rng.randrange(n)}]}}"
    mesh = mesh_groups(rng, n).text.rsplit(" {", 1)[0]
    axes = re.findall(r"'([^']*)'=(\d+)", mesh.split("]", 1)[0])
    special = rng.random()
    if special < 0.15:
        return "{" + mesh + ", " + rng.choice(["replicated", "unreduced", "manual"]) + "}"
    places: dict[str, list[str]] = {"0": [], "1": [], "replicated": [], "unreduced": [], "manual": []}
    for name, size in axes:
        halves = [rng.choice([*places, None]) for _ in range(2)]
        if int(size) < 4 or halves[0] == halves[1]:  # XLA aborts on neighbours it could merge
            pieces = [(f"'{name}'", halves[0])]
        else:
            pieces = [(f"'{name}':(1)2", halves[0]), (f"'{name}':(2){int(size) // 2}", halves[1])]
        for piece, place in pieces:
            if place is not None:
                places[place].append(piece)
    dims = [places["0"], places["1"]]
    shown = ["{" + ", ".join(d + (["?"] if rng.random() < 0.2 else [])) + "}" for d in dims]
    text = "{" + mesh + ", [" + ", ".join(shown) + "]"
    for kind in ("replicated", "unreduced", "manual"):
        if places[kind]:
            text += f", {kind}={{" + ", ".join(places[kind]) + "}"
    return text + (", " + _metadata(rng) if rng.random() < 0.2 else "") + "}"


def _attributes(rng: random.Random, groups: Groups, *, global_ids: bool = True, layout: bool = True) -> list[str]:
    """The replica groups and some of the attributes a collective may carry (use_global_device_ids
    and constrain_layout where the opcode takes them)."""
    attrs = [f"replica_groups={groups.text}"]
    if rng.random() < 0.7:
        attrs.append(f"channel_id={rng.randint(1, 40)}")
        if global_ids and rng.random() < 0.5:
            attrs.append("use_global_device_ids=true")
    if layout and rng.random() < 0.2:
        attrs.append("constrain_layout=true")
    if rng.random() < 0.4:
        attrs.append(_metadata(rng))
    if rng.random() < 0.15:
        attrs.append("sharding=" + named_sharding(rng))
    return attrs


def _line(shape: str, opcode: str, operands: list[str], attrs: list[str], rng: random.Random) -> str:
    rng.shuffle(attrs)  # XLA reads attributes in any order and prints them in its own
    return f"@N = {shape} {opcode}({', '.join(operands)})" + "".join(", " + a for a in attrs)


def _element(rng: random.Random) -> str:
    return rng.choice(["f32", "f32", "bf16", "s4", "s32", "pred", "f8e4m3fn", "u8", "c64"])


def collective_case(rng: random.Random, groups: Groups) -> Case:
    """One collective of a random kind over `groups`."""
    size = groups.group_size or DEVICES
    element = _element(rng)
    dynamic = rng.random() < 0.15
    base = [2, 4]
    kind = rng.choice(["all-gather", "all-gather-start", "all-gather-tuple", "all-reduce", "all-reduce-start",
                       "reduce-scatter", "all-to-all", "all-to-all-tuple", "collective-broadcast", "async"])
    dim = rng.randrange(2)
    grown = [d * size if i == dim else d for i, d in enumerate(base)]
    operand = _shape(rng, element, base, dynamic)
    if kind in ("all-gather", "all-gather-start"):
        attrs = _attributes(rng, groups) + [f"dimensions={{{dim}}}"]
        result = _shape(rng, element, grown, dynamic)
        if kind == "all-gather":
            return Case((operand,), (_line(result, "all-gather", ["@0"], attrs, rng),))
        start = _line(f"({operand}, {result})", "all-gather-start", ["@0"], attrs, rng)
        return Case((operand,), (start, f"@N.done = {result} all-gather-done(@N)"))
    if kind == "all-gather-tuple":
        attrs = _attributes(rng, groups) + [f"dimensions={{{dim}}}"]
        second = _shape(rng, element, base, dynamic)
        results = [_shape(rng, element, grown, dynamic) for _ in range(2)]
        return Case((operand, second), (_line(f"({', '.join(results)})", "all-gather", ["@0", "@1"], attrs, rng),))
    if kind == "collective-broadcast":
        attrs = _attributes(rng, groups, global_ids=False, layout=False)
        result = _shape(rng, element, base, dynamic)
        return Case((operand,), (_line(result, "collective-broadcast", ["@0"], attrs, rng),))
    if kind in ("all-reduce", "all-reduce-start"):
        attrs = _attributes(rng, groups) + ["to_apply=add"]
        result = _shape(rng, element, base, dynamic)
        if kind == "all-reduce":
            return Case((operand,), (_line(result, "all-reduce", ["@0"], attrs, rng),))
        start = _line(result, "all-reduce-start", ["@0"], attrs, rng)
        return Case((operand,), (start, f"@N.done = {result} all-reduce-done(@N)"))
    if kind == "reduce-scatter":
        attrs = _attributes(rng, groups) + [f"dimensions={{{dim}}}", "to_apply=add"]
        return Case((_shape(rng, element, grown, dynamic),),
                    (_line(_shape(rng, element, base, dynamic), "reduce-scatter", ["@0"], attrs, rng),))
    if kind == "async":  # XLA's async wrapper, printed as `<op>-start` / `<op>-done`
        opcode = rng.choice(["reduce-scatter", "all-to-all", "collective-broadcast"])
        extra = {"reduce-scatter": [f"dimensions={{{dim}}}", "to_apply=add"], "all-to-all": [f"dimensions={{{dim}}}"],
                 "collective-broadcast": []}[opcode]
        attrs = _attributes(rng, groups, global_ids=opcode == "reduce-scatter", layout=False) + extra
        source = _shape(rng, element, grown if opcode != "collective-broadcast" else base, False)
        result = _shape(rng, element, base if opcode != "all-to-all" else grown, False)
        start = _line(f"(({source}), {result})", f"{opcode}-start", ["@0"], attrs, rng)
        return Case((source,), (start, f"@N.done = {result} {opcode}-done(@N)"))
    if kind == "all-to-all":
        attrs = _attributes(rng, groups, global_ids=False) + [f"dimensions={{{dim}}}"]
        shape = _shape(rng, element, grown, False)
        return Case((shape,), (_line(_shape(rng, element, grown, False), "all-to-all", ["@0"], attrs, rng),))
    attrs = _attributes(rng, groups, global_ids=False)
    shapes = [_shape(rng, element, base, False) for _ in range(2)]
    return Case(tuple(shapes), (_line(f"({', '.join(shapes)})", "all-to-all", ["@0", "@1"], attrs, rng),))


def permute_case(rng: random.Random) -> Case:
    """A collective-permute (or its async pair) over random source-target pairs."""
    n = rng.choice([2, 4, 8, 16])
    targets = list(range(n))
    rng.shuffle(targets)
    pairs = [(s, t) for s, t in zip(range(n), targets) if rng.random() < 0.8]
    attrs = ["source_target_pairs={" + ",".join(f"{{{s},{t}}}" for s, t in pairs) + "}"]
    if rng.random() < 0.7:
        attrs.append(f"channel_id={rng.randint(1, 40)}")
    if rng.random() < 0.3:
        attrs.append(_metadata(rng))
    element = _element(rng)
    shape = _shape(rng, element, [2, 4], rng.random() < 0.15)
    if rng.random() < 0.6:
        return Case((shape,), (_line(shape, "collective-permute", ["@0"], attrs, rng),))
    start = _line(f"({shape}, {shape})", "collective-permute-start", ["@0"], attrs, rng)
    return Case((shape,), (start, f"@N.done = {shape} collective-permute-done(@N)"))


def generate(seed: int, count: int) -> list[Case]:
    """`count` cases, the same for the same seed."""
    rng = random.Random(seed)
    return [permute_case(rng) if rng.random() < 0.1 else collective_case(rng, any_groups(rng)) for _ in range(count)]


# ------------------------------------------------------------------------------------------
# Modules


_PLACEHOLDER = re.compile(r"@(N|[0-9])")


def module_text(cases: list[Case], name: str = "m") -> str:
    """One module holding `cases`: each reads its own parameters; the root is a tuple of
    every case's last instruction (so nothing is dead)."""
    params: list[str] = []
    body: list[str] = []
    results: list[tuple[str, str]] = []  # (name, shape) of each case's last instruction
    for k, case in enumerate(cases):
        names = {"N": f"op{k}"}
        for i, shape in enumerate(case.parameters):
            names[str(i)] = f"p{len(params)}"
            params.append(f"  p{len(params)} = {shape} parameter({len(params)})")
        for line in case.lines:
            body.append("  " + _PLACEHOLDER.sub(lambda m: names[m.group(1)], line))
        name_of_last, rest = body[-1].split(" = ", 1)
        results.append((name_of_last.strip(), _leading_shape(rest)))
    shapes, names_of_last = ", ".join(s for _, s in results), ", ".join(n for n, _ in results)
    root = f"  ROOT t = ({shapes}) tuple({names_of_last})"
    lines = "\n".join(params + body + [root])
    return f"HloModule {name}, num_partitions={DEVICES}\n\n{ADD}\nENTRY e {{\n{lines}\n}}\n"


def _leading_shape(text: str) -> str:
    """The shape that starts an instruction's right-hand side (balanced brackets)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == " " and depth == 0:
            return text[:i]
    raise ValueError(text)
