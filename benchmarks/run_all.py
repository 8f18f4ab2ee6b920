"""Run every benchmark and print the reports: the real-module suite, then the synthetic one.

    python benchmarks/run_all.py                    # real modules 4-200 MB; synthetic 1M, sweep to 1M; batch
    python benchmarks/run_all.py --quick            # real ~4 MB modules; synthetic 100k, sweep 10k/100k
    python benchmarks/run_all.py --suite real       # only the real modules (= real_modules.py)
    python benchmarks/run_all.py --suite synthetic  # only the synthetic module, sweep and batch
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
import real_modules  # noqa: E402
from common import module_file  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k-100k only")
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement (median); default 3")
    ap.add_argument("--json-dir", type=Path, help="write raw results (JSON) here")
    ap.add_argument("--suite", choices=("both", "real", "synthetic"), default="both")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results: dict[str, dict] = {}
    if args.suite != "synthetic":
        print("=" * 30, "real modules (JAX/XLA-written): the command vs XLA parse+print", "=" * 30, flush=True)
        results["real_modules"] = real_modules.measure(args.quick, args.runs)
        print(real_modules.report(results["real_modules"]), flush=True)
    if args.suite != "real":
        results.update(synthetic(args.quick, args.runs))
    print(f"\n(total {time.perf_counter() - t0:.0f}s)")
    if args.json_dir:
        args.json_dir.mkdir(parents=True, exist_ok=True)
        for name, data in results.items():
            (args.json_dir / f"{name}.json").write_text(json.dumps(data, indent=1))
    return 0


def synthetic(quick: bool, runs: int) -> dict[str, dict]:
    """The generated 10k-1M instruction module: parse+print, the pass sweep, batch mode."""
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    for n in sizes:
        module_file(n)

    print("=" * 30, "synthetic module: parse + print (foundation)", "=" * 30, flush=True)
    pp = parse_print.measure(module_file(sizes[-1]), runs)
    print(parse_print.report(pp), flush=True)

    print()
    print("=" * 30, "synthetic module: pipeline sweep (issue 7 targets)", "=" * 30, flush=True)
    sweep = pipeline.measure(sizes, runs)
    print(pipeline.report(sweep))

    print()
    print("=" * 30, "batch mode: 100 JAX modules, 1 vs 2 workers", "=" * 30, flush=True)
    batch = batch_bench.measure(files=100, jobs=[1, 2], runs=runs)
    print(batch_bench.report(batch))
    return {"parse_print": pp, "pipeline": sweep, "batch": batch}


if __name__ == "__main__":
    sys.exit(main())
