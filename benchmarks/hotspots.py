"""Profile our side with cProfile, per phase (parse, passes, print), and list the hot spots.

    python benchmarks/hotspots.py                         # 100k instructions, top 20
    python benchmarks/hotspots.py --instructions 1000000 --top 30 --sort tottime

Writes <out>/<phase>.prof (default benchmarks/out/prof_<N>/) for `python -m pstats` or
snakeviz, and prints for each phase the functions with the largest cumulative (or own)
time as a percentage of that phase. cProfile roughly doubles Python-heavy run times;
the percentages, not the seconds, are the useful figures.
"""

from __future__ import annotations

import argparse
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HERE, module_file, run_child  # noqa: E402

PHASES = ("parse", "print_unchanged", "preprocess", "allgather", "print", "dce")


def _short(func: tuple[str, int, str]) -> str:
    file, line, name = func
    if file == "~":
        return name
    p = Path(file)
    parts = p.parts
    if "hlo_dedup" in parts:
        file = "/".join(parts[parts.index("hlo_dedup") + 1 :])
    else:
        file = p.name
    return f"{file}:{line}({name})"


def top(prof: Path, n: int, sort: str) -> list[str]:
    st = pstats.Stats(str(prof))
    total = st.total_tt  # type: ignore[attr-defined]
    stats = st.stats  # type: ignore[attr-defined]
    key = 3 if sort == "cumulative" else 2  # (cc, nc, tt, ct, callers)
    rows = sorted(stats.items(), key=lambda kv: kv[1][key], reverse=True)
    out = [f"  {'cum%':>6} {'own%':>6} {'calls':>10}  function   (phase total {total:.2f}s under cProfile)"]
    for func, (cc, nc, tt, ct, _callers) in rows[:n]:
        out.append(f"  {100 * ct / total:6.1f} {100 * tt / total:6.1f} {nc:10d}  {_short(func)}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", type=int, default=100_000)
    ap.add_argument("--module", help="profile this HLO file instead of a generated one")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--sort", choices=("cumulative", "tottime"), default="cumulative")
    ap.add_argument("--out", type=Path, help="directory for the .prof files")
    ap.add_argument("--gc-on", action="store_true", help="profile with the cyclic GC running")
    args = ap.parse_args(argv)
    path = module_file(args.instructions, args.module)
    out = args.out or HERE / "out" / f"prof_{args.instructions}"
    extra = ["--profile", str(out)] + (["--gc-on"] if args.gc_on else [])
    res = run_child("pipeline", path, *extra)
    print(f"profiled {path.name} ({res['instructions']:,} instructions); .prof files in {out}")
    for phase in PHASES:
        prof = out / f"{phase}.prof"
        if not prof.exists():
            continue
        print(f"\n[{phase}] {res[phase + '_s']:.2f}s wall under cProfile")
        print("\n".join(top(prof, args.top, args.sort)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
