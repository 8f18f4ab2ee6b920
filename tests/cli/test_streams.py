"""The standard streams as callers leave them: closed, full, or named as /dev/stdout.

Each case runs the command as a shell would start it (descriptors closed or redirected
before exec), and checks the exit status, the one message line and what was written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
MODULE = DATA / "cond.hlo"
COMMAND = [sys.executable, "-m", "hlo_dedup"]


def shell(script: str, cwd: Path) -> subprocess.CompletedProcess:
    """`script` in sh with $H the command and $M the module."""
    env = {**os.environ, "H": " ".join(COMMAND), "M": str(MODULE)}
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_reading_a_closed_stdin_is_one_line(tmp_path: Path) -> None:
    proc = shell("$H - -o out.hlo <&-", tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "<stdin>: error: standard input is closed\n")
    assert not (tmp_path / "out.hlo").exists()


def test_writing_a_closed_stdout_is_one_line(tmp_path: Path) -> None:
    proc = shell("$H $M -o - >&-", tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "<stdout>: error: standard output is closed\n")


def test_a_good_run_with_stderr_closed_or_full_succeeds(tmp_path: Path) -> None:
    for redirect in ("2>&-", "2>/dev/full"):
        proc = shell(f"$H $M -o out.hlo {redirect}; echo $?", tmp_path)
        assert proc.stdout == "0\n", (redirect, proc.stdout)
        assert (tmp_path / "out.hlo").read_text() == MODULE.read_text()


def test_log_lines_never_reach_the_module_when_stderr_is_closed(tmp_path: Path) -> None:
    # A closed descriptor 2 was taken by the output file, and --v=1 lines landed in it.
    proc = shell("$H $M --v=1 -o out.hlo 2>&-", tmp_path)
    assert proc.returncode == 0
    assert (tmp_path / "out.hlo").read_text() == MODULE.read_text()


def test_dev_stdout_appends_where_the_caller_appends(tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_text("earlier lines\n")
    proc = shell("$H $M -o /dev/stdout >> log.txt", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "log.txt").read_text() == "earlier lines\n" + MODULE.read_text()
    (tmp_path / "build.log").write_text("build\n")
    proc = shell("$H $M -o /dev/stderr 2>> build.log", tmp_path)
    assert (tmp_path / "build.log").read_text().startswith("build\n" + MODULE.read_text())


def test_dev_stdout_through_a_pipe_and_a_numbered_descriptor(tmp_path: Path) -> None:
    proc = shell("$H $M -o /dev/stdout | cat", tmp_path)
    assert (proc.returncode, proc.stdout) == (0, MODULE.read_text())
    proc = shell("$H $M -o /dev/fd/7 7> fd7.hlo", tmp_path)
    assert proc.returncode == 0 and (tmp_path / "fd7.hlo").read_text() == MODULE.read_text()
    proc = shell("$H $M -o /dev/fd/9", tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "/dev/fd/9: error: cannot write: descriptor 9 is not open\n")


def test_a_broken_pipe_is_success_only_when_stdouts_reader_left(tmp_path: Path) -> None:
    big = tmp_path / "big.hlo"
    big.write_text(MODULE.read_text().replace("HloModule", "// " + "x" * (1 << 20) + "\nHloModule", 1))
    reader = subprocess.Popen([*COMMAND, str(big), "--passes=", "-o", "-"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert reader.stdout.read(10) == b"// xxxxxxx"  # type: ignore[union-attr]
    reader.stdout.close()  # type: ignore[union-attr]  # the reader leaves, as `| head` does
    assert reader.wait(timeout=60) == 0
    assert b"error" not in reader.stderr.read()  # type: ignore[union-attr]
    # A pipe to something else (a worker that could not start) broke: that is an error.
    from hlo_dedup.run import describe_failure

    r, w = os.pipe()
    saved = os.dup(1)
    try:
        os.dup2(w, 1)
        status, line = describe_failure(BrokenPipeError(32, "Broken pipe"), "in.hlo", False, sys.stderr)
    finally:
        os.dup2(saved, 1)
        for fd in (r, w, saved):
            os.close(fd)
    assert (status, line) == (2, "hlo-dedup: error: Broken pipe")
