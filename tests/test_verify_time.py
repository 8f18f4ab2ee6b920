"""`verify` on modules that never end: a BEFORE that does not finish cannot be judged, and says
so within its timeout (60 s by default, not the 300 s it once waited); an AFTER that does not
finish where BEFORE does is a difference, found within a multiple of BEFORE's own time.

The tests that run XLA take the `xla_client` fixture: never skipped in CI.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from support import ENDING_WHILE, ENDLESS_WHILE

from hlo_dedup.cli import main, verify_main
from hlo_dedup.xla.watch import Limit


def _verify(*args: str | Path) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    status = verify_main([str(a) for a in args], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue(), time.monotonic() - started


@pytest.fixture
def modules(tmp_path: Path) -> tuple[Path, Path]:
    ending, endless = tmp_path / "ending.hlo", tmp_path / "endless.hlo"
    ending.write_text(ENDING_WHILE)
    endless.write_text(ENDLESS_WHILE)
    return ending, endless


@pytest.mark.usefixtures("xla_client")
def test_a_module_that_never_ends_cannot_be_judged_within_a_small_timeout(modules: tuple[Path, Path]) -> None:
    _, endless = modules
    status, out, err, seconds = _verify(endless, endless, "--timeout", "2")
    assert status == 2 and out == "" and seconds < 45  # the child's start and the compile are not counted
    assert err == (f"{endless} vs {endless}: cannot judge: the original module did not finish in 2 s (it may loop "
                   "forever), so there is nothing to compare with; raise --timeout to give it longer\n")


@pytest.mark.usefixtures("xla_client")
def test_a_module_that_never_ends_is_answered_well_before_300_s_by_default(modules: tuple[Path, Path]) -> None:
    _, endless = modules
    status, _, err, seconds = _verify(endless, endless, "--json")
    assert status == 2 and seconds < 150
    report = json.loads(err)
    assert report["status"] == "cannot_judge" and report["timed_out"] == "before"
    assert "did not finish in 60 s" in report["message"]


@pytest.mark.usefixtures("xla_client")
def test_a_rewrite_that_never_ends_where_the_original_does_is_a_difference(modules: tuple[Path, Path]) -> None:
    ending, endless = modules
    status, out, err, seconds = _verify(ending, endless, "--timeout", "2")
    assert status == 1 and err == "" and seconds < 60, err
    assert ("different: the rewritten module did not finish within 10 x the original's time (" in out
            and "s with seed 0, at least 2 s): it was stopped after" in out
            and out.endswith("s and may loop forever where the original ends\n"))
    status, out, _, _ = _verify(endless, ending, "--timeout", "2")  # the other way round: no reference
    assert status == 2


@pytest.mark.usefixtures("xla_client")
def test_verify_after_the_passes_takes_the_timeout(modules: tuple[Path, Path], tmp_path: Path) -> None:
    _, endless = modules
    out, err = io.StringIO(), io.StringIO()
    output = tmp_path / "out.hlo"
    status = main([str(endless), "-o", str(output), "--verify", "--timeout", "2"], stdin=io.BytesIO(), stdout=out,
                  stderr=err)
    assert status == 2 and not output.exists()
    assert "the original module did not finish in 2 s" in err.getvalue()
    assert err.getvalue().endswith("cannot judge, its input is no reference on XLA:CPU; nothing written\n")


def test_the_timeout_is_a_positive_number_of_seconds_and_needs_verify(modules: tuple[Path, Path]) -> None:
    ending, _ = modules
    for bad in ("0", "-1", "nan", "soon"):
        status, _, err, _ = _verify(ending, ending, "--timeout", bad)
        assert status == 2 and "--timeout: expected a positive number of seconds" in err
    err = io.StringIO()
    assert main([str(ending), "--timeout", "5"], stdin=io.BytesIO(), stdout=io.StringIO(), stderr=err) == 2
    assert "--timeout say how --verify runs the modules: add --verify" in err.getvalue()


def test_a_derived_limit_wants_both_clocks_past_it() -> None:
    """A busy machine slows the wall clock of a correct rewrite, not the CPU time it needs."""
    limit = Limit(10.0, 10.0)
    assert not limit.exceeded(100.0, 2.0) and not limit.exceeded(5.0, 50.0)
    assert limit.exceeded(10.0, 10.0) and limit.exceeded(10.0, None)  # no CPU clock: the wall clock decides
    assert Limit(3.0).exceeded(3.0, 0.0) and not Limit(3.0).exceeded(2.9, 100.0)
