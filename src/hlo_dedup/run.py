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

import contextlib
import gc
import os
import signal
import sys
import time
from typing import Any, Callable, Iterator, Sequence, TextIO

from .plain import FrozenRecord, init_frozen
from .io.files import check_output, same_file_key, write_file
from .io.formats import (
    STDIO,
    FormatError,
    compress_for,
    decode_input,
    detect_format,
    display_name,
    modules_from_text,
    output_format_for,
    proto_device_assignment,
    read_source,
    render_chunks,
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
    render_summary,
)
from .text import HloParseError

PROG = "hlo-dedup"


class UsageError(Exception):
    """A command-line mistake: exit 2 with one line."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the program is (see `signals_interrupt`) so that it
    stops as on Ctrl-C: child processes ended, temporary files removed, one line, and exit
    status 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """For the block, SIGTERM and SIGHUP raise `Terminated` (in the main thread only: Python
    delivers signals there, and refuses a handler from any other thread)."""

    def interrupt(signum: int, frame: object) -> None:
        raise Terminated(signum)

    names = ("SIGTERM", "SIGHUP")
    try:
        previous = {sig: signal.signal(sig, interrupt) for sig in (getattr(signal, n) for n in names if hasattr(signal, n))}
    except ValueError:  # not the main thread
        previous = {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class RunOptions(FrozenRecord):
    """Everything a run is asked to do, typed; the same for every input of a batch run.

    `output_format` None: from each output's name. `report`, `dot` and `html` name the run's
    aggregate outputs (`-`: standard output); they cover every module of the run.
    `report_only`: run everything but write no module output (the aggregate outputs still are).
    `max_peak_increase`: bytes; folds raising a peak by more are refused. `price`: who prices
    the folds in memory, `model` (the pure-Python estimate, fold by fold), `xla` (XLA:CPU
    compiles each module before and after; the budget is then decided with its peaks, see
    `hlo_dedup.price`) or `none` (no price: the same folds, no peak figures, no budget).
    `price_backend`: the backend the model prices for, `native` (bf16 and f16 as written) or
    `xla-cpu` (computed in f32, as XLA:CPU does); with `price` `xla` or `none` it plays no
    part (XLA:CPU is measured, or nothing is priced).
    `command_line` is the command as typed, for the page to say what produced it.
    `participants`: the replicas x partitions --verify runs modules on (None: what they state or need);
    `verify_timeout`: the seconds its run of an input may take (None: `equivalence.DEFAULT_TIMEOUT`).
    """

    __slots__ = ("passes", "input_format", "output_format", "split_input_file", "strict", "max_peak_increase",
                 "spmd", "verify", "v", "vmodule", "report", "dot", "report_only", "html", "command_line",
                 "price", "participants", "verify_timeout", "price_backend")

    def __init__(self, passes: tuple[str, ...] = DEFAULT_PIPELINE, input_format: str | None = None,
                 output_format: str | None = None, split_input_file: bool = False, strict: bool = False,
                 max_peak_increase: int | None = None, spmd: bool = True, verify: bool = False, v: int = 0,
                 vmodule: str = "", report: str | None = None, dot: str | None = None, report_only: bool = False,
                 html: str | None = None, command_line: str = "", price: str = "model",
                 participants: Any = None, verify_timeout: float | None = None, price_backend: str = "native") -> None:
        init_frozen(self, passes, input_format, output_format, split_input_file, strict, max_peak_increase, spmd,
                    verify, v, vmodule, report, dot, report_only, html, command_line, price, participants,
                    verify_timeout, price_backend)

    @property
    def model_backend(self) -> str:
        """The backend the model prices for in this run: `price_backend`, or `native` when
        XLA:CPU is measured or nothing is priced (`price` `xla`, `none`)."""
        return "native" if self.price in ("xla", "none") else self.price_backend

    @property
    def verbose(self) -> bool:
        """VLOG lines were asked for (then no live progress display: they would interleave)."""
        return bool(self.v or self.vmodule)


def report_outputs(options: RunOptions) -> Iterator[tuple[str, str, Callable[[RunReport], bytes]]]:
    """(option, path, renderer) of each aggregate output asked for, in the order they are
    written. `--dot` draws a picture through Graphviz when its name asks for one (`.svg`)."""
    if options.dot:
        from .report.dot import image_format_for, render_dot, render_image  # a plain run never draws
        from .report.undecodable import ERRORS as UNDECODABLE

        image = None if options.dot == STDIO else image_format_for(options.dot)
        if image is None:
            yield "--dot", options.dot, lambda report: render_dot(report).encode("utf-8", UNDECODABLE)
        else:
            yield "--dot", options.dot, lambda report: render_image(render_dot(report), image)
    if options.report:
        from .report.json import render_json
        from .report.undecodable import ERRORS as UNDECODABLE

        yield "--report", options.report, lambda report: render_json(report).encode("utf-8", UNDECODABLE)
    if options.html:
        from .report.html import render_html

        yield "--html", options.html, lambda report: render_html(report, command_line=options.command_line).encode()


def write_report_outputs(report: RunReport, options: RunOptions, stdout: TextIO | None = None) -> list[str]:
    """Render and write the run's aggregate outputs (`-`: standard output); the one-line
    error of each that could not be written."""
    errors = []
    drawing_errors: tuple[type[Exception], ...] = ()
    if options.dot:
        from .report.dot import GraphvizError

        drawing_errors = (GraphvizError,)
    for _, path, render in report_outputs(options):
        try:
            data = render(report)
            if path == STDIO:
                write_output(data, STDIO, _binary(stdout))
            else:
                write_file(path, data)
        except drawing_errors as exc:
            errors.append(FormatError(path, str(exc)).format())
        except OSError as exc:
            errors.append(FormatError(path, exc.strerror or str(exc)).format())
    return errors


def check_outputs(options: RunOptions, runs: Sequence[tuple[str, str | None]], *,
                  check_module_outputs: bool = True) -> None:
    """Before anything is written: UsageError or FormatError if an output cannot be written
    or two of them, or an output and an input, are the same file.

    `runs` are the (input, output) pairs of the run (output None: none is written, as with
    --report-only); an output may be its own input (the module is rewritten in place) but no
    other run's input. With `check_module_outputs` False (batch mode, whose output
    directories do not exist yet) only the aggregate outputs are checked for writability."""
    if options.report_only:
        runs = [(input, None) for input, _ in runs]
    aggregates = [(flag, path) for flag, path, _ in report_outputs(options)]
    to_stdout = [flag for flag, path in [*aggregates, *(("-o", out) for _, out in runs)] if path == STDIO]
    if len(to_stdout) > 1:
        raise UsageError(f"{to_stdout[0]} - and {to_stdout[1]} - would both write to standard output: "
                         "give one of them a file")
    if options.dot and options.dot != STDIO:
        from .report.dot import graphviz_missing, image_format_for

        missing = graphviz_missing(options.dot) if image_format_for(options.dot) else None
        if missing:
            raise UsageError(missing)
    checked = [path for _, path in aggregates] + ([out for _, out in runs if out is not None]
                                                  if check_module_outputs else [])
    for path in checked:
        if path != STDIO:
            try:
                check_output(path)
            except OSError as exc:
                raise FormatError(path, exc.strerror or str(exc)) from None

    owners: dict[tuple, tuple[str, int]] = {}  # file -> (how an input or output names it, run)
    for index, (input, _) in enumerate(runs):
        key = same_file_key(input) if input != STDIO else None
        if key is not None:
            owners.setdefault(key, (f"the input {input}", index))
    for index, (_, output) in enumerate(runs):
        key = same_file_key(output) if output not in (STDIO, None) else None
        if key is None:
            continue
        owner = owners.get(key)
        if owner is not None and owner[1] != index:
            raise UsageError(f"the output {output} is {owner[0]}: nothing written")
        owners[key] = (f"the output {output}", index)
    for flag, path in aggregates:
        key = same_file_key(path) if path != STDIO else None
        if key is None:
            continue
        if key in owners:
            raise UsageError(f"{flag} {path} is {owners[key][0]}: nothing written")
        owners[key] = (f"{flag} {path}", -1)


# ------------------------------------------------------------------------------------------
# One input


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: the IR is millions of long-lived objects that
    each automatic full collection would rescan for nothing (a tenth of a second per 20,000
    instructions, taken wherever the collection happens to fall)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run_input(input: str, output: str | None, options: RunOptions, *, stdin=None, stdout=None,  # noqa: ANN001
              log: TextIO | None = None) -> InputResult:
    """Read `input` (`-`: stdin), run the passes on each module, write `output` (`-`: stdout;
    None with --report-only: nothing is written).

    `log` receives the passes' VLOG lines, the `--verify` lines and, with --v, tracebacks.
    Nothing is written unless every pass (and --verify) succeeded. The cyclic garbage collector
    is paused for the run (`collector_paused`).
    """
    log = sys.stderr if log is None else log
    result = InputResult(input, output)
    started = time.perf_counter()
    with collector_paused():
        try:
            _run(result, options, stdin, stdout, log)
        except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: BLE001 - the result says what failed
            result.exit_status, result.error = describe_failure(exc, display_name(input), options.v >= 1, log)
    result.seconds = time.perf_counter() - started
    return result


def _run(result: InputResult, options: RunOptions, stdin, stdout, log: TextIO) -> None:  # noqa: ANN001
    from . import logs
    from .progress import make_progress

    input, output = result.input, result.output
    out_fmt = None if output is None else output_format_for(output, options.output_format)
    result.output_format = out_fmt
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
        text, container = decode_input(data, name, in_fmt)
        assignment = proto_device_assignment(data, name, format=in_fmt) if options.verify else None
        del data  # the IR is built without the input's bytes beside it
        modules = modules_from_text(text, name, container=container, spmd=options.spmd,
                                    split_input_file=options.split_input_file)
        result.input_format = in_fmt
        result.timings["parse"] = time.perf_counter() - t0
        if out_fmt not in ("hlo", None) and len(modules) != 1:
            raise FormatError(display_name(output), f"{out_fmt} output holds one module, "
                              f"the input has {len(modules)} (write HLO text instead)")

        xla_priced = options.price == "xla"
        befores = [m.to_text() for m in modules] if options.verify or xla_priced else []

        steps = [f"{m.name}: {p}" for m in modules for p in passes]
        progress.phase(steps[0] if steps else "passes", total=len(steps))
        t0 = time.perf_counter()
        done = 0
        for index, module in enumerate(modules):
            run = ModuleRun(module.name, input, index)
            result.modules.append(run)
            pipeline = Pipeline.from_names(passes, strict=options.strict,  # XLA's peaks decide a budget later
                                           max_peak_increase=None if xla_priced else options.max_peak_increase,
                                           price_backend=options.model_backend, priced=options.price != "none")
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
                detail = one_line(exc)
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
        if result.error is None and xla_priced:
            progress.phase(f"XLA:CPU's peak of {name}")
            failure = _price_with_xla(befores, modules, result.modules, options, name)
            if failure is not None:
                result.exit_status, result.error = failure
        result.timings["passes"] = time.perf_counter() - t0
        if result.error is not None:
            return

        payload, rendered = None, 0.0
        if output is not None and out_fmt is not None:
            progress.phase("print")
            t0 = time.perf_counter()
            # Text is printed while it is written (below); proto formats are rendered here.
            payload = compress_for(output, render_chunks(modules, out_fmt, display_name(output)))
            rendered = time.perf_counter() - t0

    # The display is gone before anything is written (stdout may be the same terminal).
    if options.verify:
        failure = _verify(befores, modules, result.modules, name, log, options, assignment)
        if failure is not None:
            result.exit_status, result.error = failure
            return
    if payload is None or output is None:
        return
    t0 = time.perf_counter()
    result.bytes_out = write_output(payload, output, _binary(stdout))
    result.timings["print"] = rendered + time.perf_counter() - t0


def _price_with_xla(befores: list[str], modules: list, runs: list[ModuleRun], options: RunOptions,  # noqa: ANN001
                    name: str) -> tuple[int, str] | None:
    """`--price=xla`: each module's XLA peak before and after (its ModuleRun's `xla_price`);
    with a budget, the module and pass results XLA's peak allows replace the first ones."""
    from .price import price_with_xla
    from .xla import INSTALL_HINT, XlaError, XlaUnavailableError

    for index, (before, module, run) in enumerate(zip(befores, modules, runs)):
        def rerun(refused, before=before):  # noqa: ANN001, ANN202
            (again,) = modules_from_text(before, name, spmd=options.spmd, split_input_file=False)
            pipeline = Pipeline.from_names(options.passes, strict=options.strict, refused_folds=refused)
            return again, pipeline.run(again).passes

        started = time.perf_counter()
        try:
            modules[index], run.passes, run.xla_price = price_with_xla(
                before, module, run.passes, rerun, options.max_peak_increase)
        except XlaUnavailableError:
            return EXIT_INPUT_ERROR, (f"{name}: error: --price=xla compiles the modules with XLA:CPU, which "
                                      f"needs jax and jaxlib: {INSTALL_HINT}")
        except XlaError as exc:
            return EXIT_INPUT_ERROR, (f"{name}: error: --price=xla: XLA:CPU cannot compile module "
                                      f"{module.name}: {one_line(exc)}")
        run.xla_price["seconds"] = round(time.perf_counter() - started, 6)  # within the passes' time
    return None


def _verify(befores: list[str], modules: list, runs: list[ModuleRun], name: str,  # noqa: ANN001
            log: TextIO, options: RunOptions, assignment: tuple[int, int] | None) -> tuple[int, str] | None:
    """`--verify`: the rewrite must compute bitwise what the input computed; each verdict is
    kept in its ModuleRun (the report's `verify`). The exit status is `hlo-dedup verify`'s:
    1 the results differ, 2 XLA:CPU could not run a module or the input is no reference."""
    from .equivalence import check_equivalence

    for before, module, run in zip(befores, modules, runs):
        label = f"verify {module.name}"
        verdict = "error"
        try:
            report = check_equivalence(before, module.to_text(), participants=options.participants,
                                       device_assignments=(assignment, assignment), timeout=options.verify_timeout)
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is exit 2, as for `verify`
            print(f"{label}: error: internal error: {type(exc).__name__}: {one_line(exc)}", file=log)
            status = EXIT_INPUT_ERROR
        else:
            print(f"{label}: {report.summary()}", file=log)
            status, verdict = report.exit_code, report.status
            run.verify = {"status": report.status, "summary": report.summary(), "exit_code": report.exit_code,
                          "seed": report.seed, "runs": report.runs, "num_outputs": report.num_outputs,
                          "num_replicas": report.num_replicas, "num_partitions": report.num_partitions,
                          "participants_source": report.participants_source,
                          "participants_detail": report.participants_detail,
                          "judged_seeds": list(report.judged_seeds or ()),
                          "baseline_reproduced": report.baseline_reproduced, "inputs": report.inputs}
        if status == EXIT_PASS_FAILED:
            return status, (f"{name}: error: --verify: module {module.name} computes different results "
                            "after the passes; nothing written")
        if verdict == "cannot_judge":
            return EXIT_INPUT_ERROR, (f"{name}: error: --verify: module {module.name}: cannot judge, its input "
                                      "is no reference on XLA:CPU; nothing written")
        if status != EXIT_OK:
            return EXIT_INPUT_ERROR, (f"{name}: error: --verify: module {module.name} could not be run "
                                      "on XLA:CPU; nothing written")
    return None


# ------------------------------------------------------------------------------------------
# Single-file mode


def run_file(input: str, output: str | None, options: RunOptions, *, stdin=None, stdout=None,  # noqa: ANN001
             stderr: TextIO | None = None) -> int:
    """`hlo-dedup INPUT -o OUTPUT`: one input, then the run's report, picture and summary
    (`output` None: --report-only). Returns the exit status; every failure is one line on
    `stderr`."""
    stderr = sys.stderr if stderr is None else stderr
    try:
        check_outputs(options, [(input, output)])
    except (UsageError, FormatError) as exc:
        status, line = describe_failure(exc, display_name(input), False, stderr)
        write_line(stderr, line or "")
        return status
    result = run_input(input, output, options, stdin=stdin, stdout=stdout, log=stderr)
    if not result.ok:
        if result.error is not None:
            write_line(stderr, result.error)
        return result.exit_status
    report = RunReport(input, output, result.input_format or "hlo", result.output_format or "hlo",
                       options.passes, strict=options.strict, spmd=options.spmd, inputs=[result],
                       max_peak_increase=options.max_peak_increase, report_only=options.report_only,
                       price=options.price, price_backend=options.model_backend)
    try:
        errors = write_report_outputs(report, options, stdout)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line, as for the input
        status, line = describe_failure(exc, display_name(input), options.v >= 1, stderr)
        if line is not None:
            write_line(stderr, line)
        return status
    if errors:
        for line in errors:
            write_line(stderr, line)
        return EXIT_INPUT_ERROR
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
        return EXIT_INPUT_ERROR, f"{name}: error: {one_line(exc)}"
    if isinstance(exc, BrokenPipeError) and _stdout_reader_left():
        # The reader went away (`hlo-dedup x.hlo -o - | head`): it had what it wanted, so the
        # run stops quietly and succeeds, as it did when the output was one write.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_OK, None
    if isinstance(exc, OSError):
        where = display_name(exc.filename) if getattr(exc, "filename", None) else PROG
        return EXIT_INPUT_ERROR, f"{where}: error: {exc.strerror or exc}"
    if isinstance(exc, ValueError):  # any other malformed input found while reading it
        return EXIT_INPUT_ERROR, f"{name}: error: {one_line(exc)}"
    if isinstance(exc, Terminated):
        return 128 + exc.signum, f"{PROG}: terminated by {signal.Signals(exc.signum).name}"
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, f"{PROG}: interrupted"
    if verbose:
        import traceback

        traceback.print_exception(exc, file=log)
    return EXIT_PASS_FAILED, (f"{PROG}: internal error: {type(exc).__name__}: {one_line(exc)} "
                              "(run with --v=1 for the traceback)")


def _stdout_reader_left() -> bool:
    """Standard output is a pipe whose reading end is closed (what a broken pipe means to
    a command); a broken pipe elsewhere, such as to a worker process, is an error."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def write_line(stream: TextIO, line: str) -> None:
    stream.write(line.rstrip("\n") + "\n")
    stream.flush()


def one_line(text: object) -> str:
    """`text` on one line: its non-blank lines joined by spaces."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _binary(stream):  # noqa: ANN001, ANN202 - a text stream's bytes underneath, if it has them
    return getattr(stream, "buffer", stream)
