"""MLIR (StableHLO) text handed over for HLO text: JAX's `lower(...).as_text()` prints it by
default. The reader says what it is and what to write instead, as a file, in a directory and
on standard input; HLO text, with or without a header, is never taken for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import JAX_DATA, REPO

from hlo_dedup.io.sniff import sniff
from hlo_dedup.syntax.foreign import is_mlir_text
from hlo_dedup.text import HloParseError, parse_module

MLIR = REPO / "tests" / "data" / "mlir" / "fsdp_shard_map.mlir"  # what JAX 0.10.2 printed
ADVICE = "jax.jit(f).lower(...).as_text(dialect='hlo')"


def command(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hlo_dedup", *args], input=stdin, capture_output=True, text=True)


def test_jax_s_mlir_is_refused_at_its_first_character_with_what_to_write_instead() -> None:
    text = MLIR.read_text()
    assert text.startswith("module @jit__fsdp_forward attributes")
    with pytest.raises(HloParseError) as info:
        parse_module(text, "f.mlir")
    assert (info.value.line, info.value.column) == (1, 1)
    assert "MLIR (StableHLO) text, not HLO text" in info.value.message and ADVICE in info.value.message


@pytest.mark.parametrize("head", [
    "#loc1 = loc(\"x.py\":3:0)\nmodule @m {\n",  # as_text(debug_info=True)
    "// from a reproducer\nmodule {\n  func.func @main() {\n",
    "\ufeff  module attributes {mhlo.num_partitions = 1 : i32} {\n",
    "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n",
])
def test_other_mlir_openings_are_told_apart(head: str) -> None:
    assert is_mlir_text(head)


def test_hlo_text_is_not_taken_for_mlir() -> None:
    for path in sorted(JAX_DATA.glob("*.hlo")):
        assert not is_mlir_text(path.read_text()), path
    # A module without a header, and one whose computation is named `module`.
    assert not is_mlir_text("ENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n")
    assert not is_mlir_text("module_0001 {\n  ROOT p = f32[] parameter(0)\n}\n")
    parse_module("HloModule module\n\nENTRY module {\n  ROOT p = f32[] parameter(0)\n}\n")


def test_the_command_says_so_as_a_file_on_stdin_and_in_a_directory(tmp_path: Path) -> None:
    for args, stdin, name in (([str(MLIR)], None, str(MLIR)), (["-"], MLIR.read_text(), "<stdin>")):
        proc = command(*args, "-o", str(tmp_path / "out.hlo"), stdin=stdin)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"{name}:1:1: error: expected 'HloModule': this is MLIR (StableHLO) text"), line
        assert ADVICE in line and not (tmp_path / "out.hlo").exists()
    # In a directory, a `.txt` holding MLIR is skipped, and the reason says what it is.
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "lowered.txt").write_text(MLIR.read_text())
    (tree / "module.hlo").write_bytes((JAX_DATA / "fsdp_shard_map.hlo").read_bytes())
    assert sniff((tree / "lowered.txt").read_bytes()).what == "MLIR (StableHLO) text, not HLO text"
    proc = command(str(tree), "--output-dir", str(tmp_path / "out"), "--v=1")
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {tree / 'lowered.txt'}: MLIR (StableHLO) text, not HLO text (by its content)" in proc.stderr
