"""`--price=xla`: XLA:CPU's own peak before and after the folds, and the budget it decides.

`tied_behind_barrier.hlo` gathers one weight for its first and last matmul, the second gather
behind an optimization barrier that holds a late activation: folding it keeps the first
gather's 64 KiB result live across the wide middle, which XLA's peak shows.
`three_tied_behind_barrier.hlo` does that for three weights: under XLA's memory-minimizing
scheduler each fold raises the peak, so a zero budget drops all three, largest estimate
first. `fsdp_remat_grad.hlo` (jax, FSDP under jax.checkpoint) has two folds the model prices
as rises; XLA's peak rises by one of them only, so XLA keeps the other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_dedup.cli import main
from hlo_dedup.report.json import load_schema

DATA = Path(__file__).resolve().parents[1] / "data"
TIED = DATA / "price" / "tied_behind_barrier.hlo"
THREE_TIED = DATA / "price" / "three_tied_behind_barrier.hlo"
FSDP_REMAT = DATA / "jax" / "fsdp_remat_grad.hlo"
GATHER_BYTES = 128 * 128 * 4  # the tied weight, gathered
PARAMETER_BYTES = (64 * 128 + 16 * 128 + 128 * 1024) * 4  # live for the whole program


def run(tmp_path: Path, *args: str | Path) -> tuple[int, dict | None, str]:
    report = tmp_path / "report.json"
    err = _Stream()
    status = main([*map(str, args), "--report", str(report)], stdout=_Stream(), stderr=err)
    return status, json.loads(report.read_text()) if report.exists() else None, err.text


class _Stream:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_xla_price_reports_the_peak_a_fold_raises(tmp_path: Path, xla_client) -> None:  # noqa: ANN001
    page = tmp_path / "page.html"
    status, report, err = run(tmp_path, TIED, "--report-only", "--price=xla", "--html", page)
    assert status == 0, err
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(report, load_schema())
    assert report["price"] == "xla"
    (module,) = report["modules"]
    price = module["xla_price"]
    assert len(module["passes"][1]["folds"]) == 1
    # Parameters are live throughout; the rise is the kept gather living longer, at most its size.
    assert price["peak_bytes_before"] >= PARAMETER_BYTES
    assert 0 < price["peak_increase_bytes"] <= GATHER_BYTES
    assert price["peak_increase_bytes"] == price["peak_bytes_after"] - price["peak_bytes_before"]
    assert price["compiles"] == 2 and price["folds_dropped"] == [] and price["within_budget"] is None
    (entry,) = price["computations"]
    assert entry["peak_bytes_after"] - entry["peak_bytes_before"] == price["peak_increase_bytes"]
    rise = f"+{price['peak_increase_bytes'] // 1024}.0 KiB"
    assert "XLA:CPU peak" in err and f"({rise})" in err
    section = page.read_text().split('<div class="xla-price">', 1)[1].split("</div>", 1)[0]
    assert f"<td><code>{entry['computation']}</code></td>" in section and section.count(rise) == 2


def test_an_xla_budget_drops_the_fold_that_raises_the_peak(tmp_path: Path, xla_client) -> None:  # noqa: ANN001
    out = tmp_path / "out.hlo"
    status, report, err = run(tmp_path, TIED, "-o", out, "--price=xla", "--max-peak-increase", "0")
    assert status == 0, err
    assert out.read_text().count("all-gather(") == 2  # nothing folded
    (module,) = report["modules"]
    price = module["xla_price"]
    assert price["within_budget"] is True and price["peak_increase_bytes"] <= 0
    assert price["folds_dropped"] == [{"computation": "main", "removed": "again"}]
    refused = [g for g in module["all_gathers"] if g["fate"] == "refused"]
    assert [g["name"] for g in refused] == ["again"] and "XLA:CPU's peak" in refused[0]["reason"]
    assert "1 fold dropped" in err


def test_the_bisection_drops_the_fewest_folds_largest_estimate_first(tmp_path: Path, xla_client) -> None:  # noqa: ANN001
    status, unbudgeted, _ = run(tmp_path, THREE_TIED, "--report-only")
    assert status == 0
    # The model's price of each fold: (peak rise, live-range extension); r1's gather lives longest.
    estimates = {f["removed"]: (f["memory"]["peak_bytes_after"] - f["memory"]["peak_bytes_before"],
                                f["memory"]["live_range_extension"])
                 for f in unbudgeted["modules"][0]["passes"][1]["folds"]}
    assert max(estimates, key=estimates.get) == "r1" and min(rise for rise, _ in estimates.values()) > 0
    status, model, _ = run(tmp_path, THREE_TIED, "--report-only", "--max-peak-increase", "0")
    assert status == 0
    assert sorted(g["name"] for g in model["modules"][0]["all_gathers"] if g["fate"] == "refused") == ["r1", "r2", "r3"]
    status, report, err = run(tmp_path, THREE_TIED, "--report-only", "--price=xla", "--max-peak-increase", "0")
    assert status == 0, err
    (module,) = report["modules"]
    price = module["xla_price"]
    assert price["folds_dropped"] == [{"computation": "main", "removed": r} for r in ("r1", "r2", "r3")]
    assert module["passes"][1]["folds"] == []
    assert price["within_budget"] is True and price["peak_increase_bytes"] == 0
    # before, every fold, one fold dropped, two dropped (every fold dropped is the module as read)
    assert price["compiles"] == 4


def test_xla_not_the_model_decides_the_budget(tmp_path: Path, xla_client) -> None:  # noqa: ANN001
    """The model refuses both folds of fsdp_remat_grad under a zero budget; XLA's peak rises
    with one of them only, so --price=xla keeps the other: the fewest folds are dropped."""
    status, model, _ = run(tmp_path, FSDP_REMAT, "--report-only", "--max-peak-increase", "0")
    assert status == 0
    status, xla, err = run(tmp_path, FSDP_REMAT, "--report-only", "--price=xla", "--max-peak-increase", "0")
    assert status == 0, err
    (m_model,), (m_xla,) = model["modules"], xla["modules"]
    assert any(g["fate"] == "refused" for g in m_model["all_gathers"])
    folds = [f for p in m_xla["passes"] for f in p["folds"]]
    assert len(folds) > len([f for p in m_model["passes"] for f in p["folds"]])
    assert [f["removed"] for f in folds] == ["all_gather.6"]
    assert [d["removed"] for d in m_xla["xla_price"]["folds_dropped"]] == ["all_gather.15"]
    assert m_xla["xla_price"]["peak_increase_bytes"] <= 0 and m_xla["xla_price"]["within_budget"] is True


def test_a_module_xla_cannot_compile_is_one_line(tmp_path: Path, xla_client) -> None:  # noqa: ANN001
    src = tmp_path / "kernel.hlo"
    src.write_text(TIED.read_text().replace(
        "ROOT out = f32[16,128] dot(back_late, again), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        'ROOT out = f32[16,128] custom-call(back_late, again), custom_call_target="NoSuchKernel"'))
    status, report, err = run(tmp_path, src, "--report-only", "--price=xla")
    assert status == 2 and report is None
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"{src}: error: --price=xla: XLA:CPU cannot compile module tied_behind_barrier: ")
    assert "NoSuchKernel" in err


def test_without_the_xla_extra_price_xla_says_how_to_install(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    for name in ("jax", "jaxlib"):
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "hlo_dedup", str(TIED), "--report-only", "--price=xla"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2
    assert proc.stderr == (f"{TIED}: error: --price=xla compiles the modules with XLA:CPU, which needs jax and "
                           "jaxlib: pip install 'hlo-dedup[xla]'\n")
    # The default price needs no jax.
    proc = subprocess.run([sys.executable, "-m", "hlo_dedup", str(TIED), "--report-only"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr


def test_xla_memory_is_measured_under_the_memory_minimizing_scheduler(monkeypatch, xla_client) -> None:  # noqa: ANN001
    # XLA:CPU reads the scheduler from the flags it started with: the child starts with it,
    # and a process without it is told so instead of measuring another scheduler's peak.
    from hlo_dedup.xla import XlaError
    from hlo_dedup.xla.isolated import child_env
    from hlo_dedup.xla.memory import MEMORY_SCHEDULER_FLAG, measure

    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_concurrency_optimized_scheduler=true --xla_dump_to=/nowhere")
    flags = child_env(8)["XLA_FLAGS"].split()
    assert MEMORY_SCHEDULER_FLAG in flags and "--xla_cpu_enable_concurrency_optimized_scheduler=true" not in flags
    assert "--xla_dump_to=/nowhere" in flags and "--xla_force_host_platform_device_count=8" in flags
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    with pytest.raises(XlaError, match="memory-minimizing scheduler"):
        measure(TIED)
