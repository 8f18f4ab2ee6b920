"""Batch mode survives a worker process that dies, and still writes every good file.

A worker that dies loses only the file it had: that file is run once more in a new worker,
the one whose worker dies again is reported (one line, exit 2) and every other file is
written. The deaths here are real: a worker that kills itself with SIGSEGV on one file
(also while the command is between a result and the next file), and a worker killed with
SIGKILL from outside. Whatever else goes wrong in a worker fails its file, never the run.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from multiprocessing import Pipe
from pathlib import Path

import pytest

from hlo_dedup.batch import Task, _answer, plan, process_input, run_pool
from hlo_dedup.progress import NullProgress, make_progress
from hlo_dedup.report import EXIT_INPUT_ERROR, EXIT_OK, EXIT_PASS_FAILED, InputResult
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


def _copy_files(src: Path, extra: str) -> tuple[list[Task], Path]:
    """The test modules and one more copy named `extra`, planned into `<src>/../out`."""
    src.mkdir()
    for f in FILES:
        (src / f.name).write_bytes(f.read_bytes())
    (src / extra).write_bytes(FILES[0].read_bytes())
    out = src.parent / "out"
    out.mkdir()
    tasks, problems, _ = plan([str(src)], str(out))
    assert not problems
    return tasks, out


def segfault_once_another_file_is_written(task: Task, options: RunOptions):  # noqa: ANN201 - pickled by name
    """crash*.hlo kills its worker, but only once another file's output is written (that file
    was handed out beside it), and says so first in `<input>.dying`."""
    name = os.path.basename(task.input)
    if name.startswith("crash"):
        out = os.path.dirname(task.output)
        deadline = time.monotonic() + 120
        while not any(n.endswith(".hlo") and not n.startswith(".") for n in os.listdir(out)) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        Path(task.input + ".dying").touch()
        os.kill(os.getpid(), signal.SIGSEGV)
    return process_input(task, options)


class _SlowBetweenFiles(NullProgress):
    """The command taking its time between a result and handing out the next file (a
    loaded machine): the first advance waits until the crash worker has died, and every
    advance records the threads started since the run began."""

    def __init__(self, dying: Path) -> None:
        self.dying, self.calls = dying, 0
        self.before = set(threading.enumerate())
        self.started: set[threading.Thread] = set()

    def advance(self, description: str | None = None) -> None:
        self.calls += 1
        self.started |= set(threading.enumerate()) - self.before
        if self.calls == 1:
            deadline = time.monotonic() + 120
            while not self.dying.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(1.0)  # the worker is dead by now, and its death seen by anything watching


def test_a_worker_dying_while_the_next_file_is_handed_out_loses_nothing(tmp_path: Path) -> None:
    """The crash file is handed out first, the first other file beside it; its result comes
    while the crash worker is alive, and the worker dies before the next file is handed out.
    A process pool whose own thread ends the pool on a death made that hand-out raise
    BrokenProcessPool (the run failed), or made that thread fail with a traceback on stderr."""
    tasks, out = _copy_files(tmp_path / "in", "crash.hlo")
    tasks = [t if os.path.basename(t.input) != "crash.hlo" else Task(t.index, t.input, t.output, size=10**9)
             for t in tasks]  # largest first: the crash file goes out first
    progress = _SlowBetweenFiles(tmp_path / "in" / "crash.hlo.dying")
    results: list[InputResult | None] = [None] * len(tasks)
    run_pool(tasks, RunOptions(), 2, results, progress, worker=segfault_once_another_file_is_written)
    by_name = {os.path.basename(r.input): r for r in results if r is not None}
    crash = by_name.pop("crash.hlo")
    assert crash.error == (f"{tmp_path / 'in' / 'crash.hlo'}: error: the worker process died (killed by SIGSEGV); "
                           "nothing written")
    assert all(r.exit_status == EXIT_OK for r in by_name.values()), [r.error for r in by_name.values()]
    assert sorted(p.name for p in out.iterdir()) == sorted(f.name for f in FILES)
    assert not progress.started, progress.started  # no thread beside this one shares the files in flight


class _Unreadable:
    """Pickled in a worker, it cannot be rebuilt in the command."""

    def __reduce__(self):  # noqa: ANN204
        return (_refuse, ())


def _refuse() -> None:
    raise ValueError("this object cannot be rebuilt")


def misbehave_on_odd_files(task: Task, options: RunOptions):  # noqa: ANN201 - pickled by name
    """raise.hlo: the worker function raises; unsendable.hlo: its result cannot be pickled;
    unreadable.hlo: its result cannot be unpickled; any other file is processed."""
    name = os.path.basename(task.input)
    if name == "raise.hlo":
        raise RuntimeError("the worker function failed")
    result = process_input(task, options)
    if name == "unsendable.hlo":
        result.log = threading.Lock()  # type: ignore[assignment]
    if name == "unreadable.hlo":
        return _Unreadable()
    return result


@pytest.mark.parametrize(("name", "error"), [
    ("raise.hlo", "internal error: RuntimeError: the worker function failed"),
    ("unsendable.hlo",
     "internal error: the result could not be sent back: TypeError: cannot pickle '_thread.lock' object"),
    ("unreadable.hlo",
     "internal error: the worker's result could not be read: ValueError: this object cannot be rebuilt"),
])
def test_a_file_whose_worker_fails_to_answer_fails_alone(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                         name: str, error: str) -> None:
    tasks, out = _copy_files(tmp_path / "in", name)
    results: list[InputResult | None] = [None] * len(tasks)
    run_pool(tasks, RunOptions(), 2, results, make_progress(io.StringIO(), enabled=False),
             worker=misbehave_on_odd_files)
    by_name = {os.path.basename(r.input): r for r in results if r is not None}
    odd = by_name.pop(name)
    assert (odd.exit_status, odd.error) == (EXIT_PASS_FAILED, f"{tmp_path / 'in' / name}: error: {error}")
    assert all(r.exit_status == EXIT_OK for r in by_name.values()), [r.error for r in by_name.values()]
    assert {p.name for p in out.iterdir()} >= {f.name for f in FILES}
    assert "Traceback" not in capfd.readouterr().err  # the workers share the command's stderr


def test_a_worker_whose_command_is_gone_ends_quietly() -> None:
    """The command's end of the pipe closed while a file was being run: the result cannot
    be sent, and the worker's loop ends instead of raising (a traceback on stderr)."""
    ours, theirs = Pipe()
    task = Task(0, "a.hlo", None)
    ours.send(task)
    ours.close()
    ran: list[Task] = []

    def run(t: Task, options: RunOptions) -> InputResult:
        ran.append(t)
        return InputResult(t.input, t.output)

    _answer(theirs, run, RunOptions())  # returns: the send failed with EPIPE, the loop ended
    assert ran == [task]


def test_workers_that_die_before_their_first_file_fail_each_file_instead_of_spawning_forever(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hlo_dedup.batch as batch

    monkeypatch.setattr(batch._Worker, "hand", lambda self, task: False)  # every worker's pipe is closed
    (tmp_path / "out").mkdir()
    tasks, _, _ = plan([str(f) for f in FILES[:3]], str(tmp_path / "out"))
    results: list[InputResult | None] = [None] * len(tasks)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (run_pool(tasks, RunOptions(), 2, results, NullProgress()), done.set()))
    thread.start()
    thread.join(timeout=120)
    assert done.is_set(), "run_pool kept starting workers"
    assert all(r is not None and r.exit_status == EXIT_INPUT_ERROR and "the worker process died" in r.error
               for r in results)
