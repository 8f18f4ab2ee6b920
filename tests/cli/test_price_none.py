"""`--price=none`: the same folds without their memory price, and every output saying so.

The price costs more than the rest of the pass on modules with many folds; a user who wants
only the rewritten module skips it. Nothing may then read as "peak unchanged": the summary,
the JSON report and the page say the peak was not priced.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from support import JAX_DATA

import hlo_dedup
from hlo_dedup.cli import main
from hlo_dedup.passes import NeuronAllGatherDuplicateRemover
from hlo_dedup.report import load_schema

REMAT = JAX_DATA / "fsdp_remat_grad.hlo"  # two backward re-gathers fold onto the forward ones


def _run(tmp_path: Path, *flags: str, capsys: pytest.CaptureFixture[str]) -> tuple[bytes, str, dict, str]:
    out, report, page = tmp_path / "out.hlo", tmp_path / "r.json", tmp_path / "p.html"
    assert main([str(REMAT), "-o", str(out), "--report", str(report), "--html", str(page), *flags]) == 0
    summary = capsys.readouterr().err
    return out.read_bytes(), summary, json.loads(report.read_text()), page.read_text()


def test_the_same_folds_and_output_without_a_price(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    priced = _run(tmp_path, capsys=capsys)
    unpriced = _run(tmp_path, "--price=none", capsys=capsys)
    assert unpriced[0] == priced[0]  # the module written is the default run's, byte for byte
    gathers = [line.strip() for line in unpriced[1].splitlines() if "all-gathers:" in line]
    assert gathers == ["8 all-gathers: 2 folded onto 2 kept, 4 unique; 1.8 KiB less collective traffic per "
                       "device, peak memory not priced (--price=none)"]
    assert "peak +896 B (est." in priced[1] and "est." not in unpriced[1]
    assert priced[3].count('<svg class="live"') == 2 and "The estimated peak memory rises by" in priced[3]


def test_the_report_gives_no_rise_rather_than_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, _, report, _ = _run(tmp_path, "--price=none", capsys=capsys)
    jsonschema.validate(report, load_schema())
    assert report["price"] == "none" and report["totals"]["peak_increase_bytes"] is None
    (module,) = report["modules"]
    assert module["memory"] == {"computations": [], "peak_increase_bytes": None}
    folds = [f for p in module["passes"] for f in p["folds"]]
    assert len(folds) == 2 and all(f["memory"] is None for f in folds)


def test_the_page_says_the_peak_was_not_priced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    *_, page = _run(tmp_path, "--price=none", capsys=capsys)
    assert "memory not priced" in page and "(--price=none)" in page
    assert 'Est. peak memory</div><div class="v">not priced</div>' in page
    assert "peak memory rises" not in page and '<svg class="live"' not in page  # no live-bytes chart


def test_a_budget_needs_the_price(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.hlo"
    assert main([str(REMAT), "-o", str(out), "--price=none", "--max-peak-increase", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "hlo-dedup: error: --max-peak-increase refuses folds by their memory price: drop --price=none\n"
    assert not out.exists()
    with pytest.raises(ValueError, match="budget needs the memory price"):
        NeuronAllGatherDuplicateRemover(max_peak_increase=0, priced=False)


def test_the_api_folds_the_same_without_pricing() -> None:
    priced = hlo_dedup.run_passes(hlo_dedup.load(REMAT.read_text()))
    module = hlo_dedup.load(REMAT.read_text())
    unpriced = hlo_dedup.run_passes(module, priced=False)
    names = [[(f.kept, f.removed) for f in p.folds] for p in unpriced.passes]
    assert names == [[(f.kept, f.removed) for f in p.folds] for p in priced.passes]
    assert all(f.memory is None for p in unpriced.passes for f in p.folds)
    assert all(not p.profiles for p in unpriced.passes)


def test_the_summary_and_report_say_what_the_price_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from hlo_dedup.report import summary

    _, priced_summary, priced, _ = _run(tmp_path, capsys=capsys)
    _, unpriced_summary, unpriced, _ = _run(tmp_path, "--price=none", capsys=capsys)
    gather_pass = [p for p in priced["modules"][0]["passes"] if p["name"] == "neuron_all_gather_duplicate_remover"]
    assert 0 < gather_pass[0]["price_seconds"] <= gather_pass[0]["seconds"]
    assert all(p["price_seconds"] == 0 for m in unpriced["modules"] for p in m["passes"])
    assert ", of which the memory price " in priced_summary and "of which" not in unpriced_summary
    assert "--price=none skips it" not in priced_summary  # a price this quick needs no advice
    monkeypatch.setattr(summary, "SLOW_PRICE_SECONDS", 0.0)  # as if it had taken long
    head = [line for line in _run(tmp_path, capsys=capsys)[1].splitlines() if "remover: changed" in line]
    assert len(head) == 1 and head[0].endswith(": --price=none skips it)")
