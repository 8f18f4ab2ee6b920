"""Progress on a terminal for long runs: one line per phase (parse, each pass, print).

Shown only when standard error is a terminal, `CI` is unset, `TERM` is not `dumb`, and `rich`
is installed (`pip install 'hlo-dedup[progress]'`); otherwise every call is a no-op, so pipes
and CI logs never get control sequences. Short runs stay silent too: the display appears only
once a run has lasted `DELAY` seconds, and it is transient (erased when the run ends).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

DELAY = 0.5  # seconds before the display appears


def progress_wanted(stream: TextIO | None = None, environ: dict[str, str] | None = None) -> bool:
    """True when a live display belongs on `stream` (a terminal, and not a CI log)."""
    stream = sys.stderr if stream is None else stream
    env = os.environ if environ is None else environ
    if env.get("CI", "").lower() not in ("", "0", "false", "no"):
        return False
    if env.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class NullProgress:
    """The no-op display."""

    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def phase(self, description: str, total: int | None = None) -> None:
        """Start a new phase (closing the previous one)."""

    def advance(self, description: str | None = None) -> None:
        """One step of the current phase done; optionally rename what comes next."""


class RichProgress(NullProgress):
    """A transient rich display, started after DELAY seconds."""

    def __init__(self, stream: TextIO, delay: float = DELAY) -> None:
        # Imported here, as rich is: a run without a display (a pipe, CI) never needs them.
        import threading

        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task: Any = None
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._timer = threading.Timer(delay, self._start)
        self._timer.daemon = True

    def _start(self) -> None:
        with self._lock:
            if not self._closed and not self._started:
                self._progress.start()
                self._started = True

    def __enter__(self) -> RichProgress:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._started:
                self._progress.stop()

    def phase(self, description: str, total: int | None = None) -> None:
        with self._lock:
            if self._task is not None:
                self._progress.update(self._task, visible=False)
            self._task = self._progress.add_task(description, total=total)

    def advance(self, description: str | None = None) -> None:
        with self._lock:
            if self._task is None:
                return
            if description is not None:
                self._progress.update(self._task, advance=1, description=description)
            else:
                self._progress.advance(self._task)


def make_progress(stream: TextIO | None = None, *, enabled: bool | None = None) -> NullProgress:
    """A RichProgress when wanted and rich is installed, else a NullProgress."""
    stream = sys.stderr if stream is None else stream
    if enabled is None:
        enabled = progress_wanted(stream)
    if not enabled:
        return NullProgress()
    try:
        return RichProgress(stream)
    except ImportError:
        return NullProgress()
