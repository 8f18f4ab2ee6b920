"""gzip-compressed inputs and outputs (`--xla_dump_compress_protos`, archived caches and dumps)."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

from hlo_dedup.cli import main
from hlo_dedup.io.formats import detect_format, output_format_for

DATA = Path(__file__).resolve().parents[1] / "data" / "jax"
FSDP = DATA / "fsdp_remat_grad.hlo"


def run(*argv: str | Path) -> tuple[int, str]:
    err = io.StringIO()
    status = main([str(a) for a in argv], stdin=io.BytesIO(), stdout=io.StringIO(), stderr=err)
    return status, err.getvalue()


def test_the_name_says_the_format_through_gz() -> None:
    assert detect_format("m.hlo.pb.gz", b"") == "pb"
    assert detect_format("m.pbtxt.gz", b"") == "pbtxt"
    assert output_format_for("out/model.hlo_module.pb.gz") == "pb"
    assert output_format_for("out/m.hlo.gz") == "hlo"


def test_a_compressed_text_module_in_and_out(tmp_path: Path) -> None:
    (tmp_path / "m.hlo.gz").write_bytes(gzip.compress(FSDP.read_bytes()))
    assert run(FSDP, "-o", tmp_path / "plain.hlo")[0] == 0
    status, summary = run(tmp_path / "m.hlo.gz", "-o", tmp_path / "out.hlo.gz")
    assert status == 0 and "neuron_all_gather_duplicate_remover: changed, 2 folds" in summary
    written = (tmp_path / "out.hlo.gz").read_bytes()
    assert gzip.decompress(written) == (tmp_path / "plain.hlo").read_bytes()
    # No time stamp in the gzip header: the same module always gives the same bytes.
    assert run(tmp_path / "m.hlo.gz", "-o", tmp_path / "again.hlo.gz")[0] == 0
    assert (tmp_path / "again.hlo.gz").read_bytes() == written


def test_a_corrupt_or_truncated_gzip_is_one_error_line(tmp_path: Path) -> None:
    data = gzip.compress(FSDP.read_bytes())
    (tmp_path / "cut.hlo.gz").write_bytes(data[: len(data) // 2])
    status, message = run(tmp_path / "cut.hlo.gz", "-o", tmp_path / "x.hlo")
    assert status == 2
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'cut.hlo.gz'))}: error: corrupt or truncated gzip data: .+\n",
                        message)
    assert not (tmp_path / "x.hlo").exists()


def test_a_compressed_proto_dump(tmp_path: Path, xc) -> None:  # type: ignore[no-untyped-def]
    """What --xla_dump_compress_protos writes: a gzip'd HloProto named .hlo.pb.gz."""
    from google.protobuf import wrappers_pb2

    module = xc.hlo.hlo_module_from_text(FSDP.read_text()).as_serialized_hlo_module_proto()
    hlo_proto = wrappers_pb2.BytesValue(value=module).SerializeToString()  # HloProto { hlo_module = 1; }
    (tmp_path / "module_0001.jit_loss.before_optimizations.hlo.pb.gz").write_bytes(gzip.compress(hlo_proto))
    status, summary = run(tmp_path / "module_0001.jit_loss.before_optimizations.hlo.pb.gz", "-o", tmp_path / "o.pb.gz")
    assert status == 0 and "2 folds" in summary
    out = xc.hlo.HloModule.from_serialized_hlo_module_proto(gzip.decompress((tmp_path / "o.pb.gz").read_bytes()))
    assert out.to_string().count("all-gather(") == FSDP.read_text().count("all-gather(") - 2


def _peak_rss_of(argv: list[str], limit_bytes: int | None = None) -> tuple[int, str, int]:
    """Run the command in a child (optionally under an address-space limit): status,
    stderr and the child's peak RSS in KiB."""
    import os
    import resource
    import subprocess
    import sys

    def limit() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    proc = subprocess.Popen([sys.executable, "-m", "hlo_dedup", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=limit)
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    _, wait_status, usage = os.wait4(proc.pid, 0)  # this child's own peak, not the largest child's
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    return proc.returncode, err, usage.ru_maxrss


def test_a_gzip_input_runs_under_a_small_address_space(tmp_path: Path) -> None:
    # Decompressing asked for a 2 GiB buffer up front: MemoryError under `ulimit -v 1500000`.
    (tmp_path / "m.hlo.gz").write_bytes(gzip.compress(FSDP.read_bytes()))
    status, err, _ = _peak_rss_of([str(tmp_path / "m.hlo.gz"), "-o", str(tmp_path / "o.hlo")], 1_500_000 * 1024)
    assert status == 0, err
    assert (tmp_path / "o.hlo").read_text().startswith("HloModule")


def test_a_gzip_bomb_is_refused_on_its_first_bytes_or_its_ratio(tmp_path: Path) -> None:
    (tmp_path / "zeros.hlo.gz").write_bytes(gzip.compress(b"\0" * (256 << 20)))
    (tmp_path / "blanks.hlo.gz").write_bytes(gzip.compress(b"HloModule m\n" + b" " * (512 << 20)))
    status, err = run(tmp_path / "zeros.hlo.gz")
    assert (status, err) == (2, f"{tmp_path / 'zeros.hlo.gz'}:1:1: error: unexpected character '\\x00' "
                                "(the input starts with a NUL byte)\n")
    status, err, peak_kib = _peak_rss_of([str(tmp_path / "blanks.hlo.gz")])
    assert status == 2 and "over 256 times its size (a likely gzip bomb" in err
    assert peak_kib < 400 << 10  # bounded by 256x the 0.5 MB file, not by the 512 MiB it expands to


def test_gzip_members_and_zero_padding_read_as_gzip_reads_them(tmp_path: Path) -> None:
    (tmp_path / "empty.hlo.gz").write_bytes(gzip.compress(b""))
    assert run(tmp_path / "empty.hlo.gz")[1].endswith("empty.hlo.gz:1:1: error: expected 'HloModule' or a computation\n")
    data = FSDP.read_bytes()
    (tmp_path / "m.hlo.gz").write_bytes(gzip.compress(data[:100]) + gzip.compress(data[100:]) + b"\0" * 7)
    (tmp_path / "j.hlo.gz").write_bytes(gzip.compress(data) + b"junk")
    status, err = run(tmp_path / "m.hlo.gz", "-o", tmp_path / "o.hlo")
    assert status == 0, err
    assert run(tmp_path / "j.hlo.gz")[1].endswith("error: corrupt or truncated gzip data: not gzip data after a member (b'ju')\n")


def test_a_huge_file_that_starts_with_nul_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "zeros.hlo"
    with big.open("wb") as f:  # sparse: 3 GiB that take no disk
        f.truncate(3 << 30)
    status, err, peak_kib = _peak_rss_of([str(big)])
    assert status == 2 and err.endswith("1:1: error: unexpected character '\\x00' (the input starts with a NUL byte)\n")
    assert peak_kib < 200 << 10
    (tmp_path / "zeros.pb").write_bytes(b"\0" * 100)
    assert run(tmp_path / "zeros.pb")[1].endswith("error: not a binary HloSnapshot, HloProto or HloModuleProto "
                                                  "(it starts with a NUL byte, which no protobuf field does)\n")
