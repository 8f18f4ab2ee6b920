"""The fold pass's predicted peak change against XLA:CPU's, on small JAX programs.

    python benchmarks/price_vs_xla_dev.py [--only NAME,...] [--keep DIR]

Each program (FSDP layers under `jax.checkpoint` via `shard_map`, a weight tied between
the first and last layer, in inference and in a remat train step, a tied weight whose
second use is an elementwise tail) is lowered by JAX; its before-optimizations module is
what the pass reads. Both that module and the pass's output are compiled for XLA:CPU
with CSE off (so XLA does not fold the gathers itself) and the memory-minimizing
scheduler, and XLA's peak is read from its dump (`analysis.xla_dump`: the bytes in use at
its worst moment, values XLA placed at one offset counted once, as `--price=xla` measures).
The table gives the pass's predicted change of the folded computation's peak with the
folded program scheduled anew (and fold by fold, as budgets price it), and XLA's change
of the module's; then the same with `--max-peak-increase 0`. The model prices for the backend
it is compared with (`--price-backend xla-cpu`, the default here; these programs are f32,
which that backend prices as written).

Needs the `xla` extra (jax/jaxlib).
"""

from __future__ import annotations

import os

# The scheduler flag has no field in the Python DebugOptions: it goes through XLA_FLAGS.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
                           " --xla_cpu_enable_concurrency_optimized_scheduler=false").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import hlo_dedup
from hlo_dedup.analysis.xla_dump import read_xla_memory
from hlo_dedup.report.model import peak_changes, rescheduled_peaks
from hlo_dedup.report.units import human_bytes

FLAGS = {"xla_disable_hlo_passes": "cse_barrier_expander,cse",
         "xla_cpu_enable_concurrency_optimized_scheduler": False}
MESH = jax.make_mesh((8,), ("x",))
MIB = 1 << 20


def _gather(w):
    return jax.lax.all_gather(w, "x", tiled=True)


def _spec(shape, sharded):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(MESH, P("x") if sharded else P()))


def fsdp_remat(d: int, layers: int = 4, batch: int = 64):
    def layer(w, h):
        return jnp.tanh(h @ _gather(w))

    def loss(ws, x):
        for w in ws:
            x = jax.checkpoint(layer)(w, x)
        return jnp.sum(x * x)

    def body(ws, x):
        return jax.grad(loss)(ws, x)

    f = jax.shard_map(body, mesh=MESH, in_specs=(P("x"), P()), out_specs=P("x"), check_vma=False)
    return jax.jit(f).lower([_spec((d, d), True)] * layers, _spec((batch, d), False))


def tied_inference(d: int, layers: int = 4, batch: int = 64):
    def body(tied, ws, x):
        h = jnp.tanh(x @ _gather(tied))
        for w in ws:
            h = jnp.tanh(h @ _gather(w))
        return h @ _gather(tied).T

    f = jax.shard_map(body, mesh=MESH, in_specs=(P("x"), P("x"), P()), out_specs=P(), check_vma=False)
    return jax.jit(f).lower(_spec((d, d), True), [_spec((d, d), True)] * layers, _spec((batch, d), False))


def tied_tail(d: int, layers: int = 4, batch: int = 64):
    def body(tied, ws, x):
        h = jnp.tanh(x @ _gather(tied))
        for w in ws:
            h = jnp.tanh(h @ _gather(w))
        return h, _gather(tied) * jnp.mean(h) + 1.0

    f = jax.shard_map(body, mesh=MESH, in_specs=(P("x"), P("x"), P()), out_specs=(P(), P()), check_vma=False)
    return jax.jit(f).lower(_spec((d, d), True), [_spec((d, d), True)] * layers, _spec((batch, d), False))


def tied_square_tail(d: int, layers: int = 4):
    """The tied weight's second use is an elementwise product with the last activation."""
    def body(tied, ws, x):
        h = jnp.tanh(x @ _gather(tied))
        for w in ws:
            h = jnp.tanh(h @ _gather(w))
        return jnp.tanh(h) * _gather(tied) + 1.0

    f = jax.shard_map(body, mesh=MESH, in_specs=(P("x"), P("x"), P()), out_specs=P(), check_vma=False)
    return jax.jit(f).lower(_spec((d, d), True), [_spec((d, d), True)] * layers, _spec((d, d), False))


def tied_remat_train(d: int, layers: int = 4, batch: int = 64):
    def layer(w, h):
        return jnp.tanh(h @ _gather(w))

    def loss(params, x):
        tied, ws = params
        h = jax.checkpoint(layer)(tied, x)
        for w in ws:
            h = jax.checkpoint(layer)(w, h)
        return jnp.sum(h @ _gather(tied).T)

    def body(tied, ws, x):
        return jax.grad(loss)((tied, ws), x)

    f = jax.shard_map(body, mesh=MESH, in_specs=(P("x"), P("x"), P()), out_specs=(P("x"), P("x")), check_vma=False)
    return jax.jit(f).lower(_spec((d, d), True), [_spec((d, d), True)] * layers, _spec((batch, d), False))


PROGRAMS = {
    "fsdp4-remat-16M": lambda: fsdp_remat(2048),
    "fsdp4-remat-4M": lambda: fsdp_remat(1024),
    "tied-infer-16M": lambda: tied_inference(2048),
    "tied-infer-4M": lambda: tied_inference(1024),
    "tied-tail-16M": lambda: tied_tail(2048),
    "tied-square-tail-4M": lambda: tied_square_tail(1024),
    "tied-remat-train-16M": lambda: tied_remat_train(2048),
    "tied-remat-train-1M": lambda: tied_remat_train(512),
}


def before_optimizations(lowered, dump: Path) -> str:
    lowered.compile(compiler_options={"xla_dump_to": str(dump), **FLAGS})
    (path,) = dump.glob("*before_optimizations.txt")
    return path.read_text()


def xla_peak(text: str, dump: Path) -> int:
    """XLA:CPU's live-range peak of `text` compiled with the flags above."""
    import jaxlib
    from jax._src import xla_bridge
    from jax._src.lib import xla_client as xc

    from hlo_dedup.xla.oracle import text_to_module_proto

    options = xc.CompileOptions()
    build = options.executable_build_options
    options.num_partitions = build.num_partitions = 8
    options.num_replicas = build.num_replicas = 1
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = "xla.sdy." in text
    build.device_assignment = xc.DeviceAssignment.create(np.arange(8).reshape(1, 8))
    build.debug_options.xla_dump_to = str(dump)
    build.debug_options.xla_disable_hlo_passes = FLAGS["xla_disable_hlo_passes"]
    mlir = jaxlib._jax.mlir.hlo_to_stablehlo(text_to_module_proto(text))
    backend = xla_bridge.get_backend("cpu")
    backend.compile_and_load(mlir, xc.DeviceList(tuple(backend.devices()[:8])), options)
    (path,) = dump.glob("*cpu_after_optimizations.txt")
    return read_xla_memory(path).in_use_peak


#: The backend the model prices for: the one it is compared with (`--price-backend`).
BACKEND = ["xla-cpu"]


def predicted(text: str, budget: int | None) -> tuple[str, int, int, int]:
    """The folded module, its folds, and the largest predicted change of a computation's
    peak with the folded program re-scheduled and fold by fold."""
    module = hlo_dedup.parse_module(text)
    result = hlo_dedup.run_passes(module, max_peak_increase=budget, price_backend=BACKEND[0])
    changes = peak_changes(result.folds)
    rescheduled = rescheduled_peaks([c for p in result.passes for c in p.profiles])
    anew = max([rescheduled.get(c, after) - before for c, (before, after) in changes.items()] + [0])
    return module.to_text(), len(result.folds), anew, max([a - b for b, a in changes.values()] + [0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", help="comma-separated program names")
    parser.add_argument("--keep", type=Path, help="keep XLA's dumps under this directory")
    parser.add_argument("--price-backend", choices=("native", "xla-cpu"), default=BACKEND[0],
                        help="the backend the model prices for (default: xla-cpu, the one measured)")
    args = parser.parse_args()
    BACKEND[0] = args.price_backend
    names = [n for n in PROGRAMS if not args.only or n in args.only.split(",")]
    print("| program | folds | predicted, re-scheduled | fold by fold | XLA | within goal | folds at budget 0 "
          "| XLA change at budget 0 |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        for name in names:
            text = before_optimizations(PROGRAMS[name](), base / name / "jax")
            peak = xla_peak(text, base / name / "before")
            folded, n, rise, by_fold = predicted(text, None)
            change = xla_peak(folded, base / name / "after") - peak
            ok = abs(rise - change) <= max(0.25 * abs(change), MIB)
            kept_text, n0, _, _ = predicted(text, 0)
            change0 = xla_peak(kept_text, base / name / "budget0") - peak if n0 else 0
            print(f"| {name} | {n} | {human_bytes(rise)} | {human_bytes(by_fold)} | {human_bytes(change)} "
                  f"| {'yes' if ok else 'NO'} "
                  f"| {n0} | {human_bytes(change0)} |", flush=True)


if __name__ == "__main__":
    main()
