"""The README's quick start and Python example run as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from support import IN_CI, REPO

README = (REPO / "README.md").read_text()
DESIGN = (REPO / "docs" / "design.md").read_text()
SEMANTICS = (REPO / "docs" / "semantics.md").read_text()


def test_quick_start_script_runs_the_passes_on_the_bundled_example() -> None:
    if not (REPO / ".venv" / "bin" / "python").exists() and not IN_CI:
        pytest.skip("the quick start installs into .venv; scripts/test.sh creates it")
    assert "scripts/quickstart.sh" in README
    done = subprocess.run(
        ["bash", "scripts/quickstart.sh"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "neuron_all_gather_duplicate_remover: changed, 2 folds" in done.stderr
    out = (REPO / "out" / "fsdp_remat_grad.dedup.hlo").read_text()
    source = (REPO / "examples" / "fsdp_remat_grad.hlo").read_text()
    assert source.count("all-gather(") == 8 and out.count("all-gather(") == 6
    assert (REPO / "out" / "report.json").exists()


def _run_python(code: str, cwd) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )


def test_python_examples_in_readme_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) == 2, "README lost a Python example"
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "fsdp_remat_grad.hlo", tmp_path / "examples")
    done = _run_python(blocks[0], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True 2 []"), done.stdout
    assert "all_gather.4 <- all_gather.6" in done.stdout
    written = (tmp_path / "fsdp_remat_grad.dedup.hlo").read_text()
    assert written.count("all-gather(") == 6

    done = _run_python(blocks[1], tmp_path)  # the run path, strict: the same two folds are safe
    assert done.returncode == 0, done.stderr
    assert done.stdout == "0 None [2]\n"
    assert (tmp_path / "fsdp.strict.hlo").read_text() == written


def test_readme_names_what_exists() -> None:
    """The layout (docs/design.md) names real modules; the README's dump workflow comes first
    after the quick start."""
    layout = re.search(r"## Layout\n\n```\n(.*?)```", DESIGN, re.S)
    assert layout is not None
    package = REPO / "src" / "hlo_dedup"
    src = layout.group(1).split("\ntests/")[0]  # the package's part of the tree
    names = set(re.findall(r"\b(\w+\.(?:py|json))\b", src))
    assert {"run.py", "batch.py", "cli.py", "equivalence.py", "schema.json", "discovery.py"} <= names
    existing = {p.name for p in package.rglob("*") if p.is_file()}
    assert names <= existing, names - existing
    for folder in re.findall(r"^  (\w+)/", src, re.M):
        assert (package / folder).is_dir(), folder
    sections = re.findall(r"^## (.+)$", README, re.M)
    assert sections[sections.index("Quick start") + 1] == "From an XLA dump or a Neuron compile cache"


def test_the_dump_transcript_is_what_the_command_prints(xla_dump, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The README's transcript of `hlo-dedup dump/ --report-only` on the generated training-loop
    dump is today's output, timings aside."""
    block = re.search(r"```\n(\$ hlo-dedup dump/ (.*?)\n.*?)```", README, re.S)
    assert block is not None
    transcript, args = block.group(1), block.group(2).split()
    done = subprocess.run([sys.executable, "-m", "hlo_dedup", "dump/", *args], cwd=xla_dump.parent,
                          capture_output=True, text=True, timeout=600,
                          env={**{k: v for k, v in os.environ.items() if k != "XLA_FLAGS"},
                               "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr

    def untimed(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith(("time: ", "$ "))]

    assert untimed(done.stderr) == untimed(transcript)
    shown = json.loads(re.search(r"```json\n(.*?)\n```", README, re.S).group(1))
    assert shown in json.loads((xla_dump.parent / "report.json").read_text())["batch"]["skipped"]
    (xla_dump.parent / "report.json").unlink()



def test_readme_describes_the_example_folds_as_the_passes_make_them() -> None:
    """Both folds of the bundled example gather the tied weight; the README names them."""
    import hlo_dedup

    module = hlo_dedup.load(REPO / "examples" / "fsdp_remat_grad.hlo")
    result = hlo_dedup.run_passes(module)
    folds = [f"{f.kept} ← {f.removed}" for f in result.folds]
    assert folds == ["all_gather.4 ← all_gather.6", "all_gather.13 ← all_gather.15"]
    for fold in folds:
        assert f"(`{fold}`" in README
    assert "Both of its folds come\nfrom that tie" in README and "Remat alone makes no duplicate" in README


def test_readme_states_the_q_kv_order_and_what_first_means() -> None:
    semantics = " ".join(SEMANTICS.split())
    assert "the q reshape with operand n-2" in semantics and "the kv reshape with operand n-1" in semantics
    assert "the order only decides which RET_CHECK" not in semantics
    assert "*First* is in the computation's instruction order" in " ".join(README.split())
    assert "docs/semantics.md" in README and "docs/design.md" in README
