"""Outputs never damage what the user has: `-o`, `--report` and `--dot` write through special
files and symbolic links, keep hard links, mode and owner, refuse read-only files and any two
names of one file, check every path before the first write, and leave no temporary file
behind, not even when a signal arrives in the middle of a write.

Every test runs `python -m hlo_dedup` on real files, devices, FIFOs and links.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FSDP = DATA / "fsdp_shard_map.hlo"  # the default pipeline folds one of its gathers
COND = DATA / "cond.hlo"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def run(*args: str | Path, cwd: Path | None = None, **kwargs) -> subprocess.CompletedProcess:  # noqa: ANN003
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-m", "hlo_dedup", *map(str, args)], input=b"", capture_output=True,
                          cwd=cwd, env=env, timeout=300, **kwargs)


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, proc.stderr.decode()
    return lines[0]


def expected_output(tmp_path: Path, src: Path = FSDP) -> bytes:
    """What the command writes for `src` to a plain new file."""
    out = tmp_path / "expected" / "out.hlo"
    out.parent.mkdir(exist_ok=True)
    proc = run(src, "-o", out)
    assert proc.returncode == 0, proc.stderr.decode()
    return out.read_bytes()


def no_temporary_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------
# Special files and links are written through


def _device(tmp_path: Path, name: str, minor: int) -> Path:
    """A character device made in tmp_path (root only) that behaves like /dev/<name>: a
    broken build replaces this node, never the machine's own device."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, AttributeError):
        pytest.skip("creating a device node needs root (CAP_MKNOD)")
    return node


def test_a_character_device_is_written_through_not_replaced(tmp_path: Path) -> None:
    null = _device(tmp_path, "null", 3)
    before = os.stat(null)
    for args in (("-o", null), ("-o", tmp_path / "out.hlo", "--report", null, "--dot", null)):
        proc = run(FSDP, *args)
        assert proc.returncode == 0, proc.stderr.decode()
        after = os.stat(null)
        assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "out.hlo"]


def test_a_device_write_error_names_the_path(tmp_path: Path) -> None:
    full = _device(tmp_path, "full", 7)  # every write fails with ENOSPC
    proc = run(FSDP, "-o", full)
    assert proc.returncode == 2
    assert one_line(proc) == f"{full}: error: No space left on device"
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_a_fifo_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = run(FSDP, "-o", fifo)
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert received == [expected_output(tmp_path)]


def test_a_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from hlo_dedup.cli import main
    from hlo_dedup.io import files

    monkeypatch.setattr(files, "FIFO_WAIT_SECONDS", 0.5)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    err = io.StringIO()
    started = time.monotonic()
    status = main([str(FSDP), "-o", str(fifo)], stdin=io.BytesIO(), stdout=io.StringIO(), stderr=err)
    assert time.monotonic() - started < 60
    assert status == 2 and err.getvalue() == f"{fifo}: error: no process read this FIFO within 0.5 s\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_writes_its_target_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "model.hlo"
    target.write_text("old\n")
    link = tmp_path / "link.hlo"
    link.symlink_to(Path("real") / "model.hlo")
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(Path("real") / "report.json")
    proc = run(FSDP, "-o", link, "--report", dangling)
    assert proc.returncode == 0, proc.stderr.decode()
    assert link.is_symlink() and os.readlink(link) == str(Path("real") / "model.hlo")
    assert target.read_bytes() == expected_output(tmp_path)
    assert dangling.is_symlink() and (tmp_path / "real" / "report.json").read_text().startswith("{")
    assert no_temporary_files(tmp_path)


def test_a_hard_link_stays_one_inode(tmp_path: Path) -> None:
    first = tmp_path / "a.hlo"
    first.write_text("old\n")
    second = tmp_path / "b.hlo"
    os.link(first, second)
    proc = run(FSDP, "-o", first)
    assert proc.returncode == 0, proc.stderr.decode()
    assert os.stat(first).st_ino == os.stat(second).st_ino and os.stat(first).st_nlink == 2
    assert second.read_bytes() == expected_output(tmp_path)


def test_mode_and_owner_of_an_existing_file_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    out.write_text("old\n")
    os.chmod(out, 0o640)
    owner = (os.stat(out).st_uid, os.stat(out).st_gid)
    if IS_ROOT:
        owner = (4321, 4322)
        os.chown(out, *owner)
    proc = run(FSDP, "-o", out)
    assert proc.returncode == 0, proc.stderr.decode()
    st = os.stat(out)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o640, *owner)
    assert out.read_bytes() == expected_output(tmp_path)


def test_a_read_only_file_is_an_error_not_clobbered(tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    out.write_text("keep me\n")
    os.chmod(out, 0o444)
    proc = run(FSDP, "-o", out)
    assert proc.returncode == 2
    assert one_line(proc) == f"{out}: error: cannot write: the file is read-only (not overwritten)"
    assert out.read_text() == "keep me\n" and stat.S_IMODE(os.stat(out).st_mode) == 0o444


WITHOUT_OVERRIDES = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-chown,-fowner"]


@pytest.mark.skipif(not IS_ROOT or not shutil.which("setpriv"),
                    reason="needs root and setpriv to run the command without permission overrides")
def test_another_users_file_is_not_replaced(tmp_path: Path) -> None:
    """Run without the capabilities that let root ignore file permissions, on a file of
    another user in a directory anyone may write: renaming over it would work, writing it
    must not."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    theirs = shared / "out.hlo"
    theirs.write_text("theirs\n")
    os.chown(theirs, 4321, 4321)
    os.chmod(theirs, 0o644)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.run([*WITHOUT_OVERRIDES, sys.executable, "-m", "hlo_dedup", str(FSDP), "-o", str(theirs)],
                          input=b"", capture_output=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr.decode()
    assert one_line(proc) == f"{theirs}: error: cannot write: the file is read-only (not overwritten)"
    assert theirs.read_text() == "theirs\n" and os.stat(theirs).st_uid == 4321
    assert sorted(p.name for p in shared.iterdir()) == ["out.hlo"]


def test_a_failed_write_names_the_users_path_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A file-size limit makes the write of the temporary file fail half way."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))

    out = tmp_path / "out.hlo"
    proc = run(FSDP, "-o", out, preexec_fn=limit)
    assert proc.returncode == 2
    assert one_line(proc) == f"{out}: error: File too large"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Two names of one file; every path checked before the first write


@pytest.mark.parametrize("spelling", ["same", "dot-slash", "symlink", "hardlink"])
@pytest.mark.parametrize("clash", ["report-is-input", "dot-is-input", "report-is-output", "dot-is-report"])
def test_two_names_of_one_file_are_refused_before_writing(tmp_path: Path, spelling: str, clash: str) -> None:
    src = tmp_path / "model.hlo"
    src.write_bytes(FSDP.read_bytes())
    out = tmp_path / "out.hlo"
    out.write_text("old output\n")
    report = tmp_path / "r.json"
    first = {"report-is-input": src, "dot-is-input": src, "report-is-output": out, "dot-is-report": report}[clash]
    if spelling == "same":
        second = first
    elif spelling == "dot-slash":
        second = f"./{first.name}"
    elif spelling == "symlink":
        second = tmp_path / "alias"
        second.symlink_to(first.name)
    else:
        if not first.exists():
            first.write_text("{}\n")
        second = tmp_path / "alias"
        os.link(first, second)
    args = {
        "report-is-input": ("-o", out, "--report", second),
        "dot-is-input": ("-o", out, "--dot", second),
        "report-is-output": ("-o", first, "--report", second),
        "dot-is-report": ("-o", out, "--report", first, "--dot", second),
    }[clash]
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    proc = run(src, *args, cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line(proc)
    assert line.startswith("hlo-dedup: error: --") and line.endswith(": nothing written"), line
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_the_output_may_still_be_the_input(tmp_path: Path) -> None:
    src = tmp_path / "model.hlo"
    src.write_bytes(FSDP.read_bytes())
    proc = run("./model.hlo", "-o", src, "--report", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert src.read_bytes() == expected_output(tmp_path)


def test_every_output_is_checked_before_the_first_write(tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    for bad in ("missing/r.json", "sub", "ro.json"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        (tmp_path / "ro.json").write_text("{}\n")
        os.chmod(tmp_path / "ro.json", 0o444)
        proc = run(FSDP, "-o", out, "--dot", tmp_path / "f.dot", "--report", bad, cwd=tmp_path)
        assert proc.returncode == 2
        assert one_line(proc).startswith(f"{bad}: error: cannot write"), one_line(proc)
        assert not out.exists() and not (tmp_path / "f.dot").exists()
    proc = run(FSDP, "-o", tmp_path / "missing" / "out.hlo", "--report", tmp_path / "r.json")
    assert one_line(proc) == (f"{tmp_path / 'missing' / 'out.hlo'}: error: cannot write: directory "
                              f"'{tmp_path / 'missing'}' does not exist")
    assert not (tmp_path / "r.json").exists()


def test_batch_outputs_are_checked_against_every_input(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for f in (FSDP, COND):
        (src / f.name).write_bytes(f.read_bytes())
    proc = run(src, "--output-dir", tmp_path / "out", "--report", src / COND.name)
    assert proc.returncode == 2
    assert one_line(proc) == (f"hlo-dedup: error: --report {src / COND.name} is the input {src / COND.name}: "
                              "nothing written")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / COND.name).symlink_to(src / FSDP.name)  # cond's output would overwrite fsdp
    proc = run(src, "--output-dir", tmp_path / "out")
    assert proc.returncode == 2
    assert one_line(proc) == (f"hlo-dedup: error: the output {tmp_path / 'out' / COND.name} is the input "
                              f"{src / FSDP.name}: nothing written")
    assert (src / FSDP.name).read_bytes() == FSDP.read_bytes() and (src / COND.name).read_bytes() == COND.read_bytes()
    assert [p.name for p in (tmp_path / "out").iterdir()] == [COND.name]


# ---------------------------------------------------------------------------------------------
# --split-input-file -o INPUT


def test_split_input_file_rewritten_in_place_reads_back(tmp_path: Path) -> None:
    two = tmp_path / "two.hlo"
    two.write_text(COND.read_text() + "\n// -----\n\n" + FSDP.read_text())
    proc = run("--split-input-file", two, "-o", two)
    assert proc.returncode == 0, proc.stderr.decode()
    first = two.read_text()
    assert first.count("\n// -----\n") == 1 and first.startswith(COND.read_text())
    for flags in (["--split-input-file", "--passes="], ["--split-input-file"]):
        proc = run(*flags, two, "-o", two)  # reads back as the same two modules, and is a fixed point
        assert proc.returncode == 0, proc.stderr.decode()
        assert "1 of 2 modules changed" not in proc.stderr.decode()
        assert two.read_text() == first


# ---------------------------------------------------------------------------------------------
# Signals in the middle of a write


@pytest.fixture(scope="module")
def big_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 30 MB module that parses fast (one constant): its write takes long enough to be hit."""
    path = tmp_path_factory.mktemp("big") / "big.hlo"
    n = 10_000_000
    path.write_text(f"HloModule big\n\nENTRY main {{\n  ROOT c = f32[{n}]{{0}} constant({{{', '.join(['0'] * n)}}})\n}}\n")
    return path


def _wait_for_temporary(root: Path, proc: subprocess.Popen, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if not no_temporary_files(root):
            return True
        time.sleep(0.0005)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_write_leaves_no_temporary_file(tmp_path: Path, big_module: Path, signum: int) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "big.hlo"
    hits = 0
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "hlo_dedup", big_module, "--passes=", "-o", out],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if _wait_for_temporary(out_dir, proc):
            hits += 1
            proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
        assert no_temporary_files(out_dir), sorted(p.name for p in out_dir.iterdir())
        assert proc.returncode in (0, 128 + signum), stderr.decode()
        if proc.returncode:
            assert stderr.decode().splitlines()[-1] == f"hlo-dedup: terminated by {signal.Signals(signum).name}"
        assert not out.exists() or out.read_bytes() == big_module.read_bytes()  # whole, or not at all
        out.unlink(missing_ok=True)
    assert hits, "the temporary file was never seen: the test did not hit a write"


def test_ctrl_c_in_batch_mode_leaves_no_temporary_file(tmp_path: Path, big_module: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for i in range(4):
        os.link(big_module, src / f"big{i}.hlo")
    out_dir = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "hlo_dedup", src, "--passes=", "--output-dir", out_dir, "-j", "2"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    out_dir.mkdir(exist_ok=True)
    hit = _wait_for_temporary(out_dir, proc)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: every process of the terminal's group
    _, stderr = proc.communicate(timeout=120)
    assert hit, stderr.decode()
    assert proc.returncode == 130, stderr.decode()
    assert stderr.decode().splitlines()[-1] == "hlo-dedup: interrupted"
    assert no_temporary_files(out_dir), sorted(p.name for p in out_dir.rglob("*"))
    for path in out_dir.rglob("*.hlo"):
        assert path.read_bytes() == big_module.read_bytes()


def test_a_reader_that_leaves_early_ends_the_run_quietly(big_module: Path) -> None:
    """`hlo-dedup x.hlo -o - | head`: output is streamed, so the reader leaving breaks the
    pipe mid-write; the run stops there, exit 0, no error line and no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "hlo_dedup", big_module, "--passes=", "-o", "-"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.read(100) == big_module.read_bytes()[:100]
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr.decode()
    assert "error" not in stderr.decode() and "Traceback" not in stderr.decode()
