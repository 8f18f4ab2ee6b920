"""Batch-mode throughput: `hlo-dedup DIR --output-dir OUT -j N` on ~100 real JAX modules.

    python benchmarks/batch.py                      # 100 files, 1 vs 2 workers, 3 runs each
    python benchmarks/batch.py --files 200 --jobs 1,2,4 --runs 5

The input directory, benchmarks/out/batch_in/, holds copies of tests/data/jax/*.hlo (the
modules JAX 0.10.2 wrote for the test suite) under varied names in a few subdirectories:
`g3/042_fsdp_shard_map.hlo`. Each run is one `python -m hlo_dedup` process with the default
pipeline; the figures are medians over the runs:

* wall: the whole command, interpreter start and worker spawn included (what a user waits);
* in-tool: the report's `batch.wall_seconds` (file expansion to the last write);
* CPU: user+system time of the command and its workers (RUSAGE_CHILDREN).

Every run must exit 0, and the output trees of all worker counts must be byte-identical.

The ceiling line says how much parallel throughput the machine gives at all: N independent
processes each parse and print the same modules (no pool, no I/O) as one process does alone;
ceiling = N x (time alone) / (time of the slowest of N). On a shared host or with hyperthread
siblings this is well below N, and batch speedup cannot exceed it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import ROOT, machine_line, table  # noqa: E402

SOURCES = ROOT / "tests" / "data" / "jax"
IN_DIR = HERE / "out" / "batch_in"
OUT_ROOT = HERE / "out" / "batch_out"
GROUPS = 5


def prepare(files: int = 100, directory: Path = IN_DIR) -> list[Path]:
    """Fill `directory` with `files` copies of the JAX test modules (recreated if different)."""
    sources = sorted(SOURCES.glob("*.hlo"))
    if not sources:
        raise SystemExit(f"no modules in {SOURCES}")
    wanted = {Path(f"g{i % GROUPS}") / f"{i:03d}_{sources[i % len(sources)].stem}.hlo": sources[i % len(sources)]
              for i in range(files)}
    existing = {p.relative_to(directory) for p in directory.rglob("*.hlo")} if directory.is_dir() else set()
    if existing != set(wanted) or any((directory / rel).read_bytes() != src.read_bytes() for rel, src in wanted.items()):
        shutil.rmtree(directory, ignore_errors=True)
        for rel, src in wanted.items():
            (directory / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, directory / rel)
    return [directory / rel for rel in sorted(wanted)]


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def run_once(jobs: int, directory: Path = IN_DIR) -> dict:
    out = OUT_ROOT / f"j{jobs}"
    shutil.rmtree(out, ignore_errors=True)
    OUT_ROOT.mkdir(parents=True, exist_ok=True)  # the report is written beside the outputs
    report = OUT_ROOT / f"j{jobs}.json"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["CI"] = "true"  # never a progress display
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hlo_dedup", str(directory), "--output-dir", str(out),
                           "-j", str(jobs), "--report", str(report)], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"-j {jobs} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    data = json.loads(report.read_text())
    return {
        "jobs": jobs,
        "workers": data["batch"]["workers"],
        "files": data["batch"]["files"],
        "modules": data["totals"]["modules"],
        "folds": data["totals"]["folds"],
        "bytes_in": data["batch"]["bytes_in"],
        "wall_s": wall,
        "tool_wall_s": data["batch"]["wall_seconds"],
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "digest": tree_digest(out),
    }


_CALIBRATE = """
import sys, time
from pathlib import Path
import hlo_dedup
from hlo_dedup.ir.printer import format_module
texts = [p.read_text() for p in sorted(Path(sys.argv[1]).glob("*.hlo"))]
t0 = time.perf_counter()
for _ in range(int(sys.argv[2])):
    for text in texts:
        format_module(hlo_dedup.parse_module(text, "x"))
print(time.perf_counter() - t0)
"""


def parallel_ceiling(n: int, repeat: int = 40) -> float:
    """Throughput of n concurrent CPU-bound processes relative to one (n = perfect)."""

    def batch(k: int) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", _CALIBRATE, str(SOURCES), str(repeat)],
                                  stdout=subprocess.PIPE, text=True) for _ in range(k)]
        return max(float(p.communicate()[0]) for p in procs)

    alone = statistics.median(batch(1) for _ in range(3))
    together = statistics.median(batch(n) for _ in range(3))
    return n * alone / together


def measure(files: int = 100, jobs: list[int] | None = None, runs: int = 3) -> dict:
    jobs = jobs or [1, 2]
    prepare(files)
    results = {}
    for j in jobs:
        print(f"[batch] {files} files, -j {j} x{runs} ...", file=sys.stderr, flush=True)
        rs = [run_once(j) for _ in range(runs)]
        med = {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "tool_wall_s", "cpu_s")}
        results[str(j)] = {**rs[0], **med, "runs": runs,
                           "wall_s__min": min(r["wall_s"] for r in rs), "wall_s__max": max(r["wall_s"] for r in rs),
                           "digests_equal": len({r["digest"] for r in rs}) == 1}
    top = max(jobs)
    ceiling = parallel_ceiling(top) if top > 1 else 1.0
    return {"files": files, "dir": str(IN_DIR), "cpus": os.cpu_count(), "results": results,
            "ceiling_jobs": top, "ceiling": ceiling}


def report(res: dict) -> str:
    results = res["results"]
    base = results[min(results, key=int)]
    rows = []
    for key, r in results.items():
        rows.append([
            f"-j {key}", str(r["workers"]), f"{r['wall_s']:.2f}", f"{r['wall_s__min']:.2f}-{r['wall_s__max']:.2f}",
            f"{r['modules'] / r['wall_s']:.1f}", f"{r['tool_wall_s']:.2f}", f"{r['modules'] / r['tool_wall_s']:.1f}",
            f"{r['cpu_s']:.2f}", f"{base['wall_s'] / r['wall_s']:.2f}x", f"{base['tool_wall_s'] / r['tool_wall_s']:.2f}x",
        ])
    identical = len({r["digest"] for r in results.values()}) == 1 and all(r["digests_equal"] for r in results.values())
    first = next(iter(results.values()))
    lines = [
        machine_line(),
        f"input: {res['files']} files ({first['modules']} modules, {first['bytes_in'] / 1e6:.2f} MB, "
        f"{first['folds']} folds) in {res['dir']}; default pipeline; median of {first['runs']} runs",
        table(rows, ["", "workers", "wall s", "wall min-max", "modules/s", "in-tool s", "modules/s in-tool",
                     "CPU s", "speedup", "speedup in-tool"]),
        "wall = the whole command (interpreter start + worker spawn included); in-tool = the report's "
        "batch.wall_seconds; CPU = command + workers",
        f"outputs byte-identical across worker counts and runs: {identical}",
    ]
    if res.get("ceiling_jobs", 1) > 1:
        lines.append(f"machine ceiling: {res['ceiling_jobs']} independent CPU-bound processes give "
                     f"{res['ceiling']:.2f}x the throughput of one (perfect: {res['ceiling_jobs']}.00x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=100, help="copies of the JAX test modules (default 100)")
    ap.add_argument("--jobs", default="1,2", help="comma-separated worker counts (default 1,2)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    args = ap.parse_args(argv)
    res = measure(args.files, [int(j) for j in args.jobs.split(",") if j], args.runs)
    print(report(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
