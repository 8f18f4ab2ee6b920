"""hlo_dedup.report (summary, JSON, schema) and hlo_dedup.progress (when a display appears)."""

from __future__ import annotations

import io
import json
import sys

import pytest

from hlo_dedup import progress
from hlo_dedup.passes import FoldRecord, Hazard, PassResult
from hlo_dedup.report import ModuleRun, RunReport, human_bytes, load_schema


def sample_report() -> RunReport:
    fold = FoldRecord("neuron_all_gather_duplicate_remover", "body", "ag.1", "ag.2",
                      {"parameter": "p", "index_path": [0], "replica_groups": [[0, 1]]}, 4096, 2048,
                      hazardous=True)
    kernel = FoldRecord("neuron-preprocess-kernel-duplicate-remover", "main", "k.1", "k.2",
                        {"backend_config": "cfg"}, 512, 0, "k.3")
    hazards = [Hazard("body", "ag.1", "ag.2", ("different collective modes",), refused=False),
               Hazard("body", "ag.1", "ag.9", ("different all_gather_dimension",), refused=True)]
    report = RunReport("in.hlo", "-", "hlo", "hlo", ["neuron-preprocess-kernel-duplicate-remover",
                                                     "neuron_all_gather_duplicate_remover"])
    report.modules.append(ModuleRun("m", "in.hlo", 0, [
        PassResult("neuron-preprocess-kernel-duplicate-remover", True, [kernel], [], 0.001),
        PassResult("neuron_all_gather_duplicate_remover", True, [fold], hazards, 0.002),
    ], 0.003))
    report.modules.append(ModuleRun("n", "in.hlo", 1, [], 0.0))
    report.timings.update(parse=0.5, passes=0.003, print=0.25)
    return report


def test_json_validates_and_totals() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = json.loads(sample_report().dumps())
    jsonschema.Draft202012Validator.check_schema(load_schema())
    jsonschema.validate(data, load_schema())
    assert data["totals"] == {
        "modules": 2, "changed_modules": 1, "passes_run": 2, "folds": 2, "hazards": 2,
        "hazards_refused": 1, "bytes_output": 4608, "bytes_per_device": 2048,
    }
    assert data["timings"]["total"] == pytest.approx(0.753)
    kernel_fold = data["modules"][0]["passes"][0]["folds"][0]
    assert kernel_fold["replacement"] == "k.3" and kernel_fold["key"] == {"backend_config": "cfg"}


def test_schema_requires_documented_fields() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = json.loads(sample_report().dumps())
    del data["modules"][0]["passes"][1]["hazards"][0]["refused"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, load_schema())
    data = json.loads(sample_report().dumps())
    data["schema_version"] = 2
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, load_schema())


def test_human_summary() -> None:
    text = sample_report().summary()
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


def test_human_bytes() -> None:
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(3 * 1024**3) == "3.0 GiB"


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_outside_ci() -> None:
    assert progress.progress_wanted(FakeTty(), {})
    assert progress.progress_wanted(FakeTty(), {"CI": "false"})
    assert not progress.progress_wanted(FakeTty(), {"CI": "true"})
    assert not progress.progress_wanted(FakeTty(), {"CI": "1"})
    assert not progress.progress_wanted(FakeTty(), {"TERM": "dumb"})
    assert not progress.progress_wanted(io.StringIO(), {})
    assert isinstance(progress.make_progress(io.StringIO()), progress.NullProgress)
    assert not isinstance(progress.make_progress(io.StringIO()), progress.RichProgress)


def test_progress_falls_back_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich -> ImportError
    shown = progress.make_progress(FakeTty(), enabled=True)
    assert type(shown) is progress.NullProgress
    with shown:
        shown.phase("parse")
        shown.advance("x")


def test_rich_progress_draws_after_the_delay_and_erases() -> None:
    pytest.importorskip("rich")
    import time

    stream = FakeTty()
    shown = progress.RichProgress(stream, delay=0.0)
    with shown:
        shown.phase("parse m.hlo")
        shown.phase("passes", total=2)
        shown.advance("m: dce")
        shown.advance()
        time.sleep(0.3)
    assert "passes" in stream.getvalue()

    quiet = FakeTty()
    short = progress.RichProgress(quiet, delay=5.0)
    with short:
        short.phase("parse")
    assert quiet.getvalue() == ""
