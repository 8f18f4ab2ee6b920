"""Our estimated peak against XLA's own buffer assignment, on compiled JAX transformer steps.

    python benchmarks/memory_vs_xla.py                 # the table below, ~1 min on 2 cores
    python benchmarks/memory_vs_xla.py --keep out/dumps

Each configuration is a JAX training step (forward, `value_and_grad`, SGD update) of an
L-layer transformer (RMSNorm, multi-head attention, GELU MLP), compiled for XLA:CPU with
`xla_dump_to`; `fsdp` shards every weight over 8 devices (GSPMD, so the per-device module
gathers each weight), `remat` wraps each layer in `jax.checkpoint`, `scan` runs the layers
as `lax.scan` over stacked weights (while loops: the nested-computation rule). From the scheduled
post-optimization module (`*.cpu_after_optimizations.txt`) we estimate the entry's peak
(`hlo_dedup.analysis`); from XLA's dump files (`hlo_dedup.analysis.xla_dump`) we read:

* in use: the maximum over XLA's flattened schedule of the bytes its live values occupy,
  values XLA placed at the same allocation and offset counted once (what its placement
  really has in use at the worst moment);
* live-range max: the same without that merging (the quantity our model estimates for
  straight-line code; around while loops XLA's aliased loop-state values touch);
* reported: the peak XLA's live-range dump prints (its moment can be off the maximum);
* allocated: the bytes XLA's buffer assignment reserves (shared buffers, packing, and
  separate allocations for parameters, constants and outputs).

On straight-line steps ours equals the live-range max up to a few bytes (XLA's 8-byte
tuple index tables, not counted here; scalar constants, static here).

Needs the `xla` extra (jax/jaxlib).
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import hlo_dedup
from hlo_dedup.analysis import analyze
from hlo_dedup.report.units import human_bytes
from hlo_dedup.analysis.xla_dump import read_xla_memory


@dataclass(frozen=True)
class Config:
    name: str
    layers: int
    width: int
    heads: int
    ffn: int
    batch: int
    seq: int
    fsdp: bool = False
    remat: bool = False
    scan: bool = False


CONFIGS = (
    Config("tiny", 2, 64, 4, 256, 4, 32),
    Config("small", 4, 128, 4, 512, 8, 64),
    Config("medium", 6, 256, 8, 1024, 8, 128),
    Config("large", 8, 512, 8, 2048, 8, 128),
    Config("small-remat", 4, 128, 4, 512, 8, 64, remat=True),
    Config("small-fsdp8", 4, 128, 4, 512, 8, 64, fsdp=True),
    Config("medium-fsdp8-remat", 6, 256, 8, 1024, 16, 128, fsdp=True, remat=True),
    Config("tiny-scan", 2, 64, 4, 256, 4, 32, scan=True),
    Config("small-scan", 4, 128, 4, 512, 8, 64, scan=True),
    Config("medium-scan-remat", 6, 256, 8, 1024, 8, 128, scan=True, remat=True),
)


def _rms(x: jax.Array, gain: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * gain


def _layer(cfg: Config, p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    b, s, d, h = cfg.batch, cfg.seq, cfg.width, cfg.heads
    y = _rms(x, p["g1"])
    q, k, v = ((y @ p[w]).reshape(b, s, h, d // h) for w in ("wq", "wk", "wv"))
    a = jax.nn.softmax(jnp.einsum("bshd,bthd->bhst", q, k) / (d // h) ** 0.5, -1)
    x = x + jnp.einsum("bhst,bthd->bshd", a, v).reshape(b, s, d) @ p["wo"]
    return x + jax.nn.gelu(_rms(x, p["g2"]) @ p["w1"]) @ p["w2"]


def _step(cfg: Config):
    layer = jax.checkpoint(_layer, static_argnums=0) if cfg.remat else _layer

    def loss(params, x: jax.Array) -> jax.Array:
        if cfg.scan:
            x, _ = jax.lax.scan(lambda h, p: (layer(cfg, p, h), None), x, params)
        else:
            for p in params:
                x = layer(cfg, p, x)
        return jnp.mean(x**2)

    def step(params, x):
        value, grads = jax.value_and_grad(loss)(params, x)
        return value, jax.tree.map(lambda w, g: w - 1e-3 * g, params, grads)

    return step


def compile_step(cfg: Config, dump_dir: Path) -> Path:
    """Compile cfg's training step with XLA's dump on; return the scheduled module's path."""
    d, f = cfg.width, cfg.ffn
    shapes = {"g1": (d,), "g2": (d,), "wq": (d, d), "wk": (d, d), "wv": (d, d), "wo": (d, d),
              "w1": (d, f), "w2": (f, d)}
    if cfg.fsdp:
        mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
        row = NamedSharding(mesh, P("x"))
        spec = lambda shape: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=row)
    else:
        spec = lambda shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    if cfg.scan:
        params = {k: spec((cfg.layers, *v)) for k, v in shapes.items()}
    else:
        params = [{k: spec(v) for k, v in shapes.items()} for _ in range(cfg.layers)]
    x = spec((cfg.batch, cfg.seq, d))
    jax.jit(_step(cfg)).lower(params, x).compile(compiler_options={"xla_dump_to": str(dump_dir)})
    (found,) = dump_dir.glob("*jit_step*.cpu_after_optimizations.txt")
    return found


def measure(cfg: Config, dump_dir: Path) -> dict[str, object]:
    path = compile_step(cfg, dump_dir)
    xla = read_xla_memory(path)
    module = hlo_dedup.load(path)
    start = time.process_time()
    liveness = analyze(module)
    ours = liveness.peak_bytes
    seconds = time.process_time() - start
    count = sum(len(c.instructions) for c in liveness.analysed())
    return {"config": cfg, "path": path, "xla": xla, "ours": ours, "instructions": count, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keep", type=Path, help="keep XLA's dumps under this directory")
    parser.add_argument("--only", help="comma-separated configuration names")
    args = parser.parse_args()
    configs = [c for c in CONFIGS if not args.only or c.name in args.only.split(",")]
    print(f"jax {jax.__version__}, XLA:CPU; bytes; ratio = ours / XLA")
    header = ("config", "instr", "XLA in use", "XLA live-range max", "XLA reported", "XLA allocated",
              "ours", "/in use", "/live-range", "/reported", "/allocated")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for cfg in configs:
            dump_dir = (args.keep or Path(tmp)) / cfg.name
            dump_dir.mkdir(parents=True, exist_ok=True)
            r = measure(cfg, dump_dir)
            xla, ours = r["xla"], r["ours"]
            reported = xla.reported_peak or 0
            row = (cfg.name, str(r["instructions"]), human_bytes(xla.in_use_peak),
                   human_bytes(xla.live_range_peak), human_bytes(reported),
                   human_bytes(xla.total_allocation), human_bytes(ours),
                   f"{ours / xla.in_use_peak:.4f}", f"{ours / xla.live_range_peak:.4f}", f"{ours / reported:.4f}" if reported else "-",
                   f"{ours / xla.total_allocation:.4f}")
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
