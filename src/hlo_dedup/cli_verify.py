"""`hlo-dedup verify BEFORE AFTER`: prove on XLA:CPU that a rewrite kept the module's semantics.

    hlo-dedup verify BEFORE AFTER [--seed N] [--runs N] [--spmd | --no-spmd] [--timeout S] [--json]

Both modules are compiled by XLA's CPU backend on ``replica_count * num_partitions`` virtual
devices, fed identical seeded random inputs and every output is compared bitwise (see
:mod:`hlo_dedup.semantic_check`). One short line says what happened; the exit status is

    0  equal      every output bitwise identical
    1  different  the first differing output, with its max abs / rel diff (or differing signatures)
    2  error      a module could not be read, compiled or run (XLA's message), or bad arguments

``--spmd`` / ``--no-spmd`` choose how modules with ``num_partitions > 1`` run: ``--spmd`` lets
XLA's SPMD partitioner partition them (global inputs), ``--no-spmd`` runs the text as
already-partitioned per-device programs; by default an ENTRY named ``*_spmd`` counts as
already partitioned. No traceback is ever printed.

Wiring (the main CLI, ``hlo_dedup/cli.py``, owns the dispatch)::

    from . import cli_verify

    def main(argv=None, ...):
        argv = sys.argv[1:] if argv is None else list(argv)
        if argv and argv[0] == "verify":
            return cli_verify.main(argv[1:])
        ...
        # `hlo-dedup INPUT --verify`: check the rewritten text before writing it
        if args.verify:
            code = cli_verify.verify_output(input_text, output_text, stream=stderr)
            if code != 0:
                return code   # 1: the rewrite changed the results; 2: XLA could not check it
        ...write the output...

``verify_output`` prints to ``stderr`` by default so that it never mixes with HLO written to
stdout. For a file of several modules, ``semantic_check.verify_many`` checks all the pairs in one
XLA child process (much faster than one ``verify_output`` call per module).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Sequence, TextIO

from .semantic_check import SemanticReport, verify_semantics

__all__ = ["build_parser", "main", "read_module_text", "verify_output"]

_SPLIT_LINE = re.compile(r"^// -----[ \t]*$", re.M)


class _UsageError(Exception):
    pass


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so `main` always returns a status."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="hlo-dedup verify",
        description="Run BEFORE and AFTER on XLA:CPU with identical seeded inputs and compare every "
        "output bitwise. Exit 0 equal, 1 different, 2 could not compile/run.",
    )
    parser.add_argument("before", metavar="BEFORE", help="the original module (HLO text or HloModuleProto)")
    parser.add_argument("after", metavar="AFTER", help="the rewritten module")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--runs", type=int, default=1, help="compare with seeds SEED..SEED+RUNS-1 (default 1)")
    parser.add_argument("--spmd", action=argparse.BooleanOptionalAction, default=None,
                        help="multi-partition modules: partition with XLA's SPMD partitioner (--spmd) "
                        "or run as already-partitioned per-device programs (--no-spmd); default: "
                        "ENTRY named *_spmd is already partitioned")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per XLA run (default 300)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def read_module_text(path: str) -> str:
    """HLO text of the single module in ``path``: text as is, a binary proto printed by XLA."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and ("HloModule" in text or "ENTRY" in text) and "\x00" not in text:
        if _SPLIT_LINE.search(text):
            raise ValueError(f"{path} holds several modules (split by '// -----'); verify takes one per file")
        return text
    # Not text: a proto container (HloSnapshot / HloProto / HloModuleProto), read the package's way.
    from . import load_all

    modules = load_all(Path(path))
    if len(modules) != 1:
        raise ValueError(f"{path} holds {len(modules)} modules; verify takes one per file")
    return modules[0].to_text()


def _print_report(report: SemanticReport, before: str, after: str, stream: TextIO, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"before": before, "after": after, **report.to_json()}, indent=2), file=stream)
    else:
        print(f"{before} vs {after}: {report.summary()}", file=stream)


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """`hlo-dedup verify ...` (``argv`` excludes the word ``verify``); returns the exit status."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
    except _UsageError as exc:
        print(parser.format_usage().rstrip(), file=err)
        print(f"hlo-dedup verify: error: {exc}", file=err)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if args.runs < 1:
        print("hlo-dedup verify: error: --runs must be at least 1", file=err)
        return 2
    try:
        texts = []
        for path in (args.before, args.after):
            try:
                texts.append(read_module_text(path))
            except Exception as exc:  # OSError, FormatError, parse errors, XlaError ...
                detail = getattr(exc, "format", None)
                message = detail() if callable(detail) and not isinstance(exc, OSError) else str(exc)
                print(f"hlo-dedup verify: error: cannot read {path}: {message}", file=err)
                return 2
        report = verify_semantics(texts[0], texts[1], seed=args.seed, runs=args.runs, spmd=args.spmd,
                                  timeout=args.timeout)
    except KeyboardInterrupt:
        print("hlo-dedup verify: interrupted", file=err)
        return 130
    except Exception as exc:  # a bug of ours: still one line, never a traceback
        print(f"hlo-dedup verify: internal error: {type(exc).__name__}: {exc}", file=err)
        return 2
    _print_report(report, args.before, args.after, out if report.status != "error" else err, args.json)
    return report.exit_code


def verify_output(
    before_text: str,
    after_text: str,
    *,
    seed: int = 0,
    runs: int = 1,
    spmd: bool | None = None,
    stream: TextIO | None = None,
    label: str = "verify",
) -> int:
    """For `hlo-dedup INPUT --verify`: check the rewrite of one module before it is written.

    Prints one line (``verify: equal: ...``) to ``stream`` (default stderr) and returns 0 equal,
    1 different, 2 could not compile/run. ``spmd`` is the run mode of :func:`verify_semantics`
    (None = guess from the ENTRY name), not the main CLI's parse flag. Never raises.
    """
    stream = stream or sys.stderr
    try:
        report = verify_semantics(before_text, after_text, seed=seed, runs=runs, spmd=spmd)
    except Exception as exc:
        print(f"{label}: error: internal error: {type(exc).__name__}: {exc}", file=stream)
        return 2
    print(f"{label}: {report.summary()}", file=stream)
    return report.exit_code
