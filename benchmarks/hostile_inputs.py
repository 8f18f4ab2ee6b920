"""Inputs built to be slow, timed at two sizes: the command must stay linear in time and memory.

    python benchmarks/hostile_inputs.py              # each shape at 250 KB and 1 MB
    python benchmarks/hostile_inputs.py --size 100000 --factor 8

Each shape (issue 11 §4 and what the fuzz campaign found) is written at `size` and at
`factor * size` bytes and run as `python -m hlo_dedup FILE -o OUT` (default pipeline) in a
fresh process. The table gives wall seconds, peak RSS and the growth of each from the small
input to the large one: linear is about `factor`, quadratic about `factor` squared.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import machine_line, table  # noqa: E402


def _module(*lines: str, header: str = "HloModule m, replica_count=2") -> str:
    return "\n".join([header, "ENTRY e {", *("  " + line for line in lines), "}", ""])


def compact_gte_chain(size: int) -> str:
    return _module("p = (f32[]) parameter(0)", "ROOT n = f32[] negate(p" + "#0" * (size // 2) + ")")


def unterminated_escaped_quotes(size: int) -> str:
    return _module("p = f32[] parameter(0)", 'ROOT n = f32[] negate(p), metadata={op_name="' + '\\"' * (size // 2))


def control_predecessors(size: int) -> str:
    names = [f"c{i}" for i in range(1000)]
    preds = ",".join(names[i % 1000] for i in range(size // 5))
    return _module(*(f"{c} = f32[] constant(0)" for c in names), f"ROOT r = f32[] constant(1), control-predecessors={{{preds}}}")


def iota_replica_groups(size: int) -> str:
    """Gathers over a million devices each, in distinct orders (no header: the devices are
    not bounded by replica_count): compared in compact form, never spelled out."""
    lines = ["p = f32[1] parameter(0)"]
    for k in range(size // 200):
        order = list(range(20))
        random.Random(k).shuffle(order)
        perm = ",".join(map(str, order))
        lines.append(f"a{k} = f32[1048576] all-gather(p), replica_groups=[1,1048576]<=[{','.join(['2'] * 20)}]T({perm}), dimensions={{0}}")
    return _module(*lines, "ROOT t = () tuple()", header="HloModule m")


def nested_instructions(size: int) -> str:
    operand = "negate(" * 150 + "p" + ")" * 150
    return _module("p = f32[] parameter(0)", "ROOT t = tuple(" + ", ".join([operand] * (size // 1200)) + ")")


def folds_into_one_tuple(size: int) -> str:
    n = size // 75
    lines = ["p = f32[2] parameter(0)"] + [f"a{k} = f32[4] all-gather(p), replica_groups={{{{0,1}}}}, dimensions={{0}}" for k in range(n)]
    return _module(*lines, "ROOT t = tuple(" + ", ".join(f"a{k}" for k in range(n)) + ")")


def call_chain(size: int) -> str:
    n = size // 90
    comps = ["c0 {\n  ROOT p = f32[] parameter(0)\n}\n"]
    comps += [f"c{k} {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{k - 1}\n}}\n" for k in range(1, n)]
    entry = f"ENTRY e {{\n  p = f32[] parameter(0)\n  dead = f32[] call(p), to_apply=c{n - 1}\n  ROOT r = f32[] negate(p)\n}}\n"
    return "HloModule m\n" + "".join(comps) + entry


def bare_shape_chain(size: int) -> str:
    n = size // 24
    lines = ["a0 = f32[2] parameter(0)"] + [f"a{k} = negate(a{k - 1})" for k in range(1, n)]
    return _module(*lines, f"ROOT t = tuple(a{n - 1})")


def wide_priced_entry(size: int) -> str:
    """An entry with one fold (so it is priced) and thousands of returned values, each
    computed in place from a buffer it alone reads, and of call sites of one computation:
    the price once looked each up among all the others."""
    n = size // 170
    lines = ["p = f32[4] parameter(0)", "g1 = f32[8] all-gather(p), replica_groups={{0,1}}, dimensions={0}",
             "g2 = f32[8] all-gather(p), replica_groups={{0,1}}, dimensions={0}"]
    for k in range(n):
        lines += [f'a{k} = f32[4] custom-call(p), custom_call_target="t{k}"', f"n{k} = f32[4] negate(a{k})",
                  f"c{k} = f32[4] call(p), to_apply=f"]
    values = ", ".join(["g1", "g2"] + [f"n{k}, c{k}" for k in range(n)])
    callee = "f {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] negate(x)\n}\n\n"
    return "HloModule m, replica_count=2\n\n" + callee + _module(*lines, f"ROOT t = tuple({values})", header="").lstrip()


SHAPES: dict[str, Callable[[int], str]] = {
    f.__name__: f
    for f in (compact_gte_chain, unterminated_escaped_quotes, control_predecessors, iota_replica_groups,
              nested_instructions, folds_into_one_tuple, call_chain, bare_shape_chain, wide_priced_entry)
}


def run(path: Path, out: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit status) of the command on `path`, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent / "src"), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "hlo_dedup", str(path), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=250_000, help="bytes of the small input (default 250,000)")
    parser.add_argument("--factor", type=int, default=4, help="the large input is this many times bigger (default 4)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in SHAPES.items():
            measured = []
            for size in (args.size, args.size * args.factor):
                path = Path(tmp) / f"{name}.hlo"
                path.write_text(make(size))
                measured.append((path.stat().st_size, *run(path, Path(tmp) / "out.hlo")))
            (b0, t0, m0, s0), (b1, t1, m1, s1) = measured
            rows.append([name, f"{b0:,}", f"{t0:.2f}", f"{m0:.0f}", f"{b1:,}", f"{t1:.2f}", f"{m1:.0f}",
                         f"{t1 / t0:.1f}x", f"{(m1 - 20) / max(m0 - 20, 1):.1f}x", f"{s0}/{s1}"])
    print(machine_line())
    print(table(rows, ["shape", "bytes", "s", "MB", "bytes", "s", "MB", "time", "memory", "exit"]))
    print(f"(each size in a fresh process, start-up included; linear growth is about {args.factor}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
