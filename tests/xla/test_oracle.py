"""The XLA oracle against the JAX-generated modules in tests/data/jax (and a few hand-written edge cases).

Before any pass output is checked against XLA, the oracle itself must be trustworthy: XLA parses
every test module, a run is bitwise reproducible, a real change is detected, and protos round-trip.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import pytest
import support

from hlo_dedup.equivalence import cpu_runnable_text
from hlo_dedup.xla import XlaError, XlaUnavailableError

import numpy as np

pytestmark = pytest.mark.usefixtures("xla_client")  # every test here runs XLA


@pytest.fixture(scope="module")
def oracle(xla_client):  # type: ignore[no-untyped-def]
    """hlo_dedup.xla.oracle, imported once jax is known to be there."""
    from hlo_dedup.xla import oracle

    return oracle

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
MODULES = sorted(MANIFEST["modules"])

# XLA:CPU's own post-optimization text does not recompile through hlo_to_stablehlo: the fusions'
# backend configs are dropped on the way and the CPU thunk emitter RET_CHECKs "Fusion must have
# backend config". The oracle must report that as a clean XlaError.
NOT_RUNNABLE = {
    "gspmd_post_opt.hlo": "Fusion must have backend config",
    "mesh2d_gspmd_post_opt.hlo": "does not have a layout",
    # The HLO -> StableHLO conversion reads every mesh replica group against one of the module's
    # meshes (XLA's verifier then rejects the collectives whose groups it misread), and its
    # importer takes no mesh groups on an all-to-all.
    "gspmd_transformer_after_spmd.hlo": "shard_count == subgroup_size",
    "mesh2d_shardy_post_opt.hlo": "shard_count == subgroup_size",
    "mesh2d_shardmap_after_spmd.hlo": "must be dividable by split_count",
    "mesh2d_shardmap_post_opt.hlo": "'mhlo.all_to_all' op attribute 'replica_groups'",
}
# Misread the same way, these still compile, and run collectives over other devices than written
# (an eight-device gather over groups of one reads memory nothing wrote: not even reproducible).
# They are run as cpu_runnable_text spells their mesh groups out, as `verify` runs them.
SPELLED_OUT = {"mesh2d_gspmd_after_spmd.hlo", "mesh2d_shardy_after_spmd.hlo"}

# One text edit per runnable module that must change its outputs (first occurrence only).
MUTATIONS = {
    "bf16_cast.hlo": (" multiply(", " add("),
    "cond.hlo": ("direction=GT", "direction=LE"),
    "conv.hlo": (" maximum(", " minimum("),
    "fsdp_remat_grad.hlo": (" tanh(", " sine("),
    "fsdp_shard_map.hlo": (" tanh(", " sine("),
    "gspmd_after_spmd.hlo": (" tanh(", " sine("),
    "gspmd_remat_after_spmd.hlo": (" tanh(", " sine("),
    "linalg.hlo": ("constant(8)", "constant(9)"),
    "mesh2d_gspmd_after_spmd.hlo": (" tanh(", " sine("),
    "mesh2d_gspmd_before_optimizations.hlo": (" tanh(", " sine("),
    "mesh2d_nested.hlo": (" tanh(", " sine("),
    "mesh2d_shardmap_before_optimizations.hlo": (" tanh(", " sine("),
    "mesh2d_shardy_after_spmd.hlo": (" tanh(", " sine("),
    "mesh2d_shardy_before_optimizations.hlo": (" tanh(", " sine("),
    "pytree_weights.hlo": (" tanh(", " sine("),
    "scan_layers.hlo": (" tanh(", " sine("),
    "sort.hlo": ("direction=LT", "direction=GT"),
    "while_gather.hlo": (" tanh(", " sine("),
    "while_loop.hlo": ("constant(0.5)", "constant(0.25)"),
}
_MODULE_CONFIG_FIELD = re.compile(
    r",\s*(?:num_partitions|replica_count|allow_spmd_sharding_propagation_to_\w+)=(?:\{[^}]*\}|\w+)"
)
RUNNABLE = [name for name in MODULES if name not in NOT_RUNNABLE]


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _run_text(name: str) -> str:
    return cpu_runnable_text(_text(name)) if name in SPELLED_OUT else _text(name)


@cache
def _baseline(oracle, name: str):  # type: ignore[no-untyped-def]
    """First run of each module, shared by the reproducibility and mutation tests."""
    return oracle.run_module(_run_text(name), seed=0)


def test_manifest_covers_generated_files() -> None:
    assert sorted(p.name for p in DATA.glob("*.hlo")) == MODULES
    assert set(MUTATIONS) == set(RUNNABLE)
    assert MANIFEST["jax_version"] and MANIFEST["jaxlib_version"]


@pytest.mark.parametrize("name", MODULES)
def test_xla_parses_and_reprint_is_stable(oracle, name: str) -> None:
    text = _text(name)
    canonical = oracle.xla_canonical_text(text)
    assert canonical.startswith("HloModule ")
    assert oracle.xla_reparse_equal(text, canonical)
    assert _without_stack_frames(oracle.xla_canonical_text(canonical)) == _without_stack_frames(canonical)


def _without_stack_frames(printed: str) -> str:
    """XLA's print without the stack-frame tables and the ids into them, which XLA renumbers each
    time it prints some modules (the 2-D-mesh step's); the rest must print the same again."""
    tables = re.sub(r"\n\nFileNames\n.*?\n\nStackFrames\n.*?\n\n", "\n\n", printed, flags=re.S)
    return re.sub(r"\s*stack_frame_id=\d+", "", tables)


@pytest.mark.parametrize("name", MODULES)
def test_module_proto_round_trip(oracle, name: str) -> None:
    text = _text(name)
    back = oracle.module_proto_to_text(oracle.text_to_module_proto(text))
    oracle.xla_canonical_text(back)
    # HloModuleProto has no HloModuleConfig: header fields such as num_partitions, replica_count
    # and allow_spmd_sharding_propagation_* do not survive the proto; everything else must.
    header, rest = text.split("\n", 1)
    assert oracle.xla_reparse_equal(_MODULE_CONFIG_FIELD.sub("", header) + "\n" + rest, back)


@pytest.mark.parametrize("name", RUNNABLE)
def test_run_is_bitwise_reproducible(oracle, name: str) -> None:
    first = _baseline(oracle, name)
    assert first.num_replicas * first.num_partitions == MANIFEST["modules"][name]["devices"]
    comparison = oracle.compare_results(first, oracle.run_module(_run_text(name), seed=0))
    assert comparison.equal, comparison.message


@pytest.mark.parametrize("name", RUNNABLE)
def test_mutated_module_compares_different(oracle, name: str) -> None:
    old, new = MUTATIONS[name]
    text = _run_text(name)
    assert old in text
    comparison = oracle.compare_results(_baseline(oracle, name), oracle.run_module(text.replace(old, new, 1), seed=0))
    assert not comparison.equal
    assert comparison.index is not None and comparison.message


@pytest.mark.parametrize("name", sorted(NOT_RUNNABLE))
def test_unrunnable_module_is_a_clean_xla_error(oracle, name: str) -> None:
    with pytest.raises(XlaError, match=NOT_RUNNABLE[name]) as info:
        oracle.run_module(_text(name))
    assert "Traceback" not in str(info.value)


def test_seed_changes_inputs(oracle) -> None:
    name = "fsdp_shard_map.hlo"
    assert not oracle.compare_results(_baseline(oracle, name), oracle.run_module(_text(name), seed=1)).equal


GSPMD = """HloModule gspmd, num_partitions=8

ENTRY main {
  x = f32[16,4] parameter(0), sharding={devices=[8,1]<=[8]}
  w = f32[4,4] parameter(1), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}
  d = f32[16,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[8,1]<=[8]}
  ROOT r = f32[16,4] add(d, x), sharding={replicated}
}
"""


def test_gspmd_text_is_partitioned_by_xla(oracle) -> None:
    # No xla.sdy attributes: the GSPMD partitioner (not Shardy) partitions it; outputs are global.
    result = oracle.run_module(GSPMD)
    assert (result.num_partitions, result.per_device, result.outputs[0].shape) == (8, False, (16, 4))
    assert oracle.compare_results(result, oracle.run_module(GSPMD)).equal


def test_spmd_outputs_are_global_and_partitioned_text_per_device(oracle) -> None:
    spmd = _baseline(oracle, "fsdp_shard_map.hlo")
    assert not spmd.per_device and spmd.outputs[0].shape == (32, 16)
    partitioned = _baseline(oracle, "gspmd_after_spmd.hlo")
    assert partitioned.per_device and partitioned.outputs[0].shape == (8, 4, 16)


ALL_DTYPES = ["pred", "s4", "u4", "s8", "u8", "s32", "u64", "bf16", "f16", "f32", "f64",
              "f8e4m3fn", "f8e5m2", "f8e4m3b11fnuz", "f8e8m0fnu", "f4e2m1fn", "c64", "c128"]


def _identity_module(copy: bool) -> str:
    params = [f"  p{i} = {t}[5] parameter({i})" for i, t in enumerate(ALL_DTYPES)]
    copies = [f"  c{i} = {t}[5] copy(p{i})" for i, t in enumerate(ALL_DTYPES)] if copy else []
    prefix = "c" if copy else "p"
    shapes = ", ".join(f"{t}[5]" for t in ALL_DTYPES)
    operands = ", ".join(f"{prefix}{i}" for i in range(len(ALL_DTYPES)))
    body = "\n".join([*params, *copies, f"  ROOT t = ({shapes}) tuple({operands})"])
    return f"HloModule identity\n\nENTRY main {{\n{body}\n}}\n"


def test_inputs_cover_all_dtypes_and_depend_only_on_parameter_shapes(oracle) -> None:
    direct = oracle.run_module(_identity_module(copy=False), seed=3)
    assert [str(o.dtype) for o in direct.outputs][:3] == ["bool", "int4", "uint4"]
    assert all(np.any(np.asarray(o, dtype=np.complex128) != 0) for o in direct.outputs)
    # A different module with the same entry signature is fed the very same inputs.
    assert oracle.compare_results(direct, oracle.run_module(_identity_module(copy=True), seed=3)).equal


REPLICATED = """HloModule repl, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[2,3] parameter(0)
  id = u32[] replica-id()
  idf = f32[] convert(id)
  idb = f32[2,3] broadcast(idf), dimensions={}
  shifted = f32[2,3] add(p, idb)
  sum = f32[2,3] all-reduce(shifted), replica_groups={}, to_apply=add
  gathered = f32[8,3] all-gather(p), replica_groups={}, dimensions={0}
  ROOT t = (f32[2,3], f32[8,3]) tuple(sum, gathered)
}
"""


def test_replicated_module_runs_per_replica(oracle) -> None:
    result = oracle.run_module(REPLICATED)
    assert (result.num_replicas, result.num_partitions, result.per_device) == (4, 1, True)
    sums, gathered = result.outputs
    assert sums.shape == (4, 2, 3) and gathered.shape == (4, 8, 3)
    assert np.array_equal(sums[0], sums[3])  # all-reduce: every replica holds the same sum
    assert not np.array_equal(gathered[0, :2], gathered[0, 2:4])  # replicas were fed different inputs
    assert oracle.compare_results(result, oracle.run_module(REPLICATED)).equal
    assert not oracle.compare_results(result, oracle.run_module(REPLICATED.replace("add(p, idb)", "subtract(p, idb)"))).equal


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("HloModule m\n\nENTRY e {\n  ROOT a = f32[3] add(p, q)\n}\n", "instruction does not exist"),
        ("HloModule m\n\nENTRY e {\n  p = f32[3] parameter(0)\n  ROOT a = f32[4] add(p, p)\n}\n", "same shape"),
        ("HloModule m\n\nENTRY e {\n  p = token[] parameter(0)\n  ROOT a = token[] after-all(p)\n}\n", "token"),
        ("HloModule m\n\nENTRY e {\n  p = (f32[3], token[]) parameter(0)\n  ROOT a = f32[3] get-tuple-element(p), "
         "index=0\n}\n", r"entry parameter 0\.1 is a token"),
    ],
)
def test_bad_modules_raise_xla_error(oracle, text: str, message: str) -> None:
    with pytest.raises(XlaError, match=message):
        oracle.run_module(text)


NESTED_TUPLE_PARAMETER = """HloModule nested

ENTRY main {
  p = (f32[4], (s32[], f32[2,2])) parameter(0)
  q = f32[4] parameter(1)
  a = f32[4] get-tuple-element(p), index=0
  i = (s32[], f32[2,2]) get-tuple-element(p), index=1
  s = s32[] get-tuple-element(i), index=0
  b = f32[2,2] get-tuple-element(i), index=1
  ROOT t = (f32[4], s32[], f32[2,2], f32[4]) tuple(a, s, b, q)
}
"""


def test_tuple_parameters_are_fed_leaf_by_leaf(oracle) -> None:
    """Every leaf of a tuple parameter gets its own seeded value (the module returns them; one
    device, so each value is the one fed to device 0)."""
    from hlo_dedup.xla.execute import integer_limit, leaves, random_array

    result = oracle.run_module(NESTED_TUPLE_PARAMETER)
    a, s, b, q = result.outputs
    shapes = oracle.program_shape(NESTED_TUPLE_PARAMETER).parameter_shapes()
    limit = integer_limit(leaf for shape in shapes for _, leaf in leaves(shape))
    assert limit == 2  # integers in [0, 2): the smallest dimension of at least 2 (f32[2,2])
    fed = [random_array(leaf, 0, index, 0, path, limit)
           for index, shape in enumerate(shapes) for path, leaf in leaves(shape)]
    assert [x.tobytes() for x in (a, s, b, q)] == [x.tobytes() for x in fed]
    assert not np.array_equal(a, q)  # same shape, different parameters: different values
    again = oracle.run_module(NESTED_TUPLE_PARAMETER)
    assert oracle.compare_results(result, again).equal


def test_parse_error_is_xla_error(oracle) -> None:
    with pytest.raises(XlaError, match="Syntax error"):
        oracle.xla_canonical_text("HloModule m\n\nENTRY e {\n  ROOT a = f32[3] bogus(\n}\n")


def test_num_devices_must_fit_replicas(oracle) -> None:
    with pytest.raises(XlaError, match="multiple of replica_count"):
        oracle.run_module(REPLICATED, num_devices=6)


def _fake_interpreter(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_child_crash_is_xla_error(oracle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What an XLA CHECK failure looks like from the parent: a message on stderr, then SIGABRT.
    fake = _fake_interpreter(tmp_path, 'echo "F0000 hlo.cc:1] Check failed: fake" >&2; kill -ABRT $$')
    monkeypatch.setattr(sys, "executable", fake)
    with pytest.raises(XlaError, match="(?s)crashed.*Check failed: fake"):
        oracle.run_module(REPLICATED)


def test_child_timeout_is_xla_error(oracle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", _fake_interpreter(tmp_path, "exec sleep 30"))
    with pytest.raises(XlaError, match="did not finish"):
        oracle.run_module(REPLICATED, timeout=0.5)


def test_execution_past_its_limit_stops_that_job_only(oracle) -> None:
    """A `while` that never ends is stopped once its execution is past its limit (the child's
    start and the compile do not count against it); the next job runs in a fresh child."""
    started = time.monotonic()
    endless, ending = oracle.run_modules([(support.ENDLESS_WHILE, 0), (support.ENDING_WHILE, 0)],
                                         limits=[oracle.Limit(1.0, 0.5), None])
    assert isinstance(endless, oracle.RunTimeout) and endless.phase == "execution"
    assert endless.seconds >= 1.0 and str(endless) == "XLA:CPU run did not finish within 1 s"
    assert isinstance(ending, oracle.RunResult) and ending.compile_seconds > 0 and ending.cpu_seconds >= 0
    assert time.monotonic() - started < 60


def _result(oracle, *arrays: np.ndarray):  # type: ignore[no-untyped-def]
    return oracle.RunResult(outputs=arrays, num_replicas=1, num_partitions=1, per_device=False, seed=0)


def test_compare_results_is_bitwise_and_nan_aware(oracle) -> None:
    nan = np.array([1.0, np.nan, 3.0], np.float32)
    assert oracle.compare_results(_result(oracle, nan), _result(oracle, nan.copy())).equal
    other_nan = nan.view(np.uint32).copy()
    other_nan[1] |= 1  # a different NaN payload
    assert not oracle.compare_results(_result(oracle, nan), _result(oracle, other_nan.view(np.float32))).equal
    assert not oracle.compare_results(_result(oracle, np.zeros(2)), _result(oracle, -np.zeros(2))).equal
    diff = oracle.compare_results(_result(oracle, np.ones(2), np.array([1.0, 2.0])), _result(oracle, np.ones(2), np.array([1.0, 2.5])))
    assert (diff.equal, diff.index, diff.max_abs_diff, diff.max_rel_diff) == (False, 1, 0.5, 0.2)
    assert not oracle.compare_results(_result(oracle, np.ones(2)), _result(oracle, np.ones(3))).equal


def test_core_import_does_not_need_jax() -> None:
    script = (
        "import sys; sys.modules['jax'] = None\n"
        "import hlo_dedup.xla as x\n"
        "assert 'jax._src' not in sys.modules\n"
        "try:\n    import hlo_dedup.xla.oracle\nexcept x.XlaUnavailableError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "pip install 'hlo-dedup[xla]'" in out
    assert issubclass(XlaUnavailableError, ImportError)



def test_memory_nobody_wrote_holds_the_childs_fill(oracle, monkeypatch: pytest.MonkeyPatch) -> None:
    # The gather writes 4 of its 16 rows. The other 12 hold the complement of the child's fill
    # byte, doubled by the add, in every run with that fill, whatever ran before in the child;
    # a tunable the user set is kept beside ours.
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.check=0")
    from hlo_dedup.xla.isolated import child_env

    assert child_env(None, 0x5A)["GLIBC_TUNABLES"].split(":") == [
        "glibc.malloc.check=0", "glibc.malloc.tcache_count=0", "glibc.malloc.perturb=90"]
    unwritten = {}
    for fill in (0x5A, 0xA5):
        runs = oracle.run_modules([(support.UNWRITTEN, 0), (support.UNWRITTEN, 1), (support.UNWRITTEN, 0)], fill=fill)
        rows = [np.asarray(r.outputs[0])[4:] for r in runs]
        assert np.array_equal(rows[0], rows[1]) and np.array_equal(rows[0], rows[2])
        unwritten[fill] = rows[0]
    expected = {fill: 2 * np.frombuffer(bytes([0xFF ^ fill] * 4), np.float32)[0] for fill in unwritten}
    assert {fill: set(rows.reshape(-1).tolist()) for fill, rows in unwritten.items()} == {
        fill: {float(value)} for fill, value in expected.items()}
