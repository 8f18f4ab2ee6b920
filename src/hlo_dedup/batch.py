"""Batch mode: many inputs, a pool of worker processes, one output directory.

    hlo-dedup INPUT... --output-dir OUT [-j N] [--passes=...] [--report FILE.json] ...

Each INPUT is a file, a directory (every `*.hlo`, `*.txt`, `*.pb`, `*.pbtxt` beneath it,
recursively, sorted; hidden files and directories, and OUT itself, are skipped) or a glob
pattern, expanded here so that a quoted pattern works (`**` recurses; the files it matches
are taken whatever their extension, the directories it matches are searched as above). Every
file found is processed exactly as `hlo-dedup FILE -o OUT/REL [options]` would be (the same code, in a
worker process: `cli._Run.execute` under `cli.run_guarded`), where REL is the file's path
relative to its directory INPUT or to the glob's fixed leading directories (a plain file: its
name). The output keeps the file name; its format follows from that name as with `-o`
(`.pb` → pb, `.pbtxt` → pbtxt, else HLO text) unless --output-format/--emit-proto says
otherwise.

A failing file does not stop the others. Its one-line error (the single-file message) is
listed at the end; the exit status is 2 if any file could not be read, parsed or written,
else 1 if a pass failed on any, else 0. `--report` writes one JSON document: the single-file
fields over all modules (so existing readers still work) plus `batch` and one `inputs` entry
per file (see report_schema.json).

Workers are started with the 'spawn' method (no fork of a parent that may hold threads), so
the worker function is top-level and its arguments plain data; nothing here imports jax.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Sequence, TextIO

from . import cli
from .io.formats import STDIO, FormatError, output_format_for
from .report import SCHEMA_VERSION, human_bytes, human_seconds

INPUT_SUFFIXES: tuple[str, ...] = (".hlo", ".txt", ".pb", ".pbtxt")
EXIT_INTERRUPTED = 130

STATUS_NAMES = {cli.EXIT_OK: "ok", cli.EXIT_PASS_FAILED: "pass_failed", cli.EXIT_USAGE: "input_error",
                EXIT_INTERRUPTED: "interrupted"}

# Options of the single-file run that a worker needs (everything else is batch-only).
_RUN_OPTIONS = ("passes", "format", "output_format", "emit_proto", "split_input_file", "v", "vmodule",
                "strict", "spmd", "verify")


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
            raise cli.UsageError(f"{owner[key][1]} and {path} would both be written to {output}; "
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


class _CapturedRun(cli._Run):
    """A single-file run whose messages are kept instead of printed."""

    def __init__(self, args: argparse.Namespace, log: io.StringIO) -> None:
        super().__init__(args, io.BytesIO(), io.BytesIO(), log)
        self.errors: list[str] = []
        self.report = None

    def error(self, line: str) -> None:
        self.errors.append(line.rstrip("\n"))


def process_input(task: Task, options: dict[str, Any]) -> dict[str, Any]:
    """Process one file as `hlo-dedup FILE -o OUTPUT [options]` would; returns plain data."""
    started = time.perf_counter()
    log = io.StringIO()
    args = argparse.Namespace(**options, input=task.input, output=task.output, report=None)
    runner = _CapturedRun(args, log)
    try:
        status = cli.run_guarded(runner, runner.execute)
    except BaseException as exc:  # SystemExit and the like: never lose the file's result
        runner.errors.append(f"{task.input}: error: internal error: {type(exc).__name__}: {exc}")
        status = cli.EXIT_PASS_FAILED
    report = runner.report
    data = report.to_json() if report is not None else None
    out_fmt = "pbtxt" if options.get("emit_proto") else _safe_output_format(task.output, options.get("output_format"))
    out_bytes = None
    if status == cli.EXIT_OK:
        try:
            out_bytes = os.path.getsize(task.output)
        except OSError:
            pass
    return {
        "index": task.index,
        "input": task.input,
        "output": task.output,
        "exit_status": status,
        "error": "; ".join(runner.errors) if runner.errors else None,
        "input_format": data["input_format"] if data else None,
        "output_format": out_fmt,
        "bytes_in": task.size,
        "bytes_out": out_bytes,
        "seconds": time.perf_counter() - started,
        "modules": data["modules"] if data else [],
        "timings": data["timings"] if data else {"parse": 0.0, "passes": 0.0, "print": 0.0, "total": 0.0},
        "log": log.getvalue(),
    }


def _safe_output_format(path: str, fmt: str | None) -> str | None:
    try:
        return output_format_for(path, fmt)
    except FormatError:
        return None


def _failed_result(task: Task, status: int, message: str) -> dict[str, Any]:
    return {
        "index": task.index, "input": task.input, "output": task.output, "exit_status": status,
        "error": message, "input_format": None, "output_format": None, "bytes_in": task.size,
        "bytes_out": None, "seconds": 0.0, "modules": [],
        "timings": {"parse": 0.0, "passes": 0.0, "print": 0.0, "total": 0.0}, "log": "",
    }


# ------------------------------------------------------------------------------------------
# Totals and the report


def module_totals(modules: Sequence[dict[str, Any]]) -> dict[str, int]:
    """RunReport.totals() over per-module JSON."""
    passes = [p for m in modules for p in m["passes"]]
    folds = [f for p in passes for f in p["folds"]]
    hazards = [h for p in passes for h in p["hazards"]]
    return {
        "modules": len(modules),
        "changed_modules": sum(bool(m["changed"]) for m in modules),
        "passes_run": len(passes),
        "folds": len(folds),
        "hazards": len(hazards),
        "hazards_refused": sum(bool(h["refused"]) for h in hazards),
        "bytes_output": sum(f["bytes_output"] for f in folds),
        "bytes_per_device": sum(f["bytes_per_device"] for f in folds),
    }


def _common(values: Sequence[str | None], fallback: str) -> str:
    known = {v for v in values if v}
    if len(known) == 1:
        return known.pop()
    return "mixed" if known else fallback


def build_report(args: argparse.Namespace, passes: Sequence[str], results: Sequence[dict[str, Any]],
                 workers: int, wall: float) -> dict[str, Any]:
    from . import __version__

    modules = [m for r in results for m in r["modules"]]
    timings = {k: round(sum(r["timings"].get(k, 0.0) for r in results), 6) for k in ("parse", "passes", "print")}
    timings["total"] = round(sum(timings.values()), 6)
    out_fmt_default = "pbtxt" if args.emit_proto else (args.output_format or "hlo")
    inputs = []
    for r in results:
        inputs.append({
            "input": r["input"],
            "output": r["output"] if r["exit_status"] == cli.EXIT_OK else None,
            "status": STATUS_NAMES.get(r["exit_status"], "pass_failed"),
            "exit_status": r["exit_status"],
            "error": r["error"],
            "input_format": r["input_format"],
            "output_format": r["output_format"],
            "bytes_in": r["bytes_in"],
            "bytes_out": r["bytes_out"],
            "seconds": round(r["seconds"], 6),
            "modules": r["modules"],
            "totals": module_totals(r["modules"]),
            "timings": r["timings"],
        })
    ok = sum(r["exit_status"] == cli.EXIT_OK for r in results)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "hlo-dedup", "version": __version__},
        "input": " ".join(args.input),
        "output": args.output_dir,
        "input_format": _common([r["input_format"] for r in results], args.format or "hlo"),
        "output_format": _common([r["output_format"] for r in results], out_fmt_default),
        "pipeline": list(passes),
        "strict": args.strict,
        "spmd": args.spmd,
        "modules": modules,
        "totals": module_totals(modules),
        "timings": timings,
        "batch": {
            "arguments": list(args.input),
            "output_dir": args.output_dir,
            "workers": workers,
            "files": len(results),
            "ok": ok,
            "failed": len(results) - ok,
            "bytes_in": sum(r["bytes_in"] or 0 for r in results),
            "bytes_out": sum(r["bytes_out"] or 0 for r in results),
            "wall_seconds": round(wall, 6),
        },
        "inputs": inputs,
    }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _input_line(r: dict[str, Any]) -> str:
    t = module_totals(r["modules"])
    if t["modules"] == 1:
        line = f"{r['input']}: {'changed' if t['changed_modules'] else 'unchanged'}"
    else:
        line = f"{r['input']}: {t['changed_modules']} of {t['modules']} modules changed"
    if t["folds"]:
        line += f", {_plural(t['folds'], 'fold')}"
    if t["hazards"]:
        line += f", {_plural(t['hazards'], 'hazard')}" + (f" ({t['hazards_refused']} refused)" if t["hazards_refused"] else "")
    if t["bytes_output"]:
        line += f", removed {human_bytes(t['bytes_output'])} output"
    return line + f" ({human_seconds(r['seconds'])})"


def summary_lines(report: dict[str, Any], extra_errors: Sequence[str] = ()) -> list[str]:
    """One line per file done, then one per failure (the single-file message), then totals."""
    lines = [_input_line(r) for r in report["inputs"] if r["exit_status"] == cli.EXIT_OK]
    lines += [r["error"] or f"{r['input']}: error: failed" for r in report["inputs"] if r["exit_status"] != cli.EXIT_OK]
    lines += list(extra_errors)
    b, t, tm = report["batch"], report["totals"], report["timings"]
    lines.append(f"files: {b['ok']} ok, {b['failed']} failed (of {b['files']}); "
                 f"read {human_bytes(b['bytes_in'])}, wrote {human_bytes(b['bytes_out'])}")
    lines.append(
        f"total: {t['changed_modules']} of {_plural(t['modules'], 'module')} changed, {_plural(t['folds'], 'fold')}, "
        f"{_plural(t['hazards'], 'hazard')}" + (f" ({t['hazards_refused']} refused)" if t["hazards_refused"] else "")
        + (f", removed {human_bytes(t['bytes_output'])} output"
           + (f" / {human_bytes(t['bytes_per_device'])} per device" if t["bytes_per_device"] else "")
           if t["bytes_output"] else "")
    )
    wall = b["wall_seconds"]
    rate = f", {b['files'] / wall:.1f} files/s" if wall > 0 and b["files"] else ""
    lines.append(f"time: {human_seconds(wall)} wall, {_plural(b['workers'], 'worker')}{rate} (summed over files: "
                 + ", ".join(f"{k} {human_seconds(tm[k])}" for k in ("parse", "passes", "print")) + ")")
    return lines


# ------------------------------------------------------------------------------------------
# The driver


def _check_usage(args: argparse.Namespace, stderr: TextIO) -> tuple[str, ...]:
    if args.output is not None:
        raise cli.UsageError("-o names one output file: with several inputs use --output-dir DIR")
    if args.output_dir is None:
        raise cli.UsageError("several inputs need --output-dir DIR (batch mode)")
    if not args.input:
        raise cli.UsageError("--output-dir needs at least one INPUT (file, directory or glob pattern)")
    if STDIO in args.input:
        raise cli.UsageError("standard input (-) cannot be a batch-mode input")
    passes = cli._pass_list(args.passes, args.emit_proto)
    from . import logs

    try:  # validate --vmodule once, here, rather than once per file
        logs.configure(args.v, args.vmodule, stderr)
    except ValueError as exc:
        raise cli.UsageError(str(exc)) from None
    return passes


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


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Batch mode of `hlo-dedup` (see the module docstring); returns the exit status."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    passes = _check_usage(args, stderr)
    out_dir = args.output_dir
    t0 = time.perf_counter()
    tasks, problems = plan(args.input, out_dir)
    created = _make_dirs(tasks, out_dir)
    options = {k: getattr(args, k) for k in _RUN_OPTIONS}
    jobs = args.jobs or os.cpu_count() or 1
    workers = max(1, min(jobs, len(tasks)))
    results: list[dict[str, Any] | None] = [None] * len(tasks)

    from .progress import make_progress

    progress = make_progress(stderr, enabled=None if not (args.v or args.vmodule) else False)
    try:
        with progress:
            progress.phase(f"{_plural(len(tasks), 'file')}, {_plural(workers, 'worker')}", total=len(tasks))
            if tasks:
                _run_pool(tasks, options, workers, results, progress)
    finally:
        _remove_empty(created)
    wall = time.perf_counter() - t0

    done = [r for r in results if r is not None]
    # Arguments that named no file count as files that could not be read.
    for arg, line in problems:
        done.append({**_failed_result(Task(-1, arg, ""), cli.EXIT_USAGE, line), "output": None})
    report = build_report(args, passes, done, workers, wall)

    extra: list[str] = []
    report_failed = False
    if args.report:
        from .io.files import write_atomic

        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        try:
            if args.report == STDIO:
                stdout.write(text)
                stdout.flush()
            else:
                write_atomic(args.report, text)
        except OSError as exc:
            extra.append(FormatError(args.report, exc.strerror or str(exc)).format())
            report_failed = True

    if args.v or args.vmodule:  # each file's own log and full summary, in input order
        for r in done:
            if r["log"]:
                stderr.write(f"== {r['input']}\n{r['log']}")
    stderr.write("\n".join(summary_lines(report, extra)) + "\n")
    stderr.flush()

    statuses = {r["exit_status"] for r in done}
    if EXIT_INTERRUPTED in statuses:
        return EXIT_INTERRUPTED
    if cli.EXIT_USAGE in statuses or report_failed:
        return cli.EXIT_USAGE
    if statuses - {cli.EXIT_OK}:
        return cli.EXIT_PASS_FAILED
    return cli.EXIT_OK


def _run_pool(tasks: Sequence[Task], options: dict[str, Any], workers: int,
              results: list[dict[str, Any] | None], progress) -> None:  # noqa: ANN001
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    try:
        # Largest first: the long files start early and the pool drains evenly.
        order = sorted(tasks, key=lambda t: (-t.size, t.index))
        futures = {pool.submit(process_input, task, options): task for task in order}
        for future in as_completed(futures):
            task = futures[future]
            try:
                result = future.result()
            except BrokenProcessPool:
                result = _failed_result(task, cli.EXIT_PASS_FAILED, f"{task.input}: error: the worker process "
                                        "died (out of memory or killed); nothing written")
            except Exception as exc:  # noqa: BLE001 - e.g. a result that could not be sent back
                result = _failed_result(task, cli.EXIT_PASS_FAILED,
                                        f"{task.input}: error: internal error: {type(exc).__name__}: {exc}")
            results[task.index] = result
            progress.advance(f"{os.path.basename(task.input)} done")
    except KeyboardInterrupt:
        _stop_now(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C: drop the queued files and end the workers now (outputs are atomic, so a file
    is either written whole or not at all)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.terminate()
        except (OSError, ValueError, AttributeError):
            pass
