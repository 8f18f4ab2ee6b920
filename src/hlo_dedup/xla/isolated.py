"""XLA's parser, printer, proto conversion and memory figures for the command, in a child process.

An XLA CHECK failure aborts the process it happens in (`reshape` of f32[6] to f32[5] written
as `.pb`), a deep shape overflows the stack, and XLA logs RET_CHECK stack traces straight to
file descriptor 2. So the command never calls XLA itself: one long-lived child
(`hlo_dedup.xla.child`, `serve`) does, per process, started on first use, and another is
started after a crash. A crash becomes an `XlaError` whose message is one line (the CHECK that
failed); what XLA logged is kept from the user.

The child is an isolated interpreter (`python -I`): the current directory and PYTHON*
variables do not reach its import path, which is this package's root followed by the
parent's own path (the current directory left out), so a stray `./ml_dtypes.py` is never
imported.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from hlo_dedup.xla import XlaError, XlaUnavailableError, too_many_devices

__all__ = [
    "child_command",
    "child_env",
    "crash_message",
    "entry_parameters",
    "module_proto_to_text",
    "shutdown",
    "text_to_module_proto",
    "xla_memory",
]

_BOOTSTRAP = ("import json, sys; sys.path[:0] = json.loads(sys.argv[2]); "
              "from hlo_dedup.xla.child import main; main(sys.argv[1], sys.argv[3:])")
_GLOG_FATAL = re.compile(r"^F\d{4} [\d:.]+\s+\d+ [^\]]*\] (.*)$")
_DETAIL_LIMIT = 400


def child_command(mode: str, *arguments: str) -> list[str]:
    """The command line of an isolated child in `mode` (see `hlo_dedup.xla.child`)."""
    root = str(Path(__file__).resolve().parents[2])
    cwd = os.path.realpath(os.getcwd())
    path = [root] + [p for p in sys.path if p and p != root and os.path.realpath(p) != cwd]
    return [sys.executable, "-I", "-c", _BOOTSTRAP, mode, json.dumps(path), *arguments]


def child_env(num_devices: int | None = None, fill: int | None = None) -> dict[str, str]:
    """The child's environment: XLA:CPU only, its memory-minimizing scheduler (what
    `memory.measure` prices with; a schedule does not change what a module computes), and
    `num_devices` virtual devices if given.

    With `fill` (a byte, 1-255), glibc's malloc gives every block it hands out filled with the
    byte's complement (its per-thread cache off, which would skip the fill), so what a module
    reads from memory it never wrote depends on `fill`, not on what ran before it: two runs with
    different fills disagree there every time, and runs with the same fill agree. Elsewhere
    than glibc the setting is ignored."""
    from hlo_dedup.xla.memory import MEMORY_SCHEDULER_FLAG

    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    scheduler_flag = MEMORY_SCHEDULER_FLAG.split("=")[0]
    replaced = (scheduler_flag,) + (("--xla_force_host_platform_device_count",) if num_devices is not None else ())
    flags = [flag for flag in env.get("XLA_FLAGS", "").split() if not flag.startswith(replaced)]
    flags.append(MEMORY_SCHEDULER_FLAG)
    if num_devices is not None:
        flags.append(f"--xla_force_host_platform_device_count={num_devices}")
    env["XLA_FLAGS"] = " ".join(flags)
    if fill is not None:
        tunables = [t for t in env.get("GLIBC_TUNABLES", "").split(":")
                    if t and not t.startswith(("glibc.malloc.perturb=", "glibc.malloc.tcache_count="))]
        env["GLIBC_TUNABLES"] = ":".join(tunables + ["glibc.malloc.tcache_count=0", f"glibc.malloc.perturb={fill}"])
    return env


def crash_message(returncode: int, log: str) -> str:
    """One line for a child that died: how, and the line of its log that says why (a failed
    CHECK, a fatal log line, the last line of a Python traceback)."""
    if returncode < 0:
        try:
            how = signal.Signals(-returncode).name
        except ValueError:
            how = f"signal {-returncode}"
        if how == "SIGSEGV":
            how += ", a segmentation fault: e.g. a shape nested too deeply for XLA"
    else:
        how = f"exit status {returncode}"
    detail = _crash_detail(log)
    return f"XLA crashed ({how})" + (f": {detail}" if detail else "")


def _crash_detail(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        fatal = _GLOG_FATAL.match(line)
        if fatal:
            return _short(fatal.group(1))
    for line in lines:
        if "Check failed" in line:
            return _short(line[line.index("Check failed"):])
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        raw = [line for line in log.splitlines() if line.strip()]
        last = next((line for line in reversed(raw) if not line[:1].isspace()), "")
        return _short(last)
    return ""


def _short(text: str) -> str:
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."


class _Server:
    """One `serve` child, its pipes and the file its stderr goes to; `devices`: the virtual
    CPU devices it was started with (None: as the environment says)."""

    def __init__(self, devices: int | None = None) -> None:
        self.devices = devices
        self.log = tempfile.TemporaryFile()
        self.logged = 0  # what the log held when the last reply came: older lines are not about this call
        self.process = subprocess.Popen(child_command("serve"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, env=child_env(devices))

    def call(self, operation: str, arguments: tuple) -> Any:
        from hlo_dedup.xla.child import read_message, write_message

        try:
            write_message(self.process.stdin, (operation, arguments))
            reply = read_message(self.process.stdout)
        except (EOFError, OSError):  # the child died (BrokenPipeError is an OSError)
            self.process.kill()
            returncode = self.process.wait()
            self.log.seek(self.logged)
            raise XlaError(crash_message(returncode, self.log.read().decode(errors="replace"))) from None
        self.logged = self.log.seek(0, os.SEEK_END)
        return reply

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


_server: _Server | None = None
_lock = threading.Lock()  # one request at a time on the child's pipes


def _call(operation: str, *arguments: Any, devices: int | None = None) -> Any:
    """Run `operation` in the child: its value, or XlaError / XlaUnavailableError. A child
    with fewer than `devices` virtual devices is replaced by one with that many (jax fixes
    the count when it starts)."""
    global _server
    with _lock:
        if _server is not None and devices is not None and (_server.devices or 1) < devices:
            _server.close()
            _server = None
        if _server is None or _server.process.poll() is not None:
            _server = _Server(devices)
        server = _server
        try:
            status, value = server.call(operation, arguments)
        except BaseException:  # a crash, or an interrupt mid-message: this child is done
            _server = None
            server.close()
            raise
    if status == "ok":
        return value
    if status == "unavailable":
        raise XlaUnavailableError(value)
    raise XlaError(value)


def shutdown() -> None:
    """End this process's XLA child, if one runs (the next call starts a new one)."""
    global _server
    with _lock:
        if _server is not None:
            _server.close()
            _server = None


atexit.register(shutdown)


def text_to_module_proto(hlo_text: str) -> bytes:
    """`oracle.text_to_module_proto` in the child."""
    return _call("text_to_module_proto", hlo_text)


def module_proto_to_text(proto: bytes) -> str:
    """`oracle.module_proto_to_text` in the child."""
    return _call("module_proto_to_text", proto)


def entry_parameters(hlo_text: str) -> list[tuple[Any, str]]:
    """(signature, XLA's print) of each entry parameter (`oracle.signature`), in the child."""
    return _call("entry_parameters", hlo_text)


#: Devices of a child started to ask what a module needs: enough for most, so that the
#: compile that follows rarely needs a second child (jax's start-up is seconds).
_MEMORY_DEVICES = 8


def xla_memory(hlo_text: str, spmd: bool | None = None) -> dict[str, Any]:
    """XLA:CPU's memory figures for the module (`hlo_dedup.xla.memory.measure`), in a child
    with the devices the module needs."""
    devices = _call("device_count", hlo_text, devices=_MEMORY_DEVICES)
    refused = too_many_devices(devices)
    if refused is not None:
        raise XlaError(refused)
    return _call("xla_memory", hlo_text, spmd, devices=devices)
