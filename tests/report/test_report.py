"""hlo_dedup.report: the JSON report against its schema and the stderr summary, for a single
input and for a batch of them (the same renderers over the same result objects)."""

from __future__ import annotations

import json

import pytest

from hlo_dedup.passes import FoldRecord, Hazard, InstructionFate, NearMiss, PassResult
from hlo_dedup.report import (
    BatchInfo,
    InputResult,
    ModuleRun,
    RunReport,
    human_bytes,
    load_schema,
    render_json,
    render_summary,
)

PIPELINE = ["neuron-preprocess-kernel-duplicate-remover", "neuron_all_gather_duplicate_remover"]


def sample_result(input: str = "in.hlo") -> InputResult:
    price = {"computation": "body", "kept": "ag.1", "removed": "ag.2", "live_range_extension": 7,
             "peak_bytes_before": 10000, "peak_bytes_after": 14096, "crosses_peak": True,
             "peak_instruction": "dot.3", "refused": False}
    fold = FoldRecord("neuron_all_gather_duplicate_remover", "body", "ag.1", "ag.2",
                      {"parameter": "p", "index_path": [0], "replica_groups": [[0, 1]]}, 4096, 2048,
                      hazardous=True, memory=price)
    fates = [InstructionFate("body", "ag.1", "all-gather", "kept", bytes_output=4096, op_name="jit(f)/ag",
                             source="model.py:12"),
             InstructionFate("body", "ag.2", "all-gather", "folded", "ag.1", bytes_output=4096),
             InstructionFate("body", "ag.9", "all-gather", "refused", reason="not folded onto ag.1: ...",
                             bytes_output=4096),
             InstructionFate("body", "ag.5", "all-gather", "not_traced", reason="the walk stopped at reshape r",
                             stop=("reshape", "r"), bytes_output=4096)]
    misses = [NearMiss("same_operand", "2 all-gathers of the same reshape r", ("body",), ("ag.5", "ag.6"))]
    kernel = FoldRecord("neuron-preprocess-kernel-duplicate-remover", "main", "k.1", "k.2",
                        {"backend_config": "cfg"}, 512, 0, "k.3")
    hazards = [Hazard("body", "ag.1", "ag.2", ("different collective modes",), refused=False),
               Hazard("body", "ag.1", "ag.9", ("different all_gather_dimension",), refused=True)]
    modules = [
        ModuleRun("m", input, 0, [
            PassResult("neuron-preprocess-kernel-duplicate-remover", True, [kernel], [], 0.001),
            PassResult("neuron_all_gather_duplicate_remover", True, [fold], hazards, 0.002, fates, misses),
        ], 0.003),
        ModuleRun("n", input, 1, [], 0.0),
    ]
    return InputResult(input, "-", "hlo", "hlo", modules, {"parse": 0.5, "passes": 0.003, "print": 0.25},
                       bytes_in=1000, bytes_out=900)


def sample_report() -> RunReport:
    return RunReport("in.hlo", "-", "hlo", "hlo", PIPELINE, inputs=[sample_result()])


def test_json_validates_and_totals() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = json.loads(render_json(sample_report()))
    jsonschema.Draft202012Validator.check_schema(load_schema())
    jsonschema.validate(data, load_schema())
    assert data["totals"] == {
        "modules": 2, "changed_modules": 1, "passes_run": 2, "folds": 2, "hazards": 2,
        "hazards_refused": 1, "bytes_output": 4608, "bytes_per_device": 2048,
        "all_gathers": 4, "folds_refused": 1, "peak_increase_bytes": 4096,
    }
    module = data["modules"][0]
    assert [g["fate"] for g in module["all_gathers"]] == ["kept", "folded", "refused", "not_traced"]
    assert module["all_gathers"][3]["stop"] == {"opcode": "reshape", "instruction": "r"}
    assert module["all_gathers"][0]["source"] == "model.py:12"
    assert module["memory"] == {"computations": [{"computation": "body", "peak_bytes_before": 10000,
                                                  "peak_bytes_after": 14096}], "peak_increase_bytes": 4096}
    assert module["passes"][1]["folds"][0]["memory"]["live_range_extension"] == 7
    assert module["near_misses"][0]["kind"] == "same_operand"
    assert data["timings"]["total"] == pytest.approx(0.753)
    kernel_fold = data["modules"][0]["passes"][0]["folds"][0]
    assert kernel_fold["replacement"] == "k.3" and kernel_fold["key"] == {"backend_config": "cfg"}
    assert "batch" not in data and "inputs" not in data


def test_schema_requires_documented_fields() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = json.loads(render_json(sample_report()))
    del data["modules"][0]["passes"][1]["hazards"][0]["refused"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, load_schema())
    data = json.loads(render_json(sample_report()))
    data["schema_version"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, load_schema())


def test_human_summary() -> None:
    text = render_summary(sample_report())
    assert "module m (in.hlo, #1):" in text
    assert "neuron-preprocess-kernel-duplicate-remover: changed, 1 fold, removed 512 B output" in text
    assert "main: k.1 \u2190 k.2 as k.3" in text
    assert "body: ag.1 \u2190 ag.2 [hazardous]" in text
    assert "removed 4.0 KiB output / 2.0 KiB per device" in text
    assert "hazard (folded anyway) body: ag.1 \u2190 ag.2: different collective modes" in text
    assert "hazard (refused) body: ag.1 \u2190 ag.9: different all_gather_dimension" in text
    assert "module n (in.hlo, #2):\n  no passes run" in text
    assert "total: 1 of 2 modules changed, 2 folds, 2 hazards (1 refused), removed 4.5 KiB output" in text
    assert text.endswith("time: parse 500.0 ms, passes 3.0 ms, print 250.0 ms\n")


def test_a_batch_report_aggregates_its_inputs() -> None:
    """A batch run's report is the single-file report over every module, plus batch and inputs."""
    jsonschema = pytest.importorskip("jsonschema")
    good = sample_result("a.hlo")
    failed = InputResult("b.hlo", "out/b.hlo", exit_status=1, error="b.hlo: error: pass dce failed",
                         modules=[ModuleRun("k", "b.hlo", 0)], bytes_in=10)
    missing = InputResult("*.nope", None, exit_status=2, error="*.nope: error: no file matches this pattern")
    report = RunReport("a.hlo b.hlo *.nope", "out", "hlo", "hlo", PIPELINE, inputs=[good, failed, missing],
                       batch=BatchInfo(("a.hlo", "b.hlo", "*.nope"), "out", 2, 1.5))
    data = json.loads(render_json(report))
    jsonschema.validate(data, load_schema())
    single = json.loads(render_json(RunReport("a.hlo", "-", "hlo", "hlo", PIPELINE, inputs=[good])))
    assert data["modules"] == single["modules"] + [
        {"name": "k", "input": "b.hlo", "index": 0, "changed": False, "seconds": 0.0, "passes": [],
         "notes": [], "all_gathers": [], "kernels": [], "near_misses": [],
         "memory": {"computations": [], "peak_increase_bytes": 0}}]
    assert data["totals"] == {**single["totals"], "modules": 3}
    assert data["batch"] == {"arguments": ["a.hlo", "b.hlo", "*.nope"], "output_dir": "out", "workers": 2,
                             "files": 3, "ok": 1, "failed": 2, "bytes_in": 1010, "bytes_out": 900,
                             "wall_seconds": 1.5, "skipped": []}
    entries = {i["input"]: i for i in data["inputs"]}
    assert entries["a.hlo"]["modules"] == single["modules"] and entries["a.hlo"]["status"] == "ok"
    assert (entries["b.hlo"]["status"], entries["b.hlo"]["output"]) == ("pass_failed", None)
    assert (entries["*.nope"]["status"], entries["*.nope"]["exit_status"]) == ("input_error", 2)

    lines = render_summary(report, ["r.json: error: Permission denied"]).splitlines()
    assert lines[0].startswith("a.hlo: 1 of 2 modules changed, 2 folds, 2 hazards (1 refused), removed 4.5 KiB output")
    assert lines[1:4] == [failed.error, missing.error, "r.json: error: Permission denied"]
    assert lines[4] == "files: 1 ok, 2 failed (of 3); read 1010 B, wrote 900 B"
    # The same total line as a single-file run's.
    assert lines[5] == "total: 1 of 3 modules changed, 2 folds, 2 hazards (1 refused), removed 4.5 KiB output / 2.0 KiB per device"
    assert lines[6].startswith("time: 1.50 s wall, 2 workers, 2.0 files/s (summed over files: parse 500.0 ms")


def test_a_dump_reads_by_module_then_stage() -> None:
    """Files of an XLA dump are grouped by module, their stages in pipeline order (whatever
    order the files came in); other files keep their own line; skipped files are counted by
    kind, never as failures; --report-only says nothing was written."""
    jsonschema = pytest.importorskip("jsonschema")
    from hlo_dedup.io.discovery import Skipped

    def dumped(name: str, module: str, stage: str, folds: int, status: int = 0) -> InputResult:
        result = sample_result(f"dump/{name}")
        passes = [PassResult("neuron_all_gather_duplicate_remover", bool(folds),
                             [FoldRecord("neuron_all_gather_duplicate_remover", "main", f"a.{i}", f"b.{i}", {}, 64, 56)
                              for i in range(folds)], [], 0.0)]
        result.modules = [ModuleRun(module.split(" ")[0], result.input, 0, passes)]
        result.module, result.stage, result.output, result.bytes_out = module, stage, None, None
        if status:
            result.exit_status, result.error, result.modules = status, f"dump/{name}: error: oops", []
        return result

    inputs = [
        dumped("module_0012.jit_step.cpu_after_optimizations.txt", "jit_step", "cpu_after_optimizations", 0),
        dumped("module_0012.jit_step.0001.p.after_spmd-partitioning.before_x.txt", "jit_step",
               "0001.p.after_spmd-partitioning.before_x", 1),
        dumped("module_0012.jit_step.before_optimizations.txt", "jit_step", "before_optimizations", 6),
        sample_result("extra.hlo"),
        dumped("module_0004.jit_f.before_optimizations.txt", "jit_f (module_0004)", "before_optimizations", 0, 2),
    ]
    skipped = (Skipped("dump/a.ll", "LLVM IR", "LLVM IR XLA generated (not HLO, by its name)"),
               Skipped("dump/b.ll", "LLVM IR", "LLVM IR XLA generated (not HLO, by its name)"),
               Skipped("dump/module_0012.jit_step.before_optimizations.hlo.pb", "duplicate", "the same module ..."))
    report = RunReport("dump", None, "hlo", "hlo", PIPELINE, inputs=inputs, report_only=True,
                       batch=BatchInfo(("dump",), None, 2, 1.0, skipped))
    lines = render_summary(report).splitlines()
    assert lines[:6] == [
        "jit_step: before_optimizations 6 folds; 0001.p.after_spmd-partitioning.before_x 1 fold; "
        "cpu_after_optimizations 0 folds",
        lines[1],  # extra.hlo: its own line, as before
        "jit_f (module_0004): before_optimizations failed",
        "skipped 3 files: 2 LLVM IR, 1 duplicate (each file and why: --report FILE, or --v=1 on stderr)",
        "dump/module_0004.jit_f.before_optimizations.txt: error: oops",
        "files: 4 ok, 1 failed (of 5), 3 skipped; read 4.9 KiB, wrote nothing (--report-only)",
    ]
    assert lines[1].startswith("extra.hlo: 1 of 2 modules changed, 2 folds")
    # Totals per stage, each program once there, then the files outside the dump layout:
    # never 6 + 1 folds of one program summed over the stages XLA dumped it at.
    totals = [line for line in lines if line.startswith("total")]
    assert [t.split(",")[:2] for t in totals] == [
        ["total at before_optimizations: 1 of 1 program changed", " 6 folds"],
        ["total at 0001.p.after_spmd-partitioning.before_x: 1 of 1 program changed", " 1 fold"],
        ["total at cpu_after_optimizations: 0 of 1 program changed", " 0 folds"],
        ["total of the other files: 1 of 2 modules changed", " 2 folds"],
    ]
    data = json.loads(render_json(report))
    assert [(t["stage"], t["programs"], t["folds"]) for t in data["batch"]["totals_by_stage"]] == [
        ("before_optimizations", 1, 6), ("0001.p.after_spmd-partitioning.before_x", 1, 1),
        ("cpu_after_optimizations", 1, 0)]
    jsonschema.validate(data, load_schema())
    assert data["report_only"] is True and data["output"] is None and data["batch"]["output_dir"] is None
    assert data["batch"]["skipped"][0] == {"path": "dump/a.ll", "kind": "LLVM IR",
                                           "reason": "LLVM IR XLA generated (not HLO, by its name)"}
    assert [(i["module"], i["stage"]) for i in data["inputs"]][3:] == [(None, None), ("jit_f (module_0004)",
                                                                       "before_optimizations")]


def test_a_recompiled_program_counts_once_per_stage() -> None:
    from hlo_dedup.report.model import program_of, stage_totals

    assert program_of("jit_f (module_0008)") == "jit_f" and program_of("jit_f") == "jit_f"
    assert program_of("odd (name)") == "odd (name)"
    first, again = sample_result("a.txt"), sample_result("b.txt")
    first.module, first.stage = "jit_f", "before_optimizations"
    again.module, again.stage = "jit_f (module_0008)", "before_optimizations"
    [t] = stage_totals([first, again])
    assert (t["programs"], t["recompiles_not_counted"], t["modules"]) == (1, 1, len(first.modules))


def test_human_bytes() -> None:
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(3 * 1024**3) == "3.0 GiB"
    assert human_bytes(5 * 1024**4) == "5.0 TiB"
