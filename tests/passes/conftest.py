"""Fixtures shared by the pass tests: output checks (structure + XLA re-parse) and vlog capture."""

from __future__ import annotations

import io
import re

import pytest

import hlo_dedup
from hlo_dedup import logs

_GLOG_LINE = re.compile(r"^I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ ([\w.]+)\.cc:\d+\] (.*)$")


@pytest.fixture
def check_output(xla_hlo):  # type: ignore[no-untyped-def]
    """Assert a pass output is structurally sound and that XLA re-parses its text."""

    def check(module: hlo_dedup.HloModule, *, xla: bool = True) -> str:
        hlo_dedup.verify_structure(module)
        text = module.to_text()
        if xla:
            xla_hlo.hlo_module_from_text(text)
        return text

    return check


class VlogCapture:
    """The glog lines written by the vlog loggers, split into (source file stem, message)."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    def lines(self) -> list[tuple[str, str]]:
        out = []
        for line in self.stream.getvalue().splitlines():
            m = _GLOG_LINE.match(line)
            assert m is not None, f"not a glog line: {line!r}"
            out.append((m.group(1), m.group(2)))
        return out

    def messages(self, stem: str = "neuron_all_gather_duplicate_remover") -> list[str]:
        return [msg for s, msg in self.lines() if s == stem]

    @property
    def raw(self) -> str:
        return self.stream.getvalue()


@pytest.fixture
def vlog():
    """`configure(v)` into a private stream; restores silence (v=0) afterwards."""
    captures: list[VlogCapture] = []

    def start(v: int) -> VlogCapture:
        stream = io.StringIO()
        logs.configure(v=v, stream=stream)
        cap = VlogCapture(stream)
        captures.append(cap)
        return cap

    yield start
    logs.configure(v=0, stream=io.StringIO())
