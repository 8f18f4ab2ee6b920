"""The command's standard streams when its caller closed one or gave it a full device.

Python leaves `sys.stdin`, `sys.stdout` or `sys.stderr` as None when that descriptor was
closed at start-up, and the next file the run opens takes its number: with stderr closed,
the output file became descriptor 2 and `--v=1` lines landed in the module. `prepare`
puts /dev/null on each closed descriptor and, in place of its stream, one that says it is
closed when it is used (reading `-` or writing `-o -` is then a one-line error). Messages
on stderr that cannot be written (`2>/dev/full`, a reader that left) are dropped: the exit
status says how the run went, not whether its messages could be written.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

__all__ = ["ClosedStream", "prepare"]


class ClosedStream:
    """A standard stream the caller closed: any read or write is an OSError that says so."""

    def __init__(self, which: str) -> None:
        self.which = which

    def _closed(self, *_: Any) -> Any:
        raise OSError(errno.EBADF, f"standard {self.which} is closed", f"<std{self.which[:3]}>")

    read = read1 = readline = write = fileno = _closed

    @property
    def buffer(self) -> ClosedStream:
        return self

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class MessageStream:
    """stderr for messages: a write or flush that fails is dropped."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def prepare() -> None:
    """Make the three standard streams safe to use, as the module docstring says."""
    for fd, name, which in ((0, "stdin", "input"), (1, "stdout", "output"), (2, "stderr", "error")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:  # closed: hold the number so that no file this run opens takes it
            held = os.open(os.devnull, os.O_RDWR)
            if held != fd:
                os.dup2(held, fd)
                os.close(held)
        if name == "stderr":
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
        else:
            setattr(sys, name, ClosedStream(which))
    sys.stderr = MessageStream(sys.stderr)
