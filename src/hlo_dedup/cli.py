"""`hlo-dedup`: an hlo-opt-style driver for the dedup passes — the command line only.

    hlo-dedup [INPUT|-] [-o OUTPUT] [--passes=p1,p2,...] [--list-passes]
              [--format=hlo|txt|pb|pbtxt] [--emit-proto | --output-format=hlo|pb|pbtxt]
              [--split-input-file] [--v=N] [--vmodule=file=N,...] [--report=FILE.json]
              [--dot=FILE.dot] [--html=FILE.html] [--strict] [--max-peak-increase=BYTES]
              [--spmd | --no-spmd] [--verify [--replicas N] [--partitions M] [--timeout S]]
              [--report-only]
              [--price=model|xla|none] [--price-backend=native|xla-cpu]
    hlo-dedup INPUT... (--output-dir OUT | --report-only) [-j N] [--stage REGEX]
              [--module REGEX] [the options above]                       (batch mode)
    hlo-dedup verify BEFORE AFTER [--seed N] [--runs N] [--replicas N] [--partitions M]
              [--timeout S] [--rtol R] [--atol A] [--json]

This module parses the arguments into `hlo_dedup.run.RunOptions`, hands them to
`run.run_file` (one input) or `batch.run_batch` (several), and turns errors into exit
statuses: 0 success; 1 a pass failed (e.g. a RET_CHECK) — nothing is written; 2 a usage,
I/O or parse error, reported on one line (`file:line:col: error: ...` for HLO text).
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import sys
from typing import NoReturn, Sequence, TextIO

from . import __version__, streams
from .analysis.budget import parse_budget
from .analysis.module_liveness import PRICE_BACKENDS
from .io.formats import INPUT_FORMATS, OUTPUT_FORMATS, STDIO, output_format_for
from .passes import DEFAULT_PIPELINE, pass_names
from .passes.registry import unknown_pass_message
from .price import PRICES
from .report import EXIT_INPUT_ERROR, EXIT_OK
from .run import PROG, RunOptions, UsageError, describe_failure, one_line, run_file, signals_interrupt, write_line

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
it as JSON (schema: hlo_dedup/report/schema.json), --dot draws it (a .svg/.png/.pdf name
is drawn by Graphviz; - is standard output) and --html writes it as one self-contained page
(no network access; open it in any browser). Outputs are written only after every pass
succeeded, through symlinks and devices, keeping mode and owner; -o may name the input, no
two outputs may name the same file and --report/--dot/--html may not name an input.

batch mode (several INPUTs, a directory or a glob pattern, --output-dir, --stage or
--module): each INPUT is a file, a directory (searched recursively; hidden entries left out)
or a glob pattern (quoted; ** recurses; no symbolic-link loop is followed). Point it at what
a framework wrote: an XLA dump (--xla_dump_to), a Neuron compile cache or work directory, NxD
artifacts. Files that are not HLO (by name where the layout says so: buffer assignments,
LLVM IR, object code, NEFFs, ...; else by content), FIFOs and devices are skipped with their
reason; a module XLA dumped at one stage as text and as proto (or .gz) is processed once. Each
file is processed as a single-file run would, by a pool of -j worker processes (default: the
CPU count), and written to OUT under its path relative to its directory or the glob's fixed
prefix (a plain file: its name), in the input's format. A failing file does not stop the
others; failures are listed at the end. --report covers every file (one `inputs` entry each,
and `batch.skipped`), --dot draws every module run. The summary gives one line per dumped
module, its stages in pipeline order.
  --stage REGEX    only files whose XLA dump stage (before_optimizations,
                   cpu_after_optimizations, 0001.<pipeline>.after_<pass>.before_<pass>, ...)
                   matches REGEX (searched, as --xla_dump_hlo_pass_re is)
  --module REGEX   only modules whose name (or Neuron cache key MODULE_<h>+<h>) matches REGEX
  --report-only    run everything and write --report/--dot, but no module output

--price=xla compiles each module on XLA:CPU as read and as rewritten (XLA's own CSE off,
its memory-minimizing scheduler) and reports XLA's peak before and after, for the module and
each compiled computation whose peak changed. With --max-peak-increase the budget is then
the module's XLA peak rise: the passes run without the model's budget; if XLA's peak rises
by more, the folds are ordered by the model's estimated rise and a bisection finds the
fewest to drop (the passes rerun with them refused), which costs at most 3 +
ceil(log2(folds)) compiles per module over budget (2 otherwise; a text compiled once is
not compiled again). Needs the xla extra; a module XLA:CPU cannot
compile is an error (exit 2).

exit status: 0 success, 1 a pass failed or --verify found a difference (nothing written),
2 usage, I/O or parse error, a module --verify could not run on XLA:CPU or cannot judge, or one
--price=xla could not compile.
In batch mode: 2 if any file could not be read or parsed, else 1 if a pass failed, else 0;
skipped files are not failures.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not usage + message
        raise UsageError(f"{message} (see --help)")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """The help formatter, told the width: left to find it, argparse imports `shutil` (and
    the compression modules shutil loads) for one formatter per `add_argument`, every run."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=terminal_columns() - 2)


def terminal_columns() -> int:
    """The width help is wrapped to, found as `shutil.get_terminal_size` finds it: `COLUMNS`,
    else standard output's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=DESCRIPTION.format(default=", ".join(DEFAULT_PIPELINE)),
        epilog=EPILOG,
        formatter_class=_Formatter,
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
    parser.add_argument("--stage", metavar="REGEX",
                        help="batch mode: only files whose XLA dump stage matches REGEX (e.g. before_optimizations)")
    parser.add_argument("--module", metavar="REGEX",
                        help="batch mode: only modules whose name (or Neuron cache key) matches REGEX")
    parser.add_argument("--report-only", action="store_true",
                        help="run the passes and write --report/--dot and the summary, but no module output")
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
                        help="also draw the folds and hazards as a Graphviz graph: DOT text (- : standard "
                             "output), or a picture for FILE.svg, .png or .pdf (needs Graphviz's dot)")
    parser.add_argument("--html", metavar="FILE.html",
                        help="also write the report as one self-contained HTML page: overview, every "
                             "all-gather, each fold's walk, hazards, what changed (searchable, sortable)")
    parser.add_argument("--strict", action="store_true",
                        help="refuse hazardous all-gather folds (and report them as refused)")
    parser.add_argument("--max-peak-increase", type=_byte_count, metavar="BYTES",
                        help="refuse all-gather folds that would raise their computation's estimated "
                             "peak memory by more than BYTES (0, 512KiB, 64MiB, 1.5GiB, ...); with "
                             "--price=xla, the module's peak on XLA:CPU (see below)")
    parser.add_argument("--price", choices=PRICES, default="model",
                        help="who prices the folds in memory: model (default; the pure-Python "
                             "estimate), xla (compile each module before and after on XLA:CPU and "
                             "report XLA's own peaks; needs the xla extra) or none (no price: the same "
                             "folds, no peak figures, about half the time on modules with many folds)")
    parser.add_argument("--price-backend", choices=tuple(PRICE_BACKENDS), default="native",
                        help="the backend the model's memory price is for: native (default; bf16 and f16 "
                             "arithmetic as written, as Neuron and GPUs run it) or xla-cpu (computed in f32 "
                             "between converts, as XLA:CPU does); no effect with --price=xla or none")
    parser.add_argument("--spmd", action=argparse.BooleanOptionalAction, default=True,
                        help="read modules as SPMD programs (default); --no-spmd is XLA's text-loader default")
    parser.add_argument("--verify", action="store_true",
                        help="before writing, run input and output on XLA:CPU and require bitwise-equal "
                             "results (needs the xla extra); nothing is written on a difference (exit 1) "
                             "or when XLA:CPU cannot run a module (exit 2), as with `hlo-dedup verify`")
    add_verify_arguments(parser)
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


def _byte_count(text: str) -> int:
    try:
        return parse_budget(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _pass_list(raw: str | None, emit_proto: bool) -> tuple[str, ...]:
    if raw is None:
        return () if emit_proto else DEFAULT_PIPELINE
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    known = set(pass_names())
    for name in names:
        if name not in known:
            raise UsageError(unknown_pass_message(name))
    return names


def options_from_args(args: argparse.Namespace, command_line: str = "") -> RunOptions:
    """The typed options of a parsed command line (`command_line`: as typed, for --html)."""
    if args.price == "none" and args.max_peak_increase is not None:
        raise UsageError("--max-peak-increase refuses folds by their memory price: drop --price=none")
    return RunOptions(
        passes=_pass_list(args.passes, args.emit_proto),
        input_format=args.format,
        output_format="pbtxt" if args.emit_proto else args.output_format,
        split_input_file=args.split_input_file,
        strict=args.strict,
        max_peak_increase=args.max_peak_increase,
        spmd=args.spmd,
        verify=args.verify,
        participants=given_participants(args),
        verify_timeout=args.timeout,
        v=args.v,
        vmodule=args.vmodule,
        report=args.report,
        dot=args.dot,
        report_only=args.report_only,
        html=args.html,
        command_line=command_line,
        price=args.price,
        price_backend=args.price_backend,
    )


def _is_batch(args: argparse.Namespace) -> bool:
    """Several inputs, a directory or a pattern, --output-dir or a selection: batch mode."""
    if len(args.input) > 1 or args.output_dir is not None or args.stage is not None or args.module is not None:
        return True
    if not args.input:
        return False
    (path,) = args.input
    if os.path.isdir(path):
        return True
    if os.path.lexists(path):
        return False
    from .io.discovery import has_magic  # loaded for a pattern only: it is a third of start-up

    return has_magic(path)


def _check_batch(args: argparse.Namespace) -> None:
    if args.output is not None:
        raise UsageError("-o names one output file: with several inputs use --output-dir DIR")
    if args.report_only and args.output_dir is not None:
        raise UsageError("--report-only writes no module output: drop --output-dir")
    if args.output_dir is None and not args.report_only:
        raise UsageError("several inputs, a directory or a pattern need --output-dir DIR for the outputs "
                         "(batch mode), or --report-only")
    if not args.input:
        raise UsageError("--output-dir needs at least one INPUT (file, directory or glob pattern)")
    if STDIO in args.input:
        raise UsageError("standard input (-) cannot be a batch-mode input")
    if args.html == STDIO and args.report == STDIO:
        raise UsageError("--html - and --report - would both write to standard output")


def _check_single(input: str, output: str | None, options: RunOptions, stdin, stdout) -> None:  # noqa: ANN001
    if output == STDIO and output_format_for(output, options.output_format) == "pb" and _isatty(stdout):
        raise UsageError("refusing to write a binary proto to a terminal; use -o FILE")
    if options.report == STDIO and output == STDIO:
        raise UsageError("--report - writes the JSON to standard output, which holds the module: add -o FILE")
    if options.html == STDIO and STDIO in (output, options.report):
        raise UsageError("--html - writes the page to standard output, which holds another output: add -o FILE")
    if input == STDIO and _isatty(stdin):
        raise UsageError("no input: give a file, or - with standard input redirected")


def _isatty(stream) -> bool:  # noqa: ANN001
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def main(argv: Sequence[str] | None = None, *, stdin=None, stdout=None, stderr=None) -> int:  # noqa: ANN001
    """Run the command; returns the exit status (never raises for user errors)."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    arguments = list(sys.argv[1:] if argv is None else argv)
    with signals_interrupt():
        if arguments and arguments[0] == "verify":
            return verify_main(arguments[1:], stdout=stdout, stderr=stderr)
        return _main(arguments, stdin, stdout, stderr)


def _main(arguments: list[str], stdin, stdout, stderr) -> int:  # noqa: ANN001
    verbose = False
    try:
        try:
            args = build_parser().parse_intermixed_args(arguments)
        except SystemExit as exc:  # --help / --version
            return int(exc.code or 0)
        verbose = args.v >= 1
        command_line = shlex.join([PROG, *arguments])
        if args.list_passes:
            stdout.write(",".join(pass_names()) + "\n")
            stdout.flush()
            return EXIT_OK
        if (args.replicas or args.partitions or args.timeout is not None) and not args.verify:
            raise UsageError("--replicas/--partitions/--timeout say how --verify runs the modules: add --verify")
        if _is_batch(args):
            _check_batch(args)
            from .batch import run_batch

            return run_batch(args.input, args.output_dir, options_from_args(args, command_line), jobs=args.jobs,
                             stdout=stdout, stderr=stderr, stage=args.stage, module=args.module)
        options = options_from_args(args, command_line)
        input = args.input[0] if args.input else STDIO
        if args.report_only and args.output is not None:
            raise UsageError("--report-only writes no module output: drop -o")
        output = None if args.report_only else STDIO if args.output is None else args.output
        _check_single(input, output, options, stdin, stdout)
        return run_file(input, output, options, stdin=stdin, stdout=stdout, stderr=stderr)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line and an exit status
        status, line = describe_failure(exc, PROG, verbose, stderr)
        if line is not None:
            write_line(stderr, line)
        return status


# ------------------------------------------------------------------------------------------
# `hlo-dedup verify BEFORE AFTER`


class _VerifyUsageError(Exception):
    pass


class _VerifyParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so `verify_main` always returns a status."""

    def error(self, message: str) -> NoReturn:
        raise _VerifyUsageError(message)


def build_verify_parser() -> argparse.ArgumentParser:
    parser = _VerifyParser(
        prog=f"{PROG} verify",
        description="Run BEFORE and AFTER on XLA:CPU with identical seeded inputs and compare every "
        "output bitwise; BEFORE runs twice, in separate processes, to show it reproduces itself. Exit 0 "
        "equal, 1 different (or AFTER does not finish where BEFORE does: see --timeout), 2 could not "
        "compile/run, or cannot judge (BEFORE does not reproduce itself, gives NaN/Inf, or does not finish "
        "within --timeout).",
    )
    parser.add_argument("before", metavar="BEFORE", help="the original module (HLO text or HloModuleProto)")
    parser.add_argument("after", metavar="AFTER", help="the rewritten module")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--runs", type=int, default=1, help="compare with seeds SEED..SEED+RUNS-1 (default 1)")
    parser.add_argument("--spmd", action=argparse.BooleanOptionalAction, default=None,
                        help="multi-partition modules: partition with XLA's SPMD partitioner (--spmd) "
                        "or run as already-partitioned per-device programs (--no-spmd); default: "
                        "ENTRY named *_spmd is already partitioned")
    add_verify_arguments(parser)
    parser.add_argument("--rtol", type=_tolerance, metavar="R",
                        help="outputs within R relative difference count as equal (default: bitwise)")
    parser.add_argument("--atol", type=_tolerance, metavar="A",
                        help="outputs within A absolute difference count as equal (default: bitwise)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """--replicas / --partitions: the device counts a module runs on under verify; --timeout:
    how long it may run (see `hlo_dedup.equivalence`, *Time*)."""
    parser.add_argument("--replicas", type=_positive_int, metavar="N",
                        help="verify: run on N replicas (default: the header's replica_count, a dump's device "
                             "assignment, else what the collectives need)")
    parser.add_argument("--partitions", type=_positive_int, metavar="M",
                        help="verify: run on M partitions (default: as for --replicas, from num_partitions)")
    parser.add_argument("--timeout", type=_seconds, metavar="S",
                        help="verify: seconds the original module's execution may take (default 60; its compile "
                             "is not counted, and may take 300 s or S if longer); past them it may loop forever "
                             "and cannot be judged (exit 2). The rewritten module may then take 10 x the "
                             "original's time, at least 10 s (or S if less): past that, it is reported as "
                             "different (exit 1), since it does not end where the original does")


def given_participants(args: argparse.Namespace):  # noqa: ANN201 - Participants | None (kept out of start-up)
    """The counts --replicas/--partitions state (one alone leaves the other 1), or None."""
    if args.replicas is None and args.partitions is None:
        return None
    from .analysis.participants import Participants

    return Participants(args.replicas or 1, args.partitions or 1, "command line")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:  # NaN too; inf waits for ever
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}")
    return value


def _module_text(path: str) -> tuple[str, tuple[int, int] | None]:
    """The HLO text of the one module in `path`, unparsed, for XLA to read, and the
    (replicas, partitions) of a proto's device assignment (not in the text XLA prints)."""
    from .io.formats import module_texts_from_bytes, proto_device_assignment, read_source

    data = read_source(path)
    texts = module_texts_from_bytes(data, path)
    if len(texts) != 1:
        raise ValueError(f"{path} holds several modules (split by '// -----'); verify takes one per file")
    return texts[0], proto_device_assignment(data, path)


def verify_main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """`hlo-dedup verify BEFORE AFTER`: run both on XLA:CPU and compare bitwise (see
    `hlo_dedup.equivalence`). `argv` excludes the word `verify`. One short line says what
    happened; exit 0 equal, 1 different, 2 a module could not be read, compiled or run, BEFORE
    is no reference (cannot judge), or bad arguments. No traceback is ever printed."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    prog = f"{PROG} verify"
    parser = build_verify_parser()
    try:
        args = parser.parse_args(list(argv))
    except _VerifyUsageError as exc:
        print(parser.format_usage().rstrip(), file=err)
        print(f"{prog}: error: {exc}", file=err)
        return EXIT_INPUT_ERROR
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    if args.runs < 1:
        print(f"{prog}: error: --runs must be at least 1", file=err)
        return EXIT_INPUT_ERROR
    try:
        texts, assignments = [], []
        for path in (args.before, args.after):
            try:
                text, assignment = _module_text(path)
                texts.append(text)
                assignments.append(assignment)
            except Exception as exc:  # OSError, FormatError, XlaError ...  # noqa: BLE001
                detail = getattr(exc, "format", None)
                message = detail() if callable(detail) and not isinstance(exc, OSError) else str(exc)
                print(f"{prog}: error: cannot read {path}: {one_line(message)}", file=err)
                return EXIT_INPUT_ERROR
        from .equivalence import check_equivalence

        report = check_equivalence(texts[0], texts[1], seed=args.seed, runs=args.runs, spmd=args.spmd,
                                   timeout=args.timeout, participants=given_participants(args),
                                   device_assignments=(assignments[0], assignments[1]),
                                   rtol=args.rtol, atol=args.atol)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (Terminated)
        status, line = describe_failure(exc, prog, False, err)
        print(line, file=err)
        return status
    except Exception as exc:  # noqa: BLE001 - a bug of ours: still one line, never a traceback
        print(f"{prog}: internal error: {type(exc).__name__}: {one_line(str(exc))}", file=err)
        return EXIT_INPUT_ERROR
    stream = out if report.status in ("equal", "different") else err
    if args.json:
        import json

        print(json.dumps({"before": args.before, "after": args.after, **report.to_json()}, indent=2), file=stream)
    else:
        print(f"{args.before} vs {args.after}: {report.summary()}", file=stream)
    return report.exit_code


def entry() -> NoReturn:
    """The `hlo-dedup` command: `main`, then an exit that does not tear the IR down (freeing
    a million instructions' objects one by one takes seconds the user would wait for).

    The cyclic garbage collector stays off for the whole command, not only while modules
    are read and rewritten (`run.collector_paused`): turned back on, its first collection
    would scan every object of the IR (0.1 s per 20,000 instructions) just before the exit
    that frees them all. Batch mode keeps no IR in this process (its workers do)."""
    gc.disable()
    streams.prepare()
    status = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    isolated = sys.modules.get("hlo_dedup.xla.isolated")
    if isolated is not None:
        isolated.shutdown()  # the XLA child this run started, as its atexit hook would
    os._exit(status)


if __name__ == "__main__":
    entry()
