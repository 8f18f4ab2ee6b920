"""`verify` calls modules different only when they are: it runs them on the devices they need,
and judges only against a BEFORE that reproduces itself with finite outputs.

Each test runs XLA; the verdicts checked are the user's: exit 0 equal, 1 different, 2 cannot run
or cannot judge.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import JAX_DATA, UNWRITTEN

from hlo_dedup.cli import main, verify_main
from hlo_dedup.equivalence import check_equivalence, check_equivalence_many, clear_run_cache

pytestmark = pytest.mark.usefixtures("xla_client")  # every test here runs XLA

DATA = Path(__file__).resolve().parent / "data"
CPU_DUMP = DATA / "xla_dump" / "module_0000.jit_train_step.cpu_after_optimizations.txt"

# What torch-xla traces: no replica_count in the header, all-gathers over all participants ({})
# whose output is 4x the operand.
TRACED = """HloModule traced
ENTRY main {
  w = f32[4,8]{1,0} parameter(0)
  x = f32[2,16]{1,0} parameter(1)
  g0 = f32[16,8]{1,0} all-gather(w), replica_groups={}, dimensions={0}
  g1 = f32[16,8]{1,0} all-gather(w), replica_groups={}, dimensions={0}
  d0 = f32[2,8]{1,0} dot(x, g0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d1 = f32[2,8]{1,0} dot(x, g1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[2,8]{1,0} add(d0, d1)
}
"""


def _write(tmp_path: Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def _verify(*args: str) -> tuple[int, str, str]:
    import io

    out, err = io.StringIO(), io.StringIO()
    status = verify_main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


# --- participants -------------------------------------------------------------------------------


def test_a_traced_module_runs_on_the_devices_its_gathers_need() -> None:
    verdicts = []
    for _ in range(2):  # the same verdict every time, from fresh runs
        clear_run_cache()
        report = check_equivalence(TRACED, TRACED)
        verdicts.append((report.status, report.num_replicas, report.num_partitions, report.participants_source))
        assert report.baseline_reproduced is True
        assert "all-gather g0 gathers 4 shards" in report.participants_detail
    assert verdicts == [("equal", 4, 1, "collectives")] * 2


def test_the_deduped_traced_module_and_its_proto_are_equal(tmp_path: Path) -> None:
    before = _write(tmp_path, "traced.hlo", TRACED)
    proto = str(tmp_path / "traced.pb")
    assert main([before, "-o", proto]) == 0  # the default passes fold g1 onto g0
    status, out, _ = _verify(before, proto)
    assert status == 0 and "equal: 1 output bitwise identical (4 devices: 4 replicas x 1 partition" in out


def test_a_header_count_the_proto_drops_is_no_difference(tmp_path: Path) -> None:
    stated = TRACED.replace("HloModule traced", "HloModule traced, replica_count=4")
    text = _write(tmp_path, "stated.hlo", stated)
    proto = str(tmp_path / "stated.pb")
    assert main([text, "-o", proto, "--passes="]) == 0  # a format conversion: the proto has no replica_count
    status, out, _ = _verify(text, proto, "--json")
    report = json.loads(out)
    assert status == 0 and (report["status"], report["num_replicas"], report["participants_source"]) == (
        "equal", 4, "header")


def test_collectives_that_cannot_run_on_the_stated_count_are_exit_2(tmp_path: Path) -> None:
    one = _write(tmp_path, "one.hlo", TRACED.replace("HloModule traced", "HloModule traced, replica_count=1"))
    status, out, err = _verify(one, one)
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert "all-gather g0 gathers 4 shards" in err and "1 replica" in err and "--replicas" in err
    # Stating the count the gathers need runs it.
    status, out, _ = _verify(one, one, "--replicas", "4")
    assert status == 0 and "4 replicas x 1 partition from the command line" in out
    status, _, err = _verify(one, one, "--replicas", "2")
    assert status == 2 and "all-participant group has 2" in err


def test_collectives_that_disagree_are_exit_2() -> None:
    text = TRACED.replace("g1 = f32[16,8]{1,0} all-gather(w)", "g1 = f32[8,8]{1,0} all-gather(w)").replace(
        "d1 = f32[2,8]{1,0} dot(x, g1)", "s = f32[2,8]{1,0} slice(x), slice={[0:2], [0:8]}\n"
        "  d1 = f32[2,8]{1,0} dot(s, g1)")
    report = check_equivalence(text, text)
    assert (report.status, report.exit_code) == ("error", 2)
    assert "disagree" in report.message and "4 shards" in report.message and "2 shards" in report.message


def _with_device_assignment(module: bytes, replicas: int, partitions: int) -> bytes:
    """`module` (a serialized HloModuleProto) with a device_assignment (field 15), as XLA dumps it."""
    assignment = bytes([0x08, replicas, 0x10, partitions])  # replica_count = 1, computation_count = 2
    return module + bytes([15 << 3 | 2, len(assignment)]) + assignment


def test_a_dumped_proto_runs_on_its_device_assignment(tmp_path: Path) -> None:
    from hlo_dedup.io.formats import proto_device_assignment
    from hlo_dedup.xla import text_to_module_proto

    text = _write(tmp_path, "traced.hlo", TRACED)
    dumped = _with_device_assignment(text_to_module_proto(TRACED), 4, 1)
    assert proto_device_assignment(dumped, "m.hlo.pb") == (4, 1)
    proto = _write(tmp_path, "module.hlo.pb", dumped)
    status, out, _ = _verify(proto, text, "--json")
    report = json.loads(out)
    assert status == 0 and (report["num_replicas"], report["participants_source"]) == (4, "device assignment")
    # A device assignment the gathers cannot run on is refused, not run on garbage.
    wrong = _write(tmp_path, "wrong.hlo.pb", _with_device_assignment(text_to_module_proto(TRACED), 2, 1))
    status, out, err = _verify(wrong, wrong)
    assert status == 2 and "gathers 4 shards" in err and "from the device assignment" in err


# --- baselines ----------------------------------------------------------------------------------

# Every input finite, every output NaN: log of a negative number.
NON_FINITE = """HloModule negative_log

ENTRY main {
  p = f32[8]{0} parameter(0)
  a = f32[8]{0} abs(p)
  one = f32[] constant(1)
  ones = f32[8]{0} broadcast(one), dimensions={}
  n = f32[8]{0} subtract(a, ones)
  m = f32[8]{0} subtract(n, a)
  ROOT l = f32[8]{0} log(m)
}
"""

# A gather whose one-member group fills a quarter of its output: XLA:CPU leaves the rest as it
# found it, so two processes see different values there.


def test_a_non_finite_baseline_cannot_be_judged(tmp_path: Path) -> None:
    path = _write(tmp_path, "nan.hlo", NON_FINITE)
    status, out, err = _verify(path, path)
    assert (status, out) == (2, "")
    assert err.startswith(f"{path} vs {path}: cannot judge: BEFORE's outputs are not finite with seed 0 nor with seed 1")
    assert check_equivalence(NON_FINITE, NON_FINITE, seed=7).judged_seeds is None


def test_a_baseline_that_does_not_reproduce_cannot_be_judged(tmp_path: Path) -> None:
    path = _write(tmp_path, "unwritten.hlo", UNWRITTEN)
    status, out, err = _verify(path, path, "--json")
    report = json.loads(err)
    # The unwritten rows hold what each child's memory was filled from, and BEFORE's two runs
    # are given different fills: the baseline fails to reproduce every time, not by luck.
    assert (status, out, report["status"]) == (2, "", "cannot_judge")
    assert report["baseline_reproduced"] is False and "BEFORE does not reproduce itself" in report["message"]
    # The same AFTER written differently (g + g is 2g bitwise) is not "different" either, even
    # though AFTER and the replay run in one child, on the same fill.
    doubled = UNWRITTEN.replace("add(g, g)", "multiply(g, two)").replace(
        "  ROOT", "  c = f32[] constant(2)\n  two = f32[16,8]{1,0} broadcast(c), dimensions={}\n  ROOT")
    assert check_equivalence(UNWRITTEN, doubled).status == "cannot_judge"


def test_the_report_says_how_inputs_were_drawn_and_what_was_judged() -> None:
    report = check_equivalence(TRACED, TRACED, seed=2, runs=2).to_json()
    assert report["judged_seeds"] == [2, 3] and report["baseline_reproduced"] is True
    assert "integers uniform in [0, k)" in report["inputs"]


# --- post-optimization text and the JAX corpus --------------------------------------------------


def test_xla_cpus_own_optimized_dump_runs(tmp_path: Path) -> None:
    # Its row-major bitcasts (f32[16,16] -> f32[16,4,4]) run as the reshapes they are.
    assert " bitcast(" in CPU_DUMP.read_text()
    status, out, _ = _verify(str(CPU_DUMP), str(CPU_DUMP))
    assert status == 0 and "equal: 3 outputs bitwise identical" in out
    deduped = str(tmp_path / "deduped.hlo")
    assert main([str(CPU_DUMP), "-o", deduped, "--verify"]) == 0


def test_every_jax_module_verifies_against_itself() -> None:
    paths = sorted(JAX_DATA.glob("*.hlo"))
    reports = check_equivalence_many([(p.read_text(), p.read_text()) for p in paths])
    verdicts = {p.name: (r.status, r.summary()) for p, r in zip(paths, reports)}
    assert not [name for name, (status, _) in verdicts.items() if status == "different"], verdicts
    # The rest is exit 2 with a reason: XLA:CPU's optimized text of the 2-D-mesh steps does not
    # compile again on XLA:CPU.
    unrunnable = {name for name, (status, _) in verdicts.items() if status != "equal"}
    assert unrunnable <= {f"mesh2d_{p}_post_opt.hlo" for p in ("gspmd", "shardy", "shardmap")}, verdicts
    assert all(verdicts[name][0] == "error" and "could not compile/run" in verdicts[name][1] for name in unrunnable)
