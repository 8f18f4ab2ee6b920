"""`check_equivalence` / `hlo-dedup verify` / `--verify`: before and after a rewrite, run on XLA:CPU,
compared bitwise.

Runs are cached inside hlo_dedup.equivalence (XLA:CPU runs are bitwise deterministic), so a module's
BEFORE run is shared by every check against it in this session: the default-pipeline checks of
the JAX modules feed the wrong-rewrite check, and each hazard fixture's BEFORE run serves both the
faithful and the strict check.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

import hlo_dedup
from hlo_dedup.cli import main, verify_main
from hlo_dedup.equivalence import EquivalenceReport, check_equivalence, check_equivalence_many
from hlo_dedup.passes.dce import run_dce

pytestmark = pytest.mark.usefixtures("xla_client")  # every test here runs XLA

DATA = Path(__file__).resolve().parent / "data"
JAX_DATA = DATA / "jax"
HAZARDS = DATA / "hazards"
HAZARD_FILES = sorted(HAZARDS.glob("*.hlo"))
# XLA:CPU's post-optimization text of the 2-D-mesh steps does not compile again on XLA:CPU
# (layouts of its bitcasts and buffers are lost on the way): verify says so, never "different".
NOT_RUNNABLE = {f"mesh2d_{program}_post_opt.hlo": "XLA:CPU could not compile/run BEFORE: "
                for program in ("gspmd", "shardy", "shardmap")}
JAX_MODULES = [p.name for p in sorted(JAX_DATA.glob("*.hlo"))]


def _dedup(text: str, *, strict: bool = False) -> tuple[str, hlo_dedup.Result]:
    module = hlo_dedup.load(text)
    result = hlo_dedup.run_passes(module, strict=strict)
    return module.to_text(), result


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- the JAX-generated modules, before vs after the default passes ------------------------------


@pytest.fixture(scope="module")
def jax_reports() -> dict[str, tuple[EquivalenceReport, int]]:
    """Every JAX module before vs after the default passes, all in one XLA child process."""
    befores = [(JAX_DATA / name).read_text() for name in JAX_MODULES]
    dedups = [_dedup(text) for text in befores]
    reports = check_equivalence_many([(before, after) for before, (after, _) in zip(befores, dedups)])
    return {name: (report, len(result.folds)) for name, report, (_, result) in zip(JAX_MODULES, reports, dedups)}


@pytest.mark.parametrize("name", JAX_MODULES)
def test_default_passes_preserve_jax_modules(name: str, jax_reports: dict) -> None:
    report, _ = jax_reports[name]  # post-optimization text too (gspmd_post_opt: see cpu_runnable_text)
    if name in NOT_RUNNABLE:
        assert report.status == "error" and NOT_RUNNABLE[name] in report.message, report.message
        return
    assert report.status == "equal", report.message
    assert report.exit_code == 0 and report.num_outputs >= 1


def test_jax_corpus_exercises_folds(jax_reports: dict) -> None:
    """The equal verdicts above are about real rewrites: several modules do fold gathers."""
    folded = {name for name, (report, folds) in jax_reports.items() if folds}
    assert len(folded) >= 6, folded
    assert all(jax_reports[name][0].equal for name in folded - NOT_RUNNABLE.keys())


# --- a wrong rewrite -----------------------------------------------------------------------------


def _wrong_dedup(text: str) -> str:
    """Fold an all-gather onto one of the same shape that gathers a *different* parameter."""
    module = hlo_dedup.load(text)
    for comp in module.computations:
        gathers = [i for i in comp.instructions if i.opcode == "all-gather"]
        for i, keep in enumerate(gathers):
            for other in gathers[i + 1:]:
                if keep.shape.to_text() == other.shape.to_text() and keep.operands[0] is not other.operands[0]:
                    other.replace_all_uses_with(keep)
                    run_dce(module)
                    return module.to_text()
    raise AssertionError("no two same-shape gathers of different values")


def test_wrong_rewrite_is_different_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (JAX_DATA / "fsdp_shard_map.hlo").read_text()  # its BEFORE run is cached above
    after = _wrong_dedup(before)
    code = verify_main([_write(tmp_path, "before.hlo", before), _write(tmp_path, "after.hlo", after)])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "different: output 0 of 1 (f32[32,16])" in out and "max abs diff" in out
    assert "Traceback" not in out + err

    report = check_equivalence(before, after)  # cached: no new XLA run
    assert (report.status, report.output_index, report.per_device) == ("different", 0, False)
    assert report.max_abs_diff > 0 and report.mismatched_elements > 0


def _main(*args: str | Path) -> tuple[int, str]:
    """`hlo-dedup ARGS` in this process: (exit status, stderr)."""
    stderr = io.StringIO()
    status = main([str(a) for a in args], stdin=io.BytesIO(), stdout=io.StringIO(), stderr=stderr)
    return status, stderr.getvalue()


def test_verify_flag_on_a_correct_rewrite(tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    status, err = _main(JAX_DATA / "fsdp_shard_map.hlo", "-o", out, "--verify")  # BEFORE run cached above
    assert status == 0, err
    assert err.startswith("verify jit__fsdp_forward: equal: 1 output bitwise identical "
                          "(8 devices: 1 replica x 8 partitions, seed 0)\n")
    assert out.read_text().count("all-gather(") == 3


def test_verify_flag_exits_as_the_verify_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--verify` and `verify` give the same status: 1 different, 2 XLA:CPU cannot run it, 0 equal."""
    hazard = HAZARDS / "channel_mode.hlo"
    faithful, strict = tmp_path / "faithful.hlo", tmp_path / "strict.hlo"
    assert _main(hazard, "-o", faithful)[0] == 0  # the faithful pass folds across collective modes
    assert _main(hazard, "-o", strict, "--strict")[0] == 0
    kernel = _write(tmp_path, "kernel.hlo", NEURON_KERNEL)
    checks = [
        ((hazard, faithful), (hazard, "--verify"), 1, "computes different results after the passes"),
        ((hazard, strict), (hazard, "--strict", "--verify"), 0, None),
        ((kernel, kernel), (kernel, "--verify"), 2, "could not be run on XLA:CPU"),
    ]
    for pair, flags, expected, message in checks:
        assert verify_main([str(p) for p in pair]) == expected, capsys.readouterr()
        out = tmp_path / f"verified_{expected}.hlo"
        status, err = _main(*flags, "-o", out)
        assert status == expected, err
        assert out.exists() == (expected == 0)
        if message is not None:
            assert err.splitlines()[-1] == f"{flags[0]}: error: --verify: module {hlo_dedup.load(flags[0]).name} " \
                f"{message}; nothing written"
        assert "Traceback" not in err


# --- hazard fixtures: the faithful pass miscompiles, strict mode does not -----------------------


@pytest.fixture(scope="module")
def hazard_reports() -> dict[str, dict]:
    """Each hazard fixture: the faithful and the strict rewrite, all verified in one XLA child."""
    cases = {}
    for path in HAZARD_FILES:
        before = path.read_text()
        faithful, faithful_result = _dedup(before)
        strict, strict_result = _dedup(before, strict=True)
        cases[path.stem] = {"before": before, "faithful": faithful, "strict": strict,
                            "faithful_result": faithful_result, "strict_result": strict_result}
    pairs = [(c["before"], c[mode]) for c in cases.values() for mode in ("faithful", "strict")]
    reports = iter(check_equivalence_many(pairs))
    for case in cases.values():
        case["faithful_report"], case["strict_report"] = next(reports), next(reports)
    return cases


@pytest.mark.parametrize("stem", [p.stem for p in HAZARD_FILES])
def test_hazard_faithful_miscompiles_strict_is_equal(stem: str, hazard_reports: dict) -> None:
    case = hazard_reports[stem]
    result = case["faithful_result"]
    assert result.folds and all(f.hazardous for f in result.folds)
    assert len(result.hazards) == len(result.folds) and not any(h.refused for h in result.hazards)
    report = case["faithful_report"]
    assert report.status == "different", report.summary()
    assert report.exit_code == 1 and report.per_device and report.max_abs_diff > 0

    strict_result = case["strict_result"]
    assert not strict_result.folds and all(h.refused for h in strict_result.hazards)
    report = case["strict_report"]
    assert report.status == "equal", report.summary()


def test_hazard_fixtures_cover_the_brief() -> None:
    assert {p.stem for p in HAZARD_FILES} >= {
        "tunnelled_inner_groups", "channel_mode", "multi_operand", "gather_dimension",
        "tunnelled_inner_operands", "tunnelled_inner_mode",
    }
    header = (HAZARDS / "channel_mode.hlo").read_text()
    assert "replica_count=2, num_partitions=2" in header


def test_no_spmd_flag_runs_partitioned_text_per_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ENTRY not named *_spmd: only --no-spmd says the text is already per-device.
    before = (HAZARDS / "channel_mode.hlo").read_text().replace("%main_spmd", "%main")
    faithful, _ = _dedup(before)
    paths = [_write(tmp_path, "before.hlo", before), _write(tmp_path, "after.hlo", faithful)]
    assert verify_main([*paths, "--no-spmd", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["num_replicas"], report["num_partitions"]) == ("different", 2, 2)
    assert report["per_device"] is True and report["exit_code"] == 1


# --- replicated and SPMD modules that fold correctly --------------------------------------------

REPLICATED = """HloModule replicated_dup, replica_count=4

ENTRY %main (p: f32[2,3], q: f32[2,3]) -> (f32[8,3], f32[8,3], f32[8,3]) {
  %p = f32[2,3]{1,0} parameter(0)
  %q = f32[2,3]{1,0} parameter(1)
  %g1 = f32[8,3]{1,0} all-gather(f32[2,3]{1,0} %p), replica_groups={{0,1,2,3}}, dimensions={0}
  %c = f32[2,3]{1,0} convert(f32[2,3]{1,0} %p)
  %g2 = f32[8,3]{1,0} all-gather(f32[2,3]{1,0} %c), replica_groups={{0,1,2,3}}, dimensions={0}
  %gq = f32[8,3]{1,0} all-gather(f32[2,3]{1,0} %q), replica_groups={{0,1,2,3}}, dimensions={0}
  %t = f32[8,3]{1,0} tanh(f32[8,3]{1,0} %g2)
  ROOT %out = (f32[8,3]{1,0}, f32[8,3]{1,0}, f32[8,3]{1,0}) tuple(%g1, %t, %gq)
}
"""

PARTITIONED = """HloModule partitioned_dup, num_partitions=4

ENTRY %main_spmd (w: f32[4,8], x: f32[16,8]) -> (f32[16,16], f32[16,8]) {
  %w = f32[4,8]{1,0} parameter(0)
  %x = f32[16,8]{1,0} parameter(1)
  %w1 = f32[16,8]{1,0} all-gather(f32[4,8]{1,0} %w), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %d = f32[16,16]{1,0} dot(f32[16,8]{1,0} %x, f32[16,8]{1,0} %w1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %w2 = f32[16,8]{1,0} all-gather(f32[4,8]{1,0} %w), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %a = f32[16,8]{1,0} add(f32[16,8]{1,0} %x, f32[16,8]{1,0} %w2)
  ROOT %out = (f32[16,16]{1,0}, f32[16,8]{1,0}) tuple(%d, %a)
}
"""

GSPMD = """HloModule gspmd, num_partitions=2

ENTRY main {
  x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}
  w = f32[4,4] parameter(1), sharding={replicated}
  d = f32[8,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[2,1]<=[2]}
  ROOT r = f32[8,4] add(d, x), sharding={replicated}
}
"""


def test_replicated_module_folds_equal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    after, result = _dedup(REPLICATED)
    assert len(result.folds) == 1 and not result.hazards
    paths = [_write(tmp_path, "before.hlo", REPLICATED), _write(tmp_path, "after.hlo", after)]
    assert verify_main([*paths, "--runs", "2", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "equal: 3 outputs bitwise identical (4 devices: 4 replicas x 1 partition, seeds 5..6)" in out


def test_partitioned_spmd_module_folds_equal() -> None:
    after, result = _dedup(PARTITIONED)
    assert len(result.folds) == 1
    report = check_equivalence(PARTITIONED, after)
    assert (report.status, report.num_partitions, report.per_device) == ("equal", 4, True)


def test_gspmd_module_with_spmd_flag() -> None:
    after = GSPMD.replace("add(d, x)", "add(x, d)")  # a commutative rewrite: same bits
    report = check_equivalence(GSPMD, after, spmd=True)
    assert (report.status, report.num_partitions, report.per_device) == ("equal", 2, False)
    wrong = check_equivalence(GSPMD, GSPMD.replace("add(d, x)", "subtract(d, x)"), spmd=True)
    assert wrong.status == "different" and wrong.output_index == 0


# --- identical inputs, signatures, NaNs, tokens ------------------------------------------------


def test_identical_modules_are_equal() -> None:
    text = (HAZARDS / "multi_operand.hlo").read_text()
    report = check_equivalence(text, text, seed=3)
    assert (report.status, report.exit_code, report.num_outputs, report.num_replicas) == ("equal", 0, 4, 4)
    assert report.summary() == "equal: 4 outputs bitwise identical (4 devices: 4 replicas x 1 partition, seed 3)"


SIGNATURE = """HloModule sig

ENTRY %main (a: f32[3,2], b: s32[4], c: bf16[2]) -> (f32[3,2], s32[4], bf16[2]) {
  %a = f32[3,2]{1,0} parameter(0)
  %b = s32[4]{0} parameter(1)
  %c = bf16[2]{0} parameter(2)
  ROOT %t = (f32[3,2]{1,0}, s32[4]{0}, bf16[2]{0}) tuple(%a, %b, %c)
}
"""


def test_same_signature_gets_identical_inputs() -> None:
    # A different module with the same entry parameters is fed the very same values.
    other = SIGNATURE.replace("tuple(%a, %b, %c)", "tuple(%na, %nb, %c)").replace(
        "  ROOT", "  %n = f32[3,2]{1,0} negate(%a)\n  %na = f32[3,2]{1,0} negate(%n)\n"
        "  %m = s32[4]{0} negate(%b)\n  %nb = s32[4]{0} negate(%m)\n  ROOT")
    assert check_equivalence(SIGNATURE, other, runs=2).status == "equal"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("f32[3,2]", "f32[2,3]"), "entry parameter 0 differs: f32[3,2]"),
        (("s32[4]", "u32[4]"), "entry parameter 1 differs"),
    ],
)
def test_signature_mismatch_is_different_without_running(edit: tuple[str, str], message: str) -> None:
    report = check_equivalence(SIGNATURE, SIGNATURE.replace(*edit))
    assert report.status == "different" and message in report.message, report.message
    assert report.exit_code == 1


def test_parameter_count_mismatch() -> None:
    after = SIGNATURE.replace(", c: bf16[2]", "").replace("  %c = bf16[2]{0} parameter(2)\n", "").replace(
        "%c)", "%b)").replace("bf16[2]{0})", "s32[4]{0})").replace("bf16[2])", "s32[4])")
    report = check_equivalence(SIGNATURE, after)
    assert report.status == "different" and "3 parameters, AFTER 2" in report.message, report.message


NAN = """HloModule nan_outputs

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %z = f32[4]{0} subtract(%p, %p)
  ROOT %q = f32[4]{0} divide(%z, %z)
}
"""


def test_nan_outputs_compare_bitwise() -> None:
    finite = NAN.replace("divide(%z, %z)", "add(%z, %z)")
    report = check_equivalence(finite, NAN)  # a finite BEFORE, and an AFTER that gives 0/0
    assert report.status == "different" and "4 NaN in one and not the other" in report.message


def test_token_output_is_comparable_token_parameter_is_error() -> None:
    text = """HloModule tok

ENTRY %main (p: f32[4]) -> (f32[4], token[]) {
  %p = f32[4]{0} parameter(0)
  %t = token[] after-all()
  %n = f32[4]{0} negate(%p)
  ROOT %r = (f32[4]{0}, token[]) tuple(%n, %t)
}
"""
    assert check_equivalence(text, text).status == "equal"
    param = text.replace("(p: f32[4])", "(p: f32[4], s: token[])").replace(
        "  %t = token[] after-all()", "  %s = token[] parameter(1)\n  %t = token[] after-all(%s)")
    report = check_equivalence(param, param)
    assert (report.status, report.exit_code) == ("error", 2)
    assert "entry parameter 1 is a token" in report.message


# --- errors: exit 2, a clear message, never a traceback -----------------------------------------

NEURON_KERNEL = """HloModule neuron_kernel

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %k = f32[4]{0} custom-call(f32[4]{0} %p), custom_call_target="AwsNeuronCustomNativeKernel", backend_config="cfg"
}
"""


def test_unsupported_custom_call_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "kernel.hlo", NEURON_KERNEL)
    assert verify_main([path, path]) == 2
    out, err = capsys.readouterr()
    assert not out
    assert "error: XLA:CPU could not compile/run BEFORE: unsupported custom call 'AwsNeuronCustomNativeKernel'" in err
    assert "No registered implementation" in err  # XLA's own words are kept
    assert "Traceback" not in err


def test_after_that_xla_rejects_is_error() -> None:
    broken = SIGNATURE.replace("tuple(%a, %b, %c)", "tuple(%a, %b, %missing)")
    report = check_equivalence(SIGNATURE, broken)
    assert (report.status, report.failed, report.exit_code) == ("error", "after", 2)
    assert "XLA cannot read AFTER" in report.message


def test_cli_usage_and_read_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_main([]) == 2
    assert verify_main(["only-one.hlo"]) == 2
    assert verify_main([str(tmp_path / "missing.hlo"), str(tmp_path / "missing.hlo")]) == 2
    several = _write(tmp_path, "two.hlo", SIGNATURE + "\n// -----\n" + SIGNATURE)
    assert verify_main([several, several]) == 2
    assert verify_main([several, several, "--runs", "0"]) == 2
    err = capsys.readouterr().err
    assert "the following arguments are required" in err and "cannot read" in err
    assert "several modules" in err and "--runs must be at least 1" in err
    assert "Traceback" not in err
    assert verify_main(["--help"]) == 0


def test_missing_jax_is_an_error_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import hlo_dedup.xla

    monkeypatch.delattr(hlo_dedup.xla, "oracle", raising=False)
    monkeypatch.setitem(sys.modules, "hlo_dedup.xla.oracle", None)  # the import now raises ImportError
    report = check_equivalence(SIGNATURE, SIGNATURE)
    assert isinstance(report, EquivalenceReport) and (report.status, report.exit_code) == ("error", 2)
    assert "needs jax and jaxlib" in report.message and "pip install" in report.message
