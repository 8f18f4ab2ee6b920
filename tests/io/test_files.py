"""The temporary file an output is written through before its rename: a new file that never
takes over one already there, however its name was chosen (`hlo_dedup.io.files`; the
command's end-to-end guarantees are in tests/cli/test_outputs.py)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from hlo_dedup.io import files
from hlo_dedup.io.files import write_file


def _same_random_name(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """os.urandom as the module sees it gives zeros `times` times, then ones; returns the
    list of the sizes it was asked for."""
    asked: list[int] = []

    def urandom(n: int) -> bytes:
        asked.append(n)
        return bytes(n) if len(asked) <= times else b"\x01" * n

    monkeypatch.setattr(files.os, "urandom", urandom)
    return asked


def test_a_name_already_taken_is_left_alone_and_another_is_drawn(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.hlo"
    taken = tmp_path / f".out.hlo.{os.getpid()}.{'00' * 6}.hlo-dedup.tmp"
    taken.write_text("someone else's\n")
    asked = _same_random_name(monkeypatch, 1)
    write_file(out, "HloModule m\n")
    assert out.read_text() == "HloModule m\n"
    assert taken.read_text() == "someone else's\n"
    assert len(asked) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken.name, "out.hlo"]


def test_no_free_name_is_an_error_naming_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.hlo"
    (tmp_path / f".out.hlo.{os.getpid()}.{'00' * 6}.hlo-dedup.tmp").write_text("taken\n")
    _same_random_name(monkeypatch, 10**6)
    with pytest.raises(OSError) as info:
        write_file(out, "HloModule m\n")
    assert info.value.errno == errno.EEXIST and info.value.filename == str(out)
    assert not out.exists()


def test_a_new_output_gets_the_mode_the_umask_allows(tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    umask = os.umask(0o027)
    try:
        write_file(out, "HloModule m\n")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


def test_an_output_name_of_255_bytes_is_written(tmp_path: Path) -> None:
    for length in (238, 250, 255):
        out = tmp_path / ("x" * (length - 4) + ".hlo")
        write_file(out, "HloModule m\n")
        assert out.read_text() == "HloModule m\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_dead_writers_temporary_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".out.hlo.{int(dead.stdout)}.{'ab' * 6}.hlo-dedup.tmp"
    live = tmp_path / f".out.hlo.{os.getppid()}.{'cd' * 6}.hlo-dedup.tmp"
    other = tmp_path / f".other.hlo.{int(dead.stdout)}.{'ab' * 6}.hlo-dedup.tmp"
    for p in (stale, live, other):
        p.write_text("a fragment\n")
    write_file(tmp_path / "out.hlo", "HloModule m\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name, "out.hlo"])


def test_a_live_writers_temporary_for_a_longer_name_is_kept(tmp_path: Path) -> None:
    """Another output whose name extends this one's by `.N.hlo` (N a process id that is gone)
    has temporaries that start like this output's: the writer's id is where the name says it
    is, never N, so a live worker's temporary is not taken for a dead one's and removed."""
    import subprocess
    import sys

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    live = tmp_path / f".out.hlo.{dead}.hlo.{os.getppid()}.{'cd' * 6}.hlo-dedup.tmp"
    live.write_text("another worker's output, half written\n")
    write_file(tmp_path / "out.hlo", "HloModule m\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "out.hlo"])


def test_a_full_disk_leaves_an_in_place_output_unchanged(tmp_path: Path) -> None:
    # In place (a file with two links): the space is reserved before a byte is overwritten.
    import shutil
    import subprocess

    if not (shutil.which("mount") and os.geteuid() == 0):
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        out = mnt / "out.hlo"
        out.write_text("HloModule old\n")
        os.link(out, mnt / "link.hlo")
        with pytest.raises(OSError) as info:
            write_file(out, "HloModule m\n" + "// padding\n" * 20_000)
        assert info.value.errno == errno.ENOSPC and info.value.filename == str(out)
        assert out.read_text() == "HloModule old\n" == (mnt / "link.hlo").read_text()
    finally:
        subprocess.run(["umount", str(mnt)])
