"""The explanations in the user's words: every all-gather names the weight it gathers where
the module carries a name, and the framework idioms that stop the pass's walk (torch-xla's
collective token, pin_layout all-reduces, FSDP's flattened views, mixed-precision casts,
transposed tied weights, channel ids that only XLA's CSE compares) are named with evidence,
on real torch-xla and JAX modules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import JAX_DATA, REPO

from hlo_dedup import parse_module
from hlo_dedup.passes import NeuronAllGatherDuplicateRemover, PassResult
from hlo_dedup.passes.gather_names import layer_of, parameter_name
from hlo_dedup.report import render_json, render_summary
from hlo_dedup.report.model import RunReport
from hlo_dedup.run import RunOptions, run_input

TORCH_XLA = REPO / "tests" / "data" / "torch_xla"


def run(path: Path) -> PassResult:
    return NeuronAllGatherDuplicateRemover().run_with_result(parse_module(path.read_text()))


def misses(result: PassResult, kind: str) -> list:
    return [n for n in result.near_misses if n.kind == kind]


# --- the user's names ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pytree_weights.hlo", "fsdp_remat_grad.hlo", "fsdp_shard_map.hlo",
                                  "gspmd_remat_after_spmd.hlo", "gspmd_after_spmd.hlo", "mesh2d_nested.hlo"])
def test_every_jax_all_gather_names_the_argument_it_gathers(name: str) -> None:
    result = run(JAX_DATA / name)
    gathers = [i for i in result.instructions if i.opcode == "all-gather"]
    assert gathers and all(g.tensor for g in gathers), [(g.name, g.tensor) for g in gathers]
    # A name is the argument's key path, never the instruction name of a body parameter.
    assert not any(re.search(r"shard_map|param\b|\.\d+$", g.tensor) for g in gathers)


def test_the_names_follow_the_weight_through_the_shard_map_body_and_the_tie() -> None:
    result = run(JAX_DATA / "pytree_weights.hlo")
    by_name = {i.name: i for i in result.instructions}
    (fold,) = result.folds
    # The tied embedding, gathered for the input and the output projection, is one weight.
    assert by_name[fold.kept].tensor == by_name[fold.removed].tensor == "p['embed']"
    blocks = sorted(i.tensor for i in result.instructions if i.tensor != "p['embed']")
    assert blocks == [f"p['blocks'][{b}]['{w}']" for b in (0, 1) for w in ("w_in", "w_out")]
    assert {layer_of(t) for t in blocks} == {"p['blocks'][0]", "p['blocks'][1]"}


def test_a_compiled_module_names_its_parameters_by_their_metadata() -> None:
    # XLA renames the parameters after partitioning (param.1); the op_name keeps JAX's path.
    text = (JAX_DATA / "gspmd_remat_after_spmd.hlo").read_text()
    assert re.search(r"%param\.1 = .*op_name=\"ws\[0\]\"", text)
    result = run(JAX_DATA / "gspmd_remat_after_spmd.hlo")
    tensors = {f.removed: t.tensor for f in result.folds for t in result.instructions if t.name == f.removed}
    assert sorted(tensors.values()) == ["ws[0]", "ws[1]"]


def test_names_only_what_the_module_carries() -> None:
    module = parse_module("""HloModule m
ENTRY main {
  p1.2 = f32[2]{0} parameter(0), metadata={op_type="xla__device_data" op_name="xla__device_data"}
  Arg_1.3 = f32[2]{0} parameter(1)
  params__layers___12___mlp____w2__.4 = f32[2]{0} parameter(2)
  state.5 = f32[2]{0} parameter(3), metadata={op_name="state.params['decoder']['layers_3']['kernel']"}
  x.6 = f32[2]{0} parameter(4)
  ROOT t = (f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}) tuple(p1.2, Arg_1.3, params__layers___12___mlp____w2__.4, state.5, x.6)
}
""")
    names = [parameter_name(p) for p in module.entry.instructions[:5]]
    assert names == [None, None, "params['layers'][12]['mlp']['w2']", "state.params['decoder']['layers_3']['kernel']",
                     "x"]
    assert layer_of(names[2]) == "params['layers'][12]"
    assert layer_of(names[3]) == "state.params['decoder']['layers_3']"
    assert layer_of("model.layers.5.mlp.down_proj.weight") == "model.layers.5"
    assert layer_of("params['decoder']['layers']['mlp']['wi_0']") is None  # scanned layers: no index


def test_torch_xla_parameters_carry_no_name_and_get_none() -> None:
    result = run(TORCH_XLA / "nxd_tied_remat.hlo")
    assert "xla__device_data" in (TORCH_XLA / "nxd_tied_remat.hlo").read_text()
    assert result.instructions and all(i.tensor is None for i in result.instructions)


def test_the_report_and_the_summary_group_the_gathers_by_weight(tmp_path: Path) -> None:
    done = run_input(str(JAX_DATA / "pytree_weights.hlo"), None, RunOptions(report_only=True))
    report = RunReport(str(JAX_DATA / "pytree_weights.hlo"), "-", "hlo", "hlo", RunOptions().passes, inputs=[done])
    gathers = json.loads(render_json(report))["modules"][0]["all_gathers"]
    embed = [g for g in gathers if g["tensor"] == "p['embed']"]
    assert sorted(g["fate"] for g in embed) == ["folded", "kept"] and all(g["layer"] is None for g in embed)
    assert {g["layer"] for g in gathers if g["tensor"] != "p['embed']"} == {"p['blocks'][0]", "p['blocks'][1]"}
    summary = render_summary(report)
    kept, removed = (next(g["name"] for g in embed if g["fate"] == f) for f in ("kept", "folded"))
    assert f"{kept} \u2190 {removed}  (p['embed'])" in summary
    assert f"      p['embed']: {kept} kept, {removed} folded" in summary.splitlines()


# --- the idioms that stop the walk ---------------------------------------------------------------


def test_torch_xla_s_collective_token_is_named_and_is_what_keeps_the_folds_away() -> None:
    with_token, without = run(TORCH_XLA / "nxd_tied_remat_token.hlo"), run(TORCH_XLA / "nxd_tied_remat.hlo")
    assert not with_token.folds and all(i.stop is not None and i.stop[0] == "add" for i in with_token.instructions)
    token = misses(with_token, "collective_token")
    # The same duplicates (the tied embedding, the checkpointed layer's re-gather) fold once the token is off.
    assert len(token) == len(without.folds) == 2
    for miss in token:
        assert len(miss.instructions) == 2 and "DISABLE_NUMERIC_CC_TOKEN=1" in miss.reason
        assert re.search(r"add\.\d+ = add\(\S+, broadcast\.\d+\) with broadcast\.\d+ the token", miss.reason)
    assert any("collective token" in note and "5 all-gathers" in note for note in with_token.notes)


def test_an_add_of_a_constant_is_not_a_token() -> None:
    result = NeuronAllGatherDuplicateRemover().run_with_result(parse_module("""HloModule m
ENTRY main {
  w = f32[2,4]{1,0} parameter(0)
  c = f32[] constant(1)
  b = f32[2,4]{1,0} broadcast(c), dimensions={}
  a1 = f32[2,4]{1,0} add(w, b)
  a2 = f32[2,4]{1,0} add(w, b)
  g1 = f32[8,4]{1,0} all-gather(a1), replica_groups={{0,1,2,3}}, dimensions={0}
  g2 = f32[8,4]{1,0} all-gather(a2), replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT t = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(g1, g2)
}
"""))
    assert not result.notes and not any(n.kind == "collective_token" for n in result.near_misses)


def test_pin_layout_gathers_are_all_reduces_of_a_zero_pad_and_are_named() -> None:
    result = run(TORCH_XLA / "pin_layout.hlo")
    assert not result.instructions  # not one all-gather in the module
    (miss,) = misses(result, "pin_layout")
    assert miss.instructions == ("all-reduce.12", "all-reduce.24")
    assert "pin_layout=True" in miss.reason and "pad.4: f32[4,16] \u2192 f32[32,16]" in miss.reason
    assert "constrain_layout=true" in miss.reason  # why XLA's CSE does not merge them either
    assert any(note.startswith("2 all-reduces are xm.all_gather(pin_layout=True)") for note in result.notes)


def test_fsdp_s_flattened_views_pair_each_forward_gather_with_its_backward_re_gather() -> None:
    result = run(TORCH_XLA / "fsdp_flat.hlo")
    gathers = [i for i in result.instructions if i.opcode == "all-gather"]
    assert len(gathers) == 8 and all(g.stop is not None and g.stop[0] == "reshape" for g in gathers)
    views = misses(result, "flattened_view")
    # Two layers of weight and bias: each gathered in the forward and again in the backward.
    assert len(views) == 4 and sorted(n for m in views for n in m.instructions) == sorted(g.name for g in gathers)
    assert all("follows no reshape" in m.reason for m in views)


def test_mixed_precision_casts_are_named_behind_fsdp_s_views_and_alone() -> None:
    fsdp = run(TORCH_XLA / "fsdp_bf16.hlo")
    assert any("mixed precision" in n and "f32[512] \u2192 bf16[512]" in n for n in fsdp.notes)
    assert any("view" in n for n in fsdp.notes)
    for path in (TORCH_XLA / "bf16_cast.hlo", JAX_DATA / "bf16_cast.hlo"):
        result = run(path)
        casts = misses(result, "mixed_precision")
        assert casts, path.name
        assert all("converts that keep shape and type" in m.reason for m in casts)


def test_a_tied_weight_gathered_transposed_is_named() -> None:
    result = run(TORCH_XLA / "spmd_fsdpv2.hlo")
    (miss,) = misses(result, "transposed_weight")
    assert "directly" in miss.reason and re.search(r"transpose\.\d+: f32\[4,16\] \u2192 f32\[16,4\]", miss.reason)


def test_folds_across_channel_ids_say_what_xla_s_cse_would_not_merge() -> None:
    result = run(JAX_DATA / "gspmd_remat_after_spmd.hlo")
    text = (JAX_DATA / "gspmd_remat_after_spmd.hlo").read_text()
    channel = dict(re.findall(r"%(all-gather(?:\.\d+)?) = .*? all-gather\(.*?channel_id=(\d+)", text))
    assert len(result.folds) == 2 and all(channel[f.kept] != channel[f.removed] for f in result.folds)
    (note,) = [n for n in result.notes if "channel_id" in n]
    assert note.startswith("2 folds joined all-gathers with different channel_id")
    assert "XLA's CSE keeps them apart" in note


def test_every_torch_xla_module_s_idiom_stops_are_counted_in_its_notes() -> None:
    counted = re.compile(r"(\d+) all-gathers? (?:read their|reads its) weight through ")
    for path in sorted(TORCH_XLA.glob("*.hlo")):
        result = run(path)
        stopped = [i for i in result.instructions if i.fate == "not_traced" and i.stop[0] != "broadcast"]
        total = sum(int(m.group(1)) for note in result.notes if (m := counted.match(note)))
        # FSDP's bf16 gathers meet two idioms each (a view, then a cast): one count per idiom.
        assert total == len(stopped) * (2 if path.name == "fsdp_bf16.hlo" else 1), path.name


def test_the_torch_xla_folds_leave_a_module_xla_reads(check_output) -> None:  # type: ignore[no-untyped-def]
    module = parse_module((TORCH_XLA / "nxd_tied_remat.hlo").read_text())
    result = NeuronAllGatherDuplicateRemover().run_with_result(module)
    # The tied embedding's second gather, and the checkpointed layer's backward re-gather
    # (through torch-xla's opt-barrier), fold onto their first gathers.
    assert len(result.folds) == 2 and not result.hazards
    check_output(module)


@pytest.mark.parametrize("path", sorted(TORCH_XLA.glob("*.hlo")) + [JAX_DATA / "gspmd_remat_after_spmd.hlo"],
                         ids=lambda p: p.name)
def test_the_report_of_every_idiom_validates(path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from hlo_dedup.report.json import load_schema

    done = run_input(str(path), None, RunOptions(report_only=True))
    data = json.loads(render_json(RunReport(str(path), "-", "hlo", "hlo", RunOptions().passes, inputs=[done])))
    jsonschema.validate(data, load_schema())
    (module,) = data["modules"]
    # Each module either folds or says, in a note, which idiom kept its gathers apart.
    assert module["notes"] or any(p["folds"] for p in module["passes"])
    assert all(set(g) >= {"tensor", "layer"} for g in module["all_gathers"])
