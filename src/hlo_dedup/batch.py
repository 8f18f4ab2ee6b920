"""Batch mode: many inputs, a pool of worker processes, one output directory.

    hlo-dedup INPUT... --output-dir OUT [-j N] [--passes=...] [--report FILE.json] [--dot FILE.dot] ...
    hlo-dedup DUMP_DIR --report-only [--stage REGEX] [--module REGEX] [--report FILE.json]

Each INPUT is a file, a directory (searched recursively; hidden entries and OUT itself are
left out) or a glob pattern, expanded here so that a quoted pattern works (`**` recurses; a
matched directory is searched). `hlo_dedup.io.discovery` decides what every file found is —
an HLO module to process, or a file to skip with its reason (an XLA dump or Neuron cache
artifact, not HLO by its content, not a regular file, a second copy of a module and stage,
not selected by --stage/--module) — so pointing the tool at the directory a framework dumped
into just works. Every file to process goes through `hlo_dedup.run.run_input` — the one run
path, in a worker process — exactly as `hlo-dedup FILE -o OUT/REL [options]` would, where REL
is the file's path relative to its directory INPUT or to the glob's fixed leading directories
(a plain file: its name). The output keeps the file name and the input's format (NxD's
binary `graph.hlo` stays a binary proto; `.gz` stays compressed) unless --output-format or
--emit-proto says otherwise. With --report-only nothing is written but the report and the
picture.

A failing file does not stop the others, not even one whose worker process dies (see
`run_pool`). Its one-line error (the single-file message) is listed at the end; the exit
status is 2 if any file could not be read, parsed or written, else 1 if a pass failed on any,
else 0. Skipped files are not failures. The workers' results are gathered into one
`RunReport`, from which `--report` (one JSON document: the single-file fields over all modules,
plus `batch` and one `inputs` entry per file, see report/schema.json), `--dot` (one picture of
every module written) and the summary are rendered as in single-file mode.

Workers are started with the 'spawn' method (no fork of a parent that may hold threads), so
the worker function is top-level and its arguments and results plain data; nothing here
imports jax. Ctrl-C is the main process's to handle: it ends the workers, whose writes leave
no temporary file (`hlo_dedup.io.files`). Before anything is written, `run.check_outputs`
refuses --report/--dot naming an input or an output, and an output naming another file's input.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import re
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing import connection
from typing import Sequence, TextIO

from .io.discovery import Discovery, Skipped, discover
from .io.formats import FormatError
from .lifetime import exit_with_parent
from .report import (
    EXIT_INPUT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PASS_FAILED,
    BatchInfo,
    InputResult,
    RunReport,
    input_summary,
    render_summary,
)
from .report.units import plural
from .run import RunOptions, UsageError, check_outputs, run_input, write_report_outputs


@dataclass(frozen=True)
class Task:
    """One file to process: where it is, where its output goes, its position in the run."""

    index: int
    input: str   # as found (how messages name it)
    output: str | None  # OUT/REL; None with --report-only
    size: int = 0
    module: str | None = None  # the dump module and stage the file holds, for the summary
    stage: str | None = None
    format: str | None = None  # the input's format, which the output keeps


# ------------------------------------------------------------------------------------------
# Planning: the files to process


def plan(arguments: Sequence[str], out_dir: str | None, *, stage: str | None = None,
         module: str | None = None) -> tuple[list[Task], list[tuple[str, str]], list[Skipped]]:
    """The tasks, the arguments that matched nothing, and the files skipped (see
    `hlo_dedup.io.discovery.discover`); `out_dir` None: --report-only.

    Two different files that would be written to the same output are a usage error, and so is
    a --stage/--module that selects none of the modules found."""
    for flag, pattern in (("--stage", stage), ("--module", module)):
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise UsageError(f"{flag} {pattern!r}: bad regular expression: {exc}") from None
    found = discover(arguments, out_dir, stage=stage, module=module)
    if not found.files and (stage is not None or module is not None) and (found.stages or found.modules):
        raise UsageError(_nothing_selected(stage, module, found))
    tasks: list[Task] = []
    owner: dict[str, str] = {}  # output (normalized) -> input
    for f in found.files:
        output = None if out_dir is None else os.path.join(out_dir, f.rel)
        if output is not None:
            key = os.path.normcase(os.path.abspath(output))
            if key in owner:
                raise UsageError(f"{owner[key]} and {f.path} would both be written to {output}; "
                                 "run them separately or give their directories")
            owner[key] = f.path
        try:
            size = os.path.getsize(f.path)
        except OSError:
            size = 0
        tasks.append(Task(len(tasks), f.path, output, size, f.group, f.stage, f.format))
    return tasks, found.problems, found.skipped


def _nothing_selected(stage: str | None, module: str | None, found: Discovery) -> str:
    def some(names: set[str]) -> str:
        listed = sorted(names)
        return ", ".join(listed[:8]) + (f", ... ({len(listed)} in all)" if len(listed) > 8 else "")

    asked = " and ".join(f"{flag} {value!r}" for flag, value in (("--stage", stage), ("--module", module)) if value)
    seen = [f"stages: {some(found.stages)}" if stage is not None and found.stages else "",
            f"modules: {some(found.modules)}" if module is not None and found.modules else ""]
    return f"{asked} selects none of the HLO files found ({'; '.join(filter(None, seen)) or 'none has a dump stage'})"


# ------------------------------------------------------------------------------------------
# The worker (top level: it is pickled by name into spawned processes)


def process_input(task: Task, options: RunOptions) -> InputResult:
    """One file through the one run path, as `hlo-dedup FILE -o OUTPUT [options]`; what it
    logged is kept in the result instead of printed. The output keeps the input's format
    unless the options name one."""
    if options.output_format is None and task.format is not None:
        options = options.replaced(output_format=task.format)
    log = io.StringIO()
    result = run_input(task.input, task.output, options, stdin=io.BytesIO(), stdout=io.BytesIO(), log=log)
    result.log = log.getvalue()
    return result


def _failed(task: Task, status: int, message: str) -> InputResult:
    """The result of a file whose worker never reported back."""
    return InputResult(task.input, task.output, exit_status=status, error=message, bytes_in=task.size)


def _common(values: Sequence[str | None], fallback: str) -> str:
    known = {v for v in values if v}
    if len(known) == 1:
        return known.pop()
    return "mixed" if known else fallback


# ------------------------------------------------------------------------------------------
# The driver


def _make_dirs(tasks: Sequence[Task], out_dir: str) -> list[str]:
    """Create OUT and every output's directory; returns those created below OUT (deepest last)."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise FormatError(out_dir, exc.strerror or str(exc)) from None
    created: list[str] = []
    for directory in sorted({os.path.dirname(t.output) for t in tasks}):
        missing = []
        d = directory
        while d and not os.path.isdir(d):
            missing.append(d)
            d = os.path.dirname(d)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError:
            continue  # the worker's write reports it, for that file only
        created.extend(reversed(missing))
    return created


def _remove_empty(created: Sequence[str]) -> None:
    for directory in sorted(set(created), key=len, reverse=True):
        try:
            os.rmdir(directory)
        except OSError:
            pass  # not empty: something was written there


def run_batch(arguments: Sequence[str], output_dir: str | None, options: RunOptions, *, jobs: int | None = None,
              stdout: TextIO | None = None, stderr: TextIO | None = None, stage: str | None = None,
              module: str | None = None) -> int:
    """Batch mode of `hlo-dedup` (see the module docstring); returns the exit status.
    `output_dir` None: --report-only; `stage`/`module`: the --stage/--module expressions."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    from . import logs

    try:  # validate --vmodule once, here, rather than once per file
        logs.configure(options.v, options.vmodule, stderr)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    t0 = time.perf_counter()
    tasks, problems, skipped = plan(arguments, output_dir, stage=stage, module=module)
    check_outputs(options, [(t.input, t.output) for t in tasks], check_module_outputs=False)
    created = _make_dirs(tasks, output_dir) if output_dir is not None else []
    workers = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    results: list[InputResult | None] = [None] * len(tasks)

    from .progress import make_progress

    progress = make_progress(stderr, enabled=False if options.verbose else None)
    try:
        with progress:
            progress.phase(f"{plural(len(tasks), 'file')}, {plural(workers, 'worker')}", total=len(tasks))
            if tasks:
                run_pool(tasks, options, workers, results, progress)
    finally:
        _remove_empty(created)
    wall = time.perf_counter() - t0
    for task, r in zip(tasks, results):
        if r is not None:
            r.module, r.stage = task.module, task.stage

    done = [r for r in results if r is not None]
    # Arguments that named no file count as files that could not be read.
    done += [InputResult(arg, None, exit_status=EXIT_INPUT_ERROR, error=line) for arg, line in problems]
    default_output_format = options.output_format or "hlo"
    report = RunReport(
        " ".join(arguments), output_dir,
        _common([r.input_format for r in done], options.input_format or "hlo"),
        _common([r.output_format for r in done], default_output_format),
        options.passes, strict=options.strict, spmd=options.spmd, inputs=done,
        max_peak_increase=options.max_peak_increase,
        batch=BatchInfo(tuple(arguments), output_dir, workers, wall, tuple(skipped)),
        report_only=options.report_only, price=options.price, price_backend=options.model_backend,
    )

    errors = write_report_outputs(report, options, stdout)

    if options.verbose:  # each skipped file, then each file's own log and full summary, in input order
        for s in skipped:
            stderr.write(f"skipped {s.path}: {s.reason}\n")
        for r in done:
            text = r.log + (input_summary(r, options.model_backend) if r.ok else "")
            if text:
                stderr.write(f"== {r.input}\n{text}")
    stderr.write(render_summary(report, errors))
    stderr.flush()

    statuses = {r.exit_status for r in done}
    if EXIT_INTERRUPTED in statuses:
        return EXIT_INTERRUPTED
    if EXIT_INPUT_ERROR in statuses or errors:
        return EXIT_INPUT_ERROR
    if statuses - {EXIT_OK}:
        return EXIT_PASS_FAILED
    return EXIT_OK


def run_pool(tasks: Sequence[Task], options: RunOptions, workers: int,
             results: list[InputResult | None], progress, worker=None) -> None:  # noqa: ANN001
    """Run every task on at most `workers` worker processes, each result into `results`.

    Each worker is a process with a pipe of its own, handed one file at a time. Handing out
    files, taking results and noticing a worker's death are all done here, by this thread:
    no thread of the pool shares what is in flight with it. (Python's ProcessPoolExecutor
    has its own thread fail the pending futures and end the workers when one dies, while
    this thread hands out the next file: submit() then raised BrokenProcessPool and lost
    every result, or that thread's loop over the pending futures met the one just added and
    died with a traceback on stderr, leaving its workers running.)

    A worker that dies (killed, out of memory, a crash in native code) loses only the file it
    had: that file is run once more in a new worker, and if its worker dies again it is the
    one reported, with the cause; every other file is still written. `worker` is the
    function run per task (default: `process_input`).
    """
    worker = worker or process_input
    waiting = deque(sorted(tasks, key=lambda t: (-t.size, t.index)))  # largest first: the pool drains evenly
    context = multiprocessing.get_context("spawn")
    pool: list[_Worker] = []
    died_once: set[int] = set()
    finished = False
    try:
        def died(w: _Worker, task: Task) -> None:
            """`w` died with `task` (or before taking it): run it once more, else report it."""
            pool.remove(w.end())
            if task.index not in died_once:
                died_once.add(task.index)
                waiting.appendleft(task)
                return
            results[task.index] = _failed(task, EXIT_INPUT_ERROR, f"{task.input}: error: the worker process "
                                          f"died ({_cause(w.process.exitcode)}); nothing written")
            progress.advance(f"{os.path.basename(task.input)} failed")

        while waiting or any(w.task is not None for w in pool):
            for w in [w for w in pool if w.task is None]:
                if waiting and not w.hand(waiting[0]):
                    pool.remove(w.end())  # it died while idle: the file was never started
                elif waiting:
                    waiting.popleft()
            while waiting and len(pool) < workers:
                w = _Worker(context, worker, options)
                pool.append(w)
                task = waiting.popleft()
                if not w.hand(task):  # a new worker gone before its first file: that file's second chance
                    died(w, task)
            busy = [w for w in pool if w.task is not None]
            if not busy:
                continue
            ready = set(connection.wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
            for w in busy:
                if w.conn not in ready and w.process.sentinel not in ready:
                    continue
                task, result = w.take_result()
                if result is not None:
                    results[task.index] = result
                    progress.advance(f"{os.path.basename(task.input)} done")
                else:
                    died(w, task)
        finished = True
    finally:
        _end_workers(pool, finished)


class _Worker:
    """One worker process, the command's end of its pipe, and the task it runs (None: idle)."""

    def __init__(self, context, worker, options: RunOptions) -> None:  # noqa: ANN001
        ours, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs, worker, options), name="hlo-dedup worker")
        self.process.start()
        theirs.close()
        self.conn = ours
        self.task: Task | None = None

    def hand(self, task: Task) -> bool:
        """Give it `task`; False if it is gone (its end of the pipe is closed)."""
        try:
            self.conn.send(task)
        except OSError:
            return False
        self.task = task
        return True

    def take_result(self) -> tuple[Task, InputResult | None]:
        """Its task and that task's result, once its pipe or its process is ready; the result
        is None if the worker died without sending one."""
        task, self.task = self.task, None
        assert task is not None
        try:
            data = self.conn.recv_bytes()
        except (EOFError, OSError):
            return task, None
        try:
            return task, pickle.loads(data)
        except Exception as exc:  # noqa: BLE001 - a result that cannot be rebuilt here fails its file only
            return task, _failed(task, EXIT_PASS_FAILED, f"{task.input}: error: internal error: the worker's "
                                 f"result could not be read: {type(exc).__name__}: {exc}")

    def end(self) -> _Worker:
        """Reap a worker that died (this thread is the only one that waits for it)."""
        self.conn.close()
        self.process.join(timeout=5)
        if self.process.exitcode is None:  # its pipe closed but it still runs: it is of no use
            self.process.kill()
            self.process.join()
        return self


def _cause(code: int | None) -> str:
    """What a worker's exit code says of its death (negative: the signal)."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + ("; out of memory?" if name == "SIGKILL" else "")
    if code:
        return f"exit status {code}"
    return "it ended without a result" if code == 0 else "out of memory or killed"


def _end_workers(pool: Sequence[_Worker], finished: bool) -> None:
    """After the last file, each worker is told to stop and waited for. Otherwise (Ctrl-C,
    SIGTERM, an error here) the files not done are dropped and the workers end now: SIGTERM
    waits while a worker writes, so a file is written whole or not at all."""
    for w in pool:
        if finished:
            try:
                w.conn.send(None)
            except OSError:
                pass
        else:
            w.process.terminate()
        w.conn.close()
    for w in pool:
        w.process.join(timeout=None if finished else 10)


def _serve(conn, worker, options: RunOptions) -> None:  # noqa: ANN001
    """A worker process: `_worker_init`, then `_answer` until the command says stop."""
    _worker_init()
    _answer(conn, worker, options)


def _answer(conn, worker, options: RunOptions) -> None:  # noqa: ANN001
    """Run each task received on `conn` and send its result back, until None or the end of
    the pipe. Whatever goes wrong with a file becomes that file's failed result; a command
    that is gone (its end of the pipe closed) ends the loop quietly: nothing of it may reach
    the command's stderr as a traceback."""
    while True:
        try:
            task = conn.recv()
        except Exception:  # noqa: BLE001 - the command is gone, or sent what cannot be read: end
            return
        if task is None:
            return
        try:
            result = worker(task, options)
        except Exception as exc:  # noqa: BLE001 - the failure of one file
            result = _failed(task, EXIT_PASS_FAILED,
                             f"{task.input}: error: internal error: {type(exc).__name__}: {exc}")
        try:
            data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - a result that cannot be sent back
            data = pickle.dumps(_failed(task, EXIT_PASS_FAILED, f"{task.input}: error: internal error: the result "
                                        f"could not be sent back: {type(exc).__name__}: {exc}"))
        try:
            conn.send_bytes(data)
        except OSError:
            return


def _worker_init() -> None:
    """Ctrl-C reaches every process of the terminal's group: the workers leave it to the
    main process, which stops them (an interrupted write leaves nothing: see io.files).
    A main process killed outright cannot stop them: they end when it is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()
