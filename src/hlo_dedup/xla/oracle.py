"""XLA as the oracle: its own parser/printer, module-proto conversion, and XLA:CPU execution.

Parsing and printing run in-process. Compiling and running happen in a child process
(``python -m hlo_dedup.xla.oracle``) because an XLA CHECK failure aborts the whole process and
because the virtual CPU device count (``XLA_FLAGS``) must be fixed before jax is imported.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import re
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hlo_dedup.xla import XlaError, XlaUnavailableError

try:
    import ml_dtypes
    import numpy as np
    from jax._src.lib import xla_client as xc
except ImportError as exc:  # the optional ``xla`` extra is missing
    raise XlaUnavailableError(str(exc)) from exc

__all__ = [
    "Comparison",
    "RunResult",
    "compare_results",
    "module_proto_to_text",
    "run_module",
    "run_modules",
    "device_layout",
    "child_device_count",
    "text_to_module_proto",
    "xla_canonical_text",
    "xla_reparse_equal",
]

# Passes that would re-partition text the SPMD partitioner already produced.
_PARTITIONER_PASSES = "spmd-partitioning,sharding-propagation,shardy-xla"
_HEADER_INT = re.compile(r"\b(replica_count|num_partitions)=(\d+)")
_SDY_MESH = re.compile(r"#sdy\.mesh<\[([^\]]*)\]")
_ENTRY_NAME = re.compile(r"^ENTRY\s+%?([^\s(]+)", re.MULTILINE)
_STACK_FRAME_ID = re.compile(r"\s*stack_frame_id=\d+")
_CRASH_TAIL_LINES = 30


# --- parse / print ----------------------------------------------------------------------------


def _print_options(*, metadata: bool = True) -> Any:
    """Options that make XLA's print re-parse: the default elides large constants as ``{...}``."""
    options = xc.hlo.HloPrintOptions()
    options.print_large_constants = True
    options.print_metadata = metadata
    return options


def _parse(hlo_text: str) -> Any:
    try:
        return xc.hlo.hlo_module_from_text(hlo_text)
    except Exception as exc:  # jaxlib raises XlaRuntimeError/ValueError subclasses; keep XLA's words
        raise XlaError(str(exc)) from None


def xla_canonical_text(hlo_text: str) -> str:
    """XLA's own parse and print of ``hlo_text`` (syntax is checked, shapes are not: that needs a compile)."""
    return _parse(hlo_text).to_string(_print_options())


def _comparable_print(hlo_text: str) -> list[str]:
    """XLA's print normalised for comparison.

    Metadata (op names, source lines, the stack-frame tables and their ids) is left out because XLA
    renumbers the tables on re-print and it carries no semantics; computations are sorted by their
    printed text because XLA may print them in a different order than it read them.
    """
    printed = _parse(hlo_text).to_string(_print_options(metadata=False))
    header, _, body = printed.partition("\n")
    blocks = [_STACK_FRAME_ID.sub("", block.strip()) for block in body.split("\n\n") if block.strip()]
    return [header, *sorted(blocks)]


def xla_reparse_equal(a: str, b: str) -> bool:
    """True when XLA parses ``a`` and ``b`` to the same module up to computation order and metadata."""
    return _comparable_print(a) == _comparable_print(b)


def text_to_module_proto(hlo_text: str) -> bytes:
    """Serialized ``HloModuleProto`` of the text (not the ``HloProto`` wrapper XLA dumps write)."""
    return _parse(hlo_text).as_serialized_hlo_module_proto()


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
    """

    outputs: tuple[np.ndarray, ...]
    num_replicas: int
    num_partitions: int
    per_device: bool
    seed: int


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


def _child_env(num_devices: int) -> dict[str, str]:
    env = dict(os.environ)
    count_flag = "--xla_force_host_platform_device_count"
    flags = [flag for flag in env.get("XLA_FLAGS", "").split() if not flag.startswith(count_flag)]
    env["XLA_FLAGS"] = " ".join([*flags, f"{count_flag}={num_devices}"])
    env["JAX_PLATFORMS"] = "cpu"
    # The child imports this package; make that work from a source checkout too.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    return env


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
) -> list[RunResult | XlaError]:
    """Run several ``(hlo_text, seed)`` jobs as :func:`run_module` does, sharing one child process.

    The child gets as many virtual devices as the largest job needs (:func:`child_device_count`);
    each job runs on the first ``replica_count * num_partitions`` of them. Each job yields its
    :class:`RunResult` or the :class:`XlaError` it raised; a crash or timeout of the child is
    charged to the job that was running, and the jobs after it get a fresh child. ``timeout``
    applies per job.
    """
    layouts = [device_layout(text, num_devices) for text, _ in jobs]
    devices = max((r * p for r, p in layouts), default=1)
    outcomes: list[RunResult | XlaError] = []
    while len(outcomes) < len(jobs):
        done = len(outcomes)
        outcomes.extend(_run_in_child(jobs[done:], layouts[done:], devices, spmd, timeout))
    return outcomes


def child_device_count(texts: Any, num_devices: int | None = None) -> int:
    """Virtual devices of the child :func:`run_modules` starts for these module texts."""
    return max((r * p for r, p in (device_layout(t, num_devices) for t in texts)), default=1)


def _run_in_child(
    jobs: Any, layouts: list[tuple[int, int]], devices: int, spmd: bool | None, timeout: float
) -> list[RunResult | XlaError]:
    """Run ``jobs`` in one child with ``devices`` virtual devices; an outcome for at least the first job."""
    requests = [
        {"text": text, "seed": seed, "replicas": r, "partitions": p, "spmd": spmd}
        for (text, seed), (r, p) in zip(jobs, layouts)
    ]
    with tempfile.TemporaryDirectory(prefix="hlo-dedup-xla-") as tmp:
        result_dir = Path(tmp)
        crash: XlaError | None = None
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "hlo_dedup.xla.oracle", str(result_dir)],
                input=pickle.dumps(requests),
                capture_output=True,
                env=_child_env(devices),
                timeout=timeout * len(requests),
            )
        except subprocess.TimeoutExpired:
            crash = XlaError(f"XLA:CPU run did not finish within {timeout} s")
        else:
            stderr = proc.stderr.decode(errors="replace").strip().splitlines()
            tail = "\n".join(stderr[-_CRASH_TAIL_LINES:])
            crash = XlaError(f"XLA:CPU child process crashed (exit code {proc.returncode}):\n{tail}")
        outcomes: list[RunResult | XlaError] = []
        for index, ((_, seed), (r, p)) in enumerate(zip(jobs, layouts)):
            path = result_dir / f"result-{index}.pickle"
            if not path.exists():
                outcomes.append(crash)  # the job that was running when the child died or timed out
                break
            reply = pickle.loads(path.read_bytes())
            if "error" in reply:
                outcomes.append(XlaError(reply["error"]))
            else:
                outcomes.append(RunResult(
                    outputs=tuple(reply["outputs"]),
                    num_replicas=r,
                    num_partitions=p,
                    per_device=reply["per_device"],
                    seed=seed,
                ))
    return outcomes


def _bits(array: np.ndarray) -> np.ndarray:
    """Raw bytes, so NaN payloads, signed zeros and every dtype (bf16, f8, int4, complex) compare exactly."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _as_float(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    return array.astype(np.float64)


def compare_results(a: RunResult, b: RunResult) -> Comparison:
    """Bitwise comparison of two runs' outputs, reporting the first differing output's max abs/rel diff."""
    if len(a.outputs) != len(b.outputs):
        return Comparison(False, message=f"{len(a.outputs)} outputs vs {len(b.outputs)}")
    for index, (x, y) in enumerate(zip(a.outputs, b.outputs)):
        if x.shape != y.shape or x.dtype != y.dtype:
            mismatch = f"output {index}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
            return Comparison(False, index, message=mismatch)
        if np.array_equal(_bits(x), _bits(y)):
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


# --- child process ----------------------------------------------------------------------------


def _random_array(shape: Any, seed: int, index: int, device: int | None) -> np.ndarray:
    """Deterministic input for one parameter (``device`` None = the global value)."""
    if shape.is_token():
        raise XlaError(f"entry parameter {index} is a token; the oracle cannot feed tokens")
    if shape.is_tuple():
        raise XlaError(f"entry parameter {index} is tuple-shaped ({shape}); the oracle feeds arrays only")
    try:
        dtype = np.dtype(shape.numpy_dtype())
    except Exception as exc:
        raise XlaError(f"entry parameter {index} has an unsupported element type ({shape}): {exc}") from None
    dims = tuple(shape.dimensions())
    key = f"{seed}|{index}|{dtype.name}{list(dims)}|{'global' if device is None else device}"
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little"))
    if dtype == np.bool_:
        return rng.random(dims) < 0.5
    if dtype.kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    try:
        info = ml_dtypes.iinfo(dtype)  # numpy and ml_dtypes (int4, uint2, ...) integers
    except ValueError:
        pass
    else:
        return rng.integers(max(int(info.min), -8), min(int(info.max), 7) + 1, size=dims).astype(dtype)
    try:
        finfo = ml_dtypes.finfo(dtype)  # numpy floats and ml_dtypes bf16/f8/f4
    except ValueError:
        raise XlaError(f"entry parameter {index}: no random-input rule for {dtype}") from None
    values = rng.standard_normal(dims)
    return (np.abs(values) if float(finfo.min) >= 0 else values).astype(dtype)


def _execute(request: dict[str, Any]) -> dict[str, Any]:
    import jax
    import jaxlib
    from jax._src.lib import lapack
    from jax._src.sharding_impls import GSPMDSharding

    jax.config.update("jax_enable_x64", True)  # else device_put silently narrows f64/s64/u64/c128 inputs
    if not getattr(_execute, "lapack_ready", False):
        lapack._lapack.initialize()  # LAPACK custom-calls abort without it
        _execute.lapack_ready = True  # type: ignore[attr-defined]
    text, seed = request["text"], request["seed"]
    replicas, partitions = request["replicas"], request["partitions"]
    num_devices = replicas * partitions
    if jax.device_count() < num_devices:
        raise XlaError(f"module needs {num_devices} devices, XLA:CPU has {jax.device_count()}")
    devices = tuple(jax.devices()[:num_devices])
    if request.get("spmd") is None:
        entry = _ENTRY_NAME.search(text)
        already_partitioned = bool(entry and entry.group(1).endswith("_spmd"))
    else:
        already_partitioned = not request["spmd"]
    spmd = partitions > 1 and not already_partitioned

    proto = _parse(text).as_serialized_hlo_module_proto()
    options = xc.CompileOptions()
    build = options.executable_build_options
    for target in (options, build):
        target.num_replicas = replicas
        target.num_partitions = partitions
    if partitions > 1:
        build.use_spmd_partitioning = True
        build.use_shardy_partitioner = "xla.sdy." in text
        if already_partitioned:  # XLA:CPU wants SPMD on for num_partitions > 1; keep it from re-running
            build.debug_options.xla_disable_hlo_passes = _PARTITIONER_PASSES
    build.device_assignment = xc.DeviceAssignment.create(np.arange(num_devices).reshape(replicas, partitions))
    try:
        mlir = jaxlib._jax.mlir.hlo_to_stablehlo(proto)
        backend = jax._src.xla_bridge.get_backend("cpu")
        executable = backend.compile_and_load(mlir, xc.DeviceList(devices), options)
    except Exception as exc:
        raise XlaError(str(exc)) from None

    program = xc.XlaComputation(proto).program_shape()
    param_shapes = program.parameter_shapes()
    result = program.result_shape()
    result_shapes = result.tuple_shapes() if result.is_tuple() else [result]
    replicated = GSPMDSharding.get_replicated(devices)
    args = []
    if spmd:
        shardings = executable.get_parameter_shardings()
        for index, shape in enumerate(param_shapes):
            value = _random_array(shape, seed, index, None)
            args.append(jax.device_put(value, GSPMDSharding(devices, shardings[index])))
    else:
        for index, shape in enumerate(param_shapes):
            shards = [jax.device_put(_random_array(shape, seed, index, d), dev) for d, dev in enumerate(devices)]
            args.append(jax.make_array_from_single_device_arrays(tuple(shape.dimensions()), replicated, shards))
    try:
        per_output = executable.execute_sharded(args).disassemble_into_single_device_arrays()
        outputs = []
        if spmd:
            shardings = executable.get_output_shardings()
            for shards, shape, sharding in zip(per_output, result_shapes, shardings):
                if shape.is_token():  # a token carries no value: compare it as an empty array
                    outputs.append(np.zeros((0,), np.uint8))
                    continue
                whole = jax.make_array_from_single_device_arrays(
                    tuple(shape.dimensions()), GSPMDSharding(devices, sharding), shards
                )
                outputs.append(np.asarray(whole))
        else:
            for shards, shape in zip(per_output, result_shapes):
                if shape.is_token():
                    outputs.append(np.zeros((0,), np.uint8))
                    continue
                ordered = sorted(shards, key=lambda a: next(iter(a.devices())).id)
                stacked = np.stack([np.asarray(a) for a in ordered])
                outputs.append(stacked if num_devices > 1 else stacked[0])
    except Exception as exc:
        raise XlaError(str(exc)) from None
    return {"outputs": outputs, "per_device": num_devices > 1 and not spmd}


def _child_main(result_dir: str) -> None:
    """Child side of :func:`run_modules`: requests on stdin, one reply per job pickled to
    ``result_dir/result-<i>.pickle`` as soon as it is known (so a later crash keeps earlier replies)."""
    requests = pickle.loads(sys.stdin.buffer.read())
    for index, request in enumerate(requests):
        try:
            reply = _execute(request)
        except XlaError as exc:
            reply = {"error": str(exc)}
        except Exception as exc:  # anything else jax raises still goes back as a message, not a traceback
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        path = Path(result_dir) / f"result-{index}.pickle"
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(reply))
        partial.replace(path)


if __name__ == "__main__":
    _child_main(sys.argv[1])
