"""The Graphviz picture of folds and hazards (`--dot`)."""

from __future__ import annotations

import re
import subprocess
import sys

from support import JAX_DATA, REPO
from hlo_dedup import load, run_passes
from hlo_dedup.fold_graph import folds_to_dot
from hlo_dedup.report import ModuleRun

HAZARDS = REPO / "tests" / "data" / "hazards"


def _dot(path, strict: bool = False) -> str:  # type: ignore[no-untyped-def]
    module = load(path)
    run = ModuleRun(module.name, str(path), 0)
    run.passes.extend(run_passes(module, strict=strict).passes)
    return folds_to_dot([run])


def _edges(dot: str) -> set[tuple[str, str, str]]:
    return set(re.findall(r'"c\d+:([^"]+)" -> "c\d+:([^"]+)" \[label="([^"]*)"', dot))


def test_each_fold_is_drawn_from_the_duplicate_to_the_kept_gather() -> None:
    dot = _dot(JAX_DATA / "fsdp_remat_grad.hlo")
    assert dot.startswith("digraph folds {") and dot.rstrip().endswith("}")
    edges = _edges(dot)
    assert ("all_gather.6", "all_gather.4", "folded into") in edges
    assert ("all_gather.15", "all_gather.13", "folded into") in edges
    assert ("param:shard_map.9", "all_gather.4", "") in edges  # the traced parameter
    assert dot.count("subgraph cluster_") == 2  # one per computation with folds


def test_hazardous_and_refused_folds_carry_their_reasons() -> None:
    faithful = _dot(HAZARDS / "channel_mode.hlo")
    assert "color=orange" in faithful and "different collective modes" in faithful
    strict = _dot(HAZARDS / "tunnelled_inner_groups.hlo", strict=True)
    assert ("outer_b", "outer_a", "refused") in _edges(strict)
    assert '"c0:outer_a" [style=filled' in strict  # the kept gather is drawn, with a label


def test_a_module_without_folds_says_so() -> None:
    assert "no folds" in _dot(JAX_DATA / "conv.hlo")


def test_cli_writes_the_graph(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out, dot = tmp_path / "out.hlo", tmp_path / "folds.dot"
    done = subprocess.run(
        [sys.executable, "-m", "hlo_dedup", str(JAX_DATA / "fsdp_shard_map.hlo"), "-o", str(out), "--dot", str(dot)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert ("all_gather.6", "all_gather.4", "folded into") in _edges(dot.read_text())
