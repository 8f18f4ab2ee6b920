"""Where the command's time goes on real modules: cProfile per phase, and the imports.

    python benchmarks/real_profile.py --quick                  # the ~4 MB modules
    python benchmarks/real_profile.py --only opt-shardy-L480 --top 20
    python -m pstats benchmarks/out/real/prof/opt-shardy-L48/parse.prof

Each module runs `hlo-dedup FILE -o OUT --report R.json` (the default pipeline) in a fresh
process through `hlo_dedup.cli.main`, with one profiler per phase, switched on around the
functions `hlo_dedup.run` calls for it: read (`read_source`), parse (`decode_input`, `modules_from_text`),
passes (`Pipeline.run`), print (`render_chunks`: proto formats; text is printed while it
is written), write (`write_output`), report
(`render_json`, `render_summary`). For each phase it lists the functions with the
most own time: calls, own and cumulative seconds, µs per call, and calls per computation and
per instruction (what a cost scales with). cProfile slows Python-heavy code about 2x: read the shares, not the seconds. The
imports are `python -X importtime -c "import hlo_dedup.cli"`, largest first. Every process
reads compiled modules from the bytecode cache `real_modules.py` uses.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_generate as gen  # noqa: E402
from hotspots import _short  # noqa: E402
from real_modules import child_env  # noqa: E402

PROF_DIR = gen.OUT / "prof"
#: phase -> (module, attribute) of what the command calls for it, looked up at run time.
HOOKS = {
    "read": [("hlo_dedup.run", "read_source")],
    "parse": [("hlo_dedup.run", "decode_input"), ("hlo_dedup.run", "modules_from_text")],
    "passes": [("hlo_dedup.passes.pipeline", "Pipeline.run")],
    "print": [("hlo_dedup.run", "render_chunks")],
    "write": [("hlo_dedup.run", "write_output")],
    "report": [("hlo_dedup.run", "render_json"), ("hlo_dedup.run", "render_summary")],
}


def child(path: Path, out_dir: Path) -> dict:
    """In the profiled process: hook the phases, run the command once, save one .prof per phase."""
    import cProfile
    import functools
    import importlib

    t0 = time.perf_counter()
    cli = importlib.import_module("hlo_dedup.cli")
    imports = time.perf_counter() - t0
    profiles = {phase: cProfile.Profile() for phase in HOOKS}
    seconds = dict.fromkeys(HOOKS, 0.0)
    missing = []

    def hooked(phase: str, fn):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            profiles[phase].enable()
            try:
                return fn(*args, **kwargs)
            finally:
                profiles[phase].disable()
                seconds[phase] += time.perf_counter() - start
        return wrapper

    for phase, targets in HOOKS.items():
        for module_name, attr in targets:
            owner = importlib.import_module(module_name)
            *outer, name = attr.split(".")
            for part in outer:
                owner = getattr(owner, part)
            if not hasattr(owner, name):
                missing.append(f"{module_name}.{attr}")
                continue
            setattr(owner, name, hooked(phase, getattr(owner, name)))
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        status = cli.main([str(path), "-o", str(out_dir / "out.hlo"), "--report", str(out_dir / "report.json")],
                          stderr=quiet)
    total = time.perf_counter() - t0
    (out_dir / "out.hlo").unlink(missing_ok=True)
    for phase, prof in profiles.items():
        prof.dump_stats(str(out_dir / f"{phase}.prof"))
    return {"status": status, "imports_s": imports, "main_s": total, "phases_s": seconds, "missing": missing}


def phase_report(prof: Path, entry: dict, top: int) -> list[str]:
    """The phase's functions by own time, with their calls per computation and per instruction."""
    st = pstats.Stats(str(prof))
    total = st.total_tt  # type: ignore[attr-defined]
    rows = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)  # type: ignore[attr-defined]
    out = [f"    {'own s':>7} {'own%':>5} {'cum s':>7} {'calls':>9} {'/comp':>6} {'/instr':>6} {'µs/call':>8}  function"]
    for func, (_cc, calls, own, cum, _callers) in rows[:top]:
        if own < 0.005 * total:
            break
        out.append(f"    {own:7.3f} {100 * own / total:5.1f} {cum:7.3f} {calls:9d} "
                   f"{calls / entry['computations']:6.2f} {calls / entry['instructions']:6.2f} "
                   f"{1e6 * own / calls:8.2f}  {_short(func)}")
    return out


def profile_module(entry: dict, top: int) -> list[str]:
    out_dir = PROF_DIR / entry["name"]
    proc = subprocess.run([sys.executable, __file__, "--child", str(gen.OUT / entry["file"]), str(out_dir)],
                          capture_output=True, text=True, env=child_env())
    if proc.returncode != 0:
        raise RuntimeError(f"profiling {entry['name']} failed:\n{proc.stderr[-4000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    n = entry["instructions"]
    lines = [f"== {entry['name']}: {gen.describe(entry)}; {entry['bytes'] / 1e6:.1f} MB, {n:,} instructions, "
             f"{entry['computations']:,} computations, {entry['lines']:,} lines",
             f"   under cProfile: imports {res['imports_s']:.2f}s (unprofiled), main {res['main_s']:.2f}s; "
             + ", ".join(f"{p} {s:.2f}s ({1e6 * s / n:.1f} µs/instr)" for p, s in res["phases_s"].items())]
    if res["missing"]:
        lines.append(f"   not hooked (renamed?): {', '.join(res['missing'])}")
    for phase, seconds in res["phases_s"].items():
        if seconds >= 0.05 * res["main_s"]:
            lines.append(f"  [{phase}] {seconds:.2f}s")
            lines += phase_report(out_dir / f"{phase}.prof", entry, top)
    return lines


def imports_report(top: int) -> list[str]:
    """`-X importtime` of what the command imports, largest cumulative first."""
    code = [sys.executable, "-X", "importtime", "-c", "import hlo_dedup.cli"]
    subprocess.run(code, capture_output=True, check=True, env=child_env())  # fills the bytecode cache
    proc = subprocess.run(code, capture_output=True, text=True, check=True, env=child_env())
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cum, name = line.split(":", 1)[1].split("|")
        rows.append((int(cum), int(own), name.rstrip()))
    total = next(cum for cum, _own, name in rows if name.strip() == "hlo_dedup.cli")
    out = [f"== imports: `import hlo_dedup.cli` {total / 1e3:.0f} ms cumulative under -X importtime",
           f"    {'cum ms':>7} {'own ms':>7}  module"]
    out += [f"    {cum / 1e3:7.1f} {own / 1e3:7.1f}  {name}" for cum, own, name in sorted(rows, reverse=True)[:top]]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the ~4 MB modules")
    ap.add_argument("--only", help="comma-separated module names (see real_generate.py --list)")
    ap.add_argument("--top", type=int, default=12, help="functions listed per phase")
    ap.add_argument("--child", nargs=2, metavar=("FILE", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(Path(args.child[0]), Path(args.child[1]))))
        return 0
    wanted = set(args.only.split(",")) if args.only else None
    entries = gen.modules(gen.ensure(args.quick, only=wanted), args.quick)
    if wanted is not None:
        entries = [e for e in entries if e["name"] in wanted]
    print("\n".join(imports_report(args.top)), flush=True)
    for entry in entries:
        print("\n" + "\n".join(profile_module(entry, args.top)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
