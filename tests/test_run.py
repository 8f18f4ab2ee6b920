"""hlo_dedup.run: the typed options and the one run path, on their own (without the CLI)."""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path

import pytest

from hlo_dedup.cli import build_parser, main, options_from_args
from hlo_dedup.passes import DEFAULT_PIPELINE
from hlo_dedup.run import RunOptions, run_input

DATA = Path(__file__).resolve().parent / "data"
FSDP = DATA / "jax" / "fsdp_shard_map.hlo"
RET_CHECK = DATA / "cli" / "retcheck_first_kernel_three_users.hlo"


def test_options_are_typed_frozen_and_picklable() -> None:
    options = RunOptions()
    assert options.passes == DEFAULT_PIPELINE and options.spmd and not options.strict
    with pytest.raises(AttributeError, match="immutable"):
        options.strict = True  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(options)) == options  # sent as is to batch workers
    assert options.replaced(strict=True) == RunOptions(strict=True) != options


def test_the_command_line_becomes_options() -> None:
    def parse(*argv: str) -> RunOptions:
        return options_from_args(build_parser().parse_intermixed_args(["in.hlo", *argv]))

    assert parse() == RunOptions()
    assert parse("--emit-proto") == RunOptions(passes=(), output_format="pbtxt")
    assert parse("--emit-proto", "--passes=dce").passes == ("dce",)
    assert parse("--passes=", "--strict", "--no-spmd", "--format=pb", "--split-input-file") == RunOptions(
        passes=(), strict=True, spmd=False, input_format="pb", split_input_file=True)
    assert parse("--report", "r.json", "--dot", "f.dot", "--verify", "--v=2", "--vmodule=dce=1") == RunOptions(
        report="r.json", dot="f.dot", verify=True, v=2, vmodule="dce=1")
    assert parse("--report-only", "--report", "r.json") == RunOptions(report="r.json", report_only=True)


def test_one_input_through_the_run_path(tmp_path: Path) -> None:
    out, log = tmp_path / "out.hlo", io.StringIO()
    result = run_input(str(FSDP), str(out), RunOptions(), log=log)
    assert (result.ok, result.status, result.error) == (True, "ok", None)
    assert (result.input_format, result.output_format) == ("hlo", "hlo")
    (module,) = result.modules
    assert module.name == "jit__fsdp_forward" and module.changed
    assert [p.pass_name for p in module.passes] == list(DEFAULT_PIPELINE)
    assert [(f.kept, f.removed) for f in module.folds] == [("all_gather.4", "all_gather.6")]
    assert result.bytes_in == FSDP.stat().st_size and result.bytes_out == out.stat().st_size
    assert set(result.timings) == {"parse", "passes", "print"} and result.seconds > 0
    assert log.getvalue() == ""  # the summary is the caller's to print

    # The command writes the very same bytes: it is this path.
    assert main([str(FSDP), "-o", str(tmp_path / "cli.hlo")], stderr=io.StringIO()) == 0
    assert (tmp_path / "cli.hlo").read_bytes() == out.read_bytes()

    # Results cross process boundaries (batch workers send them back).
    assert pickle.loads(pickle.dumps(result)) == result


@pytest.mark.parametrize(
    ("source", "options", "status", "message"),
    [
        ("absent.hlo", RunOptions(), 2, r"{src}: error: No such file or directory"),
        ("bad.hlo", RunOptions(), 2, r"{src}:[45]:\d+: error: .+"),
        (RET_CHECK, RunOptions(), 1, r"{src}: error: pass neuron-preprocess-kernel-duplicate-remover failed on "
                                     r"module retcheck: RET_CHECK failure .+"),
        (FSDP, RunOptions(vmodule="oops"), 2, r"hlo-dedup: error: --vmodule entry 'oops'.*"),
    ],
)
def test_failures_are_results_not_exceptions(tmp_path: Path, source, options: RunOptions,  # noqa: ANN001
                                             status: int, message: str) -> None:
    if source == "bad.hlo":
        source = tmp_path / source
        source.write_text("HloModule bad\n\nENTRY main {\n  ROOT p = f32[] parameter(0) oops\n}\n")
    elif isinstance(source, str):
        source = tmp_path / source
    out = tmp_path / "out.hlo"
    result = run_input(str(source), str(out), options, log=io.StringIO())
    assert (result.exit_status, result.ok) == (status, False)
    assert re.fullmatch(message.format(src=re.escape(str(source))), result.error), result.error
    assert not out.exists() and result.bytes_out is None
    if status == 1:  # the modules run so far are kept, up to the failing pass
        (module,) = result.modules
        assert module.passes == [] and result.input_format == "hlo"
    else:
        assert result.modules == [] and result.input_format is None


def test_a_split_input_of_one_module_may_be_written_as_a_proto(tmp_path: Path, xla_client) -> None:  # type: ignore[no-untyped-def]
    result = run_input(str(FSDP), str(tmp_path / "out.hlo"), RunOptions(output_format="pb", split_input_file=True),
                       log=io.StringIO())
    assert result.ok, result.error


def test_vlog_lines_go_to_the_runs_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = io.StringIO()
    result = run_input(str(FSDP), str(tmp_path / "out.hlo"), RunOptions(v=2), log=log)
    assert result.ok
    assert "Running NeuronDuplicateParameterAllGatherRemover pass" in log.getvalue()
    assert capsys.readouterr().err == ""


def test_the_command_runs_from_a_thread_other_than_the_main_one(tmp_path: Path) -> None:
    # Only the main thread may set signal handlers: elsewhere (an embedding tool's worker
    # thread) the run goes on without them.
    import signal
    import threading

    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "out.hlo"
    statuses: list[int] = []
    worker = threading.Thread(target=lambda: statuses.append(
        main([str(FSDP), "-o", str(out)], stdout=io.StringIO(), stderr=io.StringIO())))
    worker.start()
    worker.join()
    assert statuses == [0] and out.read_text().startswith("HloModule")
    assert signal.getsignal(signal.SIGTERM) is before
