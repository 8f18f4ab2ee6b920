"""Inputs that are not regular files: what is read is bounded, and nothing hangs.

A FIFO without a writer is an error after `FIFO_WAIT_SECONDS`, a device such as /dev/zero is
refused without reading it, a pipe or standard input is read up to `STREAM_LIMIT` bytes; a
FIFO or a pipe with a writer is read as usual.
"""

from __future__ import annotations

import io
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hlo_dedup.cli import main
from hlo_dedup.io import files

FSDP = Path(__file__).resolve().parents[1] / "data" / "jax" / "fsdp_shard_map.hlo"


def run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:  # noqa: ANN003
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}

    def bounded() -> None:  # a build that reads /dev/zero to the end fails fast instead of eating the machine
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    kwargs.setdefault("input", b"")
    return subprocess.run([sys.executable, "-m", "hlo_dedup", *map(str, args)], capture_output=True, env=env,
                          timeout=120, preexec_fn=bounded, **kwargs)


def in_process(*args: str | Path, stdin: io.BytesIO | None = None) -> tuple[int, str, str]:
    out, err = io.BytesIO(), io.StringIO()
    status = main([str(a) for a in args], stdin=stdin or io.BytesIO(), stdout=out, stderr=err)
    return status, out.getvalue().decode(), err.getvalue()


def test_a_fifo_without_a_writer_is_an_error_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "FIFO_WAIT_SECONDS", 0.5)
    fifo = tmp_path / "in.hlo"
    os.mkfifo(fifo)
    started = time.monotonic()
    status, out, err = in_process(fifo)
    assert time.monotonic() - started < 30
    assert status == 2 and out == ""
    assert err == (f"{fifo}: error: no process wrote to this FIFO within 0.5 s (to wait longer, pipe it to "
                   "standard input: cat FIFO | hlo-dedup -)\n")


def test_a_fifo_with_a_writer_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "in.hlo"
    os.mkfifo(fifo)

    def write() -> None:
        time.sleep(0.3)
        fifo.write_bytes(FSDP.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    status, out, err = in_process(fifo, "--passes=")
    writer.join(timeout=30)
    assert status == 0, err
    assert out == FSDP.read_text()


def test_an_anonymous_pipe_has_no_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """`hlo-dedup <(slow command)`: the pipe's writer exists, however long it takes."""
    monkeypatch.setattr(files, "FIFO_WAIT_SECONDS", 0.5)
    read_end, write_end = os.pipe()

    def write() -> None:
        time.sleep(1.5)
        with os.fdopen(write_end, "wb") as w:
            w.write(FSDP.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        status, out, err = in_process(f"/dev/fd/{read_end}", "--passes=")
    finally:
        writer.join(timeout=30)
        os.close(read_end)
    assert status == 0, err
    assert out == FSDP.read_text()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_without_reading_it(device: str) -> None:
    proc = run(device)
    assert proc.returncode == 2
    kind = "character device"
    assert proc.stderr.decode() == f"{device}: error: is a {kind}, not a file or a pipe (refusing to read it)\n"


def test_standard_input_from_a_device_is_refused() -> None:
    with open("/dev/zero", "rb") as zero:
        proc = run("-", input=None, stdin=zero)
    assert proc.returncode == 2
    assert proc.stderr.decode() == ("<stdin>: error: standard input is a character device, not a file or a pipe "
                                    "(refusing to read it)\n")


def test_a_stream_is_read_up_to_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    data = FSDP.read_bytes()
    monkeypatch.setattr(files, "STREAM_LIMIT", len(data))
    status, out, err = in_process("-", "--passes=", stdin=io.BytesIO(data))
    assert status == 0, err
    assert out == data.decode()
    monkeypatch.setattr(files, "STREAM_LIMIT", len(data) - 1)
    status, out, err = in_process("-", stdin=io.BytesIO(data))
    assert status == 2 and out == ""
    assert err == (f"<stdin>: error: more than {len(data) - 1} bytes from a pipe or FIFO, the most read "
                   "from one (give a regular file)\n")


def test_the_stream_limit_holds_on_an_endless_pipe() -> None:
    """`yes | hlo-dedup -`: read to the limit, then one line; never MemoryError."""
    yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        proc = run("-", input=None, stdin=yes.stdout)
    finally:
        yes.kill()
        yes.wait()
    assert proc.returncode == 2
    assert proc.stderr.decode() == ("<stdin>: error: more than 2 GiB from a pipe or FIFO, the most read from one "
                                    "(give a regular file)\n")


def test_a_directory_given_as_the_input(tmp_path: Path) -> None:
    # A directory is batch mode's input (every module beneath it), which needs an output place.
    status, _, err = in_process(tmp_path)
    assert status == 2
    assert err == ("hlo-dedup: error: several inputs, a directory or a pattern need --output-dir DIR for "
                   "the outputs (batch mode), or --report-only\n")
