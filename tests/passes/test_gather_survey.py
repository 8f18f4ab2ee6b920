"""What the all-gather pass reports about every gather: fates, stops, near misses, memory
prices and the peak budget, on hand-written modules and on what JAX writes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import hlo_dedup
from hlo_dedup import HloModule, parse_module
from hlo_dedup.passes import NeuronAllGatherDuplicateRemover, NeuronPreprocessKernelDuplicateRemover, PassResult

TESTS = Path(__file__).resolve().parents[1]
JAX_DATA = TESTS / "data" / "jax"
REMAT_LAYERS = TESTS / "analysis" / "data" / "fsdp_remat_layers.hlo"
G = "replica_groups={{0,1,2,3}}, dimensions={0}"


def run(text: str, **options: object) -> tuple[HloModule, PassResult]:
    module = parse_module(text)
    return module, NeuronAllGatherDuplicateRemover(**options).run_with_result(module)  # type: ignore[arg-type]


def fates(result: PassResult) -> dict[str, str]:
    return {i.name: i.fate for i in result.instructions}


def test_every_fate_and_where_a_walk_stopped() -> None:
    _, result = run(f"""HloModule m
ENTRY main {{
  p = f32[2,4]{{1,0}} parameter(0)
  q = f32[2,4]{{1,0}} parameter(1)
  r = f32[2,4]{{1,0}} reshape(q)
  a = f32[8,4]{{1,0}} all-gather(p), {G}
  b = f32[8,4]{{1,0}} all-gather(p), {G}
  c = f32[8,4]{{1,0}} all-gather(r), {G}
  d = f32[8,4]{{1,0}} all-gather(q), {G}
  s = ((f32[2,4]{{1,0}}), (f32[8,4]{{1,0}}), u32[]) all-gather-start(q), {G}
  ROOT t = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}, f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(a, b, c, d)
}}
""")
    assert fates(result) == {"a": "kept", "b": "folded", "c": "not_traced", "d": "unique", "s": "not_candidate"}
    records = {i.name: i for i in result.instructions}
    assert records["b"].folded_into == "a"
    assert records["c"].stop == ("reshape", "r") and records["c"].walk == (("reshape", "r"),)
    assert records["a"].key is not None and records["a"].key["parameter"] == "p"
    assert records["a"].bytes_output == 8 * 4 * 4
    assert "all-gather-start" in (records["s"].reason or "")


def test_source_attribution_from_metadata_and_stack_frames() -> None:
    _, result = run(f"""HloModule m

FileNames
1 "train.py"

FunctionNames
1 "step"

FileLocations
1 {{file_name_id=1 function_name_id=1 line=42 end_line=42 column=3 end_column=9}}

StackFrames
1 {{file_location_id=1 parent_frame_id=0}}


ENTRY main {{
  p = f32[2,4]{{1,0}} parameter(0)
  a = f32[8,4]{{1,0}} all-gather(p), {G}, metadata={{op_name="jit(step)/all_gather" stack_frame_id=1}}
  b = f32[8,4]{{1,0}} all-gather(p), {G}, metadata={{op_name="jit(step)/all_gather" source_file="model.py" source_line=7}}
  ROOT t = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(a, b)
}}
""")
    records = {i.name: i for i in result.instructions}
    assert (records["a"].op_name, records["a"].source) == ("jit(step)/all_gather", "train.py:42")
    assert records["b"].source == "model.py:7"  # folded, yet attributed (read before DCE)


def test_near_misses_key_field_and_same_operand() -> None:
    _, result = run(f"""HloModule m
ENTRY main {{
  p = f32[2,4]{{1,0}} parameter(0)
  r = f32[2,4]{{1,0}} copy(p)
  a = f32[8,4]{{1,0}} all-gather(p), {G}
  b = f32[8,4]{{1,0}} all-gather(p), replica_groups={{{{0,2,1,3}}}}, dimensions={{0}}
  c = f32[8,4]{{1,0}} all-gather(r), {G}
  d = f32[8,4]{{1,0}} all-gather(r), {G}
  ROOT t = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}, f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(a, b, c, d)
}}
""")
    misses = {n.kind: n for n in result.near_misses}
    assert set(misses) == {"key_field", "same_operand"}
    assert misses["key_field"].instructions == ("a", "b") and "replica groups" in misses["key_field"].reason
    assert misses["same_operand"].instructions == ("c", "d") and "copy r" in misses["same_operand"].reason


def test_near_miss_across_computations_through_calls() -> None:
    _, result = run(f"""HloModule m
fwd {{
  w = f32[2,4]{{1,0}} parameter(0)
  ROOT g = f32[8,4]{{1,0}} all-gather(w), {G}
}}
bwd {{
  v = f32[2,4]{{1,0}} parameter(0)
  ROOT h = f32[8,4]{{1,0}} all-gather(v), {G}
}}
ENTRY main {{
  p = f32[2,4]{{1,0}} parameter(0)
  f = f32[8,4]{{1,0}} call(p), to_apply=fwd
  b = f32[8,4]{{1,0}} call(p), to_apply=bwd
  ROOT t = (f32[8,4]{{1,0}}, f32[8,4]{{1,0}}) tuple(f, b)
}}
""")
    (miss,) = result.near_misses
    assert (miss.kind, miss.computations, miss.instructions) == ("cross_computation", ("fwd", "bwd"), ("g", "h"))
    assert "p of main" in miss.reason


def test_preprocess_kernel_fates() -> None:
    module = hlo_dedup.load(TESTS / "data" / "neuron" / "both_substitutions.hlo")
    result = NeuronPreprocessKernelDuplicateRemover().run_with_result(module)
    kernels = {i.name: i for i in result.instructions}
    assert Counter(i.fate for i in kernels.values()) == Counter({"first": 1, "rewritten": 1, "not_matched": 1})
    rewritten = next(i for i in kernels.values() if i.fate == "rewritten")
    assert rewritten.folded_into == "preprocess" and "preprocess.1" in (rewritten.reason or "")
    module = hlo_dedup.load(TESTS / "data" / "neuron" / "no_first_kernel.hlo")
    result = NeuronPreprocessKernelDuplicateRemover().run_with_result(module)
    assert result.instructions and all(i.fate == "not_matched" and i.reason for i in result.instructions)


def _accounts_for_every_gather(path: Path) -> PassResult:
    text = path.read_text()
    module = parse_module(text, str(path))
    gathers = [i.name for c in module.computations for i in c if i.opcode in ("all-gather", "all-gather-start")]
    result = NeuronAllGatherDuplicateRemover().run_with_result(module)
    assert sorted(i.name for i in result.instructions) == sorted(gathers)
    counts = Counter(i.fate for i in result.instructions)
    assert counts["folded"] == len(result.folds)
    assert counts["kept"] == len({f.kept for f in result.folds})
    for record in result.instructions:
        assert (record.fate == "not_traced") == (record.stop is not None)
        assert (record.key is not None) == (record.fate in ("kept", "folded", "unique", "refused"))
    assert all(f.memory is not None for f in result.folds)  # every fold has a memory price
    return result


@pytest.mark.parametrize("path", sorted(JAX_DATA.glob("*.hlo")) + [REMAT_LAYERS], ids=lambda p: p.stem)
def test_the_report_accounts_for_every_all_gather_of_real_modules(path: Path) -> None:
    _accounts_for_every_gather(path)


def test_gspmd_after_partitioning_says_why_nothing_folds() -> None:
    result = _accounts_for_every_gather(JAX_DATA / "gspmd_transformer_after_spmd.hlo")
    assert not result.folds and result.instructions
    assert all(i.fate == "not_traced" and i.stop and i.stop[0] == "reshape" for i in result.instructions)
    assert all(i.source and i.source.startswith("generate.py:") for i in result.instructions)
    proc = subprocess.run([sys.executable, "-m", "hlo_dedup", str(JAX_DATA / "gspmd_transformer_after_spmd.hlo"),
                           "-o", "-"], capture_output=True, text=True, timeout=120)
    assert "12 all-gathers, none traced to a parameter: walks stopped at reshape \u00d712" in proc.stderr


def test_grad_outside_the_manual_body_is_a_cross_computation_near_miss() -> None:
    result = _accounts_for_every_gather(JAX_DATA / "fsdp_remat_grad.hlo")
    crossing = [n for n in result.near_misses if n.kind == "cross_computation"]
    assert len(crossing) == 3  # ws_0, ws_1, ws_2: forward body and backward body
    assert all(len(n.computations) == 2 for n in crossing)


@pytest.fixture(scope="session")
def remat48(tmp_path_factory: pytest.TempPathFactory, xla_client) -> Path:  # type: ignore[no-untyped-def]
    """A 48-layer shard_map FSDP MLP with jax.checkpoint and jax.grad inside the manual body."""
    path = tmp_path_factory.mktemp("remat48") / "fsdp_remat_48.hlo"
    subprocess.run([sys.executable, str(TESTS / "analysis" / "data" / "generate.py"), "48", str(path)],
                   check=True, capture_output=True, timeout=600)
    return path


def test_a_48_layer_model_prices_every_fold_and_the_budget_refuses_the_raising_ones(remat48: Path) -> None:
    result = _accounts_for_every_gather(remat48)
    assert len(result.folds) >= 48
    # remat re-gathers folded onto forward gathers keep the full weight alive longer
    assert all(f.memory["live_range_extension"] > 0 for f in result.folds)
    raising = [f for f in result.folds if f.memory["peak_bytes_after"] > f.memory["peak_bytes_before"]]
    assert raising

    module = hlo_dedup.load(remat48)
    budgeted = NeuronAllGatherDuplicateRemover(max_peak_increase=0).run_with_result(module)
    refused = [i for i in budgeted.instructions if i.fate == "refused"]
    assert refused and all("--max-peak-increase" in (i.reason or "") for i in refused)
    assert len(budgeted.folds) + len(refused) == len(result.folds)
    assert all(f.memory["peak_bytes_after"] <= f.memory["peak_bytes_before"] for f in budgeted.folds)


def test_the_budget_keeps_the_module_equal_on_xla(tmp_path: Path, xla_client) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "budget0.hlo"
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "hlo_dedup", str(REMAT_LAYERS), "--max-peak-increase=0", "-o", str(out),
                           "--report", str(report), "--verify"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    module = data["modules"][0]
    assert data["max_peak_increase"] == 0 and module["memory"]["peak_increase_bytes"] == 0
    # 6 folds; the compiler-shaped price keeps the one that leaves the peak where it was
    # (XLA:CPU agrees: that output's peak is the input's), and refuses the 5 that raise it.
    assert sum(g["fate"] == "refused" for g in module["all_gathers"]) == 5


def test_a_module_without_gathers_says_why() -> None:
    _, result = run("HloModule m\nENTRY main {\n  p = f32[8,4]{1,0} parameter(0), sharding={devices=[8,1]<=[8]}\n"
                    "  ROOT n = f32[8,4]{1,0} negate(p), sharding={devices=[8,1]<=[8]}\n}\n")
    (note,) = result.notes
    assert "not partitioned yet" in note and "spmd-partitioning" in note
    _, result = run((JAX_DATA / "conv.hlo").read_text())
    assert result.notes == ["no all-gather instructions in the module"]
