"""The top-level Python API: what `hlo_dedup.load` accepts (and says it does not), and the
semantic comparison reachable from the package."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hlo_dedup

DATA = Path(__file__).resolve().parent / "data" / "jax"
FSDP = DATA / "fsdp_remat_grad.hlo"


def test_load_takes_paths_text_and_bytes() -> None:
    text = FSDP.read_text()
    by_path = hlo_dedup.load(FSDP)
    assert hlo_dedup.load(str(FSDP)).to_text() == by_path.to_text() == text
    assert hlo_dedup.load(text).to_text() == text
    assert hlo_dedup.load(FSDP.read_bytes()).to_text() == text
    assert hlo_dedup.load(gzip.compress(FSDP.read_bytes())).to_text() == text  # archived dumps
    assert hlo_dedup.load(bytearray(FSDP.read_bytes())).name == "jit_loss"


@pytest.mark.parametrize("bad", [3, None, [FSDP], {"path": FSDP}])
def test_load_says_what_it_accepts(bad: object) -> None:
    with pytest.raises(TypeError, match=r"^hlo_dedup.load takes a path, HLO text, bytes .*jax.jit\(f\).lower\(\*args\)"
                                        rf".*; got {type(bad).__name__}$"):
        hlo_dedup.load(bad)


def test_the_package_does_not_import_jax_and_reaches_equivalence() -> None:
    code = ("import sys, hlo_dedup; from hlo_dedup import equivalence; "
            "assert hlo_dedup.equivalence is equivalence; "
            "assert hlo_dedup.check_equivalence is equivalence.check_equivalence; "
            "print('jax' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False\n"


def _jitted():  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    n = len(jax.devices())
    mesh = jax.make_mesh((n,), ("x",))

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P("x"), P("x")), out_specs=P("x"))
    def f(w, x):  # type: ignore[no-untyped-def]
        for _ in range(2):  # the same weight gathered twice: one fold
            x = jnp.tanh(x @ lax.all_gather(w, "x", tiled=True))
        return x

    sharded = NamedSharding(mesh, P("x"))
    return f, tuple(jax.ShapeDtypeStruct(shape, jnp.float32, sharding=sharded) for shape in ((4 * n, 4 * n), (2 * n, 4 * n)))


def test_load_takes_what_jax_hands_a_user(xla_client) -> None:  # type: ignore[no-untyped-def]
    f, args = _jitted()
    lowered = f.lower(*args)
    before = hlo_dedup.load(lowered)
    assert before.to_text() == lowered.as_text(dialect="hlo")
    result = hlo_dedup.run_passes(before)
    assert len(result.folds) == 1  # the duplicate gather, before XLA's optimizations
    compiled = lowered.compile()
    after = hlo_dedup.load(compiled)
    assert after.to_text() == compiled.as_text()
    assert not hlo_dedup.run_passes(after).folds  # XLA's own CSE merged them already
    with pytest.raises(TypeError, match=r"^hlo_dedup.load got PjitFunction, which has no HLO until it is lowered: "
                                        r"pass jax.jit\(f\).lower\(\*args\)"):
        hlo_dedup.load(f)
    with pytest.raises(TypeError, match="got Traced, which has no HLO until it is lowered"):
        hlo_dedup.load(f.trace(*args))


def test_a_string_that_is_neither_a_file_nor_hlo_says_both() -> None:
    with pytest.raises(FileNotFoundError, match=r"no such file, and not HLO text either"):
        hlo_dedup.load("not hlo at all")
    one_line = "HloModule m ENTRY e { ROOT p = f32[] parameter(0) }"  # a module needs no line break
    assert hlo_dedup.load(one_line).to_text() == one_line
    with pytest.raises(TypeError, match=r"^stage= needs a jax.jit\(f\).lower\(\*args\) object to compile; got str"):
        hlo_dedup.load(one_line, stage="after_spmd_partitioning")


_GSPMD_PROGRAM = """
import jax, jax.numpy as jnp, hlo_dedup
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("d",), axis_types=(AxisType.Auto,))

@jax.jit
def f(w, x):
    full = jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P()))
    return jnp.tanh(x @ full) @ full.T

lowered = f.lower(jax.ShapeDtypeStruct((64, 16), jnp.float32, sharding=NamedSharding(mesh, P("d", None))),
                  jax.ShapeDtypeStruct((4, 64), jnp.float32))
gathers = lambda m: sum(i.opcode == "all-gather" for c in m.computations for i in c)
assert hlo_dedup.load(lowered, stage="before_optimizations").to_text() == lowered.as_text(dialect="hlo")
partitioned = hlo_dedup.load(lowered, stage="after_spmd_partitioning")
print(gathers(hlo_dedup.load(lowered)), gathers(partitioned), partitioned.entry.name.endswith("_spmd"),
      gathers(hlo_dedup.load(lowered, stage="after_optimizations")))
try:
    hlo_dedup.load(lowered, stage="after_lunch")
except ValueError as e:
    print(e)
"""


def test_a_gspmd_program_is_loaded_after_partitioning(xla_client) -> None:  # type: ignore[no-untyped-def]
    # jax.jit with a sharding constraint over 8 devices: before optimizations the module
    # holds annotations only; XLA's SPMD partitioner writes the all-gather the pass looks at.
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", _GSPMD_PROGRAM], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    counts, error = proc.stdout.splitlines()
    assert counts == "0 1 True 1"
    assert error.startswith("unknown stage 'after_lunch': expected one of before_optimizations, after_spmd_partitioning")
