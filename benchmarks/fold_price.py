"""Cost of pricing folds (`hlo_dedup.analysis.FoldPricer`) next to a plain parse + print.

    python benchmarks/fold_price.py                       # 1M instructions, 500 folds, 3 runs (~4 min)
    python benchmarks/fold_price.py --instructions 100000 --folds 500,all

The module is `generate.py`'s FSDP transformer step (one computation; six re-gathered
weights per layer, so about 22 folds per 1,000 instructions). Each run is a fresh child
process: it parses the module twice (once to learn the folds by running the all-gather
pass, untimed), then times on the other copy, as the command runs (garbage collector
paused): parse; print; the pricer's build (liveness of the computation and its trees);
pricing the first N folds in order with `apply_within` (instruction objects, as the pass
will call it). Target: build + a few hundred folds <= ~10% of parse + print.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from common import ROOT, machine_line, module_file

CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
import hlo_dedup
from hlo_dedup.analysis import FoldPricer
from hlo_dedup.text.printer import format_module
text = open(sys.argv[2]).read()
count = int(sys.argv[3])
gc.disable()
folds = hlo_dedup.run_passes(hlo_dedup.parse_module(text), ["neuron_all_gather_duplicate_remover"]).folds
t0 = time.process_time(); module = hlo_dedup.parse_module(text); t1 = time.process_time()
format_module(module); t2 = time.process_time()
comps = {c.name: c for c in module.computations}
names = {name: {i.name: i for i in comps[name].instructions} for name in {f.computation for f in folds}}
calls = [(comps[f.computation], names[f.computation][f.kept], names[f.computation][f.removed]) for f in folds]
pricer = FoldPricer(module)
b0 = time.process_time()
for comp in {c for c, _, _ in calls[:count]}:
    pricer.peak_bytes(comp)
b1 = time.process_time()
refused = sum(pricer.apply_within(c, k, r, 0).refused for c, k, r in calls[:count])
b2 = time.process_time()
print(json.dumps({"parse+print": t2 - t0, "instructions": sum(len(c.instructions) for c in module.computations),
                  "folds": len(folds), "build": b1 - b0, "price": b2 - b1,
                  "priced": len(calls[:count]), "refused": refused}))
"""


def run_child(path: Path, count: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "src"), str(path), str(count)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--instructions", type=int, default=1_000_000)
    parser.add_argument("--folds", default="500", help="comma-separated fold counts ('all' for every fold)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--module", help="an existing module file instead of the generated one")
    args = parser.parse_args()
    path = module_file(args.instructions, args.module)
    counts = [10**9 if c == "all" else int(c) for c in args.folds.split(",")]
    print(machine_line())
    print(f"{path.name}; median CPU seconds of {args.runs} runs (one child process each)")
    print("| folds priced | refused at budget 0 | parse + print | build | pricing | per fold "
          "| (build + pricing) / (parse + print) |")
    print("|---|---|---|---|---|---|---|")
    for count in counts:
        runs = [run_child(path, count) for _ in range(args.runs)]
        base, build, price = (statistics.median(r[k] for r in runs) for k in ("parse+print", "build", "price"))
        priced = runs[0]["priced"]
        print(f"| {priced:,} of {runs[0]['folds']:,} | {runs[0]['refused']:,} | {base:.2f} s | {build:.3f} s "
              f"| {price:.3f} s | {price / max(priced, 1) * 1e6:.0f} us | {(build + price) / base:.1%} |",
              flush=True)


if __name__ == "__main__":
    main()
