"""Write real JAX-lowered HLO modules into ``tests/data/jax/`` (run: ``python tests/data/generate.py``).

The dedup passes must be checked on what JAX actually emits (Shardy custom-calls, ``channel_id=1``
on every gather, opt-barriers from remat, while bodies), not on hand-written text. Shapes and
seeds are fixed so a re-run with the same jax version reproduces the files byte for byte.
Needs the ``xla`` extra (jax/jaxlib). The 2-D-mesh training steps at every dump stage come from
``generate_mesh2d.py`` beside this file.

``python tests/data/generate.py --xla-dump DIR`` instead runs a small sharded training loop
with ``XLA_FLAGS=--xla_dump_to=DIR`` (text and proto, plus the dumps around XLA's SPMD
partitioner), exactly as a user would, and leaves XLA's whole dump tree in DIR: the tests of
dump-directory inputs use it (it is too large to keep in the repository).
"""

from __future__ import annotations

import os
import sys

# Eight virtual CPU devices (and, for --xla-dump, XLA's dump flags) must be set before jax is imported.
DUMP_FLAGS = "--xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_hlo_pass_re=spmd-partitioning"
_DUMP_DIR = sys.argv[sys.argv.index("--xla-dump") + 1] if "--xla-dump" in sys.argv[:-1] else None
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    + (f" --xla_dump_to={_DUMP_DIR} {DUMP_FLAGS}" if _DUMP_DIR else "")
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import json
import re
import tempfile
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax import lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import generate_mesh2d
from hlo_dedup.xla.stages import stage_text

OUT_DIR = Path(__file__).resolve().parent / "jax"
MLIR_FILE = Path(__file__).resolve().parent / "mlir" / "fsdp_shard_map.mlir"
MAX_BYTES = 300_000
D = 16  # model width; divisible by 8 so every weight shards evenly
BATCH = 32

# Source-file metadata (post-optimization text keeps it) must not carry this machine's paths.
jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")
jax.config.update("jax_include_full_tracebacks_in_locations", False)

MESH = jax.make_mesh((8,), ("x",))
MESH2D = jax.make_mesh((2, 4), ("x", "y"))


def _spec(
    shape: tuple[int, ...], spec: P, mesh: jax.sharding.Mesh = MESH, dtype: Any = jnp.float32
) -> jax.ShapeDtypeStruct:
    """Abstract argument carrying a sharding, so shard_map's in_specs match without real data."""
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


def _plain(shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


def _gathered_layer(w: jax.Array, x: jax.Array) -> jax.Array:
    """One FSDP layer: gather the row-sharded weight, then a dense layer."""
    return jnp.tanh(x @ lax.all_gather(w, "x", tiled=True))


# --- collective programs ----------------------------------------------------------------------


@partial(jax.shard_map, mesh=MESH, in_specs=(P("x"), P("x"), P("x"), P("x")), out_specs=P("x"))
def _fsdp_forward(w1: jax.Array, w2: jax.Array, w3: jax.Array, x: jax.Array) -> jax.Array:
    # w1 is tied: layers 1 and 3 gather the same parameter.
    for w in (w1, w2, w1, w3):
        x = _gathered_layer(w, x)
    return x


def _fsdp_shard_map_lowered() -> Any:
    args = [_spec((D, D), P("x"))] * 3 + [_spec((BATCH, D), P("x"))]
    return jax.jit(_fsdp_forward).lower(*args)


def fsdp_shard_map() -> str:
    return _fsdp_shard_map_lowered().as_text(dialect="hlo")


def fsdp_shard_map_mlir() -> str:
    """What `lower(...).as_text()` prints by default: MLIR (StableHLO), which users hand
    over for HLO text; the reader must say so and what to write instead."""
    return _fsdp_shard_map_lowered().as_text()


def fsdp_remat_grad() -> str:
    layer = jax.checkpoint(_gathered_layer)

    @partial(jax.shard_map, mesh=MESH, in_specs=(P("x"), P("x"), P("x"), P("x")), out_specs=P("x"))
    def forward(w1: jax.Array, w2: jax.Array, w3: jax.Array, x: jax.Array) -> jax.Array:
        for w in (w1, w2, w1, w3):
            x = layer(w, x)
        return x

    def loss(ws: tuple[jax.Array, ...], x: jax.Array) -> jax.Array:
        return jnp.sum(forward(*ws, x) ** 2)

    ws = (_spec((D, D), P("x")),) * 3
    return jax.jit(jax.grad(loss)).lower(ws, _spec((BATCH, D), P("x"))).as_text(dialect="hlo")


def pytree_weights() -> str:
    params = {
        "embed": _spec((D, D), P("x")),
        "blocks": ({"w_in": _spec((D, 2 * D), P("x")), "w_out": _spec((2 * D, D), P("x"))},) * 2,
    }
    specs = jax.tree.map(lambda s: s.sharding.spec, params)

    @partial(jax.shard_map, mesh=MESH, in_specs=(specs, P("x")), out_specs=P("x"))
    def forward(p: dict[str, Any], x: jax.Array) -> jax.Array:
        x = _gathered_layer(p["embed"], x)
        for block in p["blocks"]:
            h = _gathered_layer(block["w_in"], x)
            x = x + _gathered_layer(block["w_out"], h)
        # Tied embedding: gathered again for the output projection.
        return x @ lax.all_gather(p["embed"], "x", tiled=True).T

    return jax.jit(forward).lower(params, _spec((BATCH, D), P("x"))).as_text(dialect="hlo")


def bf16_cast() -> str:
    @partial(jax.shard_map, mesh=MESH, in_specs=(P("x"), P("x"), P("x")), out_specs=P("x"))
    def forward(w32: jax.Array, w16: jax.Array, x: jax.Array) -> jax.Array:
        outs = []
        for _ in range(2):  # every gather below appears twice: candidate duplicates
            narrowed = lax.all_gather(w32.astype(jnp.bfloat16), "x", tiled=True)  # f32 -> bf16 convert
            widened = lax.all_gather(w16.astype(jnp.float32), "x", tiled=True)  # bf16 -> f32 convert
            direct = lax.all_gather(w16, "x", tiled=True)  # bf16 param, no convert
            xb = x.astype(jnp.bfloat16)
            outs.append(xb @ narrowed + (x @ widened).astype(jnp.bfloat16) + xb @ direct)
        return (outs[0] * outs[1]).astype(jnp.float32)

    args = (_spec((D, D), P("x")), _spec((D, D), P("x"), dtype=jnp.bfloat16), _spec((BATCH, D), P("x")))
    return jax.jit(forward).lower(*args).as_text(dialect="hlo")


def scan_layers() -> str:
    @partial(jax.shard_map, mesh=MESH, in_specs=(P(None, "x"), P("x"), P("x")), out_specs=P("x"))
    def forward(stacked: jax.Array, shared: jax.Array, x: jax.Array) -> jax.Array:
        def body(h: jax.Array, w: jax.Array) -> tuple[jax.Array, None]:
            # `shared` is loop-invariant: the while body gathers the same carried value twice.
            h = _gathered_layer(shared, h)
            h = _gathered_layer(w, h)
            return _gathered_layer(shared, h), None

        return lax.scan(body, x, stacked)[0]

    args = (_spec((4, D, D), P(None, "x")), _spec((D, D), P("x")), _spec((BATCH, D), P("x")))
    return jax.jit(forward).lower(*args).as_text(dialect="hlo")


def while_gather() -> str:
    @partial(jax.shard_map, mesh=MESH, in_specs=(P(None, "x"), P("x"), P("x")), out_specs=P("x"))
    def forward(stacked: jax.Array, shared: jax.Array, x: jax.Array) -> jax.Array:
        def body(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            # Unlike scan, a while_loop body is not outlined into a closed_call: these gathers sit
            # in the while body itself, on get-tuple-element(parameter) of the loop carry.
            i, h = carry
            h = _gathered_layer(shared, h)
            h = _gathered_layer(lax.dynamic_index_in_dim(stacked, i, keepdims=False), h)
            return i + 1, _gathered_layer(shared, h)

        return lax.while_loop(lambda carry: carry[0] < stacked.shape[0], body, (0, x))[1]

    args = (_spec((4, D, D), P(None, "x")), _spec((D, D), P("x")), _spec((BATCH, D), P("x")))
    return jax.jit(forward).lower(*args).as_text(dialect="hlo")


def mesh2d_nested() -> str:
    specs = (P("x", "y"), P("x", "y"), P(("x", "y")))

    @partial(jax.shard_map, mesh=MESH2D, in_specs=specs, out_specs=P(("x", "y")))
    def forward(wa: jax.Array, wb: jax.Array, x: jax.Array) -> jax.Array:
        def full(w: jax.Array) -> jax.Array:
            # all-gather(all-gather(p)): rows over 'x', then columns over 'y'.
            return lax.all_gather(lax.all_gather(w, "x", axis=0, tiled=True), "y", axis=1, tiled=True)

        for w in (wa, wb, wa):  # wa's nested gather is emitted twice
            x = jnp.tanh(x @ full(w))
        return x

    args = (_spec((D, D), P("x", "y"), MESH2D),) * 2 + (_spec((BATCH, D), P(("x", "y")), MESH2D),)
    return jax.jit(forward).lower(*args).as_text(dialect="hlo")


@cache
def _gspmd_compiled() -> tuple[str, str]:
    """Compile one GSPMD program; return (post-optimization text, text right after spmd-partitioning)."""
    mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    row_sharded = NamedSharding(mesh, P("x", None))

    def forward(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
        for w in (w1, w2, w1):
            # Batch-sharded activations against row-sharded weights: the partitioner gathers weights.
            x = jnp.tanh(jax.lax.with_sharding_constraint(x, row_sharded) @ w)
        return x

    args = (_spec((D, D), P("x", None), mesh),) * 2 + (_spec((BATCH, D), P("x", None), mesh),)
    jitted = jax.jit(forward, in_shardings=(row_sharded,) * 3, out_shardings=row_sharded)
    with tempfile.TemporaryDirectory() as dump_dir:
        compiled = jitted.lower(*args).compile(
            compiler_options={
                "xla_dump_to": dump_dir,
                "xla_dump_hlo_pass_re": "spmd-partitioning",
                "xla_dump_hlo_as_text": True,
            }
        )
        (after_spmd,) = Path(dump_dir).glob("*.after_spmd-partitioning.*.txt")
        return compiled.as_text(), after_spmd.read_text()


def gspmd_transformer_after_spmd() -> str:
    """GSPMD attention-style layers under remat and grad, right after spmd-partitioning: the
    weights are reshaped into heads before use, so the partitioner gathers reshapes (and sums
    and dots) of parameters, never a parameter itself: nothing the Neuron pass can trace."""
    mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    row_sharded = NamedSharding(mesh, P("x", None))
    heads = 4

    def layer(x: jax.Array, wq: jax.Array, wo: jax.Array) -> jax.Array:
        q = jnp.einsum("bd,dhk->bhk", x, wq.reshape(D, heads, D // heads))
        return jnp.tanh(jnp.einsum("bhk,hkd->bd", q, wo.reshape(heads, D // heads, D))) + x

    def loss(ws: tuple[tuple[jax.Array, jax.Array], ...], x: jax.Array) -> jax.Array:
        for wq, wo in ws:
            x = jax.checkpoint(layer)(x, wq, wo)
        return jnp.sum(x * x)

    ws = ((_spec((D, D), P("x", None), mesh),) * 2,) * 2
    jitted = jax.jit(jax.grad(loss), in_shardings=(row_sharded, row_sharded))
    previous = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        return stage_text(jitted.lower(ws, _spec((BATCH, D), P("x", None), mesh)), "after_spmd_partitioning")
    finally:
        jax.config.update("jax_use_shardy_partitioner", previous)


def gspmd_post_opt() -> str:
    return _gspmd_compiled()[0]


def gspmd_after_spmd() -> str:
    return _gspmd_compiled()[1]


def gspmd_remat_after_spmd() -> str:
    """grad of a two-layer GSPMD MLP under jax.checkpoint, right after spmd-partitioning: each
    weight is gathered for the forward and again, behind an opt-barrier, for the backward, each
    gather with its own channel_id (which XLA's CSE compares and the Neuron pass does not)."""
    mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    row_sharded = NamedSharding(mesh, P("x", None))

    def layer(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.tanh(jax.lax.with_sharding_constraint(x, row_sharded) @ w)

    def loss(ws: tuple[jax.Array, ...], x: jax.Array) -> jax.Array:
        for w in ws:
            x = jax.checkpoint(layer)(x, w)
        return jnp.sum(x * x)

    jitted = jax.jit(jax.grad(loss), in_shardings=(row_sharded, row_sharded))
    lowered = jitted.lower((_spec((D, D), P("x", None), mesh),) * 2, _spec((BATCH, D), P("x", None), mesh))
    return stage_text(lowered, "after_spmd_partitioning")


# --- non-collective programs ------------------------------------------------------------------


def conv() -> str:
    def f(img: jax.Array, kernel: jax.Array) -> jax.Array:
        y = lax.conv_general_dilated(
            img, kernel, window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return jax.nn.relu(y).mean(axis=(1, 2))

    return jax.jit(f).lower(_plain((2, 8, 8, 3)), _plain((3, 3, 3, 4))).as_text(dialect="hlo")


def sort() -> str:
    def f(keys: jax.Array, values: jax.Array) -> tuple[jax.Array, ...]:
        order = jnp.argsort(keys, axis=-1)
        by_key = lax.sort((keys, values), num_keys=1)[1]
        return jnp.sort(keys, axis=-1), jnp.take_along_axis(values, order, axis=-1), by_key

    return jax.jit(f).lower(_plain((4, 16)), _plain((4, 16), jnp.int32)).as_text(dialect="hlo")


def linalg() -> str:
    def f(a: jax.Array) -> tuple[jax.Array, ...]:
        spd = a @ a.T + 8.0 * jnp.eye(a.shape[0])
        q, r = jnp.linalg.qr(a)
        return jnp.linalg.cholesky(spd), q, r

    return jax.jit(f).lower(_plain((8, 8))).as_text(dialect="hlo")


def cond() -> str:
    def f(flag: jax.Array, x: jax.Array) -> jax.Array:
        return lax.cond(flag > 0, lambda v: jnp.sin(v) * 2.0, lambda v: jnp.cos(v) - 1.0, x)

    return jax.jit(f).lower(_plain((), jnp.int32), _plain((4, 4))).as_text(dialect="hlo")


def while_loop() -> str:
    def f(x: jax.Array) -> jax.Array:
        return lax.fori_loop(0, 5, lambda i, v: v * 0.5 + jnp.sin(v) + i.astype(v.dtype), x)

    return jax.jit(f).lower(_plain((4, 4))).as_text(dialect="hlo")


MODULES: dict[str, tuple[Callable[[], str], str]] = {
    "fsdp_shard_map": (
        fsdp_shard_map,
        "shard_map FSDP MLP on an 8-device mesh, 4 layers gathering row-sharded weights;"
        " w1 is tied (gathered in layers 1 and 3)",
    ),
    "fsdp_remat_grad": (
        fsdp_remat_grad,
        "grad of the tied FSDP MLP with jax.checkpoint per layer: the backward body re-gathers every weight"
        " through get-tuple-element(opt-barrier(tuple(...))), w1 twice via two different opt-barriers",
    ),
    "pytree_weights": (
        pytree_weights,
        "weights as a nested dict/tuple pytree (flattened to separate parameters); the tied embedding"
        " is gathered twice (input layer and output projection)",
    ),
    "bf16_cast": (
        bf16_cast,
        "gathers of converted params (f32->bf16 and bf16->f32 converts) and of a bf16 param, each emitted"
        " twice; JAX folds same-dtype converts away, so every convert here changes the dtype",
    ),
    "scan_layers": (
        scan_layers,
        "lax.scan over stacked sharded layer weights; JAX outlines the scan body into a closed_call"
        " computation (called from the while body) in which the loop-invariant shared weight is gathered twice",
    ),
    "while_gather": (
        while_gather,
        "lax.while_loop over stacked sharded layer weights; gathers directly in the while body, the shared"
        " weight (get-tuple-element of the loop carry) gathered twice",
    ),
    "mesh2d_nested": (
        mesh2d_nested,
        "2-D (2x4) mesh: all-gather over 'x' then 'y' (all-gather(all-gather(p))), one weight's nested"
        " gather emitted twice",
    ),
    "gspmd_post_opt": (
        gspmd_post_opt,
        "GSPMD jit (NamedSharding, AxisType.Auto) with partitioner-inserted weight gathers;"
        " post-optimization compile().as_text() (fusions, mesh[...] replica groups)",
    ),
    "gspmd_after_spmd": (
        gspmd_after_spmd,
        "the same GSPMD program dumped right after XLA's spmd-partitioning pass: already partitioned"
        " (ENTRY main.0_spmd, num_partitions=8, local shapes); the partitioner itself reuses w1's gather",
    ),
    "gspmd_transformer_after_spmd": (
        gspmd_transformer_after_spmd,
        "grad of two GSPMD attention-style layers under jax.checkpoint, right after spmd-partitioning:"
        " the weights are reshaped into heads, so every gather reads a reshape, sum or dot of a"
        " parameter and none is traced (the 'silent zero' the report must explain)",
    ),
    "gspmd_remat_after_spmd": (
        gspmd_remat_after_spmd,
        "grad of a two-layer GSPMD MLP under jax.checkpoint, right after spmd-partitioning: every weight"
        " gathered in the forward and re-gathered behind an opt-barrier in the backward, with different"
        " channel_ids; the parameters keep the argument paths (ws[0], ws[1]) as metadata op_name",
    ),
    "conv": (conv, "2-D convolution + relu + mean (no collectives)"),
    "sort": (sort, "sort, argsort and a two-operand sort (no collectives)"),
    "linalg": (linalg, "cholesky and QR: LAPACK custom-calls (no collectives)"),
    "cond": (cond, "lax.cond on an int predicate (conditional with two branch computations)"),
    "while_loop": (while_loop, "lax.fori_loop with a fixed trip count (while loop)"),
}

STAGES = {"gspmd_post_opt": "post-optimization", "gspmd_after_spmd": "after spmd-partitioning",
          "gspmd_transformer_after_spmd": "after spmd-partitioning", "gspmd_remat_after_spmd": "after spmd-partitioning"}

# The 2-D-mesh training steps, one module per program and dump stage (see generate_mesh2d.py).
MODULES.update({name: (build, description) for name, (build, description, _) in generate_mesh2d.MODULES.items()})
STAGES.update({name: stage for name, (_, _, stage) in generate_mesh2d.MODULES.items()})

_COMPUTATION_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_HEADER_INT = re.compile(r"\b(replica_count|num_partitions)=(\d+)")
_SDY_MESH = re.compile(r"#sdy\.mesh<\[([^\]]*)\]")


def all_gathers_per_computation(text: str) -> dict[str, int]:
    """Count ``all-gather(`` lines per computation by a plain text scan (no parser involved)."""
    counts: dict[str, int] = {}
    current: str | None = None
    for line in text.splitlines():
        if current is None:
            match = _COMPUTATION_HEADER.match(line)
            if match and not line.startswith("HloModule"):
                current = match.group(1)
        elif line.strip() == "}":
            current = None
        elif "all-gather(" in line:
            counts[current] = counts.get(current, 0) + 1
    return counts


def devices_needed(text: str) -> int:
    """Devices the module needs: replica_count x num_partitions, else the Shardy mesh size."""
    header = text.split("\n", 1)[0]
    fields = {k: int(v) for k, v in _HEADER_INT.findall(header)}
    if fields:
        return fields.get("replica_count", 1) * fields.get("num_partitions", 1)
    mesh = _SDY_MESH.search(header)
    size = 1
    if mesh:
        for axis in re.findall(r"=(\d+)", mesh.group(1)):
            size *= int(axis)
    return size


def training_loop() -> None:
    """What a user's FSDP training loop leaves in an XLA dump: two steps of a sharded MLP with
    remat and a tied weight (compiled once, dumped once), the small modules JAX compiles to
    build and place the arrays, and an evaluation against a fixed table whose constant the
    text dumps elide (``{...}``), compiled with ``--xla_dump_compress_protos`` (``.hlo.pb.gz``)."""
    layer = jax.checkpoint(_gathered_layer)

    @partial(jax.shard_map, mesh=MESH, in_specs=(P("x"), P("x"), P("x")), out_specs=P("x"))
    def forward(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
        for w in (w1, w2, w1):  # w1 is tied: layers 1 and 3
            x = layer(w, x)
        return x

    def loss(ws: tuple[jax.Array, ...], x: jax.Array) -> jax.Array:
        return jnp.mean(forward(*ws, x) ** 2)

    @jax.jit
    def train_step(ws: tuple[jax.Array, ...], x: jax.Array) -> tuple[tuple[jax.Array, ...], jax.Array]:
        value, grads = jax.value_and_grad(loss)(ws, x)
        return tuple(w - 0.1 * g for w, g in zip(ws, grads)), value

    sharded = NamedSharding(MESH, P("x"))
    ws = tuple(jax.device_put(jnp.full((D, D), 0.01 * (i + 1), jnp.float32), sharded) for i in range(2))
    x = jax.device_put(jnp.ones((BATCH, D)), sharded)
    for _ in range(2):
        ws, value = train_step(ws, x)
    table = np.linspace(-1.0, 1.0, D * D, dtype=np.float32).reshape(D, D)

    def evaluate(ws: tuple[jax.Array, ...], x: jax.Array) -> jax.Array:
        return loss(ws, x) + jnp.sum(table * ws[0])

    compiled = jax.jit(evaluate).lower(ws, x).compile(compiler_options={"xla_dump_compress_protos": True})
    print(f"loss {float(value):.6f}, eval {float(compiled(ws, x)):.6f}; XLA dump in {_DUMP_DIR}")


#: XLA:CPU's own dump of an optimized module, kept apart from the JAX modules above (its file
#: name is the dump's, and it is a stage of compilation the passes are not meant for).
CPU_DUMP = Path(__file__).resolve().parent / "xla_dump" / "module_0000.jit_train_step.cpu_after_optimizations.txt"


def cpu_after_optimizations() -> str:
    """An attention-style training step (softmax, grad, SGD update) compiled for XLA:CPU with
    ``--xla_dump_to``: the ``*.cpu_after_optimizations.txt`` file XLA writes, with its fusions,
    row-major bitcasts between shapes, backend configs and schedule."""
    heads = 4

    def loss(ws: tuple[jax.Array, jax.Array], x: jax.Array) -> jax.Array:
        wq, wo = ws
        q = jnp.einsum("bd,dhk->bhk", x, wq.reshape(D, heads, D // heads))
        attention = jax.nn.softmax(jnp.einsum("bhk,chk->hbc", q, q), axis=-1)
        mixed = jnp.einsum("hbc,chk->bhk", attention, q)
        out = jnp.einsum("bhk,hkd->bd", mixed, wo.reshape(heads, D // heads, D))
        return jnp.mean((out - x) ** 2)

    def train_step(ws: tuple[jax.Array, jax.Array], x: jax.Array) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        value, grads = jax.value_and_grad(loss)(ws, x)
        return (ws[0] - 0.1 * grads[0], ws[1] - 0.1 * grads[1]), value

    cpu = jax.devices("cpu")[0]
    ws = (_plain((D, D)), _plain((D, D)))
    with tempfile.TemporaryDirectory() as dump_dir:
        jax.jit(train_step, device=cpu).lower(ws, _plain((BATCH, D))).compile(
            compiler_options={"xla_dump_to": dump_dir, "xla_dump_hlo_as_text": True})
        (dumped,) = Path(dump_dir).glob("*.jit_train_step.cpu_after_optimizations.txt")
        return dumped.read_text()


def main() -> None:
    CPU_DUMP.parent.mkdir(parents=True, exist_ok=True)
    CPU_DUMP.write_text(cpu_after_optimizations())
    MLIR_FILE.parent.mkdir(parents=True, exist_ok=True)
    MLIR_FILE.write_text(fsdp_shard_map_mlir())
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "generator": "tests/data/generate.py",
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "modules": {},
    }
    for name, (build, description) in MODULES.items():
        text = build()
        size = len(text.encode())
        if size >= MAX_BYTES:
            raise SystemExit(f"{name}: {size} bytes exceeds the {MAX_BYTES}-byte test-data limit")
        (OUT_DIR / f"{name}.hlo").write_text(text)
        gathers = all_gathers_per_computation(text)
        manifest["modules"][f"{name}.hlo"] = {
            "description": description,
            "stage": STAGES.get(name, "pre-optimization"),
            "jax_version": jax.__version__,
            "all_gathers_per_computation": gathers,
            "all_gathers_total": sum(gathers.values()),
            "devices": devices_needed(text),
            "bytes": size,
        }
        print(f"{name}.hlo: {size} bytes, all-gathers {gathers}")
    (OUT_DIR / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")


if __name__ == "__main__":
    training_loop() if _DUMP_DIR else main()
