"""`--dot -` is standard output, `--dot x.svg` is a picture drawn by Graphviz (or a clear error
when Graphviz is missing), and an unknown pass name gets a suggestion."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_dedup.passes import pass_names
from hlo_dedup.passes.registry import create_pass, suggest_pass

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FSDP = DATA / "fsdp_shard_map.hlo"


def run(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-m", "hlo_dedup", *map(str, args)], input=b"", capture_output=True,
                          env={**base, **(env or {})}, cwd=cwd, timeout=300)


def test_dot_dash_is_standard_output(tmp_path: Path) -> None:
    proc = run(FSDP, "-o", tmp_path / "out.hlo", "--dot", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("digraph folds {") and "all_gather.6" in proc.stdout.decode()
    assert not (tmp_path / "-").exists()
    both = run(FSDP, "-o", tmp_path / "out.hlo", "--dot", "-", "--report", "-", cwd=tmp_path)
    assert both.returncode == 2
    assert both.stderr.decode() == ("hlo-dedup: error: --dot - and --report - would both write to standard output: "
                                    "give one of them a file\n")


def test_dot_svg_is_drawn_by_graphviz(tmp_path: Path) -> None:
    picture = tmp_path / "folds.svg"
    proc = run(FSDP, "-o", tmp_path / "out.hlo", "--dot", picture)
    if shutil.which("dot") is None:  # what a machine without Graphviz says (see also the test below)
        assert proc.returncode == 2 and "not installed" in proc.stderr.decode()
        return
    assert proc.returncode == 0, proc.stderr.decode()
    svg = picture.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "all_gather.6" in svg
    dot_text = tmp_path / "folds.gv"
    assert run(FSDP, "--dot", dot_text, "-o", tmp_path / "out2.hlo").returncode == 0
    assert dot_text.read_text().startswith("digraph folds {")  # any other name: the DOT text


def test_dot_svg_without_graphviz_is_a_clear_error(tmp_path: Path) -> None:
    """With no `dot` on PATH the run stops before anything is written."""
    bare = tmp_path / "bin"
    bare.mkdir()
    out = tmp_path / "out.hlo"
    proc = run(FSDP, "-o", out, "--dot", tmp_path / "folds.svg", env={"PATH": str(bare)})
    assert proc.returncode == 2
    assert proc.stderr.decode() == (f"hlo-dedup: error: --dot {tmp_path / 'folds.svg'} renders the picture with "
                                    "Graphviz's `dot` command, which is not installed (install graphviz, e.g. "
                                    "apt-get install graphviz, or give a .dot file)\n")
    assert not out.exists() and not (tmp_path / "folds.svg").exists()


@pytest.mark.parametrize("typed, meant", [
    ("neuron-all-gather-duplicate-remover", "neuron_all_gather_duplicate_remover"),
    ("neuron_preprocess_kernel_duplicate_remover", "neuron-preprocess-kernel-duplicate-remover"),
    ("Neuron_All_Gather_Duplicate_Remover", "neuron_all_gather_duplicate_remover"),
    ("neuron_all_gather_dup_remover", "neuron_all_gather_duplicate_remover"),
    ("DCE", "dce"),
    ("hlo-dce", "dce"),
])
def test_an_unknown_pass_gets_a_suggestion(typed: str, meant: str) -> None:
    assert meant in pass_names() and suggest_pass(typed) == meant
    proc = run(FSDP, f"--passes={typed}")
    assert proc.returncode == 2
    assert proc.stderr.decode() == (f"hlo-dedup: error: Pass {typed} not found. Did you mean {meant}? Known passes: "
                                    f"{','.join(pass_names())}\n")
    with pytest.raises(KeyError, match=f"Did you mean {meant}"):
        create_pass(typed)


def test_no_suggestion_for_a_name_that_is_not_close() -> None:
    assert suggest_pass("algebraic-simplifier") is None
    proc = run(FSDP, "--passes=algebraic-simplifier")
    assert proc.stderr.decode().startswith("hlo-dedup: error: Pass algebraic-simplifier not found. Known passes: ")
