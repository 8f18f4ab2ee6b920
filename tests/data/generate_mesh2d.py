"""Real 2-D-mesh training steps at every stage XLA dumps them (called by ``generate.py``).

One small model, trained on a ``('data', 'model')`` = 4 x 2 mesh of the eight CPU devices:
FSDP over 'data' (every weight's other dimension is sharded over it), tensor parallelism
over 'model' (Megatron column- then row-parallel layers), ``jax.checkpoint`` on every layer
and the first layer's weight tied to the output projection. It is compiled three ways:

* ``gspmd``: ``jax.jit`` with ``NamedSharding``s and ``with_sharding_constraint``s, GSPMD's
  partitioner (Shardy off) inserting every collective;
* ``shardy``: the same program under the Shardy partitioner (JAX's default);
* ``shardmap``: ``jax.shard_map`` with the collectives written out (all-gather over 'data',
  psum over 'model'), under Shardy.

Each is kept as XLA dumps it before optimizations, right after ``spmd-partitioning`` and
after XLA:CPU's optimizations. The row-parallel weight is kept with its columns sharded over
both axes, 'model' major (``P(None, ('model', 'data'))``), and resharded for use and back: the
partitioner writes those collectives as ``replica_groups=mesh[...], device_ids=(...) {...}``,
groups over a mesh whose devices are not in iota order.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

D, H, BATCH = 16, 32, 16  # model width, hidden width, batch: all divisible by 4 and by 2
MESH = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
COLUMN, ROW, BATCH_ROWS = P("data", "model"), P("model", "data"), P("data", None)
PARAM_SPECS = {"w_in": COLUMN, "w_down": ROW, "w_up": COLUMN}  # as the layers use them
#: As the step takes and returns them: w_down is kept with its columns over both axes,
#: 'model' major, and resharded to ROW for use (and its gradient back).
STORED_SPECS = {**PARAM_SPECS, "w_down": P(None, ("model", "data"))}
#: XLA's dump file suffix of each stage kept, and the stage name the manifest records.
STAGES = {
    "before_optimizations": ("before_optimizations.txt", "pre-optimization"),
    "after_spmd": ("after_spmd-partitioning.*.txt", "after spmd-partitioning"),
    "post_opt": ("cpu_after_optimizations.txt", "post-optimization"),
}
Params = dict[str, jax.Array]


def _sharding(spec: P) -> NamedSharding:
    return NamedSharding(MESH, spec)


def _squared_error(out: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((out - y) ** 2)


def _sgd(loss: Callable[[Params, jax.Array, jax.Array], jax.Array]) -> Callable[..., tuple[Params, jax.Array]]:
    def step(params: Params, x: jax.Array, y: jax.Array) -> tuple[Params, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda w, g: w - 0.1 * g, params, grads), value

    return step


def _constrained_loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """The model for the partitioner: activations pinned to batch rows over 'data' (and the
    hidden columns over 'model'); it decides where to gather weights."""

    def pinned(h: jax.Array, spec: P) -> jax.Array:
        return lax.with_sharding_constraint(h, _sharding(spec))

    @jax.checkpoint
    def column(w: jax.Array, h: jax.Array) -> jax.Array:
        return pinned(jnp.tanh(h @ w), COLUMN)

    @jax.checkpoint
    def row(w: jax.Array, h: jax.Array) -> jax.Array:
        return pinned(jnp.tanh(h @ w), BATCH_ROWS)

    h = column(params["w_in"], pinned(x, BATCH_ROWS))
    h = column(params["w_up"], row(params["w_down"], h))
    return _squared_error(row(params["w_in"].T, h), y)  # tied: the output projection is w_in.T


@partial(jax.shard_map, mesh=MESH, in_specs=(PARAM_SPECS, BATCH_ROWS), out_specs=BATCH_ROWS)
def _manual_forward(params: Params, x: jax.Array) -> jax.Array:
    """The same model with the collectives written out: each weight is gathered over 'data'
    (FSDP) right before its layer, and row-parallel partial sums are psum'med over 'model'."""

    def gathered(w: jax.Array, axis: int) -> jax.Array:
        return lax.all_gather(w, "data", axis=axis, tiled=True)

    @jax.checkpoint
    def column(w: jax.Array, h: jax.Array) -> jax.Array:  # local h [b, D] -> [b, H / 2]
        return jnp.tanh(h @ gathered(w, 0))

    @jax.checkpoint
    def row(w: jax.Array, h: jax.Array) -> jax.Array:  # local h [b, H / 2] -> [b, D]
        return jnp.tanh(lax.psum(h @ gathered(w, 1), "model"))

    @jax.checkpoint
    def tied_output(w: jax.Array, h: jax.Array) -> jax.Array:  # w_in gathered again, transposed
        return jnp.tanh(lax.psum(h @ gathered(w, 0).T, "model"))

    h = column(params["w_in"], x)
    h = column(params["w_up"], row(params["w_down"], h))
    return tied_output(params["w_in"], h)


def _manual_loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    return _squared_error(_manual_forward(params, x), y)


def _arguments() -> tuple[dict[str, jax.ShapeDtypeStruct], jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
    shapes = {"w_in": (D, H), "w_down": (H, D), "w_up": (D, H)}
    params = {k: jax.ShapeDtypeStruct(shapes[k], jnp.float32, sharding=_sharding(STORED_SPECS[k])) for k in shapes}
    batch = jax.ShapeDtypeStruct((BATCH, D), jnp.float32, sharding=_sharding(BATCH_ROWS))
    return params, batch, batch


@cache
def _dumped_stages(loss: Callable[..., jax.Array], *, shardy: bool) -> dict[str, str]:
    """Compile one training step and read back the text XLA dumps at each of ``STAGES``."""
    shardings = {k: _sharding(s) for k, s in STORED_SPECS.items()}
    jitted = jax.jit(
        _sgd(loss),
        in_shardings=(shardings, _sharding(BATCH_ROWS), _sharding(BATCH_ROWS)),
        out_shardings=(shardings, _sharding(P())),
    )
    previous = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", shardy)
    try:
        with tempfile.TemporaryDirectory() as dump_dir:
            jitted.lower(*_arguments()).compile(
                compiler_options={
                    "xla_dump_to": dump_dir,
                    "xla_dump_hlo_pass_re": "spmd-partitioning",
                    "xla_dump_hlo_as_text": True,
                }
            )
            found = {stage: list(Path(dump_dir).glob(f"*.{suffix}")) for stage, (suffix, _) in STAGES.items()}
            if any(len(paths) != 1 for paths in found.values()):
                raise SystemExit(f"expected one dump file per stage, found {found}")
            return {stage: paths[0].read_text() for stage, paths in found.items()}
    finally:
        jax.config.update("jax_use_shardy_partitioner", previous)


_PROGRAMS = {
    "gspmd": (_constrained_loss, False, "jax.jit with NamedShardings and sharding constraints, GSPMD partitioner"),
    "shardy": (_constrained_loss, True, "jax.jit with NamedShardings and sharding constraints, Shardy partitioner"),
    "shardmap": (_manual_loss, True, "shard_map with explicit all-gathers over 'data' and psums over 'model'"),
}
_MODEL = ("train step (SGD) of a 3-layer MLP with a tied output projection on a ('data','model') = 4x2 mesh,"
          " FSDP over 'data', tensor-parallel over 'model', jax.checkpoint per layer: ")


def _stage_of(program: str, stage: str) -> Callable[[], str]:
    loss, shardy, _ = _PROGRAMS[program]
    return lambda: _dumped_stages(loss, shardy=shardy)[stage]


#: name -> (build, description, manifest stage), as generate.py's MODULES and STAGES.
MODULES: dict[str, tuple[Callable[[], str], str, str]] = {
    f"mesh2d_{program}_{stage}": (_stage_of(program, stage), _MODEL + how + f" (XLA dump: {suffix})", manifest_stage)
    for program, (_, _, how) in _PROGRAMS.items()
    for stage, (suffix, manifest_stage) in STAGES.items()
}
