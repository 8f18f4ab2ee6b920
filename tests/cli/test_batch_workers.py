"""Batch mode survives a worker process that dies, and still writes every good file.

A worker that dies breaks Python's whole process pool (BrokenProcessPool): the files in
flight are re-run each alone, so the one whose worker dies again is reported (one line,
exit 2) and every other file is written. The deaths here are real: a worker that kills
itself with SIGSEGV on one file, and a worker killed with SIGKILL from outside.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hlo_dedup.batch import Task, _exit_codes, plan, process_input, run_pool
from hlo_dedup.progress import make_progress
from hlo_dedup.report import EXIT_INPUT_ERROR, EXIT_OK
from hlo_dedup.run import RunOptions

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FILES = sorted(DATA.glob("*.hlo"))


def segfault_on_crash_files(task: Task, options: RunOptions):  # noqa: ANN201 - pickled into the workers by name
    """The worker function of these tests: a file named crash*.hlo kills its worker."""
    if os.path.basename(task.input).startswith("crash"):
        os.kill(os.getpid(), signal.SIGSEGV)
    return process_input(task, options)


def test_a_dead_worker_is_reported_and_every_other_file_written(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for f in FILES:
        (src / f.name).write_bytes(f.read_bytes())
    (src / "crash.hlo").write_bytes(FILES[0].read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    tasks, problems, _ = plan([str(src)], str(out))
    assert not problems
    results = [None] * len(tasks)
    run_pool(tasks, RunOptions(), 2, results, make_progress(io.StringIO(), enabled=False),
             worker=segfault_on_crash_files)
    by_name = {os.path.basename(r.input): r for r in results}
    crash = by_name.pop("crash.hlo")
    assert crash.exit_status == EXIT_INPUT_ERROR
    assert crash.error == f"{src / 'crash.hlo'}: error: the worker process died (killed by SIGSEGV); nothing written"
    assert all(r.exit_status == EXIT_OK for r in by_name.values()), [r.error for r in by_name.values()]
    assert sorted(p.name for p in out.iterdir()) == sorted(f.name for f in FILES)


def _workers_of(pid: int) -> list[int]:
    """The pool's worker processes among `pid`'s children (not its resource tracker)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(entry))
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the worker processes through /proc")
def test_a_worker_killed_from_outside_does_not_lose_files(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    n = 8_000_000  # modules that take a while to read and write, so a worker is busy when it is killed
    big = f"HloModule big\n\nENTRY main {{\n  ROOT c = f32[{n}]{{0}} constant({{{', '.join(['0'] * n)}}})\n}}\n"
    for i in range(4):
        (src / f"big{i}.hlo").write_text(big)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.Popen([sys.executable, "-m", "hlo_dedup", src, "--passes=", "--output-dir", out, "-j", "2"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
        workers = _workers_of(proc.pid)
        time.sleep(0.05)
    assert workers, "no worker process found"
    time.sleep(0.3)  # the workers have their first files now (each takes about a second)
    os.kill(workers[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr.decode()
    assert "files: 4 ok, 0 failed (of 4)" in stderr.decode() and "Traceback" not in stderr.decode()
    for i in range(4):
        assert (out / f"big{i}.hlo").read_text() == big


class _ReapedElsewhere:
    """A worker another thread is reaping: its status shows only after a few reads."""

    def __init__(self, code: int | None, reads_before: int) -> None:
        self.code, self.reads_before = code, reads_before

    def join(self, timeout: float | None = None) -> None:
        pass

    @property
    def exitcode(self) -> int | None:
        if self.reads_before:
            self.reads_before -= 1
            return None
        return self.code


def test_a_dead_workers_code_is_waited_for_while_the_pool_reaps_it() -> None:
    assert _exit_codes([_ReapedElsewhere(-11, 3), _ReapedElsewhere(0, 0)]) == [-11, 0]
    assert _exit_codes([_ReapedElsewhere(None, 0)], timeout=0.05) == [None]  # still running at the deadline
