"""Shared helpers: machine facts, module files, child processes, tables."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = HERE / "worker.py"
sys.path.insert(0, str(HERE))

from generate import default_path, generate  # noqa: E402


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_line() -> str:
    try:
        import jaxlib

        jl = jaxlib.__version__
    except ImportError:
        jl = "not installed"
    try:
        from importlib.metadata import version

        ours = version("hlo-dedup")
    except Exception:
        ours = "?"
    return (
        f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs) | Python {platform.python_version()} "
        f"| jaxlib {jl} | hlo-dedup {ours}"
    )


def module_file(instructions: int, path: str | None = None) -> Path:
    """The benchmark module for `instructions`, generated under benchmarks/out/ if missing."""
    if path:
        return Path(path)
    p = default_path(instructions)
    if not p.exists():
        print(f"generating {p.name} ...", file=sys.stderr, flush=True)
        generate(instructions, p)
    return p


def run_child(mode: str, path: Path, *extra: str, timeout: float = 3600) -> dict:
    """Run one measurement in a fresh interpreter; returns the JSON it prints last."""
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    proc = subprocess.run(
        [sys.executable, str(WORKER), mode, str(path), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def median_runs(mode: str, path: Path, runs: int, *extra: str) -> dict:
    """Median of each numeric field over `runs` fresh children (other fields from the first)."""
    results = [run_child(mode, path, *extra) for _ in range(runs)]
    out = dict(results[0])
    for key, value in results[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            vals = [r[key] for r in results]
            out[key] = statistics.median(vals)
            if isinstance(value, float) and len(vals) > 1:
                out[key + "__min"] = min(vals)
                out[key + "__max"] = max(vals)
    out["runs"] = runs
    return out


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    def fmt(r: list[str]) -> str:
        return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
    line = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), line, *(fmt(r) for r in rows)])


def mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.0f}"


def emit(args, measure, report) -> int:  # type: ignore[no-untyped-def]
    """The scripts' common ending: `--from-json` re-prints a saved result; otherwise
    measure, print the report and, with `--json`, save the raw results."""
    if args.from_json:
        print(report(json.loads(args.from_json.read_text())))
        return 0
    results = measure()
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0
