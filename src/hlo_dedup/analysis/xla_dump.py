"""XLA's own memory figures for a compiled module, read from its dump files.

``XLA_FLAGS=--xla_dump_to=DIR`` makes the CPU compiler write, beside the scheduled module
``<prefix>.txt`` (e.g. ``module_0000.jit_step.cpu_after_optimizations.txt``):

* ``<prefix>-buffer-assignment.txt``: every allocation and the values in it, each with
  its ``size``.
* ``<prefix>-live-range.txt``: HloLiveRange, every value's ``start-end`` in the
  flattened schedule, and the values at the moment XLA reports as the peak with their
  sum (``Stack trace breakdown for peak usage: 2 142 216 bytes``).
* ``<prefix>-memory-usage-report.txt``: the allocations per memory space, each space's
  ``Total bytes`` being what the executable reserves there.

XLA picks its reported moment with an event sweep that checks the running total after
each event and processes a time's starts before the previous time's ends, so the
moment it prints is not always the maximum over its own ranges; `live_range_peak` is
that maximum, recomputed from the dumped ranges and value sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_VALUE = re.compile(r"^ value: <\d+ ([^\s{}>]+)(\{[\d,]*\})? @\d+> \(size=(\d+),offset=\d+\)", re.M)
_RANGE = re.compile(r"^\s+([^\s{}:]+)\{([\d,]*)\}:(\d+)-(\d+)$", re.M)
_TOTAL = re.compile(r"^Total bytes: (\d+)", re.M)
_REPORTED = re.compile(r"Stack trace breakdown for peak usage: ([\d ]+) bytes")


@dataclass(frozen=True)
class XlaMemory:
    """XLA's figures for one compiled module (bytes)."""

    total_allocation: int  # every allocation of every memory space, after buffer sharing
    reported_peak: int | None  # the live-range dump's "peak usage"
    live_range_peak: int  # maximum over program points of the dumped ranges
    ranges: dict[tuple[str, tuple[int, ...]], tuple[int, int]]  # (instruction, index) -> (start, end)
    sizes: dict[tuple[str, tuple[int, ...]], int]


def _index(text: str | None) -> tuple[int, ...]:
    inner = (text or "{}")[1:-1]
    return tuple(int(x) for x in inner.split(",") if x)


def read_xla_memory(module_path: str | Path) -> XlaMemory:
    """Read the dump files beside `module_path` (the ``...cpu_after_optimizations.txt``)."""
    module_path = Path(module_path)
    prefix = str(module_path)[: -len(".txt")] if module_path.suffix == ".txt" else str(module_path)
    assignment = Path(prefix + "-buffer-assignment.txt").read_text()
    live_range = Path(prefix + "-live-range.txt").read_text()
    report = Path(prefix + "-memory-usage-report.txt").read_text()
    sizes: dict[tuple[str, tuple[int, ...]], int] = {}
    for name, index, size in _VALUE.findall(assignment):
        sizes[(name, _index(index))] = int(size)
    totals = _TOTAL.findall(report)
    if not totals:
        raise ValueError(f"{prefix}-memory-usage-report.txt has no 'Total bytes' line")
    ranges = {(name, _index("{" + index + "}")): (int(start), int(end))
              for name, index, start, end in _RANGE.findall(live_range)}
    reported = _REPORTED.search(live_range)
    return XlaMemory(
        total_allocation=sum(map(int, totals)),
        reported_peak=int(reported.group(1).replace(" ", "")) if reported else None,
        live_range_peak=_peak(ranges, sizes),
        ranges=ranges,
        sizes=sizes,
    )


def _peak(ranges: dict, sizes: dict) -> int:
    """Maximum over times of the bytes of values whose [start, end] holds the time."""
    if not ranges:
        return 0
    horizon = max(end for _, end in ranges.values()) + 2
    delta = [0] * horizon
    for key, (start, end) in ranges.items():
        size = sizes.get(key, 0)
        delta[start] += size
        delta[end + 1] -= size
    best = running = 0
    for d in delta:
        running += d
        best = max(best, running)
    return best
