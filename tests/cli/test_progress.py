"""hlo_dedup.progress: when a live display appears, and that it never breaks a run."""

from __future__ import annotations

import io
import sys

import pytest

from hlo_dedup import progress


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_outside_ci() -> None:
    assert progress.progress_wanted(FakeTty(), {})
    assert progress.progress_wanted(FakeTty(), {"CI": "false"})
    assert not progress.progress_wanted(FakeTty(), {"CI": "true"})
    assert not progress.progress_wanted(FakeTty(), {"CI": "1"})
    assert not progress.progress_wanted(FakeTty(), {"TERM": "dumb"})
    assert not progress.progress_wanted(io.StringIO(), {})
    assert isinstance(progress.make_progress(io.StringIO()), progress.NullProgress)
    assert not isinstance(progress.make_progress(io.StringIO()), progress.RichProgress)


def test_progress_falls_back_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich -> ImportError
    shown = progress.make_progress(FakeTty(), enabled=True)
    assert type(shown) is progress.NullProgress
    with shown:
        shown.phase("parse")
        shown.advance("x")


def test_rich_progress_draws_after_the_delay_and_erases() -> None:
    pytest.importorskip("rich")
    import time

    stream = FakeTty()
    shown = progress.RichProgress(stream, delay=0.0)
    with shown:
        shown.phase("parse m.hlo")
        shown.phase("passes", total=2)
        shown.advance("m: dce")
        shown.advance()
        time.sleep(0.3)
    assert "passes" in stream.getvalue()

    quiet = FakeTty()
    short = progress.RichProgress(quiet, delay=5.0)
    with short:
        short.phase("parse")
    assert quiet.getvalue() == ""
