"""One run path: an input read, its modules taken through the passes, its output written.

`run_input` does that for one input and returns an `InputResult` (the modules' pass results,
timings, and how it ended: exit status and the one error line). It never raises for a bad
input, a failing pass or a failed write; the error is in the result. Single-file mode
(`run_file`) and batch mode (`hlo_dedup.batch`, in worker processes) both call it; both then
render the run's aggregate outputs — `--report`, `--dot` — from a `RunReport` with the
renderers `report_outputs` lists, so every output means the same in both modes (a new one,
such as an HTML page, is one more renderer there and one more `RunOptions` field).
"""

from __future__ import annotations

import gc
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TextIO

from .io.formats import (
    STDIO,
    FormatError,
    detect_format,
    display_name,
    modules_from_bytes,
    output_format_for,
    read_source,
    render_modules,
    write_output,
)
from .ir import HloIrError
from .passes import DEFAULT_PIPELINE, PassError, Pipeline
from .report import (
    EXIT_INPUT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PASS_FAILED,
    InputResult,
    ModuleRun,
    RunReport,
    render_dot,
    render_json,
    render_summary,
)
from .text import HloParseError

PROG = "hlo-dedup"


class UsageError(Exception):
    """A command-line mistake: exit 2 with one line."""


@dataclass(frozen=True)
class RunOptions:
    """Everything a run is asked to do, typed; the same for every input of a batch run.

    `output_format` None: from each output's name. `report` and `dot` name the run's aggregate
    outputs (`-`: standard output for the report); they cover every module of the run.
    """

    passes: tuple[str, ...] = DEFAULT_PIPELINE
    input_format: str | None = None
    output_format: str | None = None
    split_input_file: bool = False
    strict: bool = False
    spmd: bool = True
    verify: bool = False
    v: int = 0
    vmodule: str = ""
    report: str | None = None
    dot: str | None = None

    @property
    def verbose(self) -> bool:
        """VLOG lines were asked for (then no live progress display: they would interleave)."""
        return bool(self.v or self.vmodule)


def report_outputs(options: RunOptions) -> Iterator[tuple[str, Callable[[RunReport], str]]]:
    """(path, renderer) of each aggregate output asked for, in the order they are written."""
    for path, render in ((options.dot, render_dot), (options.report, render_json)):
        if path:
            yield path, render


def write_report_output(path: str, text: str, stdout: TextIO | None = None) -> None:
    """Write one aggregate output atomically (`-`: standard output); FormatError if it fails."""
    from .io.files import write_atomic

    try:
        if path == STDIO:
            write_output(text.encode(), STDIO, _binary(stdout))
        else:
            write_atomic(path, text)
    except OSError as exc:
        raise FormatError(path, exc.strerror or str(exc)) from None


# ------------------------------------------------------------------------------------------
# One input


def run_input(input: str, output: str, options: RunOptions, *, stdin=None, stdout=None,  # noqa: ANN001
              log: TextIO | None = None) -> InputResult:
    """Read `input` (`-`: stdin), run the passes on each module, write `output` (`-`: stdout).

    `log` receives the passes' VLOG lines, the `--verify` lines and, with --v, tracebacks.
    Nothing is written unless every pass (and --verify) succeeded. The cyclic garbage collector
    is paused for the run: the IR is millions of long-lived objects it would rescan for nothing.
    """
    log = sys.stderr if log is None else log
    result = InputResult(input, output)
    started = time.perf_counter()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _run(result, options, stdin, stdout, log)
    except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: BLE001 - the result says what failed
        result.exit_status, result.error = describe_failure(exc, display_name(input), options.v >= 1, log)
    finally:
        if gc_was_enabled:
            gc.enable()
    result.seconds = time.perf_counter() - started
    return result


def _run(result: InputResult, options: RunOptions, stdin, stdout, log: TextIO) -> None:  # noqa: ANN001
    from . import logs
    from .progress import make_progress

    input, output = result.input, result.output
    out_fmt = result.output_format = output_format_for(output, options.output_format)
    try:
        logs.configure(options.v, options.vmodule, log)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    passes = options.passes
    name = display_name(input)
    progress = make_progress(log, enabled=False if options.verbose else None)
    with progress:
        progress.phase(f"parse {name}")
        t0 = time.perf_counter()
        try:
            data = read_source(input, _binary(stdin))
        except OSError as exc:
            raise FormatError(name, exc.strerror or str(exc)) from None
        result.bytes_in = len(data)
        in_fmt = options.input_format or detect_format(input, data)
        modules = modules_from_bytes(data, name, spmd=options.spmd, format=in_fmt,
                                     split_input_file=options.split_input_file)
        del data
        result.input_format = in_fmt
        result.timings["parse"] = time.perf_counter() - t0
        if out_fmt != "hlo" and len(modules) != 1:
            raise FormatError(display_name(output), f"{out_fmt} output holds one module, "
                              f"the input has {len(modules)} (write HLO text instead)")

        befores = [m.to_text() for m in modules] if options.verify else []

        steps = [f"{m.name}: {p}" for m in modules for p in passes]
        progress.phase(steps[0] if steps else "passes", total=len(steps))
        t0 = time.perf_counter()
        done = 0
        for index, module in enumerate(modules):
            run = ModuleRun(module.name, input, index)
            result.modules.append(run)
            pipeline = Pipeline.from_names(passes, strict=options.strict)
            started = time.perf_counter()

            def after_pass(p, pass_result, run=run) -> None:  # noqa: ANN001
                nonlocal done
                run.passes.append(pass_result)
                done += 1
                progress.advance(steps[done] if done < len(steps) else None)

            try:
                pipeline.run(module, after_pass=after_pass)
            except HloParseError:
                raise  # a malformed value the pass was first to decode: an input error (exit 2)
            except Exception as exc:  # noqa: BLE001 - a pass failing in any way is exit 1
                detail = _one_line(exc)
                if not isinstance(exc, (PassError, HloIrError)):
                    detail = f"internal error: {type(exc).__name__}: {detail}"
                    if options.v >= 1:
                        import traceback

                        traceback.print_exc(file=log)
                result.exit_status = EXIT_PASS_FAILED
                result.error = (f"{name}: error: pass {passes[len(run.passes)]} failed on module "
                                f"{module.name}: {detail}")
                break
            run.seconds = time.perf_counter() - started
        result.timings["passes"] = time.perf_counter() - t0
        if result.error is not None:
            return

        progress.phase("print")
        t0 = time.perf_counter()
        payload = render_modules(modules, out_fmt, display_name(output))
        rendered = time.perf_counter() - t0

    # The display is gone before anything is written (stdout may be the same terminal).
    if options.verify:
        failure = _verify(befores, modules, name, log)
        if failure is not None:
            result.exit_status, result.error = failure
            return
    t0 = time.perf_counter()
    write_output(payload, output, _binary(stdout))
    result.bytes_out = len(payload)
    result.timings["print"] = rendered + time.perf_counter() - t0


def _verify(befores: list[str], modules: list, name: str, log: TextIO) -> tuple[int, str] | None:  # noqa: ANN001
    """`--verify`: the rewrite must compute bitwise what the input computed. The exit status
    is `hlo-dedup verify`'s: 1 the results differ, 2 XLA:CPU could not run a module."""
    from .equivalence import check_equivalence

    for before, module in zip(befores, modules):
        label = f"verify {module.name}"
        try:
            report = check_equivalence(before, module.to_text())
            print(f"{label}: {report.summary()}", file=log)
            status = report.exit_code
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is exit 2, as for `verify`
            print(f"{label}: error: internal error: {type(exc).__name__}: {exc}", file=log)
            status = EXIT_INPUT_ERROR
        if status == EXIT_PASS_FAILED:
            return status, (f"{name}: error: --verify: module {module.name} computes different results "
                            "after the passes; nothing written")
        if status != EXIT_OK:
            return EXIT_INPUT_ERROR, (f"{name}: error: --verify: module {module.name} could not be run "
                                      "on XLA:CPU; nothing written")
    return None


# ------------------------------------------------------------------------------------------
# Single-file mode


def run_file(input: str, output: str, options: RunOptions, *, stdin=None, stdout=None,  # noqa: ANN001
             stderr: TextIO | None = None) -> int:
    """`hlo-dedup INPUT -o OUTPUT`: one input, then the run's report, picture and summary.
    Returns the exit status; every failure is one line on `stderr`."""
    stderr = sys.stderr if stderr is None else stderr
    result = run_input(input, output, options, stdin=stdin, stdout=stdout, log=stderr)
    if not result.ok:
        if result.error is not None:
            write_line(stderr, result.error)
        return result.exit_status
    report = RunReport(input, output, result.input_format or "hlo", result.output_format or "hlo",
                       options.passes, strict=options.strict, spmd=options.spmd, inputs=[result])
    try:
        for path, render in report_outputs(options):
            write_report_output(path, render(report), stdout)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line, as for the input
        status, line = describe_failure(exc, display_name(input), options.v >= 1, stderr)
        if line is not None:
            write_line(stderr, line)
        return status
    stderr.write(render_summary(report))
    stderr.flush()
    return EXIT_OK


# ------------------------------------------------------------------------------------------
# Errors


def describe_failure(exc: BaseException, name: str, verbose: bool, log: TextIO) -> tuple[int, str | None]:
    """The exit status and the one line for an exception that ended a run (`name`: the input
    as messages show it). Tracebacks are for bugs only, on `log`, and only when `verbose`."""
    if isinstance(exc, UsageError):
        return EXIT_INPUT_ERROR, f"{PROG}: error: {exc}"
    if isinstance(exc, (HloParseError, FormatError)):
        return EXIT_INPUT_ERROR, exc.format()
    if isinstance(exc, HloIrError):  # a structurally invalid module found while reading it
        return EXIT_INPUT_ERROR, f"{name}: error: {_one_line(exc)}"
    if isinstance(exc, BrokenPipeError):
        # The reader went away (`hlo-dedup x.hlo | head`): stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_INPUT_ERROR, None
    if isinstance(exc, OSError):
        where = getattr(exc, "filename", None) or PROG
        return EXIT_INPUT_ERROR, f"{where}: error: {exc.strerror or exc}"
    if isinstance(exc, ValueError):  # any other malformed input found while reading it
        return EXIT_INPUT_ERROR, f"{name}: error: {_one_line(exc)}"
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, f"{PROG}: interrupted"
    if verbose:
        import traceback

        traceback.print_exception(exc, file=log)
    return EXIT_PASS_FAILED, (f"{PROG}: internal error: {type(exc).__name__}: {_one_line(exc)} "
                              "(run with --v=1 for the traceback)")


def write_line(stream: TextIO, line: str) -> None:
    stream.write(line.rstrip("\n") + "\n")
    stream.flush()


def _one_line(text: object) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _binary(stream):  # noqa: ANN001, ANN202 - a text stream's bytes underneath, if it has them
    return getattr(stream, "buffer", stream)
