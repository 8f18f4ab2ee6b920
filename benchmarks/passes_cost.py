"""What the passes and the extra outputs cost on real modules, in CPU seconds.

    python benchmarks/passes_cost.py                            # the ~4 MB modules with folds
    python benchmarks/passes_cost.py --only spmd-shardy-L480,opt-shardy-L480 --runs 3
    python benchmarks/passes_cost.py --trees OLD/src,NEW/src    # two source trees, interleaved

Two kinds of measurement, each in a fresh process, run by run interleaved (variant after
variant, and tree after tree with `--trees`), reported as the minimum CPU (user+sys) of
`--runs` processes: the machine's speed drifts, and the minimum is its least disturbed run.

* **phases**: `run_input` in-process (no start-up): parse, the default pipeline, and inside
  the passes the **explain data** every run computes — the survey of every all-gather's fate
  and the near misses (`GatherSurvey`), each fold's memory price (`FoldPricer`, the liveness
  model included) and the rewrite excerpts of the fold records — then rendering `--report`
  (JSON) and `--html` from that run;
* **commands**: `python -m hlo_dedup FILE -o OUT` as a user runs it, without passes
  (`--passes=`), plain (the default pipeline), with `--report R.json`, with `--html P.html`,
  and with `--max-peak-increase` at a budget no fold exceeds (the same folds, so the same
  output: only the cost of checking differs) and at 0 (most folds refused). Each is given
  as a ratio to the plain run: the issue's target is at most 1.10 for the report, the
  explain page and `--max-peak-increase`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_generate as gen  # noqa: E402
from common import table  # noqa: E402

#: Modules with folds (the passes do real work), small enough for a quick run.
QUICK = ("spmd-shardy-L48", "opt-shardy-L48", "pre-shardy-shardmap-L48")
#: A budget (bytes) above any fold's peak increase in these modules.
NO_LIMIT = "1TiB"
VARIANTS = {
    "none": ["--passes="],
    "plain": [],
    "report": ["--report", "{dir}/r.json"],
    "html": ["--html", "{dir}/p.html"],
    "mpi": ["--max-peak-increase", NO_LIMIT],
    "mpi0": ["--max-peak-increase", "0"],
}
#: Entry points of the explain data inside the all-gather pass: (module, attribute).
EXPLAIN = [
    ("hlo_dedup.passes.gather_survey", f"GatherSurvey.{m}")
    for m in ("not_candidate", "not_traced", "traced", "folded", "refused", "close_computation",
              "records", "near_misses")
] + [
    ("hlo_dedup.analysis.fold_price", "FoldPricer.apply"),
    ("hlo_dedup.analysis.fold_price", "FoldPricer.apply_within"),
    ("hlo_dedup.passes.all_gather_duplicate_remover", "NeuronAllGatherDuplicateRemover._key_json"),
    ("hlo_dedup.passes.all_gather_duplicate_remover", "user_line"),
]


def phases_child(path: str) -> dict:
    """In a fresh process: CPU seconds of parse, passes, their explain share, JSON and HTML.
    The cyclic collector stays off throughout, as the command keeps it."""
    import gc
    import importlib

    gc.disable()

    clock = time.process_time
    explain = [0.0]
    depth = [0]

    def counted(fn):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            depth[0] += 1
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    explain[0] += clock() - start
        return wrapper

    for module_name, attr in EXPLAIN:
        owner = importlib.import_module(module_name)
        *outer, name = attr.split(".")
        for part in outer:
            owner = getattr(owner, part)
        raw = vars(owner).get(name) if isinstance(owner, type) else None
        if isinstance(raw, staticmethod):
            setattr(owner, name, staticmethod(counted(raw.__func__)))
        else:
            setattr(owner, name, counted(getattr(owner, name)))

    from hlo_dedup.passes import pipeline
    from hlo_dedup.report import RunReport, render_json
    from hlo_dedup.report.html import render_html
    from hlo_dedup.run import RunOptions, run_input

    passes = [0.0]
    run = pipeline.Pipeline.run

    def timed_run(self, module, **kwargs):  # type: ignore[no-untyped-def]
        start = clock()
        try:
            return run(self, module, **kwargs)
        finally:
            passes[0] += clock() - start

    pipeline.Pipeline.run = timed_run  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.hlo")
        options = RunOptions()
        start = clock()
        result = run_input(path, out, options, log=io.StringIO())
        total = clock() - start
        if not result.ok:
            raise RuntimeError(result.error)
        report = RunReport(path, out, "hlo", "hlo", options.passes, inputs=[result])
        start = clock()
        render_json(report)
        json_s = clock() - start
        start = clock()
        render_html(report)
        html_s = clock() - start
    return {"run_s": total, "passes_s": passes[0], "explain_s": explain[0], "json_s": json_s, "html_s": html_s,
            "folds": sum(len(p.folds) for m in result.modules for p in m.passes)}


def cpu_of(args: list[str], env: dict[str, str]) -> float:
    """User+sys CPU seconds of `python ARGS` (its stderr kept in a file: a pipe could fill)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"python {' '.join(args)} failed:\n{err.read().decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def environment(tree: str | None) -> dict[str, str]:
    env = dict(os.environ, CI="true")  # CI: no live progress display
    env.pop("XLA_FLAGS", None)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
        env["PYTHONPYCACHEPREFIX"] = str(gen.OUT / "pycache" / tree.strip("/").replace("/", "_"))
    return env


def measure(path: Path, trees: list[str | None], runs: int, variants: list[str]) -> dict:
    best: dict[str, dict[str, float]] = {str(t): {} for t in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            print(f"  {path.stem}: run {i + 1}/{runs}", file=sys.stderr, flush=True)
            for tree in trees:
                env = environment(tree)
                mine = best[str(tree)]
                proc = subprocess.run([sys.executable, __file__, "--phases", str(path)], env=env,
                                      capture_output=True, text=True, check=True)
                for key, value in json.loads(proc.stdout.strip().splitlines()[-1]).items():
                    mine[key] = min(mine.get(key, value), value)
                for variant in variants:
                    args = ["-m", "hlo_dedup", str(path), "-o", f"{tmp}/out.hlo",
                            *(a.format(dir=tmp) for a in VARIANTS[variant])]
                    cpu = cpu_of(args, env)
                    mine[variant] = min(mine.get(variant, cpu), cpu)
    return best


def report(name: str, results: dict, variants: list[str]) -> str:
    rows = []
    for tree, r in results.items():
        plain = r["plain"]
        rows.append([tree if tree != "None" else "this tree", f"{r['folds']:,}", f"{r['passes_s']:.3f}",
                     f"{r['explain_s']:.3f} ({100 * r['explain_s'] / r['run_s']:.0f}%)",
                     f"{r['json_s']:.3f}", f"{r['html_s']:.3f}",
                     *(f"{r[v]:.2f}" + ("" if v == "plain" else f" ({r[v] / plain:.2f})") for v in variants)])
    header = ["tree", "folds", "passes s", "explain s (of run)", "render json s", "render html s",
              *(f"{v} s" + ("" if v == "plain" else " (/plain)") for v in variants)]
    return f"== {name}\n" + table(rows, header)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help=f"comma-separated module names (default: {','.join(QUICK)})")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trees", help="comma-separated source directories to compare (put first on PYTHONPATH)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="command variants to run")
    ap.add_argument("--phases", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phases:
        print(json.dumps(phases_child(args.phases)))
        return 0
    variants = args.variants.split(",")
    if "plain" not in variants:
        variants.insert(0, "plain")
    trees: list[str | None] = args.trees.split(",") if args.trees else [None]
    manifest = gen.load_manifest()["modules"]
    for name in (args.only.split(",") if args.only else QUICK):
        path = gen.OUT / manifest[name]["file"]
        if not path.exists():
            print(f"{name}: {path} missing (python benchmarks/real_generate.py)", file=sys.stderr)
            continue
        print(report(name, measure(path, trees, args.runs, variants), variants), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
