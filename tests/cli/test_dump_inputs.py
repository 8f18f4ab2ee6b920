"""XLA dump directories and Neuron compile caches as batch inputs, on trees XLA itself wrote.

The XLA dump (the `xla_dump` fixture) is what `XLA_FLAGS=--xla_dump_to=DIR` leaves after a
real sharded training loop (tests/data/generate.py --xla-dump: FSDP with remat and a tied
weight, text and proto, the dumps around the SPMD partitioner, an evaluation with compressed
protos and an elided constant). The Neuron tree has the cache, work-directory and NxD-Inference layouts, with
modules JAX lowered and XLA serialized. XLA is the oracle: every file skipped as not HLO is
one XLA cannot load, every file processed is one it can, and the folds of a batch run are
those of single-file runs over the distinct modules.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from hlo_dedup.cli import main
from hlo_dedup.io import proto
from hlo_dedup.report import load_schema

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "jax"
STAGE_FILE = re.compile(r"module_(\d{4})\.[\w.]+?\.((?:\d{4}\.[\w\-.]+)|before_optimizations|\w*after_optimizations)"
                        r"\.(?:txt|hlo\.pb(?:\.gz)?)")


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-m", "hlo_dedup", *map(str, args)], input=b"", capture_output=True,
                          cwd=cwd, env=env, timeout=600)


def err(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.decode()


def files_under(root: Path, cwd: Path) -> set[str]:
    return {os.path.relpath(p, cwd) for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def single_folds(path: Path, tmp: Path) -> int:
    """The folds of a single-file run (in this process) on `path`."""
    report = tmp / "single.json"
    status = main([str(path), "--report-only", "--report", str(report)], stdin=io.BytesIO(),
                  stdout=io.StringIO(), stderr=io.StringIO())
    assert status == 0, path
    return json.loads(report.read_text())["totals"]["folds"]


def xla_loads(path: Path, xc) -> bool:  # noqa: ANN001
    """Whether XLA reads the file as HLO text or, as hlo-opt's loader does, as an HloSnapshot,
    HloProto or HloModuleProto."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        xc.hlo.hlo_module_from_text(data.decode("utf-8", "replace"))
        return True
    except Exception:  # noqa: BLE001 - any rejection
        pass
    try:
        module = bytes(proto.locate_module(data)[1])
    except proto.ProtoError:
        module = data
    try:
        xc.hlo.HloModule.from_serialized_hlo_module_proto(module)
        return True
    except Exception:  # noqa: BLE001
        return False


def _proto(xc, name: str) -> bytes:  # noqa: ANN001
    return xc.hlo.hlo_module_from_text((DATA / f"{name}.hlo").read_text()).as_serialized_hlo_module_proto()


@pytest.fixture(scope="session")
def neuron_tree(xla_client, tmp_path_factory) -> Path:  # noqa: ANN001
    """A Neuron compile cache, a compile work directory and NxD-Inference artifacts, laid out as
    neuronx-cc and NxD write them, holding HloModuleProtos XLA serialized from JAX modules."""
    root = tmp_path_factory.mktemp("neuron")
    cache = root / "cache" / "neuronxcc-2.20.9961.0+0acef03a"
    neff = b"NEFF" + bytes(range(256)) * 4  # what only the name tells: a compiled executable
    wrapper = xla_client.hlo.hlo_module_from_text(
        "HloModule SyncTensorsGraph.7\n\nENTRY main {\n  p0 = f32[16,16]{1,0} parameter(0)\n"
        "  ROOT neff = f32[16,16]{1,0} custom-call(p0), custom_call_target=\"AwsNeuronNeff\", "
        "backend_config=\"NEFF-bytes-of-the-compiled-graph\", frontend_attributes={valid_inputs=\"1\"}\n}\n"
    ).as_serialized_hlo_module_proto()
    entries = {
        "MODULE_56f0d314fda2b6e1e336+617f6939": {"model.hlo_module.pb": _proto(xla_client, "fsdp_remat_grad"),
                                                 "wrapped_neff.hlo": wrapper},
        "MODULE_ae92d68443828ba4e463+ad9e832d": {"model.hlo_module.pb.gz": gzip.compress(_proto(xla_client, "pytree_weights")),
                                                 "wrapped_neff.hlo": _proto(xla_client, "while_gather")},
        "MODULE_1c2d3e4f5a6b7c8d9e0f+0badcafe": {"model.hlo_module.pb": _proto(xla_client, "bf16_cast"),
                                                 "model.hlo_module.pb.gz": gzip.compress(_proto(xla_client, "bf16_cast"))},
    }
    for entry, files in entries.items():
        (cache / entry).mkdir(parents=True)
        files = {**files, "model.neff": neff, "model.done": b"",
                 "compile_flags.json": b'["--target=trn1", "--model-type=transformer", "-O1"]'}
        for name, data in files.items():
            (cache / entry / name).write_bytes(data)
    work = root / "workdir" / "neuroncc_compile_workdir" / "5f0a7c1e-2b3d-4e5f-8a9b-0c1d2e3f4a5b"
    work.mkdir(parents=True)
    (work / "model.MODULE_7d1e0c3b+4f2a.hlo_module.pb").write_bytes(_proto(xla_client, "scan_layers"))
    (work / "model.MODULE_7d1e0c3b+4f2a.neff").write_bytes(neff)
    (work / "log-neuron-cc.txt").write_text("INFO: Compilation Successfully Completed for model.MODULE_7d1e0c3b+4f2a\n")
    nxd = root / "nxd" / "context_encoding_model" / "_tp0_bk0"
    (nxd / "model").mkdir(parents=True)
    (nxd / "model" / "graph.hlo").write_bytes(_proto(xla_client, "mesh2d_nested"))
    (nxd / "model" / "graph.neff").write_bytes(neff)
    (nxd / "model" / "metaneff.pb").write_bytes(b"\x0a\x05input\x12\x06output")
    (nxd / "command.txt").write_text("neuronx-cc compile --framework=XLA graph.hlo --output graph.neff --target=trn1\n")
    return root


# ---------------------------------------------------------------------------------------------
# An XLA dump


def test_a_real_xla_dump_runs_clean(xla_dump: Path, tmp_path: Path, xla_client) -> None:  # noqa: ANN001
    jsonschema = pytest.importorskip("jsonschema")
    cwd = xla_dump.parent
    out, report = tmp_path / "out", tmp_path / "r.json"
    proc = run("dump", "--output-dir", out, "--report", report, "-j", "2", cwd=cwd)
    assert proc.returncode == 0, err(proc)
    assert "error" not in err(proc) and "Traceback" not in err(proc), err(proc)  # a flake says what went wrong
    data = json.loads(report.read_text())
    jsonschema.validate(data, load_schema())
    assert data["batch"]["failed"] == 0 and all(i["status"] == "ok" for i in data["inputs"]), err(proc)

    # Every file of the tree is processed or skipped, never both, and skipped with its reason.
    processed = [i["input"] for i in data["inputs"]]
    skipped = {s["path"]: s for s in data["batch"]["skipped"]}
    assert set(processed).isdisjoint(skipped) and set(processed) | set(skipped) == files_under(xla_dump, cwd)
    assert all(s["reason"] and s["kind"] for s in skipped.values())
    kinds = Counter(s["kind"] for s in skipped.values())
    assert kinds["LLVM IR"] and kinds["object code"] and kinds["XLA buffer assignment"] and kinds["MLIR"]
    assert set(kinds) <= {"LLVM IR", "object code", "XLA buffer assignment", "XLA live ranges", "XLA memory-usage report",
                          "XLA DebugOptions", "MLIR", "PJRT compile options", "PJRT topology", "duplicate"}
    # XLA agrees: it cannot load a single file skipped as not HLO, and loads every file processed.
    for path, s in skipped.items():
        assert (s["kind"] == "duplicate") == xla_loads(cwd / path, xla_client), path
    assert all(xla_loads(cwd / p, xla_client) for p in processed)

    # Each (module, stage) once: every one the tree holds, in whichever formats, is processed once.
    in_tree = {STAGE_FILE.fullmatch(Path(p).name).groups() for p in files_under(xla_dump, cwd)
               if STAGE_FILE.fullmatch(Path(p).name)}
    done = Counter(STAGE_FILE.fullmatch(Path(p).name).groups() for p in processed)
    assert set(done) == in_tree and set(done.values()) == {1}
    assert len(in_tree) == 20  # 8 compilations, 2 of them with 2 per-pass dumps

    # A duplicate names the copy processed, which holds the same module: the same folds.
    folds = {p: single_folds(cwd / p, tmp_path) for p in processed}
    for path, s in skipped.items():
        if s["kind"] == "duplicate":
            kept = re.search(r"as (\S+), which is processed", s["reason"]).group(1)
            assert kept in folds and single_folds(cwd / path, tmp_path) == folds[kept], path
    # The text copy is processed, unless it elides constants: then the (compressed) proto.
    evaluate = [p for p in processed if ".jit_evaluate." in p]
    assert evaluate and all(p.endswith(".hlo.pb.gz") for p in evaluate)
    assert all(p.endswith(".txt") for p in processed if ".jit_evaluate." not in p)
    assert all("{...}" in (cwd / p.replace(".hlo.pb.gz", ".txt")).read_text() for p in evaluate)

    # Fold totals are the sum over the distinct modules, and there are folds to find.
    assert data["totals"]["folds"] == sum(folds.values()) > 0
    assert data["totals"]["modules"] == len(processed)

    # The summary reads like the dump: one line per compiled module, its stages in pipeline order,
    # the counts those of single-file runs; XLA's own CSE left nothing to fold after optimizations.
    lines = err(proc).splitlines()
    train = next(line for line in lines if line.startswith("jit_train_step: "))
    stages = dict(re.findall(r"(\S+) (\d+) folds?", train.split(": ", 1)[1]))
    assert list(stages)[0] == "before_optimizations" and list(stages)[-1] == "cpu_after_optimizations"
    by_stage = {STAGE_FILE.fullmatch(Path(p).name).group(2): n for p, n in folds.items() if ".jit_train_step." in p}
    assert {k: int(v) for k, v in stages.items()} == by_stage
    assert by_stage["before_optimizations"] > 0 and by_stage["cpu_after_optimizations"] == 0
    assert f"skipped {len(skipped)} files: " in err(proc)
    assert f"files: {len(processed)} ok, 0 failed (of {len(processed)}), {len(skipped)} skipped" in err(proc)

    # The output tree mirrors the dump, each output in its input's format.
    assert files_under(out, out) == {os.path.relpath(p, "dump") for p in processed}
    for p in processed:
        written = (out / os.path.relpath(p, "dump")).read_bytes()
        if p.endswith(".gz"):
            xla_client.hlo.HloModule.from_serialized_hlo_module_proto(gzip.decompress(written))
        else:
            xla_client.hlo.hlo_module_from_text(written.decode())


def test_content_sniffing_on_what_xla_wrote(xla_dump: Path) -> None:
    """Judged by content alone (names aside), XLA's protos are HLO, named as in the file name,
    and its other binary and text artifacts are not."""
    from hlo_dedup.io.sniff import head, sniff

    for path in sorted(p for p in xla_dump.rglob("*") if p.is_file()):
        got = sniff(head(str(path)))
        match = STAGE_FILE.fullmatch(path.name)
        if match is not None:
            assert got.is_hlo and path.name.split(".")[1] == got.module, path
            assert got.format == ("hlo" if path.name.endswith(".txt") else "pb"), path
        else:
            assert not got.is_hlo, path


def test_stage_and_module_select_what_runs(xla_dump: Path, tmp_path: Path) -> None:
    cwd = xla_dump.parent
    report = tmp_path / "r.json"
    proc = run("dump", "--report-only", "--stage", "^before_optimizations$", "--report", report, cwd=cwd)
    assert proc.returncode == 0, err(proc)
    data = json.loads(report.read_text())
    ids = {m.group(1) for p in files_under(xla_dump, cwd) if (m := re.search(r"module_(\d{4})\.", p))}
    assert sorted(i["stage"] for i in data["inputs"]) == ["before_optimizations"] * len(ids)
    not_selected = [s for s in data["batch"]["skipped"] if s["kind"] == "stage not selected"]
    # The other 12 stages, each in two copies (text and proto): selection comes before twins.
    assert len(not_selected) == 2 * (20 - len(ids)) and all("does not match --stage '^before_optimizations$'" in s["reason"]
                                           for s in not_selected)

    proc = run("dump", "--report-only", "--module", "train", "--report", report, cwd=cwd)
    assert proc.returncode == 0, err(proc)
    inputs = json.loads(report.read_text())["inputs"]
    assert {i["module"] for i in inputs} == {"jit_train_step"} and len(inputs) == 4
    assert [line.split(":")[0] for line in err(proc).splitlines()][0] == "jit_train_step"

    both = run("dump", "--report-only", "--module", "evaluate", "--stage", "spmd", "--report", report, cwd=cwd)
    assert both.returncode == 0, err(both)
    assert len(json.loads(report.read_text())["inputs"]) == 2

    for args, message in [
        (("--stage", "after_nothing"), "hlo-dedup: error: --stage 'after_nothing' selects none of the HLO files "
                                       "found (stages: 0000.spmd-partitioner"),
        (("--module", "^nope$"), "hlo-dedup: error: --module '^nope$' selects none of the HLO files found (modules: "),
        (("--stage", "("), "hlo-dedup: error: --stage '(': bad regular expression: missing ), unterminated subpattern"),
    ]:
        bad = run("dump", "--report-only", *args, cwd=cwd)
        assert bad.returncode == 2 and len(err(bad).splitlines()) == 1 and err(bad).startswith(message), err(bad)


def test_report_only_writes_the_report_and_nothing_else(xla_dump: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    shutil.copytree(xla_dump, cwd / "dump", symlinks=True)
    before = files_under(cwd, cwd)
    proc = run("dump", "--report-only", "--report", "r.json", "--dot", "folds.dot", cwd=cwd)
    assert proc.returncode == 0, err(proc)
    assert proc.stdout == b""
    assert files_under(cwd, cwd) == before | {"r.json", "folds.dot"}
    data = json.loads((cwd / "r.json").read_text())
    assert data["report_only"] is True and data["output"] is None and data["batch"]["output_dir"] is None
    assert all(i["output"] is None and i["bytes_out"] is None for i in data["inputs"])
    assert "wrote nothing (--report-only)" in err(proc)
    assert "cluster_" in (cwd / "folds.dot").read_text()  # the picture of the folds is drawn
    full = run("dump", "--output-dir", tmp_path / "out", "--report", tmp_path / "full.json", cwd=cwd)
    assert full.returncode == 0, err(full)
    assert json.loads((tmp_path / "full.json").read_text())["totals"] == data["totals"]

    alone = run("dump", cwd=cwd)  # a directory says batch mode, whose outputs need a place
    assert alone.returncode == 2 and err(alone) == ("hlo-dedup: error: several inputs, a directory or a pattern need "
                                                    "--output-dir DIR for the outputs (batch mode), or --report-only\n")
    for args, message in [(("-o", "x.hlo"), "drop -o"), (("--output-dir", "o"), "drop --output-dir"),
                          ((), None)]:
        proc = run("dump/module_0012.jit_train_step.before_optimizations.txt", "--report-only", *args, cwd=cwd)
        if message is None:  # one file: a single-file run without an output
            assert proc.returncode == 0 and proc.stdout == b"" and "neuron_all_gather_duplicate_remover: changed" in err(proc)
        else:
            assert proc.returncode == 2 and message in err(proc), err(proc)
    assert files_under(cwd, cwd) == before | {"r.json", "folds.dot"}


def test_quoted_globs_with_a_link_loop(xla_dump: Path, tmp_path: Path) -> None:
    cwd = tmp_path
    shutil.copytree(xla_dump, cwd / "dump", symlinks=True)
    os.symlink("..", cwd / "dump" / "module_0012.jit_train_step" / "loop")  # dump/.../loop -> dump

    def inputs(*args: str) -> list[str]:
        proc = run(*args, "--report-only", "--report", "r.json", "-j", "1", cwd=cwd)
        assert proc.returncode == 0, (args, err(proc))
        found = [os.path.normpath(i["input"]) for i in json.loads((cwd / "r.json").read_text())["inputs"]]
        assert len(found) == len(set(found)) and not any("loop" in i for i in found), args
        return sorted(found)

    whole = inputs("dump")
    assert len(whole) == 20
    # Quoted, so the tool expands them: ** at the end, and a pattern whose matches include the
    # directory holding the loop; each finds the same modules, once, and ends.
    assert inputs("dump/**") == whole
    assert inputs("./dump/module_*") == whole
    # Only the .txt files: each module and stage once, the evaluation's from its text (no proto twin left).
    txt = inputs("dump/**/*.txt")
    assert len(txt) == len(whole) and all(i.endswith(".txt") for i in txt)


# ---------------------------------------------------------------------------------------------
# Neuron layouts


def test_a_neuron_cache_work_dir_and_nxd_artifacts(neuron_tree: Path, tmp_path: Path, xla_client) -> None:  # noqa: ANN001
    out, report = tmp_path / "out", tmp_path / "r.json"
    proc = run("cache", "workdir", "nxd", "--output-dir", out, "--report", report, "-j", "2", cwd=neuron_tree)
    assert proc.returncode == 0, err(proc)
    data = json.loads(report.read_text())
    processed = sorted(i["input"] for i in data["inputs"])
    skipped = {s["path"]: s["kind"] for s in data["batch"]["skipped"]}
    entry = "cache/neuronxcc-2.20.9961.0+0acef03a/MODULE_"
    assert processed == sorted([
        f"{entry}1c2d3e4f5a6b7c8d9e0f+0badcafe/model.hlo_module.pb",
        f"{entry}56f0d314fda2b6e1e336+617f6939/model.hlo_module.pb",
        f"{entry}ae92d68443828ba4e463+ad9e832d/model.hlo_module.pb.gz",
        f"{entry}ae92d68443828ba4e463+ad9e832d/wrapped_neff.hlo",  # a real module: its content decides
        "nxd/context_encoding_model/_tp0_bk0/model/graph.hlo",
        "workdir/neuroncc_compile_workdir/5f0a7c1e-2b3d-4e5f-8a9b-0c1d2e3f4a5b/model.MODULE_7d1e0c3b+4f2a.hlo_module.pb",
    ])
    assert set(processed) | set(skipped) == files_under(neuron_tree, neuron_tree)
    assert skipped[f"{entry}56f0d314fda2b6e1e336+617f6939/wrapped_neff.hlo"] == "NEFF wrapped as HLO"
    assert skipped[f"{entry}1c2d3e4f5a6b7c8d9e0f+0badcafe/model.hlo_module.pb.gz"] == "duplicate"
    assert Counter(skipped.values()) == {"NEFF": 5, "neuronx-cc flags": 3, "Neuron cache marker": 3,
                                         "NEFF wrapped as HLO": 1, "duplicate": 1, "not HLO": 2, "NxD MetaNeff": 1}
    for path, kind in skipped.items():
        if kind not in ("duplicate", "NEFF wrapped as HLO"):
            assert not xla_loads(neuron_tree / path, xla_client), path

    folds = {p: single_folds(neuron_tree / p, tmp_path) for p in processed}
    assert data["totals"]["folds"] == sum(folds.values()) > 0
    # Outputs mirror the tree and keep their input's format: binary protos (graph.hlo too), gzip kept.
    below = {p: p.split("/", 1)[1] for p in processed}  # each path below its directory argument
    for p, rel in below.items():
        written = (out / rel).read_bytes()
        module = gzip.decompress(written) if p.endswith(".gz") else written
        xla_client.hlo.HloModule.from_serialized_hlo_module_proto(module)
    assert files_under(out, out) == set(below.values())

    # --module also matches a cache entry's key.
    proc = run("cache", "--report-only", "--module", "MODULE_56f0", "--report", report, cwd=neuron_tree)
    assert proc.returncode == 0, err(proc)
    assert [i["input"] for i in json.loads(report.read_text())["inputs"]] == [
        f"{entry}56f0d314fda2b6e1e336+617f6939/model.hlo_module.pb"]
