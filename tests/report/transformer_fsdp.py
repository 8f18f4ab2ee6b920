"""Write a large real JAX module for the HTML report tests: ``python transformer_fsdp.py OUT.hlo``.

A 48-layer pre-norm transformer training step, FSDP under `jax.shard_map` over 8 devices:
every weight is row-sharded and all-gathered where a layer uses it, `jax.grad` runs inside
the manual body and each layer is under `jax.checkpoint`, so the backward pass re-gathers
every weight (through ``get-tuple-element(opt-barrier(tuple(...)))``) in the same
computation as the forward gather: one fold per weight per layer (48 x 11 = 528). Lowered
with debug info, so every gather has an op_name and a source line. Needs jax (the xla extra).
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

LAYERS, WIDTH, HIDDEN, HEADS, BATCH, SEQ = 48, 64, 128, 4, 16, 8
WEIGHTS = {  # name -> shape of the full (gathered) weight
    "ln1_scale": (WIDTH,), "ln1_bias": (WIDTH,),
    "wq": (WIDTH, WIDTH), "wk": (WIDTH, WIDTH), "wv": (WIDTH, WIDTH), "wo": (WIDTH, WIDTH),
    "ln2_scale": (WIDTH,), "ln2_bias": (WIDTH,),
    "w_up": (WIDTH, HIDDEN), "w_gate": (WIDTH, HIDDEN), "w_down": (HIDDEN, WIDTH),
}  # fmt: skip

jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")
jax.config.update("jax_include_full_tracebacks_in_locations", False)


def _norm(x: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-6) * scale + bias


def _block(shards: dict[str, jax.Array], h: jax.Array) -> jax.Array:
    w = {name: lax.all_gather(shard, "x", tiled=True) for name, shard in shards.items()}
    x = _norm(h, w["ln1_scale"], w["ln1_bias"])
    heads = lambda t: t.reshape(*t.shape[:-1], HEADS, WIDTH // HEADS)  # noqa: E731
    q, k, v = heads(x @ w["wq"]), heads(x @ w["wk"]), heads(x @ w["wv"])
    attn = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / (WIDTH // HEADS) ** 0.5, axis=-1)
    h = h + jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(h.shape) @ w["wo"]
    x = _norm(h, w["ln2_scale"], w["ln2_bias"])
    return h + (jax.nn.silu(x @ w["w_gate"]) * (x @ w["w_up"])) @ w["w_down"]


def lower() -> str:
    mesh = jax.make_mesh((8,), ("x",))
    layer = jax.checkpoint(_block)
    param_specs = [{name: P("x") for name in WEIGHTS}] * LAYERS

    @partial(jax.shard_map, mesh=mesh, in_specs=(param_specs, P("x")), out_specs=(param_specs, P()))
    def step(params: list[dict[str, jax.Array]], tokens: jax.Array):  # noqa: ANN202
        def loss(params: list[dict[str, jax.Array]]) -> jax.Array:
            h = tokens
            for shards in params:
                h = layer(shards, h)
            return lax.pmean(jnp.mean(h**2), "x")

        value, grads = jax.value_and_grad(loss)(params)
        return grads, value

    def spec(shape: tuple[int, ...]) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P("x")))

    params = [{name: spec(shape) for name, shape in WEIGHTS.items()} for _ in range(LAYERS)]
    return jax.jit(step).lower(params, spec((BATCH, SEQ, WIDTH))).as_text(dialect="hlo", debug_info=True)


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        out.write(lower())
