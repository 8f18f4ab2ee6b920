"""Write the JAX modules the liveness and fold-price tests use (run: ``python tests/analysis/data/generate.py``).

* ``fsdp_remat_layers.hlo``: a shard_map FSDP MLP whose `jax.grad` runs inside the manual
  body, each layer under `jax.checkpoint`: forward gathers and the backward re-gathers
  (through ``get-tuple-element(opt-barrier(tuple(...)))``) are in one computation, so the
  all-gather pass folds each re-gather onto its forward gather and the full weights stay
  live into the backward pass. Weights are large next to the activations: folding raises
  the body's peak.
* ``transformer_step.*`` and ``scan_step.*``: a 2-layer transformer training step compiled
  for XLA:CPU (`benchmarks/memory_vs_xla.py` configurations ``tiny`` and ``tiny-scan``),
  with XLA's own dump files beside the scheduled module: the live ranges, buffer
  assignment and memory-usage report the tests compare our estimate with.

Shapes are fixed, so a re-run with the same jax version reproduces the files. Needs the
``xla`` extra (jax/jaxlib).
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import json
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "benchmarks"))

import memory_vs_xla

# Metadata must not carry this machine's paths.
jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")
jax.config.update("jax_include_full_tracebacks_in_locations", False)

LAYERS, WIDTH, BATCH = 6, 128, 64
DUMP_SUFFIXES = (".txt", "-live-range.txt", "-buffer-assignment.txt", "-memory-usage-report.txt")


def fsdp_remat_layers(layers: int = LAYERS) -> str:
    mesh = jax.make_mesh((8,), ("x",))

    @partial(jax.shard_map, mesh=mesh, in_specs=((P("x"),) * layers, P("x")), out_specs=(P("x"),) * layers)
    def grads(ws: tuple[jax.Array, ...], x: jax.Array) -> tuple[jax.Array, ...]:
        layer = jax.checkpoint(lambda w, h: jnp.tanh(h @ lax.all_gather(w, "x", tiled=True)))

        def loss(ws: tuple[jax.Array, ...]) -> jax.Array:
            h = x
            for w in ws:
                h = layer(w, h)
            return jnp.sum(h**2)

        return jax.grad(loss)(ws)

    def spec(shape: tuple[int, ...]) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P("x")))

    weights = tuple(spec((WIDTH, WIDTH)) for _ in range(layers))
    return jax.jit(grads).lower(weights, spec((BATCH, WIDTH))).as_text(dialect="hlo")


def compiled(config_name: str, stem: str, manifest: dict) -> None:
    """Compile a benchmark configuration and keep the module and XLA's dump files as `stem`."""
    (cfg,) = [c for c in memory_vs_xla.CONFIGS if c.name == config_name]
    with tempfile.TemporaryDirectory() as tmp:
        module = memory_vs_xla.compile_step(cfg, Path(tmp))
        prefix = str(module)[: -len(".txt")]
        for suffix in DUMP_SUFFIXES:
            shutil.copyfile(prefix + suffix, HERE / f"{stem}{suffix}")
    manifest[stem] = {"config": config_name, "stage": "XLA:CPU after optimizations (scheduled)",
                      "files": [f"{stem}{s}" for s in DUMP_SUFFIXES]}


def main() -> None:
    manifest: dict = {"generator": "tests/analysis/data/generate.py", "jax_version": jax.__version__,
                      "jaxlib_version": jaxlib.__version__, "modules": {}}
    (HERE / "fsdp_remat_layers.hlo").write_text(fsdp_remat_layers())
    manifest["modules"]["fsdp_remat_layers.hlo"] = {
        "stage": "pre-optimization",
        "layers": LAYERS, "width": WIDTH, "batch": BATCH, "devices": 8,
    }  # fmt: skip
    compiled("tiny", "transformer_step", manifest["modules"])
    compiled("tiny-scan", "scan_step", manifest["modules"])
    (HERE / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    for path in sorted(HERE.iterdir()):
        if path.name != "generate.py":
            print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) == 3:  # LAYERS OUT: one bigger module for a test, not committed data
        Path(sys.argv[2]).write_text(fsdp_remat_layers(int(sys.argv[1])))
    else:
        main()
