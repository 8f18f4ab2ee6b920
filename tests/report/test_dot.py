"""The Graphviz picture of folds and hazards (`--dot`), rendered from a run's report."""

from __future__ import annotations

import re
import subprocess
import sys

from support import JAX_DATA, REPO

from hlo_dedup.report import BatchInfo, RunReport, render_dot
from hlo_dedup.run import RunOptions, run_input

HAZARDS = REPO / "tests" / "data" / "hazards"


def _report(paths, strict: bool = False, batch: bool = False) -> RunReport:  # type: ignore[no-untyped-def]
    options = RunOptions(strict=strict)
    results = [run_input(str(p), None, options.replaced(report_only=True)) for p in paths]
    assert all(r.ok for r in results), [r.error for r in results]
    return RunReport("-", "-", "hlo", "hlo", options.passes, strict=strict, inputs=results,
                     batch=BatchInfo(tuple(map(str, paths)), "out", 1, 0.0) if batch else None)


def _dot(path, strict: bool = False) -> str:  # type: ignore[no-untyped-def]
    return render_dot(_report([path], strict))


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


def _titles(dot: str) -> list[str]:
    return re.findall(r'^    label="([^"]*)";$', dot, re.M)


def test_a_batch_picture_titles_each_cluster_with_its_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    copy = tmp_path / "fsdp_shard_map.hlo"  # the same model under another directory
    copy.write_bytes((JAX_DATA / "fsdp_shard_map.hlo").read_bytes())
    files = [JAX_DATA / "fsdp_remat_grad.hlo", JAX_DATA / "conv.hlo", JAX_DATA / "fsdp_shard_map.hlo", copy]
    report = _report(files, batch=True)
    titles = _titles(render_dot(report))
    assert titles == [f"{f}: {t}" for f in (files[0], files[2], files[3]) for t in _titles(_dot(f))]
    assert len(set(titles)) == len(titles) == 4  # only the file tells the two copies apart
    report.inputs[0].exit_status, report.inputs[0].error = 1, "failed"  # nothing written: not drawn
    assert not any(t.startswith(str(files[0])) for t in _titles(render_dot(report)))


def test_cli_writes_the_graph(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out, dot = tmp_path / "out.hlo", tmp_path / "folds.dot"
    done = subprocess.run(
        [sys.executable, "-m", "hlo_dedup", str(JAX_DATA / "fsdp_shard_map.hlo"), "-o", str(out), "--dot", str(dot)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert ("all_gather.6", "all_gather.4", "folded into") in _edges(dot.read_text())
