"""Real-module benchmark: the hlo-dedup command against XLA's C++ parse+print on JAX-written modules.

    python benchmarks/real_modules.py --quick      # the ~4 MB modules, 3 runs each (~3 min)
    python benchmarks/real_modules.py              # every module, 4 MB to 200 MB (~1 h)
    python benchmarks/real_modules.py --only pre-shardy-L48,opt-shardy-L480 --runs 5
    python benchmarks/real_modules.py --from-json benchmarks/out/real/results.json
    python benchmarks/real_modules.py --startup --runs 15   # the start-up table alone (~1 min)

Modules come from `real_generate.py` (generated and cached the first time). For each module,
in one run, each measurement in its own fresh process, interleaved run by run:

* **XLA**: `hlo_module_from_text(text)` + `to_string()` in jaxlib, timed inside the process
  (imports and reading the file not counted) — the bar;
* **ours**: the whole `python -m hlo_dedup` command, process start to exit with the output
  written: `FILE --passes= -o OUT` (parse and print), `FILE -o OUT` (the default pipeline),
  `FILE -o OUT --report R.json`, and `FILE.pb --passes= -o OUT` (the binary HloModuleProto of
  the same module); and `FILE -o OUT --price=none`, the default pipeline without the memory
  price (its output checked byte-identical to the default's): the least any price can cost;
* **bytecode**: the measured processes read compiled modules from a cache under
  `benchmarks/out/real/pycache/`, as an installed package does (filled by an untimed first
  round); one start-up row shows the cost without it (`PYTHONDONTWRITEBYTECODE=1`);
* **peak RSS**: of each command process, as GNU time (`/usr/bin/time -f %M`) reports it;
  XLA's is its process's VmHWM (importing jaxlib alone is ~150 MB of it).

Figures are medians of `--runs` processes (`--big-runs` for modules over `--big-mb` MB). The
start-up section times the interpreter alone, `import hlo_dedup.cli`, and the command on a
one-layer module as text (without passes and with the default pipeline) and as `.pb`, with
the median and the least CPU time over the interpreter's. No assertion on time: this prints
numbers.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_generate as gen  # noqa: E402
from common import emit, machine_line, run_child, table  # noqa: E402

#: The command variants: label -> arguments after the input path ({out}, {report} filled in).
VARIANTS = {
    "none": ["--passes=", "-o", "{out}"],
    "default": ["-o", "{out}"],
    "report": ["-o", "{out}", "--report", "{report}"],
    "pb": ["--passes=", "-o", "{out}"],  # given the .pb twin of the module
    "unpriced": ["-o", "{out}", "--price=none"],  # the default pipeline without the memory price
}


#: GNU time reports the peak RSS of the process it runs. Linux's own `ru_maxrss` of a child
#: counts the memory it had as a fork of this (much larger) process before its exec.
GNU_TIME = "/usr/bin/time"
#: Bytecode caches of the measured processes, kept out of the source tree.
PYCACHE = gen.OUT / "pycache"


def child_env(bytecode_cache: bool = True) -> dict[str, str]:
    """The environment of a measured process. With `bytecode_cache`, imports read compiled
    modules from PYCACHE as an installed package reads its own; without, every import compiles
    its source (what PYTHONDONTWRITEBYTECODE=1 does to a source checkout)."""
    env = dict(os.environ, CI="true")  # never a progress display
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.pop("XLA_FLAGS", None)
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def run_python(args: list[str], workdir: Path, bytecode_cache: bool = True) -> dict:
    """`python ARGS` in a fresh process: wall, CPU (user+sys) and peak RSS of that process."""
    env = child_env(bytecode_cache)
    rss_file = workdir / "rss.txt"
    rss_file.unlink(missing_ok=True)
    timer = [GNU_TIME, "-f", "%M", "-o", str(rss_file)] if os.access(GNU_TIME, os.X_OK) else []
    with open(workdir / "stderr.txt", "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([*timer, sys.executable, *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = (workdir / "stderr.txt").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"python {' '.join(args)} exited {proc.returncode}:\n{tail}")
    rss = int(rss_file.read_text().split()[-1]) if timer else -1
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_kb": rss}


def _ours(variant: str, src: Path, workdir: Path) -> dict:
    out, report = workdir / "out.hlo", workdir / "report.json"
    args = [str(src), *(a.format(out=out, report=report) for a in VARIANTS[variant])]
    res = run_python(["-m", "hlo_dedup", *args], workdir)
    if variant == "none" and src.suffix == ".hlo":
        res["identical"] = filecmp.cmp(out, src, shallow=False)
    if variant == "default":
        os.replace(out, workdir / "default.hlo")
    if variant == "unpriced":
        res["identical"] = filecmp.cmp(out, workdir / "default.hlo", shallow=False)
    if variant == "report":
        data = json.loads(report.read_text())
        res.update(folds=data["totals"]["folds"], hazards=data["totals"]["hazards"],
                   **{f"tool_{k}_s": v for k, v in data["timings"].items()})
    for p in (out, report):
        p.unlink(missing_ok=True)
    return res


def _median(results: list[dict]) -> dict:
    """Per numeric field: median, and (over several runs) min and max."""
    out = dict(results[0])
    for key, value in results[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            vals = [r[key] for r in results]
            out[key] = statistics.median(vals)
            out[key + "__min"], out[key + "__max"] = min(vals), max(vals)
    out["runs"] = len(results)
    return out


def measure_module(entry: dict, runs: int, workdir: Path, with_pb: bool) -> dict:
    text, pb = gen.OUT / entry["file"], gen.OUT / entry["pb"]
    sides: dict[str, list[dict]] = {"xla": [], "none": [], "default": [], "unpriced": [], "report": [], "pb": []}
    for i in range(runs):
        print(f"  {entry['name']}: run {i + 1}/{runs}", file=sys.stderr, flush=True)
        x = run_child("xla", text)
        sides["xla"].append({"pp_s": x["parse_s"] + x["print_s"], "pp_cpu_s": x["parse_cpu_s"] + x["print_cpu_s"],
                             "rss_kb": x["rss_peak_kb"], "identical": x["xla_print_identical"]})
        for variant in ("none", "default", "unpriced", "report"):
            sides[variant].append(_ours(variant, text, workdir))
        if with_pb:
            sides["pb"].append(_ours("pb", pb, workdir))
    return {"entry": entry, **{k: _median(v) for k, v in sides.items() if v}}


#: label -> (arguments of python, with a bytecode cache)
STARTUP = {
    "interpreter (python -c pass)": (["-c", "pass"], True),
    "import hlo_dedup.cli": (["-c", "import hlo_dedup.cli"], True),
    "import hlo_dedup.cli, no bytecode cache": (["-c", "import hlo_dedup.cli"], False),
    "command, 1-layer module (text)": (["-m", "hlo_dedup", "{hlo}", "--passes=", "-o", "{out}"], True),
    "command, 1-layer module (text, default pipeline)": (["-m", "hlo_dedup", "{hlo}", "-o", "{out}"], True),
    "command, 1-layer module (.pb)": (["-m", "hlo_dedup", "{pb}", "--passes=", "-o", "{out}"], True),
}


def measure_startup(entry: dict, runs: int, workdir: Path) -> dict:
    """The fixed costs, on a one-layer module; the first (untimed) round fills the bytecode cache."""
    hlo, pb, out = gen.OUT / entry["file"], gen.OUT / entry["pb"], workdir / "out.hlo"
    times: dict[str, list[dict]] = {k: [] for k in STARTUP}
    for i in range(runs + 1):
        for label, (argv, cached) in STARTUP.items():
            res = run_python([a.format(hlo=hlo, pb=pb, out=out) for a in argv], workdir, cached)
            if i:
                times[label].append(res)
    return {"module": entry["file"], "bytes": entry["bytes"], **{k: _median(v) for k, v in times.items()}}


def measure(quick: bool, runs: int = 3, big_runs: int = 1, big_mb: float = 100.0, only: str | None = None,
            with_pb: bool = True) -> dict:
    wanted = set(only.split(",")) if only else None
    manifest = gen.ensure(quick, only=None if wanted is None else wanted | {gen.TINY})
    entries = gen.modules(manifest, quick)
    if wanted is not None:
        entries = [e for e in entries if e["name"] in wanted]
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(dir=gen.OUT) as tmp:
        workdir = Path(tmp)
        startup = measure_startup(manifest["modules"][gen.TINY], max(runs, 5), workdir)
        for entry in entries:
            n = big_runs if entry["bytes"] > big_mb * 1e6 else runs
            results.append(measure_module(entry, n, workdir, with_pb))
    return {"machine": machine_line(), "load_before": load0, "load_after": os.getloadavg(),
            "seconds": time.perf_counter() - t0, "startup": startup, "modules": results}


def measure_startup_only(runs: int) -> dict:
    """The start-up section alone (the quick modules are generated first if one is missing)."""
    manifest = gen.ensure(quick=True)
    with tempfile.TemporaryDirectory(dir=gen.OUT) as tmp:
        return {"machine": machine_line(), "startup": measure_startup(manifest["modules"][gen.TINY], runs, Path(tmp))}


# ------------------------------------------------------------------------------------------
# Report


def _x(a: float, b: float) -> str:
    return f"{a / b:.2f}x"


def _best(a: dict, key_a: str, b: dict, key_b: str) -> str:
    """The ratio of the two sides' fastest runs: on a host whose speed moves between
    processes, the run least slowed down is the best estimate of each side's own cost."""
    return _x(a.get(key_a + "__min", a[key_a]), b.get(key_b + "__min", b[key_b]))


def _spread(side: dict, key: str) -> float | None:
    if side.get("runs", 1) < 2:
        return None
    return (side[key + "__max"] - side[key + "__min"]) / side[key]


def _mb(kb: float) -> str:
    return f"{kb / 1e3:.0f}" if kb >= 0 else "-"


def main_table(results: list[dict]) -> str:
    rows = []
    for r in results:
        e, x, none, dflt = r["entry"], r["xla"], r["none"], r["default"]
        rows.append([
            e["name"], e["stage_label"].split(" (")[0], f"{e['bytes'] / 1e6:.1f}", f"{e['instructions']:,}",
            f"{e['computations']:,}", f"{x['pp_s']:.2f}", f"{none['wall_s']:.2f}", _x(none["wall_s"], x["pp_s"]),
            _x(none["cpu_s"], x["pp_cpu_s"]), _best(none, "cpu_s", x, "pp_cpu_s"), f"{dflt['wall_s']:.2f}",
            _x(dflt["wall_s"], x["pp_s"]), _x(dflt["cpu_s"], x["pp_cpu_s"]), _best(dflt, "cpu_s", x, "pp_cpu_s"),
            f"{1e6 * none['wall_s'] / e['instructions']:.1f}",
            _mb(x["rss_kb"]), _mb(none["rss_kb"]), _mb(dflt["rss_kb"]), str(none["runs"]),
        ])
    return table(rows, ["module", "class", "MB", "instructions", "comps", "XLA s", "ours s", "ratio", "CPU ratio",
                        "best", "default s", "ratio", "CPU ratio", "best", "µs/instr", "XLA RSS", "ours RSS",
                        "default RSS", "runs"])


def extra_table(results: list[dict]) -> str:
    rows = []
    for r in results:
        e, x, none, dflt, rep = r["entry"], r["xla"], r["none"], r["default"], r["report"]
        pb, free = r.get("pb"), r.get("unpriced")
        rows.append([
            e["name"], f"{rep['tool_parse_s']:.2f}", f"{rep['tool_passes_s']:.2f}", f"{rep['tool_print_s']:.2f}",
            f"{rep['wall_s'] - rep['tool_total_s']:.2f}", str(rep["folds"]),
            f"{free['cpu_s']:.2f}" if free else "-", _x(free["cpu_s"], x["pp_cpu_s"]) if free else "-",
            _best(free, "cpu_s", x, "pp_cpu_s") if free else "-",
            f"{rep['wall_s']:.2f}", _x(rep["wall_s"], dflt["wall_s"]), _best(rep, "cpu_s", dflt, "cpu_s"),
            f"{pb['wall_s']:.2f}" if pb else "-", _x(pb["wall_s"], none["wall_s"]) if pb else "-",
            _best(pb, "cpu_s", none, "cpu_s") if pb else "-",
            _mb(pb["rss_kb"]) if pb else "-", f"{1e6 * none['wall_s'] / e['lines']:.1f}",
            f"{1e3 * none['wall_s'] / e['computations']:.2f}",
        ])
    return table(rows, ["module", "parse s", "passes s", "print s", "other s", "folds", "unpriced CPU s",
                        "CPU ratio", "best", "--report s",
                        "vs default", "best", ".pb s", "vs text", "best", ".pb RSS", "µs/line", "ms/comp"])


def startup_table(s: dict) -> str:
    base = s["interpreter (python -c pass)"]
    rows = [[k, f"{1e3 * v['wall_s']:.0f}", f"{1e3 * (v['wall_s'] - base['wall_s']):.0f}", f"{1e3 * v['cpu_s']:.0f}",
             f"{1e3 * (v['cpu_s'] - base['cpu_s']):.0f}",
             f"{1e3 * (v['cpu_s__min'] - base['cpu_s__min']):.0f}" if "cpu_s__min" in v else "-", _mb(v["rss_kb"])]
            for k, v in s.items() if isinstance(v, dict)]
    return table(rows, ["start-up", "wall ms", "over interpreter", "CPU ms", "over interpreter", "min over min",
                        "RSS MB"])


def startup_report(res: dict) -> str:
    s = res["startup"]
    return "\n".join([res["machine"], startup_table(s) + f"   (median of {s['interpreter (python -c pass)']['runs']} "
                      f"runs; min over min: the fastest run's CPU less the interpreter's; module {s['module']})"])


def report(res: dict) -> str:
    results = res["modules"]
    spreads = [sp for r in results for side, key in ((r["xla"], "pp_s"), (r["none"], "wall_s"), (r["default"], "wall_s"))
               if (sp := _spread(side, key)) is not None]
    cpu_spreads = [sp for r in results for side, key in ((r["xla"], "pp_cpu_s"), (r["none"], "cpu_s"),
                                                         (r["default"], "cpu_s"))
                   if (sp := _spread(side, key)) is not None]
    identical = all(r["none"].get("identical", True) for r in results)
    unpriced_identical = all(r.get("unpriced", {}).get("identical", True) for r in results)
    lines = [
        res["machine"],
        f"load average {res['load_before'][0]:.2f} before, {res['load_after'][0]:.2f} after; "
        f"{res['seconds'] / 60:.0f} min",
        "",
        "XLA s = jaxlib parse+print in-process (wall); ours s = `hlo-dedup FILE --passes= -o OUT`, default s = "
        "`hlo-dedup FILE -o OUT`, each the whole process, start to exit (wall); ratio = ours / XLA; CPU ratio = "
        "the same with user+sys CPU seconds (robust to other load); best = the CPU ratio of each side's fastest "
        "run; µs/instr from ours s; RSS = peak MB",
        main_table(results),
        "",
        "parse/passes/print = the --report run's own timings (its `timings`); other = that run's wall - "
        "in-tool total (interpreter, imports, writing the report and summary, exit); unpriced = `hlo-dedup FILE "
        "-o OUT --price=none`, its CPU ratio to XLA's: the floor no cheaper price can go below; .pb = "
        "`hlo-dedup FILE.pb --passes= -o OUT` vs the text run; µs/line and ms/comp from ours s",
        extra_table(results),
        "",
        startup_table(res["startup"]) + f"   (median of {res['startup']['interpreter (python -c pass)']['runs']} runs; "
        f"module {res['startup']['module']})",
        "",
        f"noise: spread (max-min)/median over runs: wall median {statistics.median(spreads):.0%}, worst "
        f"{max(spreads):.0%}; CPU median {statistics.median(cpu_spreads):.0%}, worst {max(cpu_spreads):.0%} "
        f"({len(spreads)} cells with >1 run)" if spreads else "noise: single runs only",
        f"`--passes=` output byte-identical to the input: {identical}; unpriced output byte-identical to the "
        f"default's: {unpriced_identical}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the ~4 MB modules")
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement (median); default 3")
    ap.add_argument("--big-runs", type=int, default=1, help="runs for modules over --big-mb; default 1")
    ap.add_argument("--big-mb", type=float, default=100.0)
    ap.add_argument("--only", help="comma-separated module names (see real_generate.py --list)")
    ap.add_argument("--no-pb", action="store_true", help="skip the .pb input runs")
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    ap.add_argument("--from-json", type=Path, help="only re-print the report of a saved --json")
    ap.add_argument("--startup", action="store_true", help="only the start-up table (--runs runs, at least 9)")
    args = ap.parse_args(argv)
    if args.startup:
        return emit(args, lambda: measure_startup_only(max(args.runs, 9)), startup_report)
    return emit(args, lambda: measure(args.quick, args.runs, args.big_runs, args.big_mb, args.only,
                                      not args.no_pb), report)


if __name__ == "__main__":
    sys.exit(main())
