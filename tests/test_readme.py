"""The README's quick start and Python example run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from support import IN_CI, REPO

README = (REPO / "README.md").read_text()


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


def test_python_example_in_readme_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    block = re.search(r"```python\n(.*?)```", README, re.S)
    assert block is not None, "README lost its Python example"
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "fsdp_remat_grad.hlo", tmp_path / "examples")
    done = subprocess.run(
        [sys.executable, "-c", block.group(1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True 2 []"), done.stdout
    assert "all_gather.4 <- all_gather.6" in done.stdout
    written = (tmp_path / "fsdp_remat_grad.dedup.hlo").read_text()
    assert written.count("all-gather(") == 6
