"""Bytes that are not UTF-8, in a module or in a file name, and names with control
characters: the module round-trips byte for byte, the reports are valid UTF-8 that spell
such bytes `\\xNN`, and every message stays on one inert line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LATIN1_MODULE = (
    b"HloModule m, replica_count=2\nENTRY e {\n  p = f32[2]{0} parameter(0)\n"
    b'  g0 = f32[4]{0} all-gather(p), replica_groups={{0,1}}, dimensions={0}, '
    b'metadata={op_name="caf\xe9" source_file="/src/\xe9t\xe9.py" source_line=3}\n'
    b"  g1 = f32[4]{0} all-gather(p), replica_groups={{0,1}}, dimensions={0}\n"
    b"  ROOT a = f32[4]{0} add(g0, g1)\n}\n"
)


def run(*args: str | bytes | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hlo_dedup", *map(os.fsencode, args)], capture_output=True,
                          cwd=cwd, timeout=120)


def test_latin1_metadata_reaches_every_report(tmp_path: Path) -> None:
    (tmp_path / "m.hlo").write_bytes(LATIN1_MODULE)
    proc = run("m.hlo", "-o", "o.hlo", "--report", "r.json", "--html", "p.html", "--dot", "f.dot", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_bytes().decode("utf-8"))
    [gather] = [g for g in report["modules"][0]["all_gathers"] if g["name"] == "g0"]
    assert gather["op_name"] == "caf\\xe9"
    page = (tmp_path / "p.html").read_bytes().decode("ascii")
    assert "caf\\xe9" in page
    (tmp_path / "f.dot").read_bytes().decode("utf-8")
    # The module itself keeps its bytes: only the fold changed it.
    assert b'op_name="caf\xe9" source_file="/src/\xe9t\xe9.py"' in (tmp_path / "o.hlo").read_bytes()


def test_a_file_name_that_is_not_utf8_is_spelled_in_messages_and_reports(tmp_path: Path) -> None:
    name = b"n\xe9.hlo"
    (tmp_path / os.fsdecode(name)).write_bytes(LATIN1_MODULE)
    proc = run(name, "-o", "o.hlo", "--report", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode("utf-8").startswith("module m (n\\xe9.hlo):")
    report = json.loads((tmp_path / "r.json").read_bytes().decode("utf-8"))
    assert report["input"] == report["modules"][0]["input"] == "n\\xe9.hlo"


def test_control_characters_in_a_file_name_stay_on_one_inert_line(tmp_path: Path) -> None:
    name = "bad\nname\x1b[31m.hlo"
    (tmp_path / name).write_bytes(b"junk")
    proc = run(name, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "bad\\x0aname\\x1b[31m.hlo:1:1: error: expected 'HloModule' or a computation (at 'junk')\n"
    proc = run("missing\r.hlo", cwd=tmp_path)
    assert proc.stderr.decode() == "missing\\x0d.hlo: error: No such file or directory\n"
