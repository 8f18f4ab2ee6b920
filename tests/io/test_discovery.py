"""hlo_dedup.io.discovery / layouts / sniff: what a batch run finds, skips, and processes once.

These tests need no XLA: their trees hold real JAX-lowered HLO text (tests/data/jax) under the
names XLA, Neuron and NxD give their files. The same checks on trees XLA itself wrote (and on
protos) are in tests/cli/test_dump_inputs.py.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_dedup.io.discovery import discover, expand_glob, walk
from hlo_dedup.io.layouts import artifact, read_name, stage_order
from hlo_dedup.io.sniff import sniff

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FSDP = DATA / "fsdp_remat_grad.hlo"
COND = DATA / "cond.hlo"


# ---------------------------------------------------------------------------------------------
# Names


@pytest.mark.parametrize("name, module, stage, unit", [
    ("module_0012.jit_train_step.before_optimizations.txt", "jit_train_step", "before_optimizations", "module_0012"),
    ("module_0012.jit_train_step.cpu_after_optimizations.hlo.pb", "jit_train_step", "cpu_after_optimizations",
     "module_0012"),
    ("module_0003.jit_f.cpu_after_optimizations.hlo.pb.gz", "jit_f", "cpu_after_optimizations", "module_0003"),
    # From XLA's docs: a timestamp prefix, and a module name with a dot in it.
    ("1624325116260738.module_0065.pmap__unnamed_wrapped_function_.186875.before_optimizations.txt",
     "pmap__unnamed_wrapped_function_.186875", "before_optimizations", "1624325116260738.module_0065"),
    ("module_0001.SyncTensorsGraph.123.sm_8.0_gpu_after_optimizations.txt", "SyncTensorsGraph.123",
     "sm_8.0_gpu_after_optimizations", "module_0001"),
    ("module_0012.jit_train_step.0001.spmd-partitioner.after_spmd-partitioning.before_control-dep-rewriter.txt",
     "jit_train_step", "0001.spmd-partitioner.after_spmd-partitioning.before_control-dep-rewriter", "module_0012"),
    ("module_0007.jit_g.0003.some-pass.step_two.txt", "jit_g", "0003.some-pass.step_two", "module_0007"),
    ("1700000000.module_0002.jit_f.execution_0000.hlo_snapshot.pb", "jit_f", "execution_0000",
     "1700000000.module_0002"),
    # The module name is dropped when the file name would pass 255 characters.
    ("module_0004.after_optimizations.txt", None, "after_optimizations", "module_0004"),
])
def test_xla_dump_names(name: str, module: str | None, stage: str, unit: str) -> None:
    got = read_name(name)
    assert (got.layout, got.hlo, got.module, got.stage, got.unit) == ("xla-dump", True, module, stage, unit)
    # The text and proto copies of one module and stage are twins; the compressed copy too.
    assert got.twin == name.split(".txt")[0].split(".hlo")[0]


def test_neuron_and_nxd_names() -> None:
    entry = read_name("model.hlo_module.pb.gz", "MODULE_56f0d314fda2b6e1e336+617f6939")
    assert (entry.layout, entry.hlo, entry.unit, entry.twin) == (
        "neuron-cache", True, "MODULE_56f0d314fda2b6e1e336+617f6939", "model.hlo_module.pb")
    work = read_name("model.MODULE_1a2b+3c4d.hlo_module.pb")
    assert (work.layout, work.hlo, work.unit) == ("neuron-workdir", True, "MODULE_1a2b+3c4d")
    assert read_name("wrapped_neff.hlo", "MODULE_1a2b+3c4d").hlo is None  # the content decides
    assert read_name("graph.hlo", "model").hlo is True  # a proto despite the name: formats detects that
    assert read_name("notes.txt").hlo is None and read_name("model.pb").hlo is None


@pytest.mark.parametrize("name, kind", [
    ("module_0012.jit_train_step.cpu_after_optimizations-buffer-assignment.txt", "XLA buffer assignment"),
    ("module_0012.jit_train_step.cpu_after_optimizations-buffer-assignment-values.txt", "XLA buffer assignment"),
    ("module_0012.jit_train_step.cpu_after_optimizations-live-range.txt", "XLA live ranges"),
    ("module_0012.jit_train_step.cpu_after_optimizations-memory-usage-report.pb.gz", "XLA memory-usage report"),
    ("module_0012.jit_train_step.multiply_add_fusion.1_kernel_module.ir-no-opt.ll", "LLVM IR"),
    ("module_0012.jit_train_step.obj-file.multiply_add_fusion.1_kernel_module.o", "object code"),
    ("module_0012.jit_train_step.debug_options", "XLA DebugOptions"),
    ("module_0012.metadata.textproto", "XLA module metadata"),
    ("module.mlir", "MLIR"), ("compile_options.pb", "PJRT compile options"), ("topology.pb", "PJRT topology"),
    ("model.neff", "NEFF"), ("compile_flags.json", "neuronx-cc flags"), ("model.done", "Neuron cache marker"),
    ("metaneff.pb", "NxD MetaNeff"), ("module_0012.jit_train_step.before_optimizations.dot", "graph rendering"),
])
def test_artifacts_by_name(name: str, kind: str) -> None:
    found = artifact(name)
    assert found is not None and found.kind == kind
    assert artifact(name.upper() if name.endswith(".o") else name) is not None


def test_hlo_names_are_not_artifacts() -> None:
    for name in ("module_0012.jit_train_step.before_optimizations.txt", "model.hlo_module.pb", "graph.hlo",
                 "module_0012.jit_f.cpu_after_optimizations.hlo.pb.gz"):
        assert artifact(name) is None


def test_stages_sort_in_pipeline_order() -> None:
    stages = ["cpu_after_optimizations", "0001.spmd-partitioner.after_a.before_b", "before_optimizations",
              "execution_0000", "0000.spmd-partitioner.after_c.before_a"]
    assert sorted(stages, key=stage_order) == [
        "before_optimizations", "0000.spmd-partitioner.after_c.before_a", "0001.spmd-partitioner.after_a.before_b",
        "cpu_after_optimizations", "execution_0000"]


# ---------------------------------------------------------------------------------------------
# Content


def test_sniff_text() -> None:
    assert (sniff(FSDP.read_bytes()).format, sniff(FSDP.read_bytes()).module) == ("hlo", "jit_loss")
    commented = b"// dumped by a tool\n/* more */\n" + COND.read_bytes()
    assert sniff(commented).format == "hlo" and sniff(commented).module == "jit_f"
    assert sniff(b'name: "jit_f"\nentry_computation_name: "main"\ncomputations {\n  name: "main"\n').format == "pbtxt"
    assert sniff(b'# HloProto\nhlo_module {\n  name: "jit_g"\n').module == "jit_g"
    for data, what in [(b"", "empty"), (b"BufferAssignment:\nallocation 0: size 256\n", "text that is not HLO"),
                       (b"\x7fELF\x02\x01\x01\x00" + bytes(64), "binary data that is not an HLO proto"),
                       (b"HloModul jit_f\n", "text that is not HLO")]:
        got = sniff(data)
        assert not got.is_hlo and what in got.what, (data, got)


def test_sniff_binary_containers(xla_client) -> None:  # type: ignore[no-untyped-def]
    """The three containers hlo-opt's loader accepts, as XLA serializes them."""
    from google.protobuf import wrappers_pb2

    def field1(payload: bytes) -> bytes:  # HloProto { hlo_module = 1 }, HloSnapshot { hlo = 1 }
        return wrappers_pb2.BytesValue(value=payload).SerializeToString()

    module = xla_client.hlo.hlo_module_from_text(FSDP.read_text()).as_serialized_hlo_module_proto()
    for data in (module, field1(module), field1(field1(module))):
        got = sniff(data)
        assert (got.format, got.module) == ("pb", "jit_loss")
        assert sniff(data[:200]).module == "jit_loss"  # the head is enough: name and first computation lead
    assert not sniff(module[1:]).is_hlo and not sniff(field1(b"jit_loss")).is_hlo


# ---------------------------------------------------------------------------------------------
# Trees


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_a_text_dump_tree(tmp_path: Path) -> None:
    """XLA's names around real JAX text: artifacts skipped by name, other files by content,
    the gzip copy of a stage is a twin, nothing is processed twice."""
    text = FSDP.read_bytes()
    dump = _tree(tmp_path / "dump", {
        "module_0012.jit_loss.before_optimizations.txt": text,
        "module_0012.jit_loss.before_optimizations.txt.gz": gzip.compress(text),
        "module_0012.jit_loss.cpu_after_optimizations-buffer-assignment.txt": b"BufferAssignment:\n",
        "module_0012.jit_loss.debug_options": b"xla_dump_to: \"dump\"\n",
        "module_0012.jit_loss.ir-no-opt.ll": b"; ModuleID = 'x'\n",
        "module_0012.jit_loss/module.mlir": b"module @jit_loss {}\n",
        "notes.txt": b"what I ran\n",
        "sub/cond.hlo": COND.read_bytes(),
        ".hidden/module_0001.jit_f.before_optimizations.txt": COND.read_bytes(),
    })
    found = discover([str(dump)])
    assert [(f.rel, f.module, f.stage, f.group) for f in found.files] == [
        ("module_0012.jit_loss.before_optimizations.txt", "jit_loss", "before_optimizations", "jit_loss"),
        ("sub/cond.hlo", "jit_f", None, None)]
    kinds = {Path(s.path).name: s.kind for s in found.skipped}
    assert kinds == {
        "module_0012.jit_loss.before_optimizations.txt.gz": "duplicate",
        "module_0012.jit_loss.cpu_after_optimizations-buffer-assignment.txt": "XLA buffer assignment",
        "module_0012.jit_loss.debug_options": "XLA DebugOptions",
        "module_0012.jit_loss.ir-no-opt.ll": "LLVM IR",
        "module.mlir": "MLIR",
        "notes.txt": "not HLO",
    }
    reasons = {Path(s.path).name: s.reason for s in found.skipped}
    assert reasons["module_0012.jit_loss.before_optimizations.txt.gz"] == (
        f"the same module and stage as {dump}/module_0012.jit_loss.before_optimizations.txt, which is processed "
        "(uncompressed: read without decompressing)")
    assert reasons["notes.txt"] == "text that is not HLO (no HloModule header) (by its content)"
    assert found.problems == [] and found.stages == {"before_optimizations"}


def test_stage_and_module_selection(tmp_path: Path) -> None:
    dump = _tree(tmp_path, {
        "module_0001.jit_loss.before_optimizations.txt": FSDP.read_bytes(),
        "module_0001.jit_loss.cpu_after_optimizations.txt": FSDP.read_bytes(),
        "module_0002.jit_f.before_optimizations.txt": COND.read_bytes(),
        "plain.hlo": COND.read_bytes(),
    })
    by_stage = discover([str(dump)], stage="^before")
    assert [Path(f.path).name for f in by_stage.files] == [
        "module_0001.jit_loss.before_optimizations.txt", "module_0002.jit_f.before_optimizations.txt"]
    assert {Path(s.path).name: s.reason for s in by_stage.skipped} == {
        "module_0001.jit_loss.cpu_after_optimizations.txt":
            "stage cpu_after_optimizations does not match --stage '^before'",
        "plain.hlo": "has no dump stage, so --stage '^before' does not select it"}
    by_module = discover([str(dump)], module="loss")
    assert [Path(f.path).name for f in by_module.files] == [
        "module_0001.jit_loss.before_optimizations.txt", "module_0001.jit_loss.cpu_after_optimizations.txt"]
    # The name in the content counts where the file name gives none.
    assert [Path(f.path).name for f in discover([str(dump)], module="^jit_f$").files] == [
        "module_0002.jit_f.before_optimizations.txt", "plain.hlo"]


def test_two_compilations_of_one_name_are_told_apart(tmp_path: Path) -> None:
    dump = _tree(tmp_path, {
        "module_0004.jit_f.before_optimizations.txt": COND.read_bytes(),
        "module_0010.jit_f.before_optimizations.txt": COND.read_bytes(),
        "module_0012.jit_loss.before_optimizations.txt": FSDP.read_bytes(),
    })
    assert [f.group for f in discover([str(dump)]).files] == ["jit_f (module_0004)", "jit_f (module_0010)", "jit_loss"]


def test_glob_with_double_star_does_not_follow_a_link_loop(tmp_path: Path) -> None:
    root = _tree(tmp_path / "in", {"a/b/module_0001.jit_f.before_optimizations.txt": COND.read_bytes(),
                                   "a/x.ll": b"; llvm\n", "top.hlo": COND.read_bytes()})
    os.symlink("..", root / "a" / "b" / "up")  # a/b/up -> a: a loop
    os.symlink(root / "a", root / "alias")  # a second way into a/
    os.symlink("top.hlo", root / "link.hlo")  # a second name for a file
    patterns = {
        "**/*.txt": ["a/b/module_0001.jit_f.before_optimizations.txt"],
        "**/*.hlo": ["link.hlo", "top.hlo"],
        "a/*/*.txt": ["a/b/module_0001.jit_f.before_optimizations.txt"],
        "alias/b/*.txt": ["alias/b/module_0001.jit_f.before_optimizations.txt"],  # a link named outright is taken
        "a/b/up/b/up/x.ll": ["a/b/up/b/up/x.ll"],
    }
    cwd = os.getcwd()
    try:
        os.chdir(root)
        for pattern, expected in patterns.items():
            assert expand_glob(pattern) == expected, pattern
        # The walk ends; each directory is searched once; the file reached by a second name counts once.
        found = discover(["**"])
        assert [f.path for f in found.files] == ["a/b/module_0001.jit_f.before_optimizations.txt", "link.hlo"]
        assert [(s.path, s.kind, s.reason) for s in found.skipped] == [
            ("a/x.ll", "LLVM IR", "LLVM IR XLA generated (not HLO, by its name)"),
            ("top.hlo", "same file", "the same file as link.hlo (through a link), which is processed")]
    finally:
        os.chdir(cwd)
    assert [os.path.relpath(p, root) for p in walk(str(root))] == [
        "a/b/module_0001.jit_f.before_optimizations.txt", "a/x.ll", "link.hlo", "top.hlo"]


def test_non_regular_files_are_never_opened(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"cond.hlo": COND.read_bytes()})
    os.mkfifo(root / "pipe.hlo")  # opening it for reading would block
    os.symlink(root / "gone.hlo", root / "dangling.hlo")
    found = discover([str(root), str(root / "pipe.hlo")])
    assert [Path(f.path).name for f in found.files] == ["cond.hlo"]
    assert {(Path(s.path).name, s.kind) for s in found.skipped} == {
        ("pipe.hlo", "not a regular file"), ("dangling.hlo", "broken link")}
    assert "a FIFO" in next(s.reason for s in found.skipped if s.kind == "not a regular file")


def test_arguments_that_name_nothing(tmp_path: Path) -> None:
    empty = _tree(tmp_path / "junk", {"a.ll": b"; x\n", "b.txt": b"hello\n"})
    found = discover([str(empty), str(tmp_path / "*.nope"), str(tmp_path / "missing.hlo")])
    assert found.problems == [
        (str(empty), f"{empty}: error: no HLO module beneath this directory (2 files skipped, none is HLO)"),
        (str(tmp_path / "*.nope"), f"{tmp_path / '*.nope'}: error: no file matches this pattern")]
    # A missing file named on the command line is kept: reading it fails with the usual message.
    assert [f.path for f in found.files] == [str(tmp_path / "missing.hlo")]


def test_a_directory_given_twice_or_inside_another_counts_once(tmp_path: Path) -> None:
    root = _tree(tmp_path / "in", {"cond.hlo": COND.read_bytes(), "sub/fsdp.hlo": FSDP.read_bytes()})
    found = discover([str(root), str(root / "sub"), str(root)])
    assert [f.rel for f in found.files] == ["cond.hlo", "sub/fsdp.hlo"]
    assert found.problems == [] and found.skipped == []


def test_the_output_directory_is_not_searched(tmp_path: Path) -> None:
    root = _tree(tmp_path / "in", {"cond.hlo": COND.read_bytes(), "out/cond.hlo": COND.read_bytes()})
    assert [f.rel for f in discover([str(root)], str(root / "out")).files] == ["cond.hlo"]
    shutil.rmtree(root / "out")


def test_a_directory_with_an_indented_note_is_scanned_at_once(tmp_path: Path) -> None:
    # The sniff's patterns tried every way of splitting a run of blank space: 40 leading
    # spaces before anything but `HloModule` kept a directory scan busy for hours. In a
    # child with a deadline, so that a return of that fails instead of hanging the suite.
    (tmp_path / "indented.txt").write_bytes(b" " * 40 + b"an indented note\n")
    (tmp_path / "m.hlo").write_text("HloModule m\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    proc = subprocess.run([sys.executable, "-m", "hlo_dedup", str(tmp_path), "--output-dir", str(tmp_path / "out"),
                           "--v=1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {tmp_path / 'indented.txt'}: text that is not HLO" in proc.stderr


@pytest.mark.parametrize("head", [
    b" " * 65536,  # a blank head that leads nowhere
    b" \n" * 20000 + b"notes",
    b"# comment\n" * 6000 + b"key: value",  # like a text proto's comments, then no module
    b"// c\n/* d */\n" * 4000 + b"ENTRY",
])
def test_a_head_of_blank_space_and_comments_is_judged(head: bytes) -> None:
    assert sniff(head).format is None
    # Blank space and comments before a real header are still read through.
    assert sniff(b" \n" * 20000 + b"// c\n/* d */\nHloModule m\n").module == "m"
    assert sniff(b"# c\n" * 6000 + b"hlo_module {\n").format == "pbtxt"
