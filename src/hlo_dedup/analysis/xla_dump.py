"""XLA's own memory figures for a compiled module, read from its dump files.

``XLA_FLAGS=--xla_dump_to=DIR`` makes the CPU compiler write, beside the scheduled module
``<prefix>.txt`` (e.g. ``module_0000.jit_step.cpu_after_optimizations.txt``):

* ``<prefix>-live-range.txt``: HloLiveRange, every value's ``start-end`` in the
  flattened schedule (while bodies and called computations inlined in time), and the
  values at the moment XLA reports as the peak with their sum (``Stack trace breakdown
  for peak usage: 2 142 216 bytes``);
* ``<prefix>-buffer-assignment.txt``: every allocation and the values placed in it, each
  with its ``size`` and ``offset``;
* ``<prefix>-memory-usage-report.txt``: each memory space's ``Total bytes``, what the
  executable reserves.

From these, three figures. `live_range_peak`: the maximum over time of the bytes of the
values live then (the quantity our liveness model estimates; values XLA aliases, such as
a loop state and its body parameter, count separately where their ranges touch).
`in_use_peak`: the same, but values XLA placed at the same allocation and offset count
once, so it is the memory in use at XLA's worst moment after its in-place sharing.
`reported_peak`: what the dump prints; XLA picks that moment with an event sweep that
weighs each value by its instruction's whole shape (a tuple counts its index table only)
and checks the total between a time's starts and the previous time's ends, so it is
neither of the two maxima.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_VALUE = re.compile(r"^ value: <\d+ ([^\s{}>]+)(?:\{([\d,]*)\})?(?: \(phi\))? @\d+> \(size=(\d+),offset=(\d+)\)", re.MULTILINE)
_ALLOCATION = re.compile(r"^allocation (\d+):", re.MULTILINE)
_RANGE = re.compile(r"^\s+([^\s{}:]+)\{([\d,]*)\}:(\d+)-(\d+)$", re.MULTILINE)
_TOTAL = re.compile(r"^Total bytes: (\d+)", re.MULTILINE)
_REPORTED = re.compile(r"Stack trace breakdown for peak usage: ([\d ]+) bytes")

Value = tuple[str, tuple[int, ...]]  # (instruction name, shape index)


@dataclass(frozen=True)
class XlaMemory:
    """XLA's figures for one compiled module (bytes)."""

    total_allocation: int  # every allocation of every memory space
    reported_peak: int | None  # the live-range dump's "peak usage"
    live_range_peak: int  # max over time of the live values' bytes
    in_use_peak: int  # max over time of the bytes at distinct (allocation, offset) places
    ranges: dict[Value, tuple[int, int]]  # value -> (start, end) in XLA's flattened schedule
    places: dict[Value, tuple[int, int, int]]  # value -> (allocation, offset, size)


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def read_xla_memory(module_path: str | Path) -> XlaMemory:
    """Read the dump files beside `module_path` (the ``...cpu_after_optimizations.txt``)."""
    module_path = Path(module_path)
    prefix = str(module_path)[: -len(".txt")] if module_path.suffix == ".txt" else str(module_path)
    live_range = Path(prefix + "-live-range.txt").read_text()
    assignment = Path(prefix + "-buffer-assignment.txt").read_text()
    totals = _TOTAL.findall(Path(prefix + "-memory-usage-report.txt").read_text())
    if not totals:
        raise ValueError(f"{prefix}-memory-usage-report.txt has no 'Total bytes' line")
    ranges = {(name, _index(index)): (int(start), int(end))
              for name, index, start, end in _RANGE.findall(live_range)}
    places: dict[Value, tuple[int, int, int]] = {}
    starts = [(m.start(), int(m.group(1))) for m in _ALLOCATION.finditer(assignment)]
    allocation = iter(starts)
    current = (-1, -1)
    following = next(allocation, None)
    for m in _VALUE.finditer(assignment):
        while following is not None and following[0] < m.start():
            current, following = following, next(allocation, None)
        places[(m.group(1), _index(m.group(2) or ""))] = (current[1], int(m.group(4)), int(m.group(3)))
    missing = [value for value in ranges if value not in places]
    if missing:
        raise ValueError(f"{prefix}: {len(missing)} live values have no place in the buffer "
                         f"assignment, e.g. {missing[0]}")
    reported = _REPORTED.search(live_range)
    return XlaMemory(
        total_allocation=sum(map(int, totals)),
        reported_peak=int(reported.group(1).replace(" ", "")) if reported else None,
        live_range_peak=_peak(ranges, places, shared=False),
        in_use_peak=_peak(ranges, places, shared=True),
        ranges=ranges,
        places=places,
    )


def in_use_peak_of(memory: XlaMemory, values: list[Value]) -> int:
    """`in_use_peak` counting only `values` (e.g. those one computation defines)."""
    return _peak({value: memory.ranges[value] for value in values}, memory.places, shared=True)


def _peak(ranges: dict[Value, tuple[int, int]], places: dict[Value, tuple[int, int, int]],
          *, shared: bool) -> int:
    """Max over time of live bytes; with `shared`, values at one place count once."""
    horizon = max((end for _, end in ranges.values()), default=-1) + 1
    by_time: list[list[Value]] = [[] for _ in range(horizon)]
    for value, (start, end) in ranges.items():
        for t in range(start, end + 1):
            by_time[t].append(value)
    best = 0
    for values in by_time:
        if shared:
            slots: dict[tuple[int, int], int] = {}
            for value in values:
                allocation, offset, size = places[value]
                slots[(allocation, offset)] = max(size, slots.get((allocation, offset), 0))
            total = sum(slots.values())
        else:
            total = sum(places[value][2] for value in values)
        best = max(best, total)
    return best
