"""Issue 7 targets: size sweep of parse, each pass, print; ours vs XLA parse+print.

    python benchmarks/pipeline.py                          # 10k, 100k, 1M; 3 runs each
    python benchmarks/pipeline.py --sizes 10000,100000 --runs 3

Per size (fresh child per run and side, medians):
  ours: parse, `neuron-preprocess-kernel-duplicate-remover`, `neuron_all_gather_duplicate_remover`
        (incl. the HloDCE it runs; that DCE also shown alone as "ag.dce"), print of the
        result, then `dce` run by itself on the result (a full liveness walk that removes
        nothing); XLA: parse + print (XLA has no such passes, so the XLA side is the bar).
  ratios: (a) ours parse+print / XLA parse+print, (b) ours parse+both passes+print / XLA
        parse+print; µs per instruction per phase and its spread over sizes (linear ±25%);
        peak RSS of each side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit, machine_line, mb, median_runs, module_file, table  # noqa: E402

PHASES = [  # (key in worker JSON, label)
    ("parse_s", "parse"),
    ("preprocess_s", "preprocess"),
    ("allgather_s", "allgather"),
    ("allgather_dce_s", "ag.dce"),
    ("print_s", "print"),
    ("dce_s", "dce alone"),
]
#: Rows reported for information, outside the linearity target: the standalone `dce` runs on
#: an already-clean module (a sub-millisecond scan at 10k, served from cache there), and
#: XLA's own parse+print.
INFO_ONLY = frozenset({"dce alone", "XLA parse+print"})
TARGET_PP = 1.0
TARGET_FULL = 1.25
LINEAR_TOL = 0.25


def _k(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def measure(sizes: list[int], runs: int, gc_on: bool = False) -> list[dict]:
    out = []
    for n in sizes:
        path = module_file(n)
        print(f"[{_k(n)}] {path.name}: ours x{runs} ...", file=sys.stderr, flush=True)
        ours = median_runs("pipeline", path, runs, *(["--gc-on"] if gc_on else []))
        print(f"[{_k(n)}] XLA x{runs} ...", file=sys.stderr, flush=True)
        xla = median_runs("xla", path, runs)
        out.append({"size": n, "file": str(path), "ours": ours, "xla": xla})
    return out


def _sum(d: dict, keys: list[str], clock: str) -> float:
    suffix = "_cpu_s" if clock == "cpu" else "_s"
    return sum(d[k + suffix] for k in keys)


PP = ["parse", "print_unchanged"]
FULL = ["parse", "preprocess", "allgather", "print"]


def report(results: list[dict]) -> str:
    lines = [machine_line()]
    cols = [_k(r["size"]) for r in results]
    rows: list[list[str]] = []
    rows.append(["instructions"] + [f"{r['ours']['instructions']:,}" for r in results])
    rows.append(["MB"] + [mb(r["ours"]["bytes"]) for r in results])
    rows.append(["all-gathers folded"] + [str(r["ours"]["allgather_folds"]) for r in results])
    for key, label in PHASES:
        ck = key[:-2] + "_cpu_s"
        rows.append([f"ours {label}"] + [f"{r['ours'][ck]:.3f}" for r in results])
    rows.append(["XLA parse"] + [f"{r['xla']['parse_cpu_s']:.3f}" for r in results])
    rows.append(["XLA print"] + [f"{r['xla']['print_cpu_s']:.3f}" for r in results])
    ratio = {}
    for clock in ("cpu", "wall"):
        pp = [_sum(r["ours"], PP, clock) for r in results]
        full = [_sum(r["ours"], FULL, clock) for r in results]
        xpp = [_sum(r["xla"], ["parse", "print"], clock) for r in results]
        ratio[clock] = (pp, full, xpp)
        rows.append([f"ours parse+print ({clock})"] + [f"{v:.3f}" for v in pp])
        rows.append([f"ours parse+passes+print ({clock})"] + [f"{v:.3f}" for v in full])
        rows.append([f"XLA parse+print ({clock})"] + [f"{v:.3f}" for v in xpp])
    for clock in ("cpu", "wall"):
        pp, full, xpp = ratio[clock]
        rows.append([f"(a) pp ours/XLA, {clock} (<= {TARGET_PP})"] + [f"{a / b:.2f}x" for a, b in zip(pp, xpp)])
    for clock in ("cpu", "wall"):
        pp, full, xpp = ratio[clock]
        rows.append([f"(b) full ours/XLA, {clock} (<= {TARGET_FULL})"] + [f"{a / b:.2f}x" for a, b in zip(full, xpp)])
    rows.append(["peak RSS ours (MB)"] + [f"{r['ours']['rss_peak_kb'] / 1e3:.0f}" for r in results])
    rows.append(["peak RSS XLA (MB)"] + [f"{r['xla']['rss_peak_kb'] / 1e3:.0f}" for r in results])
    rows.append(["peak RSS ours/XLA"] + [f"{r['ours']['rss_peak_kb'] / r['xla']['rss_peak_kb']:.2f}x" for r in results])
    rows.append(["RSS over base ours (MB)"] + [f"{(r['ours']['rss_peak_kb'] - r['ours']['rss_base_kb']) / 1e3:.0f}" for r in results])
    rows.append(["RSS over base XLA (MB)"] + [f"{(r['xla']['rss_peak_kb'] - r['xla']['rss_base_kb']) / 1e3:.0f}" for r in results])
    lines.append(f"seconds are CPU time of the child (robust on a shared host) unless marked wall; "
                 f"median of {results[0]['ours']['runs']} runs per size and side, fresh child each")
    lines.append(table(rows, ["phase (s)"] + cols))

    lin_rows = []
    checks = []
    pp, full, xpp = ratio["cpu"]
    series = [(label, [r["ours"][key[:-2] + "_cpu_s"] for r in results])
              for key, label in PHASES]
    series += [("ours parse+passes+print", full), ("XLA parse+print", xpp)]
    for label, secs in series:
        us = [s * 1e6 / r["ours"]["instructions"] for s, r in zip(secs, results)]
        med = statistics.median(us)
        dev = max(abs(u / med - 1) for u in us) if med > 0 else 0.0
        ok = dev <= LINEAR_TOL
        if label in INFO_ONLY:
            verdict = "(info)"
        else:
            checks.append(ok)
            verdict = "ok" if ok else "NOT LINEAR"
        lin_rows.append([label] + [f"{u:.2f}" for u in us] + [f"±{dev * 100:.0f}%", verdict])
    lines.append("")
    lines.append("µs per instruction, CPU (linearity: max deviation from the median over sizes, target ±25% "
                 "for parse, each pass with its DCE, print and the full pipeline)")
    lines.append(table(lin_rows, ["phase"] + cols + ["spread", ""]))
    big = results[-1]
    verdict = []
    for clock in ("cpu", "wall"):
        pp, full, xpp = ratio[clock]
        verdict.append(f"[{clock}] (a) {pp[-1] / xpp[-1]:.2f}x {'MET' if pp[-1] <= TARGET_PP * xpp[-1] else 'NOT MET'}, "
                       f"(b) {full[-1] / xpp[-1]:.2f}x {'MET' if full[-1] <= TARGET_FULL * xpp[-1] else 'NOT MET'}")
    rss = big["ours"]["rss_peak_kb"] / big["xla"]["rss_peak_kb"]
    lines.append("")
    lines.append(f"targets at {_k(big['size'])}: " + "; ".join(verdict)
                 + f"; RSS {rss:.2f}x {'MET' if rss <= 1 else 'NOT MET'}; linear {'MET' if all(checks) else 'NOT MET'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated instruction counts")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--gc-on", action="store_true", help="what-if: our side with the cyclic GC running")
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    ap.add_argument("--from-json", type=Path, help="only re-print the report of a saved --json")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    return emit(args, lambda: measure(sizes, args.runs, args.gc_on), report)


if __name__ == "__main__":
    sys.exit(main())
