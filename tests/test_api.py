"""The top-level Python API: what `hlo_dedup.load` accepts (and says it does not), and the
semantic comparison reachable from the package."""

from __future__ import annotations

import gzip
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
