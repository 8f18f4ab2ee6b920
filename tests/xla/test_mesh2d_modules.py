"""The 2-D-mesh training step (tests/data/generate_mesh2d.py) at every stage XLA dumps it.

Three programs (GSPMD jit, Shardy jit, shard_map) on a ('data', 'model') = 4 x 2 mesh, each
before optimizations, right after spmd-partitioning and after XLA:CPU's optimizations. The
partitioned stages hold mesh replica groups, some with ``device_ids=(...)``: the form whose
comma once stopped the reader. For every module: the default pipeline exits 0, ``--passes=``
gives the input back byte for byte, XLA re-parses the output, and ``verify`` says equal where
XLA:CPU can run the module. The fold counts, read off each module, are with the other JAX
modules' in tests/passes/test_all_gather_fold_effects.py.

A run goes through jaxlib's HLO -> StableHLO conversion, which drops a mesh's ``device_ids``
and, on the way back, reads every mesh group against one of the module's meshes; ``verify``
therefore spells mesh groups out as device lists first (``cpu_runnable_text``), and the last
tests pin both facts down.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from hlo_dedup.cli import main
from hlo_dedup.equivalence import check_equivalence_many, cpu_runnable_text
from hlo_dedup.ir.replica_groups import parse_replica_groups
from hlo_dedup.text import parse_module

pytestmark = pytest.mark.usefixtures("xla_client")  # every test here runs XLA

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["modules"]
PROGRAMS = ("gspmd", "shardy", "shardmap")
STAGES = {"before_optimizations": "pre-optimization", "after_spmd": "after spmd-partitioning",
          "post_opt": "post-optimization"}
NAMES = [f"mesh2d_{program}_{stage}.hlo" for program in PROGRAMS for stage in STAGES]
PARTITIONED = [f"mesh2d_{program}_{stage}.hlo" for program in PROGRAMS for stage in ("after_spmd", "post_opt")]
MESH_WITH_DEVICE_IDS = re.compile(r"replica_groups=mesh\[[^\]]*\], device_ids=\((?:[^()]|\([^()]*\))*\) \{[^}]*\}")
# XLA:CPU's post-optimization text of this step has layout bitcasts (s32[] of s32[1]) that lose
# their layouts on the way to XLA:CPU, which then cannot compile it.
#: XLA:CPU's optimized text of these modules does not compile again on XLA:CPU (a layout its
#: HLO -> StableHLO import loses): verify says it cannot run them, exit 2, never "different".
NOT_RUNNABLE = {f"mesh2d_{program}_post_opt.hlo": "XLA:CPU could not compile/run BEFORE: " for program in PROGRAMS}


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _cli(*args: str | Path) -> tuple[int, str]:
    err = io.StringIO()
    status = main([str(a) for a in args], stdin=io.BytesIO(), stdout=io.StringIO(), stderr=err)
    return status, err.getvalue()


def test_every_program_at_every_stage_is_in_the_manifest() -> None:
    for name in NAMES:
        stage = name.removesuffix(".hlo").split("_", 2)[2]
        assert (MANIFEST[name]["stage"], MANIFEST[name]["devices"]) == (STAGES[stage], 8), name
        header = _text(name).partition("\n")[0]
        assert "num_partitions=8" in header, name
        assert ("is_scheduled=true" in header) == (stage == "post_opt"), name
        assert ("_spmd" in _text(name).partition("\nENTRY ")[2].partition(" ")[0]) == (stage != "before_optimizations")


def test_mesh_groups_with_device_ids_are_covered() -> None:
    # The parameter kept with its columns over ('model', 'data') makes every partitioned stage
    # of every program gather or reshard over a mesh whose devices are not in iota order.
    with_ids = {name for name in NAMES if MESH_WITH_DEVICE_IDS.search(_text(name))}
    assert with_ids == set(PARTITIONED)


@pytest.mark.parametrize("name", NAMES)
def test_default_pipeline_and_no_passes(name: str, tmp_path: Path, xla_client) -> None:  # type: ignore[no-untyped-def]
    source = DATA / name
    status, err = _cli(source, "--passes=", "-o", tmp_path / "same.hlo")
    assert status == 0, err
    assert (tmp_path / "same.hlo").read_bytes() == source.read_bytes()
    status, err = _cli(source, "-o", tmp_path / "out.hlo")
    assert status == 0, err
    out = (tmp_path / "out.hlo").read_text()
    xla_client.hlo.hlo_module_from_text(out)
    # A fold keeps the first gather of a pair: every device_ids group written is still there.
    assert set(MESH_WITH_DEVICE_IDS.findall(out)) == set(MESH_WITH_DEVICE_IDS.findall(_text(name)))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[object, bool]]:
    """Every module before vs after the default pipeline on XLA:CPU (one child process), with
    whether the pipeline changed it."""
    out = tmp_path_factory.mktemp("mesh2d")
    afters = []
    for name in NAMES:
        status, err = _cli(DATA / name, "-o", out / name)
        assert status == 0, err
        afters.append((out / name).read_text())
    reports = check_equivalence_many([(_text(name), after) for name, after in zip(NAMES, afters)])
    return {name: (report, after != _text(name)) for name, report, after in zip(NAMES, reports, afters)}


@pytest.mark.parametrize("name", NAMES)
def test_verify_says_equal(name: str, verdicts: dict) -> None:
    report, _ = verdicts[name]
    if name in NOT_RUNNABLE:
        assert report.status == "error" and NOT_RUNNABLE[name] in report.message, report.message
        return
    assert report.status == "equal", report.message
    assert (report.num_partitions, report.num_outputs) == (8, 4)  # w_down, w_in, w_up, loss


def test_verified_modules_include_folded_device_id_gathers(verdicts: dict) -> None:
    """The equal verdicts are about real rewrites, one of them of a gather with device_ids."""
    changed = {name for name, (report, rewritten) in verdicts.items() if rewritten and report.equal}
    assert {"mesh2d_gspmd_after_spmd.hlo", "mesh2d_shardy_after_spmd.hlo", "mesh2d_shardmap_after_spmd.hlo",
            "mesh2d_shardmap_before_optimizations.hlo"} <= changed


AFTER_SPMD = [f"mesh2d_{program}_after_spmd.hlo" for program in PROGRAMS]


@pytest.mark.parametrize("name", AFTER_SPMD)
def test_spelled_out_groups_are_the_groups_xla_reads(name: str, xla_client) -> None:  # type: ignore[no-untyped-def]
    # XLA's fingerprint print spells every replica group out as a list; spelling them out is all
    # cpu_runnable_text does to text without fusions, so XLA must print the very same module.
    text = _text(name)
    runnable = cpu_runnable_text(text)
    assert MESH_WITH_DEVICE_IDS.search(text) and "replica_groups=mesh[" not in runnable
    fingerprint = xla_client.hlo.HloPrintOptions.fingerprint()
    assert (xla_client.hlo.hlo_module_from_text(runnable).to_string(fingerprint)
            == xla_client.hlo.hlo_module_from_text(text).to_string(fingerprint))


def _stablehlo(text: str) -> str:
    """The StableHLO a run compiles, as text (the conversion hlo_dedup.xla.execute uses)."""
    import jaxlib
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir

    proto = xc.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    with mlir.make_ir_context():
        return str(ir.Module.parse(jaxlib._jax.mlir.hlo_to_stablehlo(proto)))


def _groups(text: str) -> list[tuple[tuple[int, ...], ...]]:
    """Every collective's device groups, as hlo_dedup reads them, in a sorted list."""
    module = parse_module(text)
    values = [i.attr("replica_groups") for c in module.computations for i in c.instructions]
    return sorted(tuple(map(tuple, parse_replica_groups(v).groups)) for v in values if v is not None)


def test_the_run_conversion_misreads_mesh_groups(xla_client) -> None:  # type: ignore[no-untyped-def]
    """Why verify spells mesh groups out: jaxlib's conversion keeps each mesh's axes but not its
    device_ids, and its way back reads every group against one mesh (an eight-device gather
    comes back over groups of one device); spelled out, the groups come back as written."""
    import jaxlib

    def round_trip(stablehlo: str) -> str:
        return jaxlib._jax.mlir.mlir_module_to_xla_computation(
            stablehlo, use_tuple_args=False, return_tuple=False).as_hlo_text()

    text = _text("mesh2d_gspmd_after_spmd.hlo")
    converted = _stablehlo(text)
    meshes = re.findall(r"sdy\.mesh @\S+ = <[^>]*>", converted)
    assert len(meshes) >= 2 and not any("device_ids" in mesh for mesh in meshes), meshes
    assert all(len(g[0]) > 1 for g in _groups(text)) and any(len(g[0]) == 1 for g in _groups(round_trip(converted)))
    spelled = _stablehlo(cpu_runnable_text(text))
    assert "replica_group_mesh_axes" in converted and "replica_group_mesh_axes" not in spelled
    assert _groups(round_trip(spelled)) == _groups(text)
