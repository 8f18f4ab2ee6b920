#!/usr/bin/env python3
"""Record what the command writes for every module we have, to prove a refactor changed nothing.

    python scripts/output_snapshot.py OUT_DIR            # run, write OUT_DIR/<config>/..., manifest
    python scripts/output_snapshot.py OUT_DIR --corpus DIR   # the corpus is elsewhere
    python scripts/output_snapshot.py OUT_DIR --also benchmarks/out/real/*-L48.*   # real modules too
    python scripts/output_snapshot.py --compare A B      # exit 1 and list the differences

For each input (every corpus file under ../shared/corpus/xla-hlo beside the checkout, or
--corpus DIR, every `.hlo` under tests/data and examples/, and each --also file) and each
configuration (the default pipeline, `--passes=`, `--strict`), the command runs in-process as `hlo-dedup INPUT --split-input-file -o OUT
--report REPORT.json --dot FOLDS.dot --html PAGE.html`. The snapshot keeps the exit status,
the output bytes, the JSON report, the picture, the page and the stderr summary, with every
timing removed (they are the only thing that may change between two runs). `manifest.tsv` lists one SHA-256 per (configuration, input, kind).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "xla-hlo"
CONFIGS: dict[str, list[str]] = {
    "default": [],
    "no-passes": ["--passes="],
    "strict": ["--strict"],
}
_SECONDS = r"\d+(?:\.\d+)? (?:µs|ms|s)"
_DURATION = re.compile(rf"\s*\({_SECONDS}(?:, of which the memory price {_SECONDS}(?:: --price=none skips it)?)?\)")
_TIMING_KEYS = frozenset({"timings", "seconds", "wall_seconds", "price_seconds"})


def inputs(corpus: Path, also: list[Path]) -> list[Path]:
    found = sorted(corpus.glob("*.hlo")) if corpus.is_dir() else []
    for folder in ("tests/data", "examples"):
        found += sorted((REPO / folder).rglob("*.hlo"))
    return found + [path.absolute() for path in also]  # not resolved: the checkout may link to them


def _without_timings(value):  # noqa: ANN001, ANN202 - JSON in, JSON out
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in _TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def normalise_summary(text: str) -> str:
    lines = [line for line in text.splitlines() if not line.startswith("time: ")]
    return "\n".join(_DURATION.sub("", line) for line in lines) + "\n"


def run_one(source: Path, flags: list[str], work: Path) -> dict[str, bytes]:
    from hlo_dedup.cli import main

    output, report, dot, page = work / "out.hlo", work / "report.json", work / "folds.dot", work / "page.html"
    for stale in (output, report, dot, page):
        stale.unlink(missing_ok=True)
    stdout, stderr = io.StringIO(), io.StringIO()
    status = main([os.path.relpath(source), "--split-input-file", "-o", str(output), "--report", str(report),
                   "--dot", str(dot), "--html", str(page), *flags],
                  stdin=io.StringIO(), stdout=stdout, stderr=stderr)
    record = {
        "status": f"{status}\n".encode(),
        "stderr": normalise_summary(stderr.getvalue().replace(str(work), "WORK")).encode(),
        "output": output.read_bytes() if output.exists() else b"",
        "report": b"",
        "dot": dot.read_bytes() if dot.exists() else b"",
        "page": page.read_bytes().replace(str(work).encode(), b"WORK") if page.exists() else b"",
    }
    if report.exists():
        data = _without_timings(json.loads(report.read_text()))
        record["report"] = (json.dumps(data, indent=1, sort_keys=True).replace(str(work), "WORK") + "\n").encode()
    return record


def snapshot(out_dir: Path, corpus: Path, also: list[Path]) -> None:
    out_dir, corpus = out_dir.resolve(), corpus.resolve()
    os.chdir(REPO)  # inputs are named relative to the checkout, so two checkouts compare
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    manifest: list[str] = []
    files = inputs(corpus, also)
    for config, flags in CONFIGS.items():
        for source in files:
            rel = source.relative_to(corpus) if source.is_relative_to(corpus) else source.relative_to(REPO)
            record = run_one(source, flags, work)
            target = out_dir / config / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            for kind, data in record.items():
                (target.parent / f"{target.name}.{kind}").write_bytes(data)
                manifest.append(f"{config}\t{rel}\t{kind}\t{hashlib.sha256(data).hexdigest()}")
        print(f"{config}: {len(files)} inputs ({sum(f.is_relative_to(corpus) for f in files)} from the corpus)", file=sys.stderr)
    (out_dir / "manifest.tsv").write_text("\n".join(manifest) + "\n")


def compare(a: Path, b: Path) -> int:
    def load(path: Path) -> dict[tuple[str, str, str], str]:
        rows = (line.split("\t") for line in (path / "manifest.tsv").read_text().splitlines())
        return {(c, r, k): h for c, r, k, h in rows}

    left, right = load(a), load(b)
    differing = sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))
    for config, rel, kind in differing:
        print(f"differs: {config} {rel} {kind}")
    print(f"{len(left)} entries, {len(differing)} differ")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, metavar="DIR")
    parser.add_argument("--compare", action="store_true", help="compare two snapshot directories")
    parser.add_argument("--corpus", type=Path, default=CORPUS, metavar="DIR",
                        help="the XLA corpus folder (default: ../shared/corpus/xla-hlo beside the checkout)")
    parser.add_argument("--also", type=Path, nargs="+", default=[], metavar="FILE",
                        help="more inputs inside the checkout (the real benchmark modules, text or .pb: "
                             "thousands of folds, which the corpus and test modules do not have)")
    args = parser.parse_args()
    if args.compare:
        if len(args.paths) != 2:
            parser.error("--compare takes two directories")
        return compare(*args.paths)
    if len(args.paths) != 1:
        parser.error("give one output directory")
    snapshot(args.paths[0], args.corpus, args.also)
    return 0


if __name__ == "__main__":
    sys.exit(main())
