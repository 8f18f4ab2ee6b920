"""Batch mode: `hlo-dedup DIR_OR_GLOB... --output-dir OUT [-j N]` (hlo_dedup.batch).

Every file must come out exactly as a single-file run writes it; failures are one line each
(the single-file message) at the end, and do not stop the others.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_dedup.cli import main
from hlo_dedup.report import load_schema

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
JAX_FILES = sorted(DATA.glob("*.hlo"))
BAD_HLO = "HloModule bad\n\nENTRY main {\n  ROOT p = f32[] parameter(0) oops\n}\n"
RET_CHECK_HLO = (Path(__file__).resolve().parents[1] / "data" / "cli" / "retcheck_first_kernel_three_users.hlo").read_text()


def run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-m", "hlo_dedup", *map(str, args)], input=b"",
                          capture_output=True, cwd=cwd, env={**base, **(env or {})}, timeout=300)


def err(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.decode()


def single(src: Path, out: Path, *options: str) -> tuple[int, str]:
    """A single-file run in this process: (exit status, stderr)."""
    stderr = io.StringIO()
    status = main([str(src), "-o", str(out), *options], stdin=io.BytesIO(), stdout=io.StringIO(), stderr=stderr)
    return status, stderr.getvalue()


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """tests/data/jax/*.hlo, a few in a subdirectory, plus one malformed file."""
    src = tmp_path / "in"
    (src / "sub" / "deeper").mkdir(parents=True)
    for i, f in enumerate(JAX_FILES):
        dest = src / ("sub" if i % 4 == 1 else "") / f.name
        shutil.copy(f, dest)
    (src / "sub" / "deeper" / "bad.hlo").write_text(BAD_HLO)
    (src / "notes.md").write_text("not an input\n")  # not named like an input: skipped
    return src


def test_directory_with_a_malformed_file(corpus: Path, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    out, report = tmp_path / "out", tmp_path / "r.json"
    proc = run(corpus, "--output-dir", out, "-j", "2", "--report", report)
    assert proc.returncode == 2, err(proc)
    assert proc.stdout == b""
    lines = err(proc).splitlines()
    assert "Traceback" not in err(proc)

    good = sorted(p for p in corpus.rglob("*.hlo") if p.name != "bad.hlo")
    assert len(good) == len(JAX_FILES)
    # Every good file is written where it was, byte for byte what a single-file run writes.
    for src in good:
        rel = src.relative_to(corpus)
        status, _ = single(src, tmp_path / "single.hlo")
        assert status == 0
        assert (out / rel).read_bytes() == (tmp_path / "single.hlo").read_bytes(), rel
    assert sorted(tree(out)) == sorted(p.relative_to(corpus).as_posix() for p in good)
    assert not (out / "sub" / "deeper").exists()  # nothing written for the bad file, no empty dir

    # The failure: one line, the single-file message, after the per-file lines, before the totals.
    bad = corpus / "sub" / "deeper" / "bad.hlo"
    status, message = single(bad, tmp_path / "x.hlo")
    assert status == 2
    assert re.fullmatch(rf"{re.escape(str(bad))}:\d+:\d+: error: .+\n", message)
    assert lines[-4] == message.rstrip("\n")
    assert sum("error:" in line for line in lines) == 1
    assert lines[-3].startswith(f"files: {len(good)} ok, 1 failed (of {len(good) + 1})")
    assert lines[-2].startswith("total: ")
    assert re.match(r"time: .* wall, 2 workers, [\d.]+ files/s", lines[-1])

    data = json.loads(report.read_text())
    jsonschema.Draft202012Validator.check_schema(load_schema())
    jsonschema.validate(data, load_schema())
    inputs = data["inputs"]
    assert [Path(i["input"]) for i in inputs] == sorted([*good, bad], key=lambda p: p.relative_to(corpus).as_posix())
    by_name = {Path(i["input"]).name: i for i in inputs}
    assert by_name["bad.hlo"]["status"] == "input_error" and by_name["bad.hlo"]["exit_status"] == 2
    assert by_name["bad.hlo"]["error"] == message.rstrip("\n") and by_name["bad.hlo"]["output"] is None
    fsdp = by_name["fsdp_shard_map.hlo"]
    assert fsdp["status"] == "ok" and fsdp["error"] is None and fsdp["output"] == str(out / "fsdp_shard_map.hlo")
    assert fsdp["totals"]["folds"] == 1 and fsdp["modules"][0]["name"] == "jit__fsdp_forward"
    assert data["batch"]["files"] == len(good) + 1 and data["batch"]["ok"] == len(good) and data["batch"]["failed"] == 1
    assert data["batch"]["workers"] == 2
    # The single-file fields cover every module, so existing readers keep working.
    assert len(data["modules"]) == len(good)
    assert data["totals"]["folds"] == sum(i["totals"]["folds"] for i in inputs) > 0
    assert data["input_format"] == "hlo" and data["output"] == str(out)


def test_per_file_report_entry_matches_a_single_file_report(corpus: Path, tmp_path: Path) -> None:
    src = corpus / "fsdp_shard_map.hlo"
    run_out = run(src, "--output-dir", tmp_path / "out", "--report", tmp_path / "batch.json")
    assert run_out.returncode == 0, err(run_out)
    status, _ = single(src, tmp_path / "one.hlo", "--report", str(tmp_path / "one.json"))
    assert status == 0

    def strip(module: dict) -> dict:  # timings differ
        module = {**module, "seconds": 0}
        module["passes"] = [{**p, "seconds": 0, "price_seconds": 0} for p in module["passes"]]
        return module

    batch = json.loads((tmp_path / "batch.json").read_text())
    one = json.loads((tmp_path / "one.json").read_text())
    assert [strip(m) for m in batch["inputs"][0]["modules"]] == [strip(m) for m in one["modules"]]
    assert batch["inputs"][0]["totals"] == one["totals"]


def test_one_and_two_workers_give_identical_outputs(corpus: Path, tmp_path: Path) -> None:
    outs, reports = {}, {}
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        proc = run(corpus, "--output-dir", out, "-j", jobs, "--report", tmp_path / f"r{jobs}.json")
        assert proc.returncode == 2, err(proc)
        outs[jobs] = tree(out)
        data = json.loads((tmp_path / f"r{jobs}.json").read_text())
        reports[jobs] = [(i["input"], i["status"], i["error"], i["totals"]) for i in data["inputs"]]
        assert data["batch"]["workers"] == int(jobs)
        # Only the timings and the worker count may differ on stderr.
        reports[jobs + "err"] = [re.sub(r"\([^()]*s\)$", "", line) for line in err(proc).splitlines()[:-1]]
    assert outs["1"] == outs["2"] and len(outs["1"]) == len(JAX_FILES)
    assert reports["1"] == reports["2"]
    assert reports["1err"] == reports["2err"]


def _cluster_titles(dot: str) -> list[str]:
    return re.findall(r'^    label="([^"]*)";$', dot, re.M)


def test_dot_draws_every_module_of_every_file(corpus: Path, tmp_path: Path) -> None:
    dot = tmp_path / "folds.dot"
    proc = run(corpus, "--output-dir", tmp_path / "out", "-j", "2", "--dot", dot)
    assert proc.returncode == 2, err(proc)  # bad.hlo: not drawn, the others are
    expected = []
    for src in sorted(corpus.rglob("*.hlo"), key=lambda p: p.relative_to(corpus).as_posix()):
        if src.name != "bad.hlo":
            assert single(src, tmp_path / "x.hlo", "--dot", str(tmp_path / "one.dot"))[0] == 0
            expected += [f"{src}: {title}" for title in _cluster_titles((tmp_path / "one.dot").read_text())]
    assert len(expected) >= 8  # several files fold, some in two computations
    assert _cluster_titles(dot.read_text()) == expected


def test_glob_patterns_are_expanded_by_the_tool(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    # Quoted patterns reach the tool unexpanded (no shell here); ** recurses; the output mirrors
    # the path below the pattern's fixed prefix.
    proc = run("in/**/*_*.hlo", "in/c*.hlo", "--output-dir", out, "-j", "2", cwd=tmp_path)
    assert proc.returncode == 0, err(proc)
    expected = sorted({p.relative_to(corpus).as_posix() for p in corpus.rglob("*_*.hlo")}
                      | {p.relative_to(corpus).as_posix() for p in corpus.glob("c*.hlo")})
    assert sorted(tree(out)) == expected
    assert any("/" in rel for rel in expected)
    assert f"files: {len(expected)} ok, 0 failed" in err(proc)

    nothing = run("in/*.nope", DATA / "cond.hlo", "--output-dir", tmp_path / "out2", cwd=tmp_path)
    assert nothing.returncode == 2
    assert "in/*.nope: error: no file matches this pattern" in err(nothing).splitlines()
    assert (tmp_path / "out2" / "cond.hlo").exists()  # the other input still ran


def test_single_file_with_output_dir_and_missing_file(tmp_path: Path) -> None:
    proc = run(DATA / "cond.hlo", tmp_path / "absent.hlo", "--output-dir", tmp_path / "out")
    assert proc.returncode == 2
    assert f"{tmp_path / 'absent.hlo'}: error: No such file or directory" in err(proc).splitlines()
    assert tree(tmp_path / "out") == {"cond.hlo": (DATA / "cond.hlo").read_bytes()}
    one = run(DATA / "fsdp_shard_map.hlo", "--output-dir", tmp_path / "one")
    assert one.returncode == 0, err(one)
    assert sorted(tree(tmp_path / "one")) == ["fsdp_shard_map.hlo"]


def test_pass_failure_is_exit_1_and_the_others_are_written(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(DATA / "fsdp_shard_map.hlo", src)
    (src / "retcheck.hlo").write_text(RET_CHECK_HLO)
    proc = run(src, "--output-dir", tmp_path / "out", "--report", tmp_path / "r.json")
    assert proc.returncode == 1, err(proc)
    status, message = single(src / "retcheck.hlo", tmp_path / "x.hlo")
    assert status == 1
    assert message.rstrip("\n") in err(proc).splitlines()
    assert sorted(tree(tmp_path / "out")) == ["fsdp_shard_map.hlo"]
    entry = json.loads((tmp_path / "r.json").read_text())["inputs"][1]
    assert entry["status"] == "pass_failed" and entry["exit_status"] == 1 and "RET_CHECK" in entry["error"]


def test_options_reach_every_file(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    two = src / "two.txt"
    two.write_text((DATA / "cond.hlo").read_text() + "\n// -----\n" + (DATA / "fsdp_shard_map.hlo").read_text())
    shutil.copy(DATA / "fsdp_shard_map.hlo", src)
    args = ("--passes=neuron_all_gather_duplicate_remover", "--split-input-file", "--no-spmd")
    proc = run(src, "--output-dir", tmp_path / "out", *args)
    assert proc.returncode == 0, err(proc)
    for name in ("two.txt", "fsdp_shard_map.hlo"):
        status, _ = single(src / name, tmp_path / "single.hlo", *args)
        assert status == 0
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "single.hlo").read_bytes()
    without = run(src, "--output-dir", tmp_path / "out2")
    assert without.returncode == 2
    assert re.search(r"two\.txt:\d+:1: error: '// -----' separator found", err(without))


def test_usage_errors(tmp_path: Path) -> None:
    a, b = DATA / "cond.hlo", DATA / "conv.hlo"
    for args, text in [
        ((a, b, "-o", tmp_path / "x.hlo"), "-o names one output file"),
        ((a, b), "several inputs, a directory or a pattern need --output-dir DIR"),
        ((a, "-", "--output-dir", tmp_path / "o"), "standard input (-) cannot be a batch-mode input"),
        ((a, b, "--output-dir", tmp_path / "o", "-j", "0"), "expected a positive integer"),
        ((a, tmp_path / "x" / "cond.hlo", "--output-dir", tmp_path / "o"), "would both be written to"),
    ]:
        if "would both" in text:
            (tmp_path / "x").mkdir(exist_ok=True)
            shutil.copy(a, tmp_path / "x" / "cond.hlo")
        proc = run(*args)
        assert proc.returncode == 2, (args, err(proc))
        lines = err(proc).splitlines()
        assert len(lines) == 1 and lines[0].startswith("hlo-dedup: error: ") and text in lines[0], lines
    assert not (tmp_path / "o").exists()


def test_report_to_stdout_and_no_progress_on_a_pipe(corpus: Path, tmp_path: Path) -> None:
    proc = run(corpus, "--output-dir", tmp_path / "out", "--report", "-", env={"CI": ""})
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert len(data["inputs"]) == len(JAX_FILES) + 1
    assert "\x1b[" not in err(proc)


def test_output_dir_inside_the_input_is_not_scanned(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(DATA / "cond.hlo", src)
    for _ in range(2):
        proc = run(src, "--output-dir", src / "out")
        assert proc.returncode == 0, err(proc)
        assert "files: 1 ok, 0 failed (of 1)" in err(proc)
    assert sorted(tree(src)) == ["cond.hlo", "out/cond.hlo"]


def test_works_without_jax(corpus: Path, tmp_path: Path) -> None:
    hidden = tmp_path / "nojax"
    for name in ("jax", "jaxlib"):
        (hidden / name).mkdir(parents=True)
        (hidden / name / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    path = os.pathsep.join(filter(None, [str(hidden), os.environ.get("PYTHONPATH", "")]))
    proc = run(corpus, "--output-dir", tmp_path / "out", "-j", "2", env={"PYTHONPATH": path})
    assert proc.returncode == 2, err(proc)
    assert "Traceback" not in err(proc)
    assert f"files: {len(JAX_FILES)} ok, 1 failed" in err(proc)


def test_binary_proto_inputs_write_binary_protos(tmp_path: Path, xc) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "in"
    src.mkdir()
    proto = xc.hlo.hlo_module_from_text((DATA / "fsdp_shard_map.hlo").read_text()).as_serialized_hlo_module_proto()
    (src / "model.pb").write_bytes(proto)
    from hlo_dedup.io.proto import module_bytes_to_text_proto

    (src / "model.textproto").write_text(module_bytes_to_text_proto(proto))  # every proto suffix is found
    shutil.copy(DATA / "cond.hlo", src)
    proc = run(src, "--output-dir", tmp_path / "out", "--report", tmp_path / "r.json")
    assert proc.returncode == 0, err(proc)
    # In a fresh process, as XLA numbers modules per process (the proto holds that id).
    one = run(src / "model.pb", "-o", tmp_path / "single.pb")
    assert one.returncode == 0, err(one)
    assert (tmp_path / "out" / "model.pb").read_bytes() == (tmp_path / "single.pb").read_bytes()
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["input_format"] == "mixed" and data["output_format"] == "mixed"
    assert [i["output_format"] for i in data["inputs"]] == ["hlo", "pb", "pbtxt"]
    assert [i["input_format"] for i in data["inputs"]] == ["hlo", "pb", "pbtxt"]
    assert sorted(tree(tmp_path / "out")) == ["cond.hlo", "model.pb", "model.textproto"]
