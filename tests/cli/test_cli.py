"""`hlo-dedup` end to end, through `python -m hlo_dedup` in a subprocess.

Covers hlo-opt-style invocation, every input container (HLO text, HloModuleProto, HloProto,
HloSnapshot, text protos), stdin/stdout, --split-input-file, the exit codes and their one-line
messages, atomic output, --report against its JSON Schema, --v logging and --strict.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_dedup.cli import build_parser, main, terminal_columns
from hlo_dedup.passes import pass_names

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FSDP = DATA / "fsdp_shard_map.hlo"

RET_CHECK_HLO = (Path(__file__).resolve().parents[1] / "data" / "cli" / "retcheck_first_kernel_three_users.hlo").read_text()

# Two all-gathers of one parameter, same output shape and groups; one has a channel_id (flattened
# ids), the other none (cross-replica): the faithful key folds them, which is a hazard.
HAZARD_HLO = """\
HloModule hazard

ENTRY main {
  p = f32[2,16] parameter(0)
  ag0 = f32[16,16] all-gather(p), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
  ag1 = f32[16,16] all-gather(p), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  ROOT t = (f32[16,16], f32[16,16]) tuple(ag0, ag1)
}
"""

BAD_HLO = "HloModule bad\n\nENTRY main {\n  ROOT p = f32[] parameter(0) oops\n}\n"


def run(*args: str | Path, stdin: bytes | None = None, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS",)}
    return subprocess.run(
        [sys.executable, "-m", "hlo_dedup", *map(str, args)],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        cwd=cwd,
        env={**base, **(env or {})},
        timeout=120,
    )


def err(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.decode()


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = err(proc).splitlines()
    assert len(lines) == 1, err(proc)
    assert "Traceback" not in err(proc)
    return lines[0]



@pytest.fixture(scope="module")
def fsdp_proto(xc) -> bytes:
    return xc.hlo.hlo_module_from_text(FSDP.read_text()).as_serialized_hlo_module_proto()


def wrap_field1(payload: bytes) -> bytes:
    """`message { bytes field1 = 1; }`: HloProto.hlo_module and HloSnapshot.hlo are field 1."""
    from google.protobuf import wrappers_pb2

    return wrappers_pb2.BytesValue(value=payload).SerializeToString()


def all_gathers(text: str) -> list[str]:
    return re.findall(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = \S+ all-gather\(", text, re.M)


# ---------------------------------------------------------------------------------------------
# Text input, the default pipeline, stdin/stdout


def test_default_pipeline_on_jax_module(tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    proc = run(FSDP, "-o", out)
    assert proc.returncode == 0, err(proc)
    assert proc.stdout == b""
    text = out.read_text()
    assert all_gathers(text) == ["all_gather.4", "all_gather.5", "all_gather.7"]
    assert "dot(tanh.5, all_gather.4)" in text
    summary = err(proc)
    assert "neuron-preprocess-kernel-duplicate-remover: unchanged" in summary
    assert "neuron_all_gather_duplicate_remover: changed, 1 fold" in summary
    assert "all_gather.4 \u2190 all_gather.6" in summary
    assert "1.0 KiB output / 896 B per device" in summary


def test_empty_pass_list_round_trips_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "same.hlo"
    proc = run(FSDP, "--passes=", "-o", out)
    assert proc.returncode == 0, err(proc)
    assert out.read_bytes() == FSDP.read_bytes()
    assert "no passes run" in err(proc)


def test_stdin_to_stdout() -> None:
    proc = run("-", "--passes=neuron_all_gather_duplicate_remover", stdin=FSDP.read_bytes())
    assert proc.returncode == 0, err(proc)
    assert all_gathers(proc.stdout.decode()) == ["all_gather.4", "all_gather.5", "all_gather.7"]
    assert "module jit__fsdp_forward (<stdin>)" in err(proc)


def test_input_defaults_to_stdin() -> None:
    proc = run("--passes=dce", stdin=FSDP.read_bytes())
    assert proc.returncode == 0, err(proc)
    assert proc.stdout.decode().startswith("HloModule jit__fsdp_forward")


@pytest.mark.parametrize("passes", ["dce", "neuron_all_gather_duplicate_remover,dce"])
def test_named_passes(passes: str) -> None:
    proc = run(FSDP, f"--passes={passes}")
    assert proc.returncode == 0, err(proc)
    for name in passes.split(","):
        assert f"  {name}: " in err(proc)
    assert "neuron-preprocess-kernel-duplicate-remover" not in err(proc)


def test_list_passes() -> None:
    proc = run("--list-passes")
    assert proc.returncode == 0
    assert proc.stdout.decode() == ",".join(sorted(pass_names())) + "\n"
    assert "dce" in pass_names()


def test_split_input_file(tmp_path: Path) -> None:
    two = tmp_path / "two.hlo"
    two.write_text((DATA / "cond.hlo").read_text() + "// -----\n" + FSDP.read_text())
    proc = run("--split-input-file", two)
    assert proc.returncode == 0, err(proc)
    out = proc.stdout.decode()
    assert [m for m in re.findall(r"^HloModule (\S+?),", out, re.M)] == ["jit_f", "jit__fsdp_forward"]
    assert "all_gather.6" not in out
    assert "module jit_f (" in err(proc) and "module jit__fsdp_forward (" in err(proc)
    assert "1 of 2 modules changed" in err(proc)

    without = run(two)
    assert without.returncode == 2
    assert re.fullmatch(r".*two\.hlo:\d+:1: error: '// -----' separator found in input, "
                        r"but --split-input-file not specified", one_line(without))


# ---------------------------------------------------------------------------------------------
# Proto inputs and outputs


@pytest.mark.parametrize("container", ["HloModuleProto", "HloProto", "HloSnapshot"])
def test_each_proto_container(tmp_path: Path, fsdp_proto: bytes, container: str) -> None:
    data = fsdp_proto
    if container in ("HloProto", "HloSnapshot"):
        data = wrap_field1(data)
    if container == "HloSnapshot":
        data = wrap_field1(data)
    src = tmp_path / f"model.{container}.pb"
    src.write_bytes(data)
    out = tmp_path / "out.hlo"
    proc = run(src, "-o", out)
    assert proc.returncode == 0, err(proc)
    assert all_gathers(out.read_text()) == ["all_gather.4", "all_gather.5", "all_gather.7"]
    assert "all_gather.4 \u2190 all_gather.6" in err(proc)


def test_binary_proto_named_hlo_is_sniffed(tmp_path: Path, fsdp_proto: bytes) -> None:
    src = tmp_path / "graph.hlo"  # NxD-Inference writes binary HloModuleProtos under this name
    src.write_bytes(fsdp_proto)
    proc = run(src, "--passes=")
    assert proc.returncode == 0, err(proc)
    assert proc.stdout.decode().startswith("HloModule jit__fsdp_forward")


def test_proto_from_stdin(fsdp_proto: bytes) -> None:
    proc = run("-", stdin=wrap_field1(fsdp_proto))
    assert proc.returncode == 0, err(proc)
    assert len(all_gathers(proc.stdout.decode())) == 3


def test_pb_output_is_an_hlo_module_proto(tmp_path: Path, xc) -> None:
    out = tmp_path / "out.hlo_module.pb"
    proc = run(FSDP, "-o", out)
    assert proc.returncode == 0, err(proc)
    module = xc.hlo.HloModule.from_serialized_hlo_module_proto(out.read_bytes())
    assert len(all_gathers(module.to_string())) == 3
    # and it reads back
    back = run(out, "--passes=")
    assert back.returncode == 0, err(back)
    assert len(all_gathers(back.stdout.decode())) == 3


def test_output_format_pb_to_stdout(fsdp_proto: bytes) -> None:
    proc = run(FSDP, "--output-format=pb", "--passes=")
    assert proc.returncode == 0, err(proc)
    from hlo_dedup.io.proto import looks_like_module

    assert looks_like_module(proc.stdout)


def test_emit_proto_writes_text_proto_without_passes(tmp_path: Path, fsdp_proto: bytes) -> None:
    out = tmp_path / "m.pbtxt"
    proc = run(FSDP, "--emit-proto", "-o", out)
    assert proc.returncode == 0, err(proc)
    text = out.read_text()
    assert text.startswith('name: "jit__fsdp_forward"')
    assert text.count('opcode: "all-gather"') == 4  # --emit-proto alone runs no pass (as hlo-opt)
    back = run(out)
    assert back.returncode == 0, err(back)
    assert len(all_gathers(back.stdout.decode())) == 3


def test_multi_module_proto_output_is_refused(tmp_path: Path) -> None:
    two = tmp_path / "two.hlo"
    two.write_text(FSDP.read_text() + "// -----\n" + FSDP.read_text())
    out = tmp_path / "two.pb"
    proc = run("--split-input-file", two, "-o", out)
    assert proc.returncode == 2
    assert "pb output holds one module, the input has 2" in one_line(proc)
    assert not out.exists()


def _shadow(tmp_path: Path, package: str) -> dict[str, str]:
    """An environment in which importing ``package`` (a top-level name) fails."""
    shadow = tmp_path / f"shadow_{package}" / package
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(f"raise ImportError('No module named {package} (test shadow)')\n")
    return {"PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.oracle
def test_proto_input_needs_no_jax(tmp_path: Path, fsdp_proto: bytes) -> None:
    from hlo_dedup.xla import module_proto_to_text

    src = tmp_path / "m.pb"
    src.write_bytes(fsdp_proto)
    no_jax = _shadow(tmp_path, "jax")
    from_proto = run(src, "--passes=", env=no_jax)
    assert from_proto.returncode == 0, err(from_proto)
    # With no pass the output is the module as read: XLA's own print of the proto.
    assert from_proto.stdout.decode() == module_proto_to_text(fsdp_proto)
    write = run(FSDP, "-o", tmp_path / "out.pb", env=no_jax)
    assert write.returncode == 2
    assert "writing HLO protos needs jax, jaxlib and protobuf: pip install 'hlo-dedup[xla]'" in one_line(write)


def test_proto_input_without_protobuf(tmp_path: Path, fsdp_proto: bytes) -> None:
    src = tmp_path / "m.pb"
    src.write_bytes(fsdp_proto)
    proc = run(src, env=_shadow(tmp_path, "google"))
    assert proc.returncode == 2
    line = one_line(proc)
    assert line.startswith(f"{src}: error: reading HLO protos needs protobuf: pip install 'hlo-dedup[proto]'")


def test_garbage_pb(tmp_path: Path) -> None:
    src = tmp_path / "junk.pb"
    src.write_bytes(b"\xff\x00\x13 not a proto \x00")
    proc = run(src)
    assert proc.returncode == 2
    assert one_line(proc).startswith(f"{src}: error: not a binary HloSnapshot, HloProto or HloModuleProto")


# ---------------------------------------------------------------------------------------------
# Errors, exit codes, atomicity


def test_unknown_pass_is_a_usage_error() -> None:
    proc = run(FSDP, "--passes=dce,nope")
    assert proc.returncode == 2
    line = one_line(proc)
    assert line.startswith("hlo-dedup: error: Pass nope not found. Known passes: ")
    for name in pass_names():
        assert name in line
    assert proc.stdout == b""


def test_bad_argument_is_one_line() -> None:
    proc = run(FSDP, "--format=xml")
    assert proc.returncode == 2
    assert one_line(proc).startswith("hlo-dedup: error: argument --format")


def test_parse_error_is_one_located_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hlo"
    bad.write_text(BAD_HLO)
    proc = run(bad)
    assert proc.returncode == 2
    assert re.fullmatch(rf"{re.escape(str(bad))}:[45]:\d+: error: .+", one_line(proc))
    assert proc.stdout == b""


def test_missing_input(tmp_path: Path) -> None:
    proc = run(tmp_path / "absent.hlo")
    assert proc.returncode == 2
    assert one_line(proc) == f"{tmp_path / 'absent.hlo'}: error: No such file or directory"


def test_unwritable_output(tmp_path: Path) -> None:
    proc = run(FSDP, "-o", tmp_path / "no" / "such" / "dir" / "out.hlo")
    assert proc.returncode == 2
    assert "error:" in one_line(proc)


def test_ret_check_failure_exits_1_and_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "retcheck.hlo"
    src.write_text(RET_CHECK_HLO)
    out = tmp_path / "out.hlo"
    report = tmp_path / "r.json"
    proc = run(src, "-o", out, "--report", report)
    assert proc.returncode == 1
    line = one_line(proc)
    assert "pass neuron-preprocess-kernel-duplicate-remover failed on module retcheck" in line
    assert "RET_CHECK failure" in line and "first->user_count() == 2" in line
    assert not out.exists() and not report.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["retcheck.hlo"]  # no temp file left


def test_failed_run_leaves_existing_output_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    out.write_text("previous contents\n")
    for text in (RET_CHECK_HLO, BAD_HLO):
        src = tmp_path / "in.hlo"
        src.write_text(text)
        proc = run(src, "-o", out)
        assert proc.returncode in (1, 2)
        assert out.read_text() == "previous contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.hlo", "out.hlo"]


def test_output_may_name_the_input(tmp_path: Path) -> None:
    src = tmp_path / "model.hlo"
    src.write_text(FSDP.read_text())
    proc = run(src, "-o", src)
    assert proc.returncode == 0, err(proc)
    assert len(all_gathers(src.read_text())) == 3
    # The input itself is never touched without -o.
    again = tmp_path / "model2.hlo"
    again.write_text(FSDP.read_text())
    assert run(again).returncode == 0
    assert again.read_text() == FSDP.read_text()


def test_binary_proto_to_a_terminal_is_refused() -> None:
    class Tty(io.BytesIO):
        def isatty(self) -> bool:
            return True

    stderr = io.StringIO()
    stdout = Tty()
    code = main([str(FSDP), "--output-format=pb"], stdout=stdout, stderr=stderr)
    assert code == 2
    assert "refusing to write a binary proto to a terminal" in stderr.getvalue()
    assert stdout.getvalue() == b""


# ---------------------------------------------------------------------------------------------
# Report, logging, strict mode


def test_report_json_matches_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from hlo_dedup.report import load_schema

    report = tmp_path / "r.json"
    proc = run(FSDP, "-o", tmp_path / "out.hlo", "--report", report)
    assert proc.returncode == 0, err(proc)
    data = json.loads(report.read_text())
    jsonschema.validate(data, load_schema())
    assert data["schema_version"] == 2
    assert data["pipeline"] == ["neuron-preprocess-kernel-duplicate-remover", "neuron_all_gather_duplicate_remover"]
    (module,) = data["modules"]
    assert module["name"] == "jit__fsdp_forward" and module["changed"] is True
    kernel, gather = module["passes"]
    assert kernel["changed"] is False and kernel["folds"] == []
    (fold,) = gather["folds"]
    assert fold["kept"] == "all_gather.4" and fold["removed"] == "all_gather.6"
    assert fold["computation"] == "xla.sdy.manual_computation_body.1"
    assert fold["bytes_output"] == 16 * 16 * 4 and fold["bytes_per_device"] == 16 * 16 * 4 * 7 // 8
    assert fold["key"]["parameter"] == "shard_map.9"
    assert data["totals"]["folds"] == 1 and data["totals"]["bytes_output"] == 1024
    assert set(data["timings"]) == {"parse", "passes", "print", "total"}


def test_report_with_split_input_and_schema_rejects_garbage(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from hlo_dedup.report import load_schema

    two = tmp_path / "two.hlo"
    two.write_text((DATA / "while_gather.hlo").read_text() + "// -----\n" + HAZARD_HLO)
    report = tmp_path / "r.json"
    proc = run("--split-input-file", two, "--report", report)
    assert proc.returncode == 0, err(proc)
    data = json.loads(report.read_text())
    jsonschema.validate(data, load_schema())
    assert [m["index"] for m in data["modules"]] == [0, 1]
    data["modules"][0]["passes"][0]["changed"] = "yes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, load_schema())


@pytest.mark.parametrize("flag", [["--v=2"], ["--v", "2"], ["-v", "2"], ["-v2"],
                                  ["--vmodule=neuron_all_gather_duplicate_remover=2"]])
def test_vlog_lines_at_v2(flag: list[str]) -> None:
    proc = run(FSDP, *flag)
    assert proc.returncode == 0, err(proc)
    lines = err(proc).splitlines()
    running = [ln for ln in lines if "Running NeuronDuplicateParameterAllGatherRemover pass" in ln]
    assert len(running) == 1
    assert re.match(r"I\d{4} \d\d:\d\d:\d\d\.\d{6}\s+\d+ neuron_all_gather_duplicate_remover\.cc:\d+\] ",
                    running[0])


def test_no_vlog_lines_by_default() -> None:
    proc = run(FSDP)
    assert proc.returncode == 0
    assert "Running NeuronDuplicateParameterAllGatherRemover" not in err(proc)
    assert not re.search(r"^I\d{4} ", err(proc), re.M)


def test_bad_vmodule_is_a_usage_error() -> None:
    proc = run(FSDP, "--vmodule=foo")
    assert proc.returncode == 2
    assert one_line(proc).startswith("hlo-dedup: error: --vmodule entry 'foo'")


def test_strict_refuses_hazard(tmp_path: Path) -> None:
    src = tmp_path / "hazard.hlo"
    src.write_text(HAZARD_HLO)

    loose = run(src, "--report", tmp_path / "loose.json")
    assert loose.returncode == 0, err(loose)
    assert all_gathers(loose.stdout.decode()) == ["ag0"]
    assert "hazard (folded anyway) main: ag0 \u2190 ag1: different collective modes" in err(loose)
    (hazard,) = json.loads((tmp_path / "loose.json").read_text())["modules"][0]["passes"][1]["hazards"]
    assert hazard["refused"] is False

    strict = run(src, "--strict", "--report", tmp_path / "strict.json")
    assert strict.returncode == 0, err(strict)
    assert strict.stdout.decode() == HAZARD_HLO  # nothing folded, printed back byte for byte
    assert "hazard (refused) main: ag0 \u2190 ag1" in err(strict)
    data = json.loads((tmp_path / "strict.json").read_text())
    assert data["strict"] is True
    gather = data["modules"][0]["passes"][1]
    assert gather["folds"] == [] and gather["changed"] is False
    (hazard,) = gather["hazards"]
    assert hazard["refused"] is True and hazard["kept"] == "ag0" and hazard["removed"] == "ag1"
    assert any("collective modes" in r for r in hazard["reasons"])
    assert data["totals"]["hazards_refused"] == 1


def test_no_progress_on_a_pipe() -> None:
    proc = run(FSDP, env={"CI": ""})
    assert proc.returncode == 0
    assert "\x1b[" not in err(proc)


def test_help_and_version() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    text = proc.stdout.decode()
    for flag in ("--passes", "--list-passes", "--format", "--emit-proto", "--output-format",
                 "--split-input-file", "--vmodule", "--report", "--strict", "--no-spmd"):
        assert flag in text
    version = run("--version")
    assert version.returncode == 0 and version.stdout.decode().startswith("hlo-dedup ")


def test_help_wraps_to_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The width comes from COLUMNS, else the terminal, else 80 (what shutil would say)."""
    monkeypatch.setenv("COLUMNS", "60")
    assert terminal_columns() == 60
    parser = build_parser()
    text = parser.format_help()
    assert len(parser.format_usage().splitlines()) > 3
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # argparse finds the width itself
    assert parser.format_help() == text
    for unusable in ("0", "-3", "wide"):
        monkeypatch.setenv("COLUMNS", unusable)
        assert terminal_columns() == 80  # pytest captures standard output: no terminal
    monkeypatch.setattr(sys, "__stdout__", None)
    assert terminal_columns() == 80


def test_no_input_from_a_terminal_is_a_usage_error() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stderr = io.StringIO()
    assert main([], stdin=Tty(), stdout=io.StringIO(), stderr=stderr) == 2
    assert stderr.getvalue() == "hlo-dedup: error: no input: give a file, or - with standard input redirected\n"


def test_no_spmd_and_report_to_stdout(tmp_path: Path) -> None:
    # Without SPMD partitioning a gather with a channel_id has a side effect (xla-semantics §2),
    # so DCE keeps the folded duplicate although nothing uses it any more.
    out = tmp_path / "out.hlo"
    proc = run(FSDP, "--no-spmd", "--report", "-", "-o", out)
    assert proc.returncode == 0, err(proc)
    data = json.loads(proc.stdout)
    assert data["spmd"] is False and data["totals"]["folds"] == 1
    assert "dot(tanh.5, all_gather.4)" in out.read_text()
    assert "all_gather.6 = " in out.read_text()

    clash = run(FSDP, "--report", "-")
    assert clash.returncode == 2
    assert "--report - writes the JSON to standard output" in one_line(clash)


def test_in_process_main_with_text_streams(tmp_path: Path) -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main([str(FSDP), "--passes=neuron_all_gather_duplicate_remover"], stdout=stdout, stderr=stderr)
    assert code == 0, stderr.getvalue()
    assert len(all_gathers(stdout.getvalue())) == 3


def test_a_plain_run_loads_no_renderer_comparer_or_dump_tree_reader(tmp_path: Path) -> None:
    """Start-up is most of a small module's run: what only --dot, --html, verify or a
    directory input needs is loaded when asked for, not by every run."""
    out = tmp_path / "out.hlo"
    script = ("import sys; from hlo_dedup.cli import main; "
              f"status = main([{str(DATA / 'gspmd_transformer_after_spmd.hlo')!r}, '-o', {str(out)!r}]); "
              "print(status, sorted(m for m in sys.modules if m.startswith(('hlo_dedup', 'hashlib', 'html', 'jax'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    status, loaded = done.stdout.split(" ", 1)
    assert status == "0" and out.exists()
    for module in ("hlo_dedup.report.dot", "hlo_dedup.report.html", "hlo_dedup.equivalence",
                   "hlo_dedup.io.discovery", "hlo_dedup.io.layouts", "hashlib", "html", "jax"):
        assert f"'{module}'" not in loaded, module
    assert "'hlo_dedup.passes.all_gather_duplicate_remover'" in loaded
