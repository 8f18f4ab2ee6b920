"""XLA runs in a child process: its crashes and its logging never reach the command.

Real XLA crashes: a `reshape` of f32[6] to f32[5] aborts XLA's parser on a failed CHECK when
it is written as `.pb`, a tuple shape nested 10,000 deep overflows its stack; a corrupt
proto makes XLA log a RET_CHECK with a stack trace. Each must be one `file: error:` line with
exit 2. The child is isolated: a `./ml_dtypes.py` in the current directory is not imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_dedup.xla import XlaError

pytestmark = pytest.mark.usefixtures("xla_client")  # every test here runs XLA

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FSDP = DATA / "fsdp_shard_map.hlo"

RESHAPE_6_TO_5 = """HloModule r

ENTRY main {
  p = f32[6]{0} parameter(0)
  ROOT r = f32[5]{0} reshape(p)
}
"""


def deep_tuple_module(depth: int) -> str:
    shape = "(" * depth + "f32[]" + ")" * depth
    return f"HloModule deep\n\nENTRY main {{\n  ROOT p = {shape} parameter(0)\n}}\n"


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    # -P: the command's own import path does not start with the current directory either.
    return subprocess.run([sys.executable, "-P", "-m", "hlo_dedup", *map(str, args)], input=b"",
                          capture_output=True, cwd=cwd, env=env, timeout=300)


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, proc.stderr.decode()
    return lines[0]


def test_a_check_failure_writing_a_proto_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "r.hlo"
    src.write_text(RESHAPE_6_TO_5)
    proc = run(src, "-o", tmp_path / "r.pb")
    assert proc.returncode == 2
    assert one_line(proc).startswith(f"{tmp_path / 'r.pb'}: error: XLA could not parse the module to write it as a proto: "
                                     "XLA crashed (SIGABRT): Check failed: ")
    assert "shape: f32[5] operand: f32[6]" in one_line(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.hlo"]


def test_a_shape_too_deep_for_xla_is_refused_before_xla_runs(tmp_path: Path) -> None:
    """A 10,000-deep tuple shape segfaults XLA's parser; both our readers refuse it where it
    passes MAX_NESTING, so the command says where, and XLA never sees it."""
    src = tmp_path / "deep.hlo"
    src.write_text(deep_tuple_module(10_000))
    proc = run(src, "--passes=", "-o", tmp_path / "deep.pb")
    assert proc.returncode == 2
    assert one_line(proc).startswith(f"{src}:4:212: error: tuple shape nests deeper than 200 levels")
    assert not (tmp_path / "deep.pb").exists()


def test_batch_mode_writes_every_good_proto_when_xla_crashes_on_one(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "r.hlo").write_text(RESHAPE_6_TO_5)
    for name in ("fsdp_shard_map.hlo", "cond.hlo", "sort.hlo"):
        (src / name).write_bytes((DATA / name).read_bytes())
    proc = run(src, "--output-dir", tmp_path / "out", "--output-format", "pb", "-j", "2")
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert f"{tmp_path / 'out' / 'r.hlo'}: error: XLA could not parse the module to write it as a proto: XLA crashed " \
        "(SIGABRT): Check failed: " in err
    assert "files: 3 ok, 1 failed (of 4)" in err and "worker process died" not in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cond.hlo", "fsdp_shard_map.hlo", "sort.hlo"]


def test_xla_is_usable_again_after_a_crash() -> None:
    from hlo_dedup.xla import isolated

    with pytest.raises(XlaError, match=r"^XLA crashed \(SIGABRT\): Check failed"):
        isolated.text_to_module_proto(RESHAPE_6_TO_5)
    proto = isolated.text_to_module_proto(FSDP.read_text())
    assert "jit__fsdp_forward" in isolated.module_proto_to_text(proto)


def corrupt_shape_proto(text: str) -> bytes:
    """The module's proto with one shape claiming a dynamic dimension it does not have:
    XLA answers with a RET_CHECK failure, which it logs with a stack trace."""
    from google.protobuf import descriptor_pool, message_factory

    from hlo_dedup.io import hlo_schema
    from hlo_dedup.xla import oracle

    pool = descriptor_pool.DescriptorPool()
    pool.Add(hlo_schema.file_descriptor_proto())
    module_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("xla.HloModuleProto"))
    module = module_class.FromString(oracle.text_to_module_proto(text))
    shape = module.computations[-1].instructions[0].shape
    del shape.dimensions[:]
    shape.is_dynamic_dimension.extend([False, False])
    return module.SerializeToString()


def test_a_ret_check_on_a_corrupt_proto_prints_no_stack_trace(capfd: pytest.CaptureFixture[str]) -> None:
    from hlo_dedup.xla import isolated

    with pytest.raises(XlaError) as info:
        isolated.module_proto_to_text(corrupt_shape_proto(FSDP.read_text()))
    message = str(info.value)
    assert message.startswith("INTERNAL: RET_CHECK failure") and "Malformed shape proto" in message
    assert "\n" not in message
    assert "stack trace" not in capfd.readouterr().err


def test_the_command_reads_the_corrupt_proto_without_xla(tmp_path: Path) -> None:
    """The command prints protos itself, and refuses what XLA's loader refuses."""
    src = tmp_path / "corrupt.pb"
    src.write_bytes(corrupt_shape_proto(FSDP.read_text()))
    proc = run(src)
    assert proc.returncode == 2 and proc.stdout == b""
    assert one_line(proc) == f"{src}: error: XLA would reject the HloModuleProto: shape has 0 dimensions but 4 dynamic flags"


def test_the_child_does_not_import_from_the_current_directory(tmp_path: Path) -> None:
    """A `ml_dtypes.py` (or `jax.py`) beside the user's files is not the real one."""
    for name in ("ml_dtypes", "numpy", "jax"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the local {name}.py was imported')\n")
    src = tmp_path / "m.hlo"
    src.write_text(FSDP.read_text())
    proc = run("m.hlo", "-o", "m.pb", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    proc = run("verify", "m.hlo", "m.pb", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("m.hlo vs m.pb: equal: ")


def test_a_crash_message_names_the_check() -> None:
    from hlo_dedup.xla.isolated import crash_message

    log = ("E1130 status_macros.cc:58] INTERNAL: RET_CHECK failure\n*** Begin stack trace ***\n\t\n"
           "F1130 22:22:04.615426    6634 shape.h:397] Check failed: has_layout() element_type: F32\n"
           "*** Check failure stack trace: ***\n    @     0x7f5ea8ea7a17  xla::HloInstruction::x()\n")
    assert crash_message(-6, log) == "XLA crashed (SIGABRT): Check failed: has_layout() element_type: F32"
    traceback = "Traceback (most recent call last):\n  File \"x\", line 1\n    import jax\nImportError: no jax\n"
    assert crash_message(1, traceback) == "XLA crashed (exit status 1): ImportError: no jax"
    assert crash_message(-9, "") == "XLA crashed (SIGKILL)"
    assert crash_message(-11, "") == "XLA crashed (SIGSEGV, a segmentation fault: e.g. a shape nested too deeply for XLA)"


def test_the_xla_children_end_when_the_command_is_killed(xla_client) -> None:  # type: ignore[no-untyped-def]
    import signal
    import time

    module = Path(__file__).resolve().parents[1] / "data" / "jax" / "fsdp_remat_grad.hlo"
    command = subprocess.Popen([sys.executable, "-m", "hlo_dedup", "verify", str(module), str(module)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if stat[1] == str(command.pid) and stat[0] != "Z":
                found.append(int(entry))
        return found

    deadline = time.monotonic() + 60
    while not children() and time.monotonic() < deadline and command.poll() is None:
        time.sleep(0.05)
    started = children()
    assert started, "verify started no XLA child"
    os.kill(command.pid, signal.SIGKILL)  # no handler runs: only the children can notice
    command.wait()

    def alive(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 15
    while any(map(alive, started)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(alive, started))


def test_a_module_asking_for_more_devices_than_the_cpu_runs_is_one_line(tmp_path: Path, xla_client) -> None:  # type: ignore[no-untyped-def]
    from hlo_dedup.xla import MAX_CPU_DEVICES

    module = tmp_path / "many.hlo"
    module.write_text(f"HloModule m, replica_count={MAX_CPU_DEVICES * 1024}\nENTRY e {{\n  p = f32[2]{{0}} parameter(0)\n"
                      "  ROOT n = f32[2]{0} negate(p)\n}\n")
    for argv in (["verify", str(module), str(module)], [str(module), "--price=xla", "-o", str(tmp_path / "o.hlo")]):
        done = subprocess.run([sys.executable, "-m", "hlo_dedup", *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.splitlines()[-1:]
        assert f"the module needs {MAX_CPU_DEVICES * 1024} devices; XLA:CPU runs at most {MAX_CPU_DEVICES}" in line
