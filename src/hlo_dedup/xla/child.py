"""The child processes XLA runs in, so that an XLA crash ends the child and not the command.

XLA aborts the process on a failed CHECK and overflows its stack on deeply nested shapes;
what it logs (RET_CHECK stack traces, protobuf warnings) goes straight to file descriptor 2.
Every call the command makes into XLA therefore runs here, started by
`hlo_dedup.xla.isolated` as an isolated interpreter (`python -I`: neither the current
directory nor PYTHON* variables reach its import path) whose stderr the parent keeps:

    python -I -c BOOTSTRAP serve PATH_JSON        parse, print, convert and compile for XLA's
                                                  memory figures (`hlo_dedup.xla.isolated`)
    python -I -c BOOTSTRAP run PATH_JSON DIR      run modules on XLA:CPU (`oracle.run_modules`,
                                                  watched by `hlo_dedup.xla.watch`)

`serve` answers requests until its stdin closes: each message is an 8-byte little-endian
length and a pickle; a request is `(operation, arguments)`, a reply `("ok", value)`,
`("error", message)` or `("unavailable", message)` (jax/jaxlib missing).
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path
from typing import Any, BinaryIO, Callable

_LENGTH = 8


def read_message(stream: BinaryIO) -> Any:
    """One framed pickle from `stream`; EOFError when it ends."""
    header = _read_exactly(stream, _LENGTH)
    return pickle.loads(_read_exactly(stream, int.from_bytes(header, "little")))


def write_message(stream: BinaryIO, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(_LENGTH, "little") + data)
    stream.flush()


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError("the stream ended")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# --- serve: XLA's parser, printer and proto conversion ----------------------------------------


def _entry_parameters(text: str) -> list[tuple[Any, str]]:
    """(signature, XLA's print) of each entry parameter: the signature is the logical type
    (layout ignored, tuples nested), what two modules must share to be fed the same inputs."""
    from hlo_dedup.xla import oracle

    shapes = oracle.program_shape(text).parameter_shapes()
    return [(oracle.signature(shape), str(shape)) for shape in shapes]


def _device_count(text: str) -> int:
    from hlo_dedup.xla import oracle

    return oracle.child_device_count([text])


def _operations() -> dict[str, Callable[..., Any]]:
    from hlo_dedup.xla import memory, oracle

    return {
        "text_to_module_proto": oracle.text_to_module_proto,
        "module_proto_to_text": oracle.module_proto_to_text,
        "entry_parameters": _entry_parameters,
        "device_count": _device_count,
        "xla_memory": memory.measure,
    }


def _serve() -> None:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything XLA or jax prints goes to the log the parent keeps, not into replies
    requests = sys.stdin.buffer
    try:
        operations: dict[str, Callable[..., Any]] | None = _operations()
        unavailable = ""
    except ImportError as exc:  # XlaUnavailableError is an ImportError; its cause says what is missing
        operations, unavailable = None, str(exc.__cause__ or exc)
    while True:
        try:
            operation, arguments = read_message(requests)
        except EOFError:
            return
        if operations is None:
            reply: tuple[str, Any] = ("unavailable", unavailable)
        else:
            try:
                reply = ("ok", operations[operation](*arguments))
            except Exception as exc:  # noqa: BLE001 - XlaError or anything jaxlib raises: its words go back
                reply = ("error", str(exc) or type(exc).__name__)
        write_message(replies, reply)


# --- run: XLA:CPU execution ---------------------------------------------------------------------


def _run(result_dir: str) -> None:
    """Jobs from `result_dir/requests.pickle`; one reply per job pickled to
    `result_dir/result-<i>.pickle` as soon as it is known, so a later crash keeps the earlier
    replies. `compiled I` and `done I` lines on stdout tell the parent which phase job I is in
    (`hlo_dedup.xla.watch` bounds each); whatever jax prints goes to stderr instead."""
    events = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def say(line: str) -> None:
        events.write(line + "\n")
        events.flush()

    from hlo_dedup.xla import XlaError
    from hlo_dedup.xla.execute import execute

    requests = pickle.loads((Path(result_dir) / "requests.pickle").read_bytes())
    for index, request in enumerate(requests):
        try:
            reply = execute(request, lambda: say(f"compiled {index}"))  # noqa: B023 - called in this iteration
        except XlaError as exc:
            reply = {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - anything else jax raises goes back as a message
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        path = Path(result_dir) / f"result-{index}.pickle"
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(reply))
        partial.replace(path)
        say(f"done {index}")


def main(mode: str, arguments: list[str]) -> None:
    from hlo_dedup.lifetime import exit_with_parent

    exit_with_parent()  # a command killed outright leaves no compile running
    if mode == "serve":
        _serve()
    elif mode == "run":
        _run(arguments[0])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
