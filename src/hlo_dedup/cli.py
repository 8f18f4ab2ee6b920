"""`hlo-dedup`: an hlo-opt-style driver for the dedup passes.

    hlo-dedup [INPUT|-] [-o OUTPUT] [--passes=p1,p2,...] [--list-passes]
              [--format=hlo|txt|pb|pbtxt] [--emit-proto | --output-format=hlo|pb|pbtxt]
              [--split-input-file] [--v=N] [--vmodule=file=N,...] [--report=FILE.json]
              [--strict] [--spmd | --no-spmd] [--verify]
    hlo-dedup INPUT... --output-dir OUT [-j N] [the options above]     (batch mode)
    hlo-dedup verify BEFORE AFTER [--seed N] [--runs N] [--json]

Exit status: 0 success; 1 a pass failed (e.g. a RET_CHECK) — nothing is written; 2 a usage,
I/O or parse error, reported on one line (`file:line:col: error: ...` for HLO text).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import NoReturn, Sequence

from . import __version__
from .io.formats import (
    INPUT_FORMATS,
    OUTPUT_FORMATS,
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
from .ir.instruction import HloIrError
from .passes import DEFAULT_PIPELINE, PassError, Pipeline, pass_names
from .report import ModuleRun, RunReport
from .text import HloParseError

PROG = "hlo-dedup"
EXIT_OK, EXIT_PASS_FAILED, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """\
Run the Neuron compiler's dedup passes on an XLA HLO module, like XLA's hlo-opt.
Without --passes the default pipeline runs, in neuronx-cc's order: {default}.
"""

EPILOG = """\
formats:
  input   hlo/txt (HLO text), pb (binary HloSnapshot, HloProto or HloModuleProto, tried in
          that order), pbtxt (the same as text protos). Default: from the extension (.pb,
          .pbtxt), else from the content, so binary protos named *.hlo are read too.
  output  hlo (text; several modules are joined with a newline, as hlo-opt does), pb
          (binary HloModuleProto) or pbtxt (text HloModuleProto). Default: from -o's
          extension, else hlo. Reading protos needs the proto extra (pip install
          'hlo-dedup[proto]'); writing them needs the xla extra: pip install 'hlo-dedup[xla]'.

--list-passes prints the registered names sorted and comma-joined, as hlo-opt does.
--emit-proto writes a text proto (hlo-opt's flag); as in hlo-opt no pass runs unless
--passes is given. --passes= (empty) runs no pass: a format conversion or round trip.

A summary of each pass (folds, bytes removed, hazards) goes to stderr; --report also writes
it as JSON (schema: hlo_dedup/report_schema.json). Outputs are written atomically and only
after every pass succeeded; -o may name the input.

batch mode (several INPUTs, or --output-dir): each INPUT is a file, a directory (every *.hlo,
*.txt, *.pb, *.pbtxt beneath it, recursively, sorted; hidden entries skipped) or a glob pattern
(quoted; ** recurses). Each file is processed as a single-file run would, by a pool of -j
worker processes (default: the CPU count), and written to OUT under its path relative to its
directory or the glob's fixed prefix (a plain file: its name). A failing file does not stop
the others; failures are listed at the end. --report holds one entry per file (`inputs`).

exit status: 0 success, 1 a pass failed (nothing written), 2 usage, I/O or parse error.
In batch mode: 2 if any file could not be read or parsed, else 1 if a pass failed, else 0.
"""


class UsageError(Exception):
    """A command-line mistake: exit 2 with one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not usage + message
        raise UsageError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=DESCRIPTION.format(default=", ".join(DEFAULT_PIPELINE)),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("input", nargs="*", metavar="INPUT",
                        help="input file, or - for standard input (the default); several files, "
                             "directories or globs: batch mode")
    parser.add_argument("-o", "--output", metavar="OUTPUT",
                        help="output file, or - for standard output (the default)")
    parser.add_argument("--output-dir", metavar="OUT",
                        help="batch mode: write each input's output under OUT, mirroring its relative path")
    parser.add_argument("-j", "--jobs", type=_positive_int, metavar="N",
                        help="batch mode: worker processes (default: the number of CPUs)")
    parser.add_argument("--passes", metavar="P1,P2,...",
                        help="comma-separated passes to run in order (default: the neuronx-cc pipeline)")
    parser.add_argument("--list-passes", action="store_true", help="print the registered passes and exit")
    parser.add_argument("--format", choices=INPUT_FORMATS, help="input format (default: detected)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--output-format", choices=OUTPUT_FORMATS, help="output format (default: from -o)")
    out.add_argument("--emit-proto", action="store_true",
                     help="write a text-proto HloModuleProto (= --output-format=pbtxt; no passes unless --passes)")
    parser.add_argument("--split-input-file", action="store_true",
                        help="split HLO text on '// -----' lines and process each module in turn")
    parser.add_argument("-v", "--v", type=int, default=0, dest="v", metavar="N",
                        help="XLA-style verbose logging level (VLOG) on stderr")
    parser.add_argument("--vmodule", default="", metavar="FILE=N,...",
                        help="per-source-file VLOG levels, e.g. neuron_all_gather_duplicate_remover=2")
    parser.add_argument("--report", metavar="FILE.json",
                        help="also write the run report as JSON (- : standard output, with -o FILE)")
    parser.add_argument("--dot", metavar="FILE.dot",
                        help="also draw the folds and hazards as a Graphviz graph (render: dot -Tsvg FILE.dot)")
    parser.add_argument("--strict", action="store_true",
                        help="refuse hazardous all-gather folds (and report them as refused)")
    parser.add_argument("--spmd", action=argparse.BooleanOptionalAction, default=True,
                        help="read modules as SPMD programs (default); --no-spmd is XLA's text-loader default")
    parser.add_argument("--verify", action="store_true",
                        help="before writing, run input and output on XLA:CPU and require bitwise-equal "
                             "results (needs the xla extra); a difference is exit 1, nothing written")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _pass_list(raw: str | None, emit_proto: bool) -> tuple[str, ...]:
    if raw is None:
        return () if emit_proto else DEFAULT_PIPELINE
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    known = set(pass_names())
    for name in names:
        if name not in known:
            raise UsageError(f"Pass {name} not found. Known passes: {','.join(pass_names())}")
    return names


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


class _Run:
    """One invocation, after argument parsing."""

    def __init__(self, args: argparse.Namespace, stdin, stdout, stderr) -> None:
        self.args = args
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr

    def execute(self) -> int:
        """One input to one output. The cyclic garbage collector is paused for the run: the
        IR is millions of long-lived objects it would rescan again and again for nothing."""
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._execute()
        finally:
            if gc_was_enabled:
                gc.enable()

    def _execute(self) -> int:
        args = self.args
        passes = _pass_list(args.passes, args.emit_proto)
        out_fmt = "pbtxt" if args.emit_proto else output_format_for(args.output, args.output_format)
        if args.output == STDIO and out_fmt == "pb" and _isatty(self.stdout):
            raise UsageError("refusing to write a binary proto to a terminal; use -o FILE")
        if args.report == STDIO and args.output == STDIO:
            raise UsageError("--report - writes the JSON to standard output, which holds the module: add -o FILE")
        if args.input == STDIO and _isatty(self.stdin):
            raise UsageError("no input: give a file, or - with standard input redirected")

        from . import logs

        try:
            logs.configure(args.v, args.vmodule, self.stderr)
        except ValueError as exc:
            raise UsageError(str(exc)) from None

        from .progress import make_progress

        # Log lines and a live display would interleave on stderr: verbose runs show no display.
        progress = make_progress(self.stderr, enabled=None if not (args.v or args.vmodule) else False)
        name = display_name(args.input)
        with progress:
            # --- parse
            progress.phase(f"parse {name}")
            t0 = time.perf_counter()
            try:
                data = read_source(args.input, self.stdin_buffer())
            except OSError as exc:
                raise FormatError(name, exc.strerror or str(exc)) from None
            in_fmt = args.format or detect_format(args.input, data)
            modules = modules_from_bytes(data, name, spmd=args.spmd, format=in_fmt,
                                         split_input_file=args.split_input_file)
            del data
            report = RunReport(args.input, args.output, in_fmt, out_fmt, passes,
                               strict=args.strict, spmd=args.spmd)
            self.report = report
            report.timings["parse"] = time.perf_counter() - t0
            if out_fmt != "hlo" and len(modules) != 1:
                raise FormatError(display_name(args.output), f"{out_fmt} output holds one module, "
                                  f"the input has {len(modules)} (write HLO text instead)")

            befores = [m.to_text() for m in modules] if args.verify else []

            # --- passes
            steps = [f"{m.name}: {p}" for m in modules for p in passes]
            progress.phase(steps[0] if steps else "passes", total=len(steps))
            t0 = time.perf_counter()
            failure: str | None = None
            done = 0
            for index, module in enumerate(modules):
                run = ModuleRun(module.name, args.input, index)
                report.modules.append(run)
                pipeline = Pipeline.from_names(passes, strict=args.strict)
                started = time.perf_counter()

                def after_pass(p, result, run=run) -> None:
                    nonlocal done
                    run.passes.append(result)
                    done += 1
                    progress.advance(steps[done] if done < len(steps) else None)

                try:
                    pipeline.run(module, after_pass=after_pass)
                except Exception as exc:  # noqa: BLE001 - a pass failing in any way is exit 1
                    failed = passes[len(run.passes)]
                    detail = _one_line(exc)
                    if not isinstance(exc, (PassError, HloIrError)):
                        detail = f"internal error: {type(exc).__name__}: {detail}"
                        if args.v >= 1:
                            import traceback

                            traceback.print_exc(file=self.stderr)
                    failure = f"{name}: error: pass {failed} failed on module {module.name}: {detail}"
                    break
                run.seconds = time.perf_counter() - started
            report.timings["passes"] = time.perf_counter() - t0

            if failure is None:
                # --- print
                progress.phase("print")
                t0 = time.perf_counter()
                payload = render_modules(modules, out_fmt, display_name(args.output))
                rendered = time.perf_counter() - t0

        # The display is gone before anything is written (stdout may be the same terminal).
        if failure is None and args.verify:
            failure = self.verify(befores, modules)
        if failure is not None:
            self.error(failure)
            return EXIT_PASS_FAILED
        t0 = time.perf_counter()
        write_output(payload, args.output, self.stdout_buffer())
        report.timings["print"] = rendered + time.perf_counter() - t0

        if getattr(args, "dot", None):
            from .fold_graph import folds_to_dot
            from .io.files import write_atomic

            try:
                write_atomic(args.dot, folds_to_dot(report.modules))
            except OSError as exc:
                raise FormatError(args.dot, exc.strerror or str(exc)) from None
        if args.report:
            from .io.files import write_atomic

            try:
                if args.report == STDIO:
                    write_output(report.dumps().encode(), STDIO, self.stdout_buffer())
                else:
                    write_atomic(args.report, report.dumps())
            except OSError as exc:
                raise FormatError(args.report, exc.strerror or str(exc)) from None
        self.stderr.write(report.summary())
        self.stderr.flush()
        return EXIT_OK

    def verify(self, befores: list[str], modules: list) -> str | None:
        """`--verify`: the rewrite must compute bitwise what the input computed."""
        from .cli_verify import verify_output

        for before, module in zip(befores, modules):
            status = verify_output(before, module.to_text(), stream=self.stderr, label=f"verify {module.name}")
            if status == 1:
                return f"{display_name(self.args.input)}: error: --verify: module {module.name} computes different results after the passes; nothing written"
            if status == 2:
                return f"{display_name(self.args.input)}: error: --verify: module {module.name} could not be run on XLA:CPU; nothing written"
        return None

    def stdin_buffer(self):
        return getattr(self.stdin, "buffer", self.stdin)

    def stdout_buffer(self):
        return getattr(self.stdout, "buffer", self.stdout)

    def error(self, line: str) -> None:
        self.stderr.write(line.rstrip("\n") + "\n")
        self.stderr.flush()


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def main(argv: Sequence[str] | None = None, *, stdin=None, stdout=None, stderr=None) -> int:
    """Run the command; returns the exit status (never raises for user errors)."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] == "verify":
        from . import cli_verify

        return cli_verify.main(arguments[1:], stdout=stdout, stderr=stderr)
    parser = build_parser()
    runner = _Run(argparse.Namespace(v=0), stdin, stdout, stderr)

    def dispatch() -> int:
        try:
            args = parser.parse_intermixed_args(arguments)
        except SystemExit as exc:  # --help / --version
            return int(exc.code or 0)
        runner.args = args
        if args.list_passes:
            stdout.write(",".join(pass_names()) + "\n")
            stdout.flush()
            return EXIT_OK
        if len(args.input) > 1 or args.output_dir is not None:
            from . import batch

            return batch.run(args, stdout=stdout, stderr=stderr)
        args.input = args.input[0] if args.input else STDIO
        args.output = STDIO if args.output is None else args.output
        return runner.execute()

    return run_guarded(runner, dispatch)


def run_guarded(runner: _Run, body) -> int:  # noqa: ANN001 - body: () -> int
    """Run `body`, turning user errors into one line on `runner.error` and an exit status."""
    try:
        return body()
    except UsageError as exc:
        runner.error(f"{PROG}: error: {exc}")
        return EXIT_USAGE
    except HloParseError as exc:
        runner.error(exc.format())
        return EXIT_USAGE
    except FormatError as exc:
        runner.error(exc.format())
        return EXIT_USAGE
    except HloIrError as exc:  # a structurally invalid module found while reading it
        runner.error(f"{display_name(getattr(runner.args, 'input', STDIO))}: error: {_one_line(exc)}")
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (`hlo-dedup x.hlo | head`): stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_USAGE
    except OSError as exc:
        where = getattr(exc, "filename", None) or PROG
        runner.error(f"{where}: error: {exc.strerror or exc}")
        return EXIT_USAGE
    except ValueError as exc:  # any other malformed input found while reading it
        runner.error(f"{display_name(getattr(runner.args, 'input', STDIO))}: error: {_one_line(exc)}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        runner.error(f"{PROG}: interrupted")
        return 130
    except Exception as exc:  # a bug: one line, the traceback only when asked for (--v>=1)
        if getattr(runner.args, "v", 0) >= 1:
            import traceback

            traceback.print_exc(file=runner.stderr)
        runner.error(f"{PROG}: internal error: {type(exc).__name__}: {_one_line(exc)} "
                     "(run with --v=1 for the traceback)")
        return EXIT_PASS_FAILED


if __name__ == "__main__":
    sys.exit(main())
