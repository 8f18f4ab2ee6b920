#!/usr/bin/env python3
"""Fuzz the hlo-dedup command against its contract and print a table of outcomes.

    python scripts/fuzz.py --cases 10000                 # the long campaign (seed 11)
    python scripts/fuzz.py --cases 500 --seed 3 --jobs 1
    python scripts/fuzz.py --cases 200 --subprocess      # one `python -m hlo_dedup` per case
    python scripts/fuzz.py --start 4711 --cases 1        # one case again (same seed)

Cases mutate the corpus beside the checkout (../shared/corpus/xla-hlo), tests/data and
examples/, or are crafted to be deep, long or huge (tests/fuzz/fuzz_inputs.py); each runs
with one of several option sets. The contract (tests/fuzz/fuzz_runner.py): exit 0, or one
located error line with exit 2 (exit 1 only for a RET_CHECK), no traceback, no internal
error, no signal, at most --timeout seconds (+2 s per MB of input) and --memory-mb more
resident memory (+100 bytes per input byte). Every violating input is saved under --out with a JSON file that
says what happened and the command that reproduces it; the exit status is 1 if any.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))

from fuzz_runner import Campaign, Limits, run_campaign, table  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="how many cases (default 1000)")
    parser.add_argument("--start", type=int, default=0, help="index of the first case (default 0)")
    parser.add_argument("--seed", type=int, default=11, help="campaign seed (default 11)")
    parser.add_argument("--scale", type=float, default=1.0, help="size of crafted inputs (1.0: up to ~1 MB)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a case may take, plus 2 s per MB (default 10)")
    parser.add_argument("--memory-mb", type=int, default=512, help="resident MB a case may add (default 512)")
    parser.add_argument("--no-protos", action="store_true", help="no .pb/.pbtxt cases (they need jax)")
    parser.add_argument("--subprocess", action="store_true", help="run every case as its own process")
    parser.add_argument("--out", type=Path, default=Path("fuzz-violations"),
                        help="where violating inputs are saved (default ./fuzz-violations)")
    args = parser.parse_args()

    campaign = Campaign(seed=args.seed, cases=args.cases, start=args.start, scale=args.scale, jobs=args.jobs,
                        protos=not args.no_protos, subprocess=args.subprocess,
                        limits=Limits(args.timeout, args.memory_mb), save_dir=args.out, progress=True)
    started = time.monotonic()
    results = run_campaign(campaign)
    print(table(results))
    bad = sum(r.violation for r in results)
    print(f"{len(results)} cases in {time.monotonic() - started:.0f} s (seed {args.seed}, cases {args.start}.."
          f"{args.start + args.cases - 1}, scale {args.scale}); " + (f"inputs saved under {args.out}" if bad else "no violations"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
