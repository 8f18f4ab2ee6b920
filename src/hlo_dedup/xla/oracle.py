"""XLA as the oracle: its own parser/printer, module-proto conversion, and XLA:CPU execution.

The functions here call XLA in the calling process (tests use them as the oracle; the command
reaches them through `hlo_dedup.xla.isolated`, in a child process, since an XLA CHECK
failure aborts the process it runs in). Compiling and running always happen in a child
process (`hlo_dedup.xla.child`, `hlo_dedup.xla.execute`), which also fixes the virtual CPU
device count (``XLA_FLAGS``) before jax is imported.
"""

from __future__ import annotations

import math
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hlo_dedup.xla import XlaError, XlaUnavailableError, too_many_devices
from hlo_dedup.xla.watch import Limit, RunTimeout, run_watched

try:
    import numpy as np
    from jax._src.lib import xla_client as xc
except ImportError as exc:  # the optional ``xla`` extra is missing
    raise XlaUnavailableError(str(exc)) from exc

__all__ = [
    "Comparison",
    "Limit",
    "RunResult",
    "RunTimeout",
    "compare_results",
    "module_proto_to_text",
    "non_finite",
    "parse_text",
    "program_shape",
    "run_module",
    "run_modules",
    "device_layout",
    "child_device_count",
    "signature",
    "text_to_module_proto",
    "xla_canonical_text",
    "xla_reparse_equal",
]

_HEADER_INT = re.compile(r"\b(replica_count|num_partitions)=(\d+)")
_SDY_MESH = re.compile(r"#sdy\.mesh<\[([^\]]*)\]")
_STACK_FRAME_ID = re.compile(r"\s*stack_frame_id=\d+")


# --- parse / print ----------------------------------------------------------------------------


def _print_options(*, metadata: bool = True) -> Any:
    """Options that make XLA's print re-parse: the default elides large constants as ``{...}``."""
    options = xc.hlo.HloPrintOptions()
    options.print_large_constants = True
    options.print_metadata = metadata
    return options


def parse_text(hlo_text: str) -> Any:
    """XLA's HloModule of the text (its parser; no shape checks): XlaError if XLA rejects it."""
    try:
        return xc.hlo.hlo_module_from_text(hlo_text)
    except Exception as exc:  # jaxlib raises XlaRuntimeError/ValueError subclasses; keep XLA's words
        raise XlaError(str(exc)) from None


def xla_canonical_text(hlo_text: str) -> str:
    """XLA's own parse and print of ``hlo_text`` (syntax is checked, shapes are not: that needs a compile)."""
    return parse_text(hlo_text).to_string(_print_options())


def _comparable_print(hlo_text: str) -> list[str]:
    """XLA's print normalised for comparison.

    Metadata (op names, source lines, the stack-frame tables and their ids) is left out because XLA
    renumbers the tables on re-print and it carries no semantics; computations are sorted by their
    printed text because XLA may print them in a different order than it read them.
    """
    printed = parse_text(hlo_text).to_string(_print_options(metadata=False))
    header, _, body = printed.partition("\n")
    blocks = [_STACK_FRAME_ID.sub("", block.strip()) for block in body.split("\n\n") if block.strip()]
    return [header, *sorted(blocks)]


def xla_reparse_equal(a: str, b: str) -> bool:
    """True when XLA parses ``a`` and ``b`` to the same module up to computation order and metadata."""
    return _comparable_print(a) == _comparable_print(b)


def text_to_module_proto(hlo_text: str) -> bytes:
    """Serialized ``HloModuleProto`` of the text (not the ``HloProto`` wrapper XLA dumps write)."""
    return parse_text(hlo_text).as_serialized_hlo_module_proto()


def program_shape(hlo_text: str) -> Any:
    """XLA's ProgramShape of the module: `parameter_shapes()` and `result_shape()`."""
    return xc.XlaComputation(text_to_module_proto(hlo_text)).program_shape()


def signature(shape: Any) -> Any:
    """A shape's logical type, as plain data: (dtype, dims) of an array, "token", a tuple of
    its elements' signatures. Layouts are ignored: inputs are fed as logical arrays."""
    if shape.is_tuple():
        return tuple(signature(s) for s in shape.tuple_shapes())
    if shape.is_token():
        return "token"
    return str(shape.element_type()), tuple(shape.dimensions())


def module_proto_to_text(proto: bytes) -> str:
    """Text of a serialized ``HloModuleProto``, printed by XLA so that it re-parses."""
    try:
        module = xc.hlo.HloModule.from_serialized_hlo_module_proto(proto)
    except Exception as exc:
        raise XlaError(str(exc)) from None
    return module.to_string(_print_options())


# --- running ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunResult:
    """Outputs of one XLA:CPU execution.

    ``outputs`` holds one numpy array per leaf of the entry result. When XLA partitioned the module
    itself (single device, or SPMD text with shardings) each is the global value, reassembled from the
    device shards. For replicated modules (``replica_count > 1``) and already-partitioned text, whose
    devices hold independent values, each is the per-device results stacked on a new leading axis of
    length ``num_replicas * num_partitions`` in device order; ``per_device`` says which form it is.
    The times are the child's own measure of the job.
    """

    outputs: tuple[np.ndarray, ...]
    num_replicas: int
    num_partitions: int
    per_device: bool
    seed: int
    seconds: float = 0.0  # the execution's wall clock (inputs, run, outputs; not the compile)
    cpu_seconds: float = 0.0  # ... and its CPU time, every thread's
    compile_seconds: float = 0.0


@dataclass(frozen=True)
class Comparison:
    """Bitwise comparison of two runs; ``index`` is the first differing output, if any."""

    equal: bool
    index: int | None = None
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    message: str = "bitwise equal"


def _header(hlo_text: str) -> str:
    for line in hlo_text.splitlines():
        if line.startswith("HloModule"):
            return line
    return ""


def device_layout(hlo_text: str, num_devices: int | None) -> tuple[int, int]:
    """(replicas, partitions) from the module header.

    jax's Shardy text has no ``num_partitions`` in its header, only the mesh in the frontend
    attributes, so the largest ``#sdy.mesh`` gives the partition count there.
    """
    header = _header(hlo_text)
    fields = {key: int(value) for key, value in _HEADER_INT.findall(header)}
    replicas = fields.get("replica_count", 1)
    partitions = fields.get("num_partitions")
    if partitions is None:
        meshes = [math.prod(int(n) for n in re.findall(r"=(\d+)", m)) for m in _SDY_MESH.findall(header)]
        partitions = max(meshes, default=1)
    if num_devices is not None:
        if num_devices < 1 or num_devices % replicas:
            raise XlaError(f"num_devices={num_devices} is not a multiple of replica_count={replicas}")
        partitions = num_devices // replicas
    return replicas, partitions


def run_module(
    hlo_text: str,
    *,
    seed: int = 0,
    num_devices: int | None = None,
    spmd: bool | None = None,
    timeout: float = 300,
) -> RunResult:
    """Compile and run ``hlo_text`` on XLA:CPU in a child process, feeding seeded random inputs.

    Devices are ``replica_count * num_partitions`` from the header (see ``device_layout``), or
    ``num_devices`` if given. With several partitions, text carrying ``xla.sdy.`` attributes is
    partitioned by Shardy, other text by GSPMD, and text whose ENTRY is named ``*_spmd`` (already
    partitioned) runs with the partitioner passes disabled; ``spmd=True`` / ``False`` overrides that
    guess (partition it / it is already per-device). Inputs depend only on ``seed``, the parameter's
    index and shape (and the device, where each device gets its own), so a module before and after
    a rewrite that keeps the entry signature gets identical inputs. Every failure — XLA's
    parse/compile/run errors, a crash or a timeout of the child — is an :class:`XlaError` carrying
    XLA's message.
    """
    (outcome,) = run_modules([(hlo_text, seed)], num_devices=num_devices, spmd=spmd, timeout=timeout)
    if isinstance(outcome, XlaError):
        raise outcome
    return outcome


def run_modules(
    jobs: list[tuple[str, int]] | tuple[tuple[str, int], ...],
    *,
    num_devices: int | None = None,
    spmd: bool | None = None,
    timeout: float = 300,
    limits: list[Limit | None] | None = None,
    fill: int | None = None,
) -> list[RunResult | XlaError]:
    """Run several ``(hlo_text, seed)`` jobs as :func:`run_module` does, sharing one child process.

    The child gets as many virtual devices as the largest job needs (:func:`child_device_count`);
    each job runs on the first ``replica_count * num_partitions`` of them. Each job yields its
    :class:`RunResult` or the :class:`XlaError` it raised; a crash of the child, or a job past its
    time (:class:`RunTimeout`), is charged to the job that was running, and the jobs after it get
    a fresh child. ``timeout`` bounds each job's compile (the first's with the child's start) and
    its execution, unless ``limits`` gives that job's execution a :class:`Limit` of its own.
    ``fill``: the byte the child's fresh memory is filled from (see ``isolated.child_env``), so
    that a read of memory the module never wrote gives the same bits in every child with that fill.
    """
    layouts = [device_layout(text, num_devices) for text, _ in jobs]
    refusals = [too_many_devices(r * p) for r, p in layouts]
    runnable = [i for i, refused in enumerate(refusals) if refused is None]
    devices = max((layouts[i][0] * layouts[i][1] for i in runnable), default=1)
    bounds = [Limit(timeout) if limit is None else limit for limit in (limits or [None] * len(jobs))]
    ran: list[RunResult | XlaError] = []
    while len(ran) < len(runnable):
        rest = runnable[len(ran):]
        ran.extend(_run_in_child([jobs[i] for i in rest], [layouts[i] for i in rest], devices, spmd, timeout,
                                 [bounds[i] for i in rest], fill))
    outcomes = dict(zip(runnable, ran))
    return [outcomes[i] if refused is None else XlaError(refused) for i, refused in enumerate(refusals)]


def child_device_count(texts: Any, num_devices: int | None = None) -> int:
    """Virtual devices of the child :func:`run_modules` starts for these module texts."""
    return max((r * p for r, p in (device_layout(t, num_devices) for t in texts)), default=1)


def _run_in_child(jobs: Any, layouts: list[tuple[int, int]], devices: int, spmd: bool | None, timeout: float,
                  limits: list[Limit], fill: int | None) -> list[RunResult | XlaError]:
    """Run ``jobs`` in one child with ``devices`` virtual devices; an outcome for at least the first job."""
    requests = [
        {"text": text, "seed": seed, "replicas": r, "partitions": p, "spmd": spmd}
        for (text, seed), (r, p) in zip(jobs, layouts)
    ]
    from hlo_dedup.xla.isolated import child_command, child_env

    with tempfile.TemporaryDirectory(prefix="hlo-dedup-xla-") as tmp:
        replies, stopped = run_watched(child_command("run"), child_env(devices, fill), requests, Path(tmp), timeout, limits)
    outcomes: list[RunResult | XlaError] = []
    for reply, (_, seed), (r, p) in zip(replies, jobs, layouts):
        if "error" in reply:
            outcomes.append(XlaError(reply["error"]))
            continue
        outcomes.append(RunResult(outputs=tuple(reply["outputs"]), num_replicas=r, num_partitions=p,
                                  per_device=reply["per_device"], seed=seed, seconds=reply["seconds"],
                                  cpu_seconds=reply["cpu_seconds"], compile_seconds=reply["compile_seconds"]))
    if stopped is not None:
        outcomes.append(stopped)  # the job that was running when the child died or was stopped
    return outcomes


def _bits(array: np.ndarray) -> np.ndarray:
    """Raw bytes, so NaN payloads, signed zeros and every dtype (bf16, f8, int4, complex) compare exactly."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _as_float(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    return array.astype(np.float64)


def _close(x: np.ndarray, y: np.ndarray, rtol: float, atol: float) -> bool:
    """Within ``atol + rtol * |y|`` everywhere, NaN where the other is NaN (integers: equal)."""
    if x.dtype.kind not in "fc" and not x.dtype.name.startswith(("bfloat", "float")):
        return np.array_equal(_bits(x), _bits(y))
    with np.errstate(all="ignore"):
        return bool(np.allclose(_as_float(x), _as_float(y), rtol=rtol, atol=atol, equal_nan=True))


def non_finite(result: RunResult) -> tuple[int, int, int] | None:
    """(output index, non-finite elements, elements) of the first output holding a NaN or an infinity."""
    for index, x in enumerate(result.outputs):
        if x.dtype.kind not in "fc" and not x.dtype.name.startswith(("bfloat", "float")):
            continue
        with np.errstate(all="ignore"):
            bad = int(np.count_nonzero(~np.isfinite(_as_float(x))))
        if bad:
            return index, bad, int(x.size)
    return None


def compare_results(a: RunResult, b: RunResult, rtol: float | None = None, atol: float | None = None) -> Comparison:
    """Bitwise comparison of two runs' outputs, reporting the first differing output's max abs/rel diff;
    with ``rtol``/``atol`` outputs that are that close count as equal (NaN positions must agree)."""
    if len(a.outputs) != len(b.outputs):
        return Comparison(False, message=f"{len(a.outputs)} outputs vs {len(b.outputs)}")
    for index, (x, y) in enumerate(zip(a.outputs, b.outputs)):
        if x.shape != y.shape or x.dtype != y.dtype:
            mismatch = f"output {index}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
            return Comparison(False, index, message=mismatch)
        if np.array_equal(_bits(x), _bits(y)):
            continue
        if (rtol is not None or atol is not None) and _close(x, y, rtol or 0.0, atol or 0.0):
            continue
        xf, yf = _as_float(x), _as_float(y)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            diff = np.abs(xf - yf)
            rel = diff / np.maximum(np.maximum(np.abs(xf), np.abs(yf)), np.finfo(np.float64).tiny)
            max_abs = float(np.nanmax(diff)) if not np.all(np.isnan(diff)) else math.nan
            max_rel = float(np.nanmax(rel)) if not np.all(np.isnan(rel)) else math.nan
        return Comparison(
            False, index, max_abs, max_rel,
            message=f"output {index} differs: max abs diff {max_abs:.6g}, max rel diff {max_rel:.6g}",
        )
    return Comparison(True)
