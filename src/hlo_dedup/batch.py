"""Batch mode: many inputs, a pool of worker processes, one output directory.

    hlo-dedup INPUT... --output-dir OUT [-j N] [--passes=...] [--report FILE.json] [--dot FILE.dot] ...

Each INPUT is a file, a directory (every file beneath it named like an input, see
`hlo_dedup.io.formats.INPUT_SUFFIXES`, recursively, sorted; hidden files and directories, and
OUT itself, are skipped) or a glob pattern, expanded here so that a quoted pattern works (`**`
recurses; the files it matches are taken whatever their extension, the directories it matches
are searched as above). Every file found goes through `hlo_dedup.run.run_input` — the one run
path, in a worker process — exactly as `hlo-dedup FILE -o OUT/REL [options]` would, where REL
is the file's path relative to its directory INPUT or to the glob's fixed leading directories
(a plain file: its name). The output keeps the file name; its format follows from that name as
with `-o` (`.pb` → pb, `.pbtxt` → pbtxt, else HLO text) unless --output-format/--emit-proto
says otherwise.

A failing file does not stop the others, not even one whose worker process dies (see
`run_pool`). Its one-line error (the single-file message) is listed at the end; the exit status is 2 if any file could not be read, parsed or written,
else 1 if a pass failed on any, else 0. The workers' results are gathered into one
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

import glob
import io
import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Sequence, TextIO

from .io.formats import INPUT_SUFFIXES, FormatError
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
    output: str  # OUT/REL
    size: int = 0


# ------------------------------------------------------------------------------------------
# Expanding the INPUT arguments


def _has_magic(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _is_hidden(name: str) -> bool:
    return name.startswith(".") and name not in (".", "..")


def _wanted(name: str) -> bool:
    return name.lower().endswith(INPUT_SUFFIXES) and not _is_hidden(name)


def _walk(root: str, skip: str | None) -> list[str]:
    """Every wanted file beneath `root`, as paths relative to it, sorted; `skip` (a real
    path: the output directory) is not entered."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not _is_hidden(d)
                       and (skip is None or os.path.realpath(os.path.join(dirpath, d)) != skip)]
        for name in filenames:
            if _wanted(name):
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(found, key=lambda rel: rel.replace(os.sep, "/"))


def _glob_base(pattern: str) -> str:
    """The leading directories of `pattern` that hold no wildcard ('' for none)."""
    parts = pattern.replace(os.altsep or os.sep, os.sep).split(os.sep)
    fixed: list[str] = []
    for part in parts[:-1]:  # the last component names the files, never the base
        if _has_magic(part):
            break
        fixed.append(part)
    if fixed == [""]:
        return os.sep  # '/*.hlo'
    return os.sep.join(fixed)


def _relative(path: str, base: str) -> str:
    rel = os.path.relpath(path, base or ".")
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return os.path.basename(path)
    return rel


def expand_inputs(arguments: Sequence[str], out_dir: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(input path, path relative to OUT) per file, in argument order, each argument's files
    sorted; and (argument, error line) for arguments that name no file at all.

    A path that does not exist (and is not a pattern) is kept: reading it fails in the
    worker with the single-file message."""
    skip = os.path.realpath(out_dir)
    files: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []

    def add_dir(directory: str, base: str) -> int:
        inner_skip = None if os.path.realpath(directory) == skip else skip
        rels = _walk(directory, inner_skip)
        for rel in rels:
            path = os.path.join(directory, rel)
            files.append((path, _relative(path, base) if base != directory else rel))
        return len(rels)

    for arg in arguments:
        if os.path.isdir(arg):
            if not add_dir(arg, arg):
                problems.append((arg, f"{arg}: error: no {', '.join('*' + s for s in INPUT_SUFFIXES)} "
                                      "file beneath this directory"))
        elif os.path.lexists(arg) or not _has_magic(arg):
            files.append((arg, os.path.basename(arg)))
        else:
            base = _glob_base(arg)
            before = len(files)
            for match in sorted(glob.glob(arg, recursive=True)):
                if os.path.isdir(match):
                    add_dir(match, base)
                else:
                    files.append((match, _relative(match, base)))
            if len(files) == before:
                problems.append((arg, f"{arg}: error: no file matches this pattern"))
    return files, problems


def plan(arguments: Sequence[str], out_dir: str) -> tuple[list[Task], list[tuple[str, str]]]:
    """The tasks (duplicates dropped) and the arguments that matched nothing.

    Two different files that would be written to the same output are a usage error."""
    files, problems = expand_inputs(arguments, out_dir)
    tasks: list[Task] = []
    owner: dict[str, tuple[str, str]] = {}  # output (normalized) -> (real input, input as given)
    for path, rel in files:
        output = os.path.join(out_dir, rel)
        key = os.path.normcase(os.path.abspath(output))
        real = os.path.realpath(path)
        if key in owner:
            if owner[key][0] == real:
                continue
            raise UsageError(f"{owner[key][1]} and {path} would both be written to {output}; "
                             "run them separately or give their directories")
        owner[key] = (real, path)
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        tasks.append(Task(len(tasks), path, output, size))
    return tasks, problems


# ------------------------------------------------------------------------------------------
# The worker (top level: it is pickled by name into spawned processes)


def process_input(task: Task, options: RunOptions) -> InputResult:
    """One file through the one run path, as `hlo-dedup FILE -o OUTPUT [options]`; what it
    logged is kept in the result instead of printed."""
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


def run_batch(arguments: Sequence[str], output_dir: str, options: RunOptions, *, jobs: int | None = None,
              stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Batch mode of `hlo-dedup` (see the module docstring); returns the exit status."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    from . import logs

    try:  # validate --vmodule once, here, rather than once per file
        logs.configure(options.v, options.vmodule, stderr)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    t0 = time.perf_counter()
    tasks, problems = plan(arguments, output_dir)
    check_outputs(options, [(t.input, t.output) for t in tasks], check_module_outputs=False)
    created = _make_dirs(tasks, output_dir)
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

    done = [r for r in results if r is not None]
    # Arguments that named no file count as files that could not be read.
    done += [InputResult(arg, None, exit_status=EXIT_INPUT_ERROR, error=line) for arg, line in problems]
    default_output_format = options.output_format or "hlo"
    report = RunReport(
        " ".join(arguments), output_dir,
        _common([r.input_format for r in done], options.input_format or "hlo"),
        _common([r.output_format for r in done], default_output_format),
        options.passes, strict=options.strict, spmd=options.spmd, inputs=done,
        batch=BatchInfo(tuple(arguments), output_dir, workers, wall),
    )

    errors = write_report_outputs(report, options, stdout)

    if options.verbose:  # each file's own log and full summary, in input order
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
                    processes = _workers(pool)
                    for process in processes:
                        process.join(timeout=5)
                    codes = [p.exitcode for p in processes if p.exitcode]
                    return _Broken([task, *futures.values()], list(reversed(waiting)), codes)
                except Exception as exc:  # noqa: BLE001 - e.g. a result that could not be sent back
                    result = _failed(task, EXIT_PASS_FAILED,
                                     f"{task.input}: error: internal error: {type(exc).__name__}: {exc}")
                results[task.index] = result
                progress.advance(f"{os.path.basename(task.input)} done")
        return None
    except KeyboardInterrupt:
        _stop_now(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _worker_init() -> None:
    """Ctrl-C reaches every process of the terminal's group: the workers leave it to the
    main process, which stops them (an interrupted write leaves nothing: see io.files)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _workers(pool: ProcessPoolExecutor) -> list:
    return list((getattr(pool, "_processes", None) or {}).values())


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C: drop the queued files and end the workers now (a file is either written
    whole or not at all)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    processes = _workers(pool)  # shutdown() forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.terminate()
        except (OSError, ValueError, AttributeError):
            pass
