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

import gc
import io
import multiprocessing
import os
import re
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
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
        report_only=options.report_only, price=options.price,
    )

    errors = write_report_outputs(report, options, stdout)

    if options.verbose:  # each skipped file, then each file's own log and full summary, in input order
        for s in skipped:
            stderr.write(f"skipped {s.path}: {s.reason}\n")
        for r in done:
            text = r.log + (input_summary(r) if r.ok else "")
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
    """Run every task in a pool of `workers` processes, each result into `results`.

    A worker that dies (killed, out of memory, a crash in native code) breaks the whole
    pool. The files not finished then are run again: those that were in flight each alone in
    a pool of its own, so that a file whose worker dies again is the one reported, and those
    not started yet in a new pool; every good file is still written. At most `workers` files
    are handed out at a time, so the files in flight are known. `worker` is the function run
    per task (default: `process_input`).
    """
    worker = worker or process_input
    queue = sorted(tasks, key=lambda t: (-t.size, t.index))  # largest first: the pool drains evenly
    while queue:
        broken = _run_until_broken(queue, options, workers, results, progress, worker)
        if broken is None:
            return
        for task in broken.in_flight:
            again = _run_until_broken([task], options, 1, results, progress, worker)
            if again is not None:
                results[task.index] = _failed(task, EXIT_INPUT_ERROR, f"{task.input}: error: the worker "
                                              f"process died ({again.cause()}); nothing written")
                progress.advance(f"{os.path.basename(task.input)} failed")
        queue = broken.waiting


@dataclass
class _Broken:
    """How a pool ended when a worker died: the tasks in flight, those not handed out yet,
    and the exit codes of the workers that had ended (negative: the signal)."""

    in_flight: list[Task]
    waiting: list[Task]
    exit_codes: list[int]

    def cause(self) -> str:
        for code in self.exit_codes:
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                return f"killed by {name}" + ("; out of memory?" if name == "SIGKILL" else "")
            if code > 0:
                return f"exit status {code}"
        return "out of memory or killed"


def _run_until_broken(queue: Sequence[Task], options: RunOptions, workers: int,
                      results: list[InputResult | None], progress, worker) -> _Broken | None:  # noqa: ANN001
    """Run `queue` in one pool until every task is done (None) or a worker dies."""
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_init)
    waiting = list(reversed(queue))
    futures: dict = {}
    try:
        while waiting or futures:
            while waiting and len(futures) < workers:
                task = waiting.pop()
                futures[pool.submit(worker, task, options)] = task
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for future in done:
                task = futures.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool:
                    codes = [code for code in _exit_codes(_workers(pool)) if code]
                    return _Broken([task, *futures.values()], list(reversed(waiting)), codes)
                except Exception as exc:  # noqa: BLE001 - e.g. a result that could not be sent back
                    result = _failed(task, EXIT_PASS_FAILED,
                                     f"{task.input}: error: internal error: {type(exc).__name__}: {exc}")
                results[task.index] = result
                progress.advance(f"{os.path.basename(task.input)} done")
        return None
    except KeyboardInterrupt:
        _stop_now(pool)
        pool = None  # its queues' semaphores are unlinked when they are collected, not at exit
        gc.collect()
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _worker_init() -> None:
    """Ctrl-C reaches every process of the terminal's group: the workers leave it to the
    main process, which stops them (an interrupted write leaves nothing: see io.files).
    A main process killed outright cannot stop them: they end when it is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()


def _exit_codes(processes: list, timeout: float = 5.0) -> list[int | None]:
    """The workers' exit codes once they have ended (None for one still running at the
    deadline). The pool's own thread reaps them at the same time: a process it reaped
    reads as running until that thread has stored its status, so a missing code is asked
    again instead of taken for "no code" (which had turned a SIGSEGV into "out of memory
    or killed" on a busy machine)."""
    deadline = time.monotonic() + timeout
    codes: list[int | None] = []
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        code = process.exitcode
        while code is None and time.monotonic() < deadline:
            time.sleep(0.01)
            code = process.exitcode
        codes.append(code)
    return codes


def _workers(pool: ProcessPoolExecutor) -> list:
    return list((getattr(pool, "_processes", None) or {}).values())


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C: drop the queued files and end the workers now (a file is either written
    whole or not at all)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    processes = _workers(pool)  # shutdown() forgets them and the pool's thread
    thread = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.terminate()
        except (OSError, ValueError, AttributeError):
            pass
    if thread is not None:
        thread.join(timeout=10)  # it sees the workers gone and lets go of the queues
