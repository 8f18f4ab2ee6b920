"""Run every benchmark and print the reports.

    python benchmarks/run_all.py            # parse/print at 1M, pipeline sweep 10k/100k/1M, batch, 3 runs
    python benchmarks/run_all.py --quick    # parse/print at 100k, sweep 10k/100k
    python benchmarks/run_all.py --runs 5 --json-dir benchmarks/out/results

Modules are generated into benchmarks/out/ (git-ignored) the first time they are needed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import batch as batch_bench  # noqa: E402
import parse_print  # noqa: E402
import pipeline  # noqa: E402
from common import module_file  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k-100k only")
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement (median); default 3")
    ap.add_argument("--json-dir", type=Path, help="write raw results (JSON) here")
    args = ap.parse_args(argv)
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    t0 = time.perf_counter()
    for n in sizes:
        module_file(n)

    print("=" * 30, "parse + print (foundation)", "=" * 30, flush=True)
    pp = parse_print.measure(module_file(sizes[-1]), args.runs)
    print(parse_print.report(pp), flush=True)

    print()
    print("=" * 30, "pipeline sweep (issue 7 targets)", "=" * 30, flush=True)
    sweep = pipeline.measure(sizes, args.runs)
    print(pipeline.report(sweep))

    print()
    print("=" * 30, "batch mode: 100 JAX modules, 1 vs 2 workers", "=" * 30, flush=True)
    batch = batch_bench.measure(files=100, jobs=[1, 2], runs=args.runs)
    print(batch_bench.report(batch))
    print(f"\n(total {time.perf_counter() - t0:.0f}s)")
    if args.json_dir:
        args.json_dir.mkdir(parents=True, exist_ok=True)
        (args.json_dir / "parse_print.json").write_text(json.dumps(pp, indent=1))
        (args.json_dir / "pipeline.json").write_text(json.dumps(sweep, indent=1))
        (args.json_dir / "batch.json").write_text(json.dumps(batch, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
