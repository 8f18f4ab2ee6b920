"""One module compiled and run on XLA:CPU with seeded inputs: the child side of
`hlo_dedup.xla.oracle.run_modules` (it runs in `hlo_dedup.xla.child`, never in the command).

Every entry parameter is fed, leaf by leaf when it is a tuple (torch-xla modules and
while-loop state take tuples): the executable takes the leaves of its parameters in
depth-first order. A leaf's value depends only on the seed, the parameter's index, the
leaf's position in it, its dtype and dimensions (and the device, for per-device programs), so
two modules with the same entry signature get identical inputs.

The values keep a typical training step finite (:data:`INPUTS`): floats are normals scaled by
1/8 (a power of two, so a narrow type holds the same digits as at full scale; not for the 8-
and 4-bit types whose smallest normal is above 2^-10, which would round most of them to 0), integers are
drawn from [0, k), k the smallest dimension (of at least 2, and at most 8) of any entry
parameter, so an integer used as an index or a loop bound stays in range.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any, Callable, Iterator

import ml_dtypes
import numpy as np
from jax._src.lib import xla_client as xc

from hlo_dedup.xla import XlaError
from hlo_dedup.xla.oracle import parse_text

# Passes that would re-partition text the SPMD partitioner already produced.
_PARTITIONER_PASSES = "spmd-partitioning,sharding-propagation,shardy-xla"
_ENTRY_NAME = re.compile(r"^ENTRY\s+%?([^\s(]+)", re.MULTILINE)
_FLOAT_SCALE = 0.125
_INT_LIMIT = 8
#: How the inputs are drawn, as reports say it.
INPUTS = (f"floats ~ N(0, 1) x {_FLOAT_SCALE:g} (x 1 for types with fewer than 10 exponent steps below 1, "
          "such as f8e4m3fn and f4e2m1fn); integers uniform in [0, k), k the smallest entry-parameter "
          f"dimension >= 2 (at most {_INT_LIMIT}); pred a fair coin")


def leaves(shape: Any, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Any]]:
    """(position, shape) of every non-tuple leaf of `shape`, depth first."""
    if shape.is_tuple():
        for i, element in enumerate(shape.tuple_shapes()):
            yield from leaves(element, (*path, i))
    else:
        yield path, shape


def integer_limit(shapes: Any) -> int:
    """k of :data:`INPUTS` for these entry-parameter leaf shapes."""
    dims = [d for shape in shapes if not shape.is_token() for d in shape.dimensions() if d >= 2]
    return min([_INT_LIMIT, *dims])


def random_array(shape: Any, seed: int, index: int, device: int | None, path: tuple[int, ...] = (),
                 int_limit: int = _INT_LIMIT) -> np.ndarray:
    """Deterministic input for one leaf of entry parameter `index` (`device` None = the
    global value); a parameter that is not a tuple has the empty `path`; integers are drawn
    from [0, `int_limit`)."""
    where = f"{index}" + "".join(f".{i}" for i in path)
    if shape.is_token():
        raise XlaError(f"entry parameter {where} is a token; the oracle cannot feed tokens")
    try:
        dtype = np.dtype(shape.numpy_dtype())
    except Exception as exc:  # noqa: BLE001 - jaxlib raises its own types here
        raise XlaError(f"entry parameter {where} has an unsupported element type ({shape}): {exc}") from None
    dims = tuple(shape.dimensions())
    key = f"{seed}|{where}|{dtype.name}{list(dims)}|{'global' if device is None else device}"
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
        return rng.integers(0, max(1, min(int(info.max) + 1, int_limit)), size=dims).astype(dtype)
    try:
        finfo = ml_dtypes.finfo(dtype)  # numpy floats and ml_dtypes bf16/f8/f4
    except ValueError:
        raise XlaError(f"entry parameter {where}: no random-input rule for {dtype}") from None
    values = rng.standard_normal(dims) * (_FLOAT_SCALE if float(finfo.tiny) <= _FLOAT_SCALE / 128 else 1.0)
    return (np.abs(values) if float(finfo.min) >= 0 else values).astype(dtype)


def compile_hlo(text: str, proto: bytes, replicas: int, partitions: int, devices: tuple, *,
                disabled_passes: str = "", dump_to: str | None = None) -> Any:
    """Compile a module (its text and proto) for XLA:CPU on `devices`: SPMD on where it has
    partitions (Shardy where its text is Shardy's), `disabled_passes` off, XLA's dump to
    `dump_to`. XlaError with XLA's words if it cannot."""
    import jax
    import jaxlib

    options = xc.CompileOptions()
    build = options.executable_build_options
    for target in (options, build):
        target.num_replicas = replicas
        target.num_partitions = partitions
    if partitions > 1:
        build.use_spmd_partitioning = True
        build.use_shardy_partitioner = "xla.sdy." in text
    if disabled_passes:
        build.debug_options.xla_disable_hlo_passes = disabled_passes
    if dump_to is not None:
        build.debug_options.xla_dump_to = dump_to
    build.device_assignment = xc.DeviceAssignment.create(np.arange(replicas * partitions).reshape(replicas, partitions))
    try:
        mlir = jaxlib._jax.mlir.hlo_to_stablehlo(proto)
        backend = jax._src.xla_bridge.get_backend("cpu")
        return backend.compile_and_load(mlir, xc.DeviceList(devices), options)
    except Exception as exc:  # noqa: BLE001 - XLA's compile errors, with its words
        raise XlaError(str(exc)) from None


def execute(request: dict[str, Any], compiled: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Compile and run one request of `oracle.run_modules`: its outputs as numpy arrays, and
    the seconds its compile and its execution took (wall clock; the execution's CPU time too,
    every thread's). `compiled` is called between the two: the parent bounds each on its own."""
    import jax
    from jax._src.lib import lapack
    from jax._src.sharding_impls import GSPMDSharding

    jax.config.update("jax_enable_x64", True)  # else device_put silently narrows f64/s64/u64/c128 inputs
    if not getattr(execute, "lapack_ready", False):
        lapack._lapack.initialize()  # LAPACK custom-calls abort without it
        execute.lapack_ready = True  # type: ignore[attr-defined]
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

    started = time.perf_counter()
    proto = parse_text(text).as_serialized_hlo_module_proto()
    # XLA:CPU wants SPMD on for num_partitions > 1; a partitioned module must not be partitioned again.
    disabled = _PARTITIONER_PASSES if partitions > 1 and already_partitioned else ""
    executable = compile_hlo(text, proto, replicas, partitions, devices, disabled_passes=disabled)
    compile_seconds = time.perf_counter() - started
    compiled()
    started, cpu_started = time.perf_counter(), time.process_time()
    program = xc.XlaComputation(proto).program_shape()
    inputs = [(index, path, leaf) for index, shape in enumerate(program.parameter_shapes())
              for path, leaf in leaves(shape)]
    int_limit = integer_limit(leaf for _, _, leaf in inputs)
    result_leaves = [leaf for _, leaf in leaves(program.result_shape())]
    replicated = GSPMDSharding.get_replicated(devices)
    args = []
    if spmd:
        shardings = executable.get_parameter_shardings()
        for (index, path, shape), sharding in zip(inputs, shardings):
            value = random_array(shape, seed, index, None, path, int_limit)
            args.append(jax.device_put(value, GSPMDSharding(devices, sharding)))
    else:
        for index, path, shape in inputs:
            shards = [jax.device_put(random_array(shape, seed, index, d, path, int_limit), dev)
                      for d, dev in enumerate(devices)]
            args.append(jax.make_array_from_single_device_arrays(tuple(shape.dimensions()), replicated, shards))
    try:
        per_output = executable.execute_sharded(args).disassemble_into_single_device_arrays()
        outputs = []
        shardings = executable.get_output_shardings() if spmd else [None] * len(result_leaves)
        for shards, shape, sharding in zip(per_output, result_leaves, shardings):
            if shape.is_token():  # a token carries no value: compare it as an empty array
                outputs.append(np.zeros((0,), np.uint8))
            elif spmd:
                whole = jax.make_array_from_single_device_arrays(
                    tuple(shape.dimensions()), GSPMDSharding(devices, sharding), shards)
                outputs.append(np.asarray(whole))
            else:
                ordered = sorted(shards, key=lambda a: next(iter(a.devices())).id)
                stacked = np.stack([np.asarray(a) for a in ordered])
                outputs.append(stacked if num_devices > 1 else stacked[0])
    except Exception as exc:  # noqa: BLE001 - XLA's run errors, with its words
        raise XlaError(str(exc)) from None
    return {"outputs": outputs, "per_device": num_devices > 1 and not spmd, "compile_seconds": compile_seconds,
            "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu_started}
