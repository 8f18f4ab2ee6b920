"""What a plain run imports: start-up is paid on every command, so what only a report, a
picture, a proto, batch mode, `--v` or an error path needs loads when used.

Each case runs the command (`hlo_dedup.cli.main`, what `hlo-dedup` calls) in a fresh
interpreter on a module JAX wrote, and lists the modules it imported. Timings live in
`benchmarks/real_modules.py --startup`; this checks the imports that decide them.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

FSDP = Path(__file__).resolve().parents[1] / "data" / "jax" / "fsdp_shard_map.hlo"  # the default pipeline folds

#: Loaded by no plain text run: the JSON report, the drawing and the page (with json,
#: html), the proto reader, the XLA bridge, batch mode, `--v` (logging), a mistyped pass
#: name (difflib), compressed files (gzip) and the temporary-file module (tempfile); nor
#: dataclasses (with inspect, ast, dis, tokenize): the records are hlo_dedup.plain's; nor
#: threading (the live display's timer) or shutil with lzma and bz2 (argparse's way to the
#: terminal width).
ON_DEMAND = frozenset({
    "hlo_dedup.report.json", "hlo_dedup.report.dot", "hlo_dedup.report.html", "hlo_dedup.io.proto",
    "hlo_dedup.xla", "hlo_dedup.equivalence", "hlo_dedup.batch", "hlo_dedup.io.discovery",
    "json", "logging", "difflib", "gzip", "tempfile", "dataclasses", "inspect",
    "threading", "shutil", "lzma", "bz2",
})

_LIST_MODULES = """\
import sys
from hlo_dedup.cli import main
status = main(sys.argv[1:]) if len(sys.argv) > 1 else 0
print(status, *sorted(sys.modules))
"""


def imported(*args: str | Path, status: int = 0) -> set[str]:
    """The modules a fresh interpreter holds after `hlo-dedup ARGS` (none: after the import),
    which must end with exit status `status`, less those the bare interpreter holds (a
    host's site-packages may import anything at start-up, tempfile and all)."""
    ended, *modules = _run(_LIST_MODULES, *map(str, args))
    assert ended == str(status)
    return set(modules) - _bare_interpreter()


@functools.cache
def _bare_interpreter() -> frozenset[str]:
    return frozenset(_run("import sys; print(*sys.modules)"))


def _run(script: str, *args: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=False,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("passes", [[], ["--passes="]], ids=["default pipeline", "no passes"])
def test_a_plain_text_run_loads_nothing_on_demand(tmp_path: Path, passes: list[str]) -> None:
    modules = imported(FSDP, *passes, "-o", tmp_path / "out.hlo")
    assert "hlo_dedup.report.summary" in modules and "hlo_dedup.passes" in modules
    assert not modules & ON_DEMAND, sorted(modules & ON_DEMAND)
    assert (tmp_path / "out.hlo").exists()


def test_importing_the_command_loads_nothing_on_demand() -> None:
    modules = imported()
    assert "hlo_dedup.cli" in modules
    assert not modules & ON_DEMAND, sorted(modules & ON_DEMAND)


@pytest.mark.parametrize(("args", "loaded", "status"), [
    (["--report", "{tmp}/r.json"], {"hlo_dedup.report.json", "json"}, 0),
    (["--v=2"], {"logging"}, 0),
    (["--vmodule=neuron_all_gather_duplicate_remover=2"], {"logging"}, 0),
    (["--passes=neuron_all_gather_duplicate_remove"], {"difflib"}, 2),
], ids=["report", "v", "vmodule", "mistyped pass"])
def test_what_a_run_asks_for_is_loaded(tmp_path: Path, args: list[str], loaded: set[str], status: int) -> None:
    """The other side: each of those modules is there when the run needs it."""
    modules = imported(FSDP, "-o", tmp_path / "out.hlo", *(a.format(tmp=tmp_path) for a in args), status=status)
    assert loaded <= modules


def test_a_compressed_output_loads_gzip(tmp_path: Path) -> None:
    assert "gzip" in imported(FSDP, "-o", tmp_path / "out.hlo.gz")


def test_the_page_and_the_report_need_no_dataclasses(tmp_path: Path) -> None:
    """Their records are plain ones too: `dataclasses` would bring inspect, ast, dis and
    tokenize, a tenth of a small run."""
    modules = imported(FSDP, "-o", tmp_path / "out.hlo", "--html", tmp_path / "p.html", "--report", tmp_path / "r.json")
    assert {"hlo_dedup.report.html", "hlo_dedup.report.json"} <= modules
    assert not modules & {"dataclasses", "inspect"}, sorted(modules & {"dataclasses", "inspect"})
