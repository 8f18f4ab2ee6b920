"""One measurement in a fresh process (so peak RSS belongs to one side only).

    python benchmarks/worker.py xla FILE
    python benchmarks/worker.py ours FILE [--gc-on] [--profile DIR]
    python benchmarks/worker.py pipeline FILE [--gc-on] [--profile DIR]

Prints one JSON line: seconds per phase (wall and CPU), peak RSS (VmHWM) and the RSS
before parsing (after imports and reading the file), in kB.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Phases:
    """Times named phases (wall and CPU) and optionally profiles each into DIR/<name>.prof."""

    def __init__(self, profile_dir: str | None) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.profile_dir = Path(profile_dir) if profile_dir else None

    def run(self, name: str, fn, *args):  # type: ignore[no-untyped-def]
        prof = None
        if self.profile_dir is not None:
            import cProfile

            prof = cProfile.Profile()
        w0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        try:
            return fn(*args)
        finally:
            if prof is not None:
                prof.disable()
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - w0
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c0
            if prof is not None:
                assert self.profile_dir is not None
                self.profile_dir.mkdir(parents=True, exist_ok=True)
                prof.dump_stats(str(self.profile_dir / f"{name}.prof"))

    def result(self) -> dict:
        out: dict = {}
        for k, v in self.wall.items():
            out[f"{k}_s"] = v
            out[f"{k}_cpu_s"] = self.cpu[k]
        return out


def run_xla(path: Path, args: argparse.Namespace) -> dict:
    from jax._src.lib import xla_client as xc

    text = path.read_text()
    base = _status_kb("VmRSS")
    ph = Phases(None)
    module = ph.run("parse", xc.hlo.hlo_module_from_text, text)
    printed = ph.run("print", module.to_string)
    identical = printed == text
    n = sum(len(c.instructions()) for c in module.computations()) if args.count else -1
    del printed
    return {**ph.result(), "bytes": len(text), "rss_base_kb": base, "rss_peak_kb": _status_kb("VmHWM"),
            "xla_print_identical": identical, "instructions": n}


def _parse_and_print(path: Path, args: argparse.Namespace, print_phase: str):  # type: ignore[no-untyped-def]
    """Parse as the command does, then print the unchanged module (asserted byte-identical)."""
    import hlo_dedup
    from hlo_dedup.ir.printer import format_module

    text = path.read_text()
    base = _status_kb("VmRSS")
    if not args.gc_on:
        gc.disable()  # as the hlo-dedup command does for its run
    ph = Phases(args.profile)
    module = ph.run("parse", hlo_dedup.parse_module, text, str(path))
    printed = ph.run(print_phase, format_module, module)
    assert printed == text, "our print of the unchanged module is not byte-identical to the input"
    return text, base, ph, module


def run_ours(path: Path, args: argparse.Namespace) -> dict:
    text, base, ph, module = _parse_and_print(path, args, "print")
    return {**ph.result(), "bytes": len(text), "rss_base_kb": base, "rss_peak_kb": _status_kb("VmHWM"),
            "instructions": module.instruction_count(), "print_identical": True}


def run_pipeline(path: Path, args: argparse.Namespace) -> dict:
    from hlo_dedup.passes import all_gather_duplicate_remover as agmod
    from hlo_dedup.passes import create_pass
    from hlo_dedup.ir.printer import format_module

    text, base, ph, module = _parse_and_print(path, args, "print_unchanged")
    before = module.instruction_count()

    # Time the HloDCE the all-gather pass runs inside (instrumentation only).
    inner = {"s": 0.0, "cpu": 0.0}
    real_dce = agmod.run_dce

    def timed_dce(m, transaction=None):  # type: ignore[no-untyped-def]
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return real_dce(m, transaction)
        finally:
            inner["s"] += time.perf_counter() - t0
            inner["cpu"] += time.process_time() - c0

    agmod.run_dce = timed_dce
    pre = create_pass("neuron-preprocess-kernel-duplicate-remover")
    ag = create_pass("neuron_all_gather_duplicate_remover")
    r1 = ph.run("preprocess", pre.run_with_result, module)
    r2 = ph.run("allgather", ag.run_with_result, module)
    agmod.run_dce = real_dce
    after = module.instruction_count()
    printed = ph.run("print", format_module, module)
    out_bytes = len(printed)
    del printed
    dce = create_pass("dce")
    r3 = ph.run("dce", dce.run_with_result, module)
    res = ph.result()
    res["allgather_dce_s"] = inner["s"]
    res["allgather_dce_cpu_s"] = inner["cpu"]
    return {**res, "bytes": len(text), "out_bytes": out_bytes, "rss_base_kb": base,
            "rss_peak_kb": _status_kb("VmHWM"), "instructions": before, "instructions_after": after,
            "preprocess_folds": len(r1.folds), "allgather_folds": len(r2.folds),
            "hazards": len(r2.hazards), "dce_changed": r3.changed}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("xla", "ours", "pipeline"))
    ap.add_argument("file", type=Path)
    ap.add_argument("--gc-on", action="store_true",
                    help="keep the cyclic GC running (what-if; the CLI pauses it for its run)")
    ap.add_argument("--profile", help="write a cProfile .prof per phase into this directory")
    ap.add_argument("--count", action="store_true", help="xla: count instructions")
    args = ap.parse_args()
    fn = {"xla": run_xla, "ours": run_ours, "pipeline": run_pipeline}[args.mode]
    result = fn(args.file, args)
    result["mode"] = args.mode
    print(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
