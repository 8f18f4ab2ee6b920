"""The `run` child of `oracle.run_modules`, watched phase by phase.

A module whose `while` never ends runs until it is stopped, and a compile may take far longer
than the run it prepares. So the child says when each job has compiled (`compiled I`) and when
its reply is written (`done I`), one line each on a pipe, and the parent bounds each phase on
its own: the start of the child and a job's compile by `compile_seconds`, a job's execution
(its inputs, the run and its outputs) by that job's :class:`Limit`. A job past its limit is
stopped with the child and answered by :class:`RunTimeout`, which says which phase it was in
and how long it had run; the jobs after it are not run (the caller gives them a fresh child).

A limit may also require CPU time: a machine busy with other work slows the wall clock of a
run but not the processor time it needs, so a limit derived from another run's time can ask
for both to be exceeded before it calls a run endless. The child's CPU time is read from
/proc; where there is none, only the wall clock counts.
"""

from __future__ import annotations

import os
import pickle
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hlo_dedup.xla import XlaError

__all__ = ["Limit", "RunTimeout", "run_watched"]

#: How often the parent looks at a running job's clocks when it waits on CPU time too.
_POLL_SECONDS = 0.2
#: The longest one wait on the child's pipe (select's timeout has a ceiling; a limit may be inf).
_LONGEST_WAIT = 3600.0


@dataclass(frozen=True)
class Limit:
    """How long one job's execution may run: `seconds` of wall clock and, when `cpu_seconds`
    is given, that much CPU time too (both must be exceeded before the job is stopped)."""

    seconds: float
    cpu_seconds: float | None = None

    def exceeded(self, wall: float, cpu: float | None) -> bool:
        if wall < self.seconds:
            return False
        return self.cpu_seconds is None or cpu is None or cpu >= self.cpu_seconds


class RunTimeout(XlaError):
    """A job stopped in `phase` ('compile': the child's start and the compile, or 'execution')
    after `seconds` of wall clock (`cpu_seconds` of CPU time where known)."""

    def __init__(self, phase: Literal["compile", "execution"], seconds: float, cpu_seconds: float | None,
                 limit: Limit) -> None:
        self.phase, self.seconds, self.cpu_seconds, self.limit = phase, seconds, cpu_seconds, limit
        what = "compile" if phase == "compile" else "run"
        super().__init__(f"XLA:CPU {what} did not finish within {limit.seconds:g} s")


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, every thread) of process `pid` so far; None where /proc has none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class _Events:
    """The child's event lines, read without blocking past a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.closed = fd, b"", False

    def next(self, wait: float) -> str | None:
        """The next line, or None if none came within `wait` seconds or the pipe closed."""
        deadline = time.monotonic() + wait
        while b"\n" not in self.buffer and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], min(left, _LONGEST_WAIT))[0]:
                return None
            chunk = os.read(self.fd, 4096)
            self.buffer += chunk
            self.closed = not chunk
        if b"\n" not in self.buffer:
            return None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


def run_watched(command: list[str], env: dict[str, str], requests: list[dict[str, Any]], result_dir: Path,
                compile_seconds: float, limits: list[Limit]) -> tuple[list[dict[str, Any]], XlaError | None]:
    """Run `requests` in one child (`command` followed by `result_dir`): the replies of the jobs
    that finished, in order, and the error that ended the child early, if it did (a RunTimeout,
    or a crash with the line of its log that says why)."""
    from hlo_dedup.xla.isolated import crash_message

    (result_dir / "requests.pickle").write_bytes(pickle.dumps(requests, protocol=pickle.HIGHEST_PROTOCOL))
    log_path = result_dir / "child.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([*command, str(result_dir)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=log, env=env)
    events = _Events(process.stdout.fileno())  # type: ignore[union-attr]
    replies: list[dict[str, Any]] = []
    stopped: XlaError | None = None
    try:
        phase, limit = "compile", Limit(compile_seconds)
        started, cpu_start = time.monotonic(), 0.0
        while len(replies) < len(requests):
            wall = time.monotonic() - started
            cpu = _cpu_seconds(process.pid)
            cpu = None if cpu is None else cpu - cpu_start
            if limit.exceeded(wall, cpu):
                stopped = RunTimeout(phase, wall, cpu, limit)  # type: ignore[arg-type]
                break
            wait = limit.seconds - wall  # past it, only the CPU clock is short of its limit: look again soon
            line = events.next(wait if wait > 0 else _POLL_SECONDS)
            if line is None:
                if events.closed:
                    break
                continue
            event, _, number = line.partition(" ")
            index = len(replies)
            if number != str(index) or event not in ("compiled", "done"):
                raise XlaError(f"the XLA child said {line!r} while running job {index}")
            if event == "compiled":
                phase, limit = "execution", limits[index]
            else:
                replies.append(pickle.loads((result_dir / f"result-{index}.pickle").read_bytes()))
                phase, limit = "compile", Limit(compile_seconds)
            started, cpu_start = time.monotonic(), _cpu_seconds(process.pid) or 0.0
    finally:
        _end(process, finished=len(replies) == len(requests))
    if stopped is None and len(replies) < len(requests):
        stopped = XlaError(crash_message(process.returncode, log_path.read_text(errors="replace")))
    return replies, stopped


def _end(process: subprocess.Popen, finished: bool) -> None:
    """Let a child that answered every job exit (a few seconds at most); stop any other now."""
    if finished:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    if process.poll() is None:
        process.kill()
    process.wait()
    process.stdout.close()  # type: ignore[union-attr]
