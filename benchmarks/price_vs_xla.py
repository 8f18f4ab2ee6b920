"""The model's price of the folds against XLA's own peak, on unscheduled JAX modules.

    python benchmarks/price_vs_xla.py            # the table in benchmarks/README.md, ~1 min on 2 cores
    python benchmarks/price_vs_xla.py --quick    # the same programs with 1/16 of the weights
    python benchmarks/price_vs_xla.py --price-backend native   # bf16 priced as written

The model prices for the backend it is compared with (`--price-backend xla-cpu`, the
default here: XLA:CPU computes bf16 in f32, `hlo_dedup.analysis.f32_arithmetic`).
Each program is lowered for 8 devices (`jax.jit(f).lower(...).as_text(dialect="hlo")`:
before XLA's optimizations, so its duplicate all-gathers are still there). Per module:

* folds: what the default pipeline folds (`hlo_dedup.run_passes`);
* model, re-scheduled: the largest change of one computation's estimated peak with the
  folded program scheduled anew (`LiveProfile.rescheduled`), the figure the summary leads with;
* model, fold by fold: the same priced fold by fold on the schedule made before the folds
  (`ModuleRun.peak_changes`), which `--max-peak-increase` compares with its budget;
* XLA: the change of XLA:CPU's peak (`hlo_dedup.xla.memory.measure`: the module compiled as
  read and as rewritten, XLA's CSE off, its memory-minimizing scheduler), module-wide;
* budget 0 (model): the folds `--max-peak-increase 0` keeps and XLA's peak change of that
  output: the model's budget is right when this is never positive;
* budget 0 (XLA): the folds `--price=xla --max-peak-increase 0` keeps and its compiles.

Needs the `xla` extra (jax/jaxlib).
"""

from __future__ import annotations

import os

# XLA:CPU takes its scheduler from the flags it starts with (`hlo_dedup.xla.memory.measure`).
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
                           " --xla_cpu_enable_concurrency_optimized_scheduler=false").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import hlo_dedup
from hlo_dedup.io.formats import modules_from_text
from hlo_dedup.passes import Pipeline
from hlo_dedup.price import price_with_xla
from hlo_dedup.report.model import peak_changes, rescheduled_peaks
from hlo_dedup.report.units import human_bytes
from hlo_dedup.xla.memory import measure

MESH = jax.make_mesh((8,), ("x",))


def _sharded(shape: tuple[int, ...], spec: P, dtype=jnp.float32) -> jax.ShapeDtypeStruct:  # noqa: ANN001
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(MESH, spec))


def _gather(w: jax.Array) -> jax.Array:
    return lax.all_gather(w, "x", tiled=True)


def _layer(w: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ _gather(w))


def _train_step(layers: Callable, count: int, weights: tuple, x: jax.ShapeDtypeStruct) -> str:
    """The gradient of a squared-output loss w.r.t. `count` sharded weights, taken inside
    shard_map (as FSDP does): forward gathers and the backward's re-gathers share a body."""

    def local_loss(ws: tuple, xs: jax.Array) -> jax.Array:
        return jnp.sum(layers(*ws, xs).astype(jnp.float32) ** 2)

    @partial(jax.shard_map, mesh=MESH, in_specs=((P("x"),) * count, P("x")), out_specs=(P("x"),) * count)
    def step(ws, xs):  # noqa: ANN001, ANN202
        return jax.grad(local_loss)(ws, xs)

    return jax.jit(step).lower(weights, x).as_text(dialect="hlo")


def fsdp_remat(d: int, batch: int, dtype=jnp.float32) -> str:  # noqa: ANN001
    """Four FSDP layers under jax.checkpoint, the training gradient: the backward pass
    re-gathers every weight behind an optimization barrier."""
    layer = jax.checkpoint(_layer)

    def layers(w1, w2, w3, w4, x):  # noqa: ANN001, ANN202
        for w in (w1, w2, w3, w4):
            x = layer(w, x)
        return x

    weights = tuple(_sharded((d, d), P("x"), dtype) for _ in range(4))
    return _train_step(layers, 4, weights, _sharded((batch, d), P("x"), dtype))


def tied_inference(d: int, batch: int) -> str:
    """The first and the last layer share a weight, forward only: each gathers it."""

    @partial(jax.shard_map, mesh=MESH, in_specs=(P("x"),) * 4, out_specs=P("x"))
    def forward(tied, w1, w2, x):  # noqa: ANN001, ANN202
        for w in (tied, w1, w2, tied):
            x = _layer(w, x)
        return x

    args = [_sharded((d, d), P("x")) for _ in range(3)] + [_sharded((batch, d), P("x"))]
    return jax.jit(forward).lower(*args).as_text(dialect="hlo")


def tied_fused_tail(d: int) -> str:
    """A tied weight used by the first matmul and again by an elementwise tail XLA fuses."""

    @partial(jax.shard_map, mesh=MESH, in_specs=(P("x"),) * 4, out_specs=P(None, "x"))
    def forward(tied, w1, w2, x):  # noqa: ANN001, ANN202
        h = _gather(x)  # [d, d] activations, so the tail can scale them by the weight
        for w in (tied, w1, w2):
            h = _layer(w, h)
        scaled = jnp.tanh(h) * _gather(tied) + 1.0
        return scaled[:, : d // 8]

    args = [_sharded((d, d), P("x")) for _ in range(4)]
    return jax.jit(forward).lower(*args).as_text(dialect="hlo")


def tied_remat_train(d: int, batch: int) -> str:
    """First and last layer tied, every layer under jax.checkpoint, the gradient."""
    layer = jax.checkpoint(_layer)

    def layers(tied, w1, w2, x):  # noqa: ANN001, ANN202
        for w in (tied, w1, w2, tied):
            x = layer(w, x)
        return x

    weights = tuple(_sharded((d, d), P("x")) for _ in range(3))
    return _train_step(layers, 3, weights, _sharded((batch, d), P("x")))


def scan_remat(d: int, batch: int) -> str:
    """Four layers as lax.scan over stacked weights, a shared weight gathered twice per step,
    under jax.checkpoint, the gradient (gathers inside while bodies)."""

    def layers(stacked, shared, x):  # noqa: ANN001, ANN202
        @jax.checkpoint
        def body(h, w):  # noqa: ANN001, ANN202
            h = _layer(shared, h)
            return _layer(shared, _layer(w, h)), None

        return lax.scan(body, x, stacked)[0]

    def local_loss(ws: tuple, xs: jax.Array) -> jax.Array:
        return jnp.sum(layers(*ws, xs) ** 2)

    @partial(jax.shard_map, mesh=MESH, in_specs=((P(None, "x"), P("x")), P("x")), out_specs=(P(None, "x"), P("x")))
    def step(ws, xs):  # noqa: ANN001, ANN202
        return jax.grad(local_loss)(ws, xs)

    weights = (_sharded((4, d, d), P(None, "x")), _sharded((d, d), P("x")))
    return jax.jit(step).lower(weights, _sharded((batch, d), P("x"))).as_text(dialect="hlo")


def programs(scale: int) -> list[tuple[str, str, Callable[[], str]]]:
    """(name, one weight's bytes, lowering) at 1/`scale` of the full width (weights of 1-64 MiB)."""
    tiny, small, large, huge = (width // scale for width in (512, 1024, 2048, 4096))
    size = lambda d, dtype_bytes=4: human_bytes(d * d * dtype_bytes)  # noqa: E731
    return [
        ("fsdp-remat-4", size(small), lambda: fsdp_remat(small, 512 // scale)),
        ("tied-inference", size(huge), lambda: tied_inference(huge, 256 // scale)),
        ("tied-fused-tail", size(small), lambda: tied_fused_tail(small)),
        ("tied-remat-train", size(large), lambda: tied_remat_train(large, 256 // scale)),
        ("scan-remat", size(tiny), lambda: scan_remat(tiny, 512 // scale)),
        ("fsdp-remat-4-bf16", size(large, 2), lambda: fsdp_remat(large, 512 // scale, jnp.bfloat16)),
    ]


#: The backend the model prices for: the one it is compared with (`--price-backend`).
BACKEND = ["xla-cpu"]


def _passes(text: str, **options) -> tuple[hlo_dedup.HloModule, list]:  # noqa: ANN003
    (module,) = modules_from_text(text, "<jax>", split_input_file=False)
    options.setdefault("price_backend", BACKEND[0])
    return module, Pipeline.from_names(hlo_dedup.DEFAULT_PIPELINE, **options).run(module).passes


def row(name: str, size: str, text: str) -> tuple[str, ...]:
    before = measure(text)["peak_bytes"]
    module, passes = _passes(text)
    folds = [f for p in passes for f in p.folds]
    changes = peak_changes(folds)
    model = max([after - first for first, after in changes.values()], default=0)
    rescheduled = rescheduled_peaks([c for p in passes for c in p.profiles])
    anew = max([rescheduled.get(c, after) - first for c, (first, after) in changes.items()], default=0)
    xla = measure(module.to_text())["peak_bytes"] - before
    budgeted, budget_passes = _passes(text, max_peak_increase=0)
    kept = sum(len(p.folds) for p in budget_passes)
    budget_xla = measure(budgeted.to_text())["peak_bytes"] - before
    # As the command runs --price=xla: the backend plays no part (XLA:CPU is measured).
    native = {"price_backend": "native"}
    _, xla_passes, price = price_with_xla(text, *_passes(text, **native),
                                          lambda refused: _passes(text, refused_folds=refused, **native), budget=0)
    xla_kept = sum(len(p.folds) for p in xla_passes)
    signed = lambda n: ("+" if n > 0 else "") + human_bytes(n)  # noqa: E731
    within = abs(anew - xla) <= max(abs(xla) / 4, 1 << 20)
    return (name, size, str(len(folds)), human_bytes(before), signed(anew) + ("" if within else " **off**"),
            signed(model), signed(xla),
            f"{kept} kept, {signed(budget_xla)}" + (" **over**" if budget_xla > 0 else ""),
            f"{xla_kept} kept, {signed(price['peak_increase_bytes'])}, {price['compiles']} compiles")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1/16 of the weights (a smoke run)")
    parser.add_argument("--only", help="comma-separated program names")
    parser.add_argument("--price-backend", choices=("native", "xla-cpu"), default=BACKEND[0],
                        help="the backend the model prices for (default: xla-cpu, the one measured)")
    args = parser.parse_args()
    BACKEND[0] = args.price_backend
    print(f"jax {jax.__version__}, XLA:CPU, 8 devices; peaks per device; model: --price-backend {BACKEND[0]}")
    header = ("program", "weight", "folds", "XLA peak before", "model: re-scheduled", "model: fold by fold",
              "XLA: change",
              "budget 0 (model): XLA change", "budget 0 (--price=xla)")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    started = time.perf_counter()
    for name, size, lower in programs(16 if args.quick else 1):
        if args.only and name not in args.only.split(","):
            continue
        print("| " + " | ".join(row(name, size, lower())) + " |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
