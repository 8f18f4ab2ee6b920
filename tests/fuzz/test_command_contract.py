"""The command's contract on fuzz cases (the long campaign: `python scripts/fuzz.py --cases 10000`).

Deterministic: the same seed gives the same cases. In CI 300 cases with crafted inputs at a
fifth of their campaign size; elsewhere 60. Proto cases are left out (they need XLA, and
reading protos is the io layer's business; the campaign has them). The judge itself is
tested on outcomes made up to break each rule.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import support
from fuzz_inputs import GENERATORS, Case, make_case
from fuzz_runner import Campaign, Limits, Result, judge, run_campaign, table

CASES = 300 if support.FULL_CORPUS else 60


def test_fuzz_cases_hold_the_contract() -> None:
    support.corpus_files()  # the corpus is part of the seeds: absent, skip (fail in CI)
    results = run_campaign(Campaign(seed=20261130, cases=CASES, scale=0.2, jobs=2, protos=False))
    assert len(results) == CASES
    report = table(results)
    assert not [r for r in results if r.violation], report
    outcomes = {r.outcome for r in results}
    assert {"ok", "error"} <= outcomes, report  # both sides of the contract were exercised


def test_cases_are_deterministic_and_cover_every_generator() -> None:
    assert make_case(5, 17).data == make_case(5, 17).data
    families = {make_case(1, i, 0.01, protos=False).family for i in range(600)}
    assert {f"crafted:{name}" for name in GENERATORS} <= families
    assert "mutation" in families


def _judged(status: int | None, stderr: str, *, text_input: bool = True, signal: str | None = None,
            seconds: float = 0.1, peak_mb: float = 10, output: str = "") -> Result:
    case = Case(0, "t", "", b"x" * 1000, text_input=text_input)
    result = Result(0, "t", "", [], 1000, status=status, signal=signal, stderr=stderr, seconds=seconds,
                    peak_mb=peak_mb, extra={"output": output})
    judge(result, case, Limits(timeout=10, memory_mb=100))
    return result


@pytest.mark.parametrize(
    ("kwargs", "outcome"),
    [
        ({"status": 0, "stderr": "total: 0 of 1 module changed\n"}, "ok"),
        ({"status": 2, "stderr": "m.hlo:3:7: error: expected ')'\n"}, "error"),
        ({"status": 2, "stderr": "m.pb: error: not a binary HloSnapshot\n", "text_input": False}, "io-error"),
        ({"status": 1, "stderr": "m.hlo: error: pass dce failed on module m: RET_CHECK failure (x.cc:1) c\n"}, "ret-check"),
        ({"status": 2, "stderr": "m.hlo: error: bad shape\n"}, "unlocated"),
        ({"status": 2, "stderr": "m.hlo:0:0: error: bad shape\n"}, "unlocated"),
        ({"status": 2, "stderr": "m.hlo:1:1: error: a\nm.hlo:2:1: error: b\n"}, "not-one-line"),
        ({"status": 1, "stderr": "hlo-dedup: internal error: KeyError: 'x'\n"}, "internal-error"),
        ({"status": 1, "stderr": "hlo-dedup: internal error: MemoryError: \n"}, "memory"),
        ({"status": 1, "stderr": "m.hlo: error: pass x failed on module m: boom\n"}, "exit-1"),
        ({"status": 2, "stderr": "Traceback (most recent call last):\n  ...\n"}, "traceback"),
        ({"status": None, "stderr": ""}, "timeout"),
        ({"status": 0, "stderr": "", "seconds": 11.0}, "timeout"),
        ({"status": 0, "stderr": "", "peak_mb": 500.0}, "memory"),
        ({"status": None, "stderr": "", "signal": "SIGSEGV"}, "signal"),
        ({"status": 0, "stderr": "", "output": "reread: the output does not read back"}, "reread"),
        ({"status": 0, "stderr": "", "output": "roundtrip: --passes= did not write the input back"}, "roundtrip"),
        ({"status": 3, "stderr": "?\n"}, "exit-3"),
    ],
)
def test_the_judge_applies_each_rule(kwargs: dict, outcome: str) -> None:
    result = _judged(**kwargs)
    assert result.outcome == outcome
    assert result.violation == (outcome not in ("ok", "error", "io-error", "ret-check"))


def test_a_directory_of_fuzz_cases_is_scanned_and_run_within_the_contract(tmp_path: Path) -> None:
    # Directory discovery reads each file's head (`sniff`) before any parse; hostile heads
    # (blank space, comments, token soup, cut-off headers) must not stall it. Each case is
    # a `.txt`, whose content decides, and the whole run has a deadline.
    tree = tmp_path / "tree"
    tree.mkdir()
    for index in range(40):
        case = make_case(20261203, index, scale=0.05, protos=False)
        (tree / f"case{index:02d}.txt").write_bytes(case.data[:300] if index % 4 == 0 else case.data)
    proc = subprocess.run([sys.executable, "-m", "hlo_dedup", str(tree), "--output-dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1, 2), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    # Every file was judged: run (each failure one located line) or skipped by its head.
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert all(re.match(rf"{re.escape(str(tree))}/case\d\d\.txt:\d+:\d+: error: ", e) for e in errors), errors
    counts = re.search(r"^files: \d+ ok, (\d+) failed \(of (\d+)\), (\d+) skipped", proc.stderr, re.M)
    assert counts and int(counts[2]) + int(counts[3]) == 40 and int(counts[1]) == len(errors), proc.stderr[-2000:]
