"""`verify` / `--verify` on the modules users have: tuple entry parameters, post-optimization
text, an isolated XLA child whose crashes and tracebacks stay one line, one exit status for
both commands, and the verdict of a successful `--verify` in `--report`.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
import support

from hlo_dedup.cli import main, verify_main
from hlo_dedup.equivalence import check_equivalence, cpu_runnable_text
from hlo_dedup.report import load_schema

pytestmark = pytest.mark.usefixtures("xla_client")  # every test here runs XLA

DATA = Path(__file__).resolve().parent / "data"
POST_OPT = DATA / "jax" / "gspmd_post_opt.hlo"  # XLA:CPU's own output after its pipeline
TUPLED = "xla_tools_multihost_hlo_runner_data_single_device_tupled.hlo"  # ENTRY takes a tuple
CUBLAS = "xla_service_gpu_tests_kernel_reuse.hlo"  # GPU post-optimization text with cuBLAS calls


def _main(*args: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main([str(a) for a in args], stdin=io.BytesIO(), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def _corpus(name: str) -> Path:
    support.corpus_files()  # skips (or fails in CI) without the corpus
    return support.CORPUS / name


# --- tuple entry parameters --------------------------------------------------------------------


def test_a_tuple_entry_parameter_is_fed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """XLA's own test module whose ENTRY takes (f32[2,2], f32[2,2]) and adds the two leaves."""
    path = _corpus(TUPLED)
    assert verify_main([str(path), str(path)]) == 0
    assert capsys.readouterr().out.endswith("equal: 1 output bitwise identical (1 device: 1 replica x 1 partition, "
                                            "seed 0)\n")
    # The leaves get different values: a - b differs from b - a, and from a + b.
    text = path.read_text()
    minus = tmp_path / "minus.hlo"
    minus.write_text(text.replace("add(arg_0, arg_1)", "subtract(arg_0, arg_1)"))
    swapped = tmp_path / "swapped.hlo"
    swapped.write_text(text.replace("add(arg_0, arg_1)", "subtract(arg_1, arg_0)"))
    assert verify_main([str(path), str(minus)]) == 1
    assert verify_main([str(minus), str(swapped)]) == 1
    assert "differs in 4 of 4 elements" in capsys.readouterr().out


# --- post-optimization text --------------------------------------------------------------------


def test_post_optimization_text_runs() -> None:
    """XLA:CPU's post-optimization module (fusions with backend configs, is_scheduled=true)."""
    text = POST_OPT.read_text()
    assert "is_scheduled=true" in text and " fusion(" in text
    runnable = cpu_runnable_text(text)
    assert "is_scheduled" not in runnable.partition("\n")[0] and " fusion(" not in runnable
    assert len(re.findall(r" call\(.*to_apply=%(?:fused|wrapped)", runnable)) == text.count(" fusion(")
    assert cpu_runnable_text(runnable) == runnable  # nothing left to change
    report = check_equivalence(text, text)
    assert report.status == "equal", report.summary()
    status, _, err = _main(POST_OPT, "-o", "-", "--verify")
    assert status == 0 and err.startswith("verify jit_forward: equal: 1 output bitwise identical"), err


def test_pre_optimization_text_is_not_touched() -> None:
    manifest = json.loads((DATA / "jax" / "MANIFEST.json").read_text())["modules"]
    pre_optimization = [name for name, entry in manifest.items() if entry["stage"] == "pre-optimization"]
    assert len(pre_optimization) >= 10
    for name in pre_optimization:
        text = (DATA / "jax" / name).read_text()
        assert cpu_runnable_text(text) == text, name


def test_a_gpu_module_says_why_it_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GPU post-optimization text calls cuBLAS: one line saying so, exit 2."""
    pieces = _corpus(CUBLAS).read_text().split("// -----")
    module = next(p for p in pieces if "__cublas$gemm" in p)
    path = tmp_path / "gpu.hlo"
    path.write_text(module)
    assert verify_main([str(path), str(path)]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.splitlines()) == 1
    assert ("error: XLA:CPU could not compile/run BEFORE: unsupported custom call '__cublas$gemm': XLA:CPU has no "
            "implementation for it") in err


def test_a_layout_bitcast_says_why_it_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A bitcast between row-major arrays is a reshape and runs as one (the corpus module
    # below verifies); one that reorders elements by its layouts cannot run on XLA:CPU.
    pieces = _corpus("xla_service_gpu_tests_dynamic_update_slice_inplace.hlo").read_text().split("// -----")
    row_major = tmp_path / "row_major.hlo"
    row_major.write_text(next(p for p in pieces if "bitcasted_dus0 = bf16[11,10,12] bitcast(dus0)" in p))
    assert verify_main([str(row_major), str(row_major)]) == 0
    capsys.readouterr()
    path = tmp_path / "bitcast.hlo"
    path.write_text("HloModule m, is_scheduled=true\n\nENTRY main {\n  p0 = f32[4,6]{1,0} parameter(0)\n"
                    "  b = f32[6,4]{0,1} bitcast(p0)\n  ROOT n = f32[6,4]{0,1} negate(b)\n}\n")
    assert verify_main([str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert ("error: XLA:CPU could not compile/run BEFORE: a bitcast whose meaning depends on the layouts another "
            "backend assigned (post-optimization text)") in err


# --- the child: crashes, tracebacks, exit statuses ----------------------------------------------


def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


TRACEBACK = """printf 'Traceback (most recent call last):\\n  File "ml_dtypes.py", line 1, in <module>\\n    boom()\\n\
NameError: name boom is not defined\\n' >&2; exit 1"""


@pytest.mark.parametrize("body, words", [
    (TRACEBACK, "XLA crashed (exit status 1): NameError: name boom is not defined"),
    ('echo "F1130 12:00:00.000000 1 hlo_instruction.cc:1615] Invalid binary instruction opcode fusion" >&2; '
     "kill -ABRT $$", "XLA crashed (SIGABRT): Invalid binary instruction opcode fusion"),
])
def test_a_dead_child_is_one_line_and_exit_2_for_both_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], body: str, words: str) -> None:
    from hlo_dedup.equivalence import clear_run_cache
    from hlo_dedup.xla import isolated

    src = tmp_path / "m.hlo"
    src.write_text((DATA / "jax" / "cond.hlo").read_text())
    clear_run_cache()
    isolated.shutdown()  # the next XLA child is started with the interpreter below
    monkeypatch.setattr(sys, "executable", _fake_python(tmp_path, body))
    assert verify_main([str(src), str(src)]) == 2
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and "Traceback" not in err and words in err, err
    status, _, err = _main(src, "-o", tmp_path / "out.hlo", "--verify")
    assert status == 2 and "Traceback" not in err
    assert err.splitlines() == [f"verify jit_f: error: XLA cannot read BEFORE: {words}",
                                f"{src}: error: --verify: module jit_f could not be run on XLA:CPU; nothing written"]
    assert not (tmp_path / "out.hlo").exists()


def test_batch_verify_has_the_same_status(tmp_path: Path) -> None:
    kernel = tmp_path / "in" / "kernel.hlo"
    kernel.parent.mkdir()
    kernel.write_text("""HloModule neuron_kernel

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %k = f32[4]{0} custom-call(f32[4]{0} %p), custom_call_target="AwsNeuronCustomNativeKernel", backend_config="c"
}
""")
    status, _, err = _main(kernel.parent, "--output-dir", tmp_path / "out", "--verify", "-j", "1")
    assert status == 2, err
    assert f"{kernel}: error: --verify: module neuron_kernel could not be run on XLA:CPU; nothing written" in err


# --- the verdict in --report --------------------------------------------------------------------


def test_a_successful_verify_is_in_the_report(tmp_path: Path) -> None:
    import jsonschema

    report = tmp_path / "r.json"
    status, _, err = _main(DATA / "jax" / "fsdp_shard_map.hlo", "-o", tmp_path / "out.hlo", "--verify",
                           "--report", report)
    assert status == 0, err
    data = json.loads(report.read_text())
    jsonschema.validate(data, load_schema())
    (module,) = data["modules"]
    from hlo_dedup.xla.execute import INPUTS

    assert module["verify"] == {
        "status": "equal", "exit_code": 0, "seed": 0, "runs": 1, "num_outputs": 1, "num_replicas": 1,
        "num_partitions": 8, "participants_source": "header", "participants_detail": None,
        "judged_seeds": [0], "baseline_reproduced": True, "inputs": INPUTS,
        "summary": "equal: 1 output bitwise identical (8 devices: 1 replica x 8 partitions, seed 0)",
    }
    assert data["schema_version"] == 2
    status, _, _ = _main(DATA / "jax" / "cond.hlo", "-o", tmp_path / "plain.hlo", "--report", report)
    assert status == 0 and "verify" not in json.loads(report.read_text())["modules"][0]
