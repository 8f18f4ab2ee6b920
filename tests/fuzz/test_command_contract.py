"""The command's contract on fuzz cases (the long campaign: `python scripts/fuzz.py --cases 10000`).

Deterministic: the same seed gives the same cases. In CI 300 cases with crafted inputs at a
fifth of their campaign size; elsewhere 60. Proto cases are left out (they need XLA, and
reading protos is the io layer's business; the campaign has them). The judge itself is
tested on outcomes made up to break each rule.
"""

from __future__ import annotations

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
