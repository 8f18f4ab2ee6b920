"""Foundation benchmark: our HLO text parse + print vs XLA's C++ (through jaxlib), same file.

    python benchmarks/parse_print.py                       # 1,000,000 instructions, 3 runs
    python benchmarks/parse_print.py --instructions 100000 --runs 5
    python benchmarks/parse_print.py --module some.hlo

Each run of each side is a fresh child process, so the peak RSS (VmHWM) is that side's
alone; figures are medians over the runs. Our print of the unchanged module must be
byte-identical to the input (the child asserts it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit, machine_line, mb, median_runs, module_file, table  # noqa: E402


def measure(path: Path, runs: int, gc_on: bool = False) -> dict:
    extra = ["--gc-on"] if gc_on else []
    ours = median_runs("ours", path, runs, *extra)
    xla = median_runs("xla", path, runs)
    return {"file": str(path), "ours": ours, "xla": xla}


def report(res: dict) -> str:
    ours, xla = res["ours"], res["xla"]
    size = ours["bytes"]
    n = ours["instructions"]

    def row(label: str, o: float, x: float, unit: str = "s") -> list[str]:
        if unit == "s":
            return [label, f"{o:.3f}", f"{x:.3f}", f"{o / x:.2f}x"]
        return [label, f"{o:.0f}", f"{x:.0f}", f"{o / x:.2f}x"]

    o_pp = ours["parse_s"] + ours["print_s"]
    o_cpu = ours["parse_cpu_s"] + ours["print_cpu_s"]
    x_cpu = xla["parse_cpu_s"] + xla["print_cpu_s"]
    x_pp = xla["parse_s"] + xla["print_s"]
    rows = [
        row("parse (s)", ours["parse_s"], xla["parse_s"]),
        row("print (s)", ours["print_s"], xla["print_s"]),
        row("parse+print (s)", o_pp, x_pp),
        row("parse CPU (s)", ours["parse_cpu_s"], xla["parse_cpu_s"]),
        row("print CPU (s)", ours["print_cpu_s"], xla["print_cpu_s"]),
        row("parse+print CPU (s)", o_cpu, x_cpu),
        row("parse MB/s (CPU)", size / 1e6 / ours["parse_cpu_s"], size / 1e6 / xla["parse_cpu_s"], "n"),
        row("print MB/s (CPU)", size / 1e6 / ours["print_cpu_s"], size / 1e6 / xla["print_cpu_s"], "n"),
        row("parse+print MB/s (CPU)", size / 1e6 / o_cpu, size / 1e6 / x_cpu, "n"),
        row("peak RSS (MB)", ours["rss_peak_kb"] / 1e3, xla["rss_peak_kb"] / 1e3, "n"),
        row("RSS over base (MB)", (ours["rss_peak_kb"] - ours["rss_base_kb"]) / 1e3,
            (xla["rss_peak_kb"] - xla["rss_base_kb"]) / 1e3, "n"),
    ]
    spread = (
        f"min-max over {ours['runs']} runs (wall): ours parse {ours.get('parse_s__min', 0):.3f}-{ours.get('parse_s__max', 0):.3f}s, "
        f"XLA parse {xla.get('parse_s__min', 0):.3f}-{xla.get('parse_s__max', 0):.3f}s; (CPU): ours parse "
        f"{ours.get('parse_cpu_s__min', 0):.3f}-{ours.get('parse_cpu_s__max', 0):.3f}s, XLA parse "
        f"{xla.get('parse_cpu_s__min', 0):.3f}-{xla.get('parse_cpu_s__max', 0):.3f}s"
    )
    lines = [
        machine_line(),
        f"module: {res['file']} ({n:,} instructions, {mb(size)} MB); median of {ours['runs']} runs, one child per run and side",
        table(rows, ["", "ours", "XLA (jaxlib)", "ours/XLA"]),
        *([spread] if ours["runs"] > 1 else []),
        f"our print byte-identical to input: {ours['print_identical']}; XLA's print byte-identical: {xla['xla_print_identical']}",
        "base = RSS after imports and reading the file (jaxlib's import alone is most of XLA's base)",
        f"target parse+print <= 1.0x XLA: wall {o_pp / x_pp:.2f}x {'MET' if o_pp <= x_pp else 'NOT MET'}, "
        f"CPU {o_cpu / x_cpu:.2f}x {'MET' if o_cpu <= x_cpu else 'NOT MET'} (CPU time is robust to other load on a shared host)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", type=int, default=1_000_000)
    ap.add_argument("--module", help="benchmark this HLO file instead of a generated one")
    ap.add_argument("--runs", type=int, default=3, help="runs per side (median); default 3")
    ap.add_argument("--gc-on", action="store_true", help="what-if: our side with gc.disable()")
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    ap.add_argument("--from-json", type=Path, help="only re-print the report of a saved --json")
    args = ap.parse_args(argv)
    return emit(args, lambda: measure(module_file(args.instructions, args.module), args.runs, args.gc_on), report)


if __name__ == "__main__":
    sys.exit(main())
