"""XLA's own memory figures for an HLO module text: compile it on XLA:CPU and read the dumps.

The model in `hlo_dedup.analysis` estimates what a fold does to a computation's peak; this is
what a compiler really allocates. The module is compiled as it is (its schedule, if any, is
recomputed), with the options that keep XLA from undoing or hiding what the passes did:

* ``cse`` and ``cse_barrier_expander`` off, so XLA does not fold the duplicate all-gathers
  itself (else the module before the folds compiles to the module after them);
* the memory-minimizing scheduler (not the concurrency-optimized one), the one whose peak
  a memory budget is about;
* for already-partitioned text (ENTRY ``*_spmd``) the partitioner passes off, as for
  ``--verify``; Shardy text (``xla.sdy.`` attributes) is partitioned by Shardy.

``xla_dump_to`` is a temporary directory; `hlo_dedup.analysis.xla_dump.read_xla_memory`
reads the scheduled module's buffer-assignment, memory-usage and live-range dumps. The peak
is `in_use_peak` there: the most bytes XLA's placement has in use at one moment of its
flattened schedule. Per computation of the compiled module, the same maximum over only the
values its instructions define (XLA inlines calls, so a computation of the input may not
survive: it then has no figure).

`measure` runs in the XLA child process (`hlo_dedup.xla.isolated.xla_memory` sends it
there); nothing here imports jax at module import.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from hlo_dedup.xla import XlaError

#: XLA:CPU's memory-minimizing scheduler instead of its concurrency-optimized one; the XLA
#: child starts with it (`hlo_dedup.xla.isolated.child_env`).
MEMORY_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"

#: XLA's own all-gather merging, which would fold the duplicates before they are priced.
_MERGING_PASSES = ("cse_barrier_expander", "cse")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([^\s(%]+)\s*[({]", re.MULTILINE)
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([^\s=]+)\s*=", re.MULTILINE)


def measure(hlo_text: str, spmd: bool | None = None) -> dict[str, Any]:
    """Compile `hlo_text` on XLA:CPU (in this process: the child's side) and return XLA's
    figures: ``peak_bytes`` (module), ``allocated_bytes`` (every allocation),
    ``reported_peak_bytes`` (the live-range dump's own), ``computations`` (name -> peak).
    `spmd` as for `oracle.run_module`: None guesses from the ENTRY's name."""
    from hlo_dedup.analysis.xla_dump import in_use_peak_of, read_xla_memory
    from hlo_dedup.xla.execute import _ENTRY_NAME, _PARTITIONER_PASSES

    if MEMORY_SCHEDULER_FLAG not in os.environ.get("XLA_FLAGS", "").split():
        # XLA:CPU reads its scheduler from the flags it started with: set per compile
        # (CompileOptions.env_option_overrides) it is accepted and has no effect.
        raise XlaError(f"XLA's memory is measured under its memory-minimizing scheduler: start the "
                       f"process with {MEMORY_SCHEDULER_FLAG} in XLA_FLAGS (the XLA child is)")
    from hlo_dedup.xla.oracle import device_layout

    replicas, partitions = device_layout(hlo_text, None)
    if spmd is None:
        entry = _ENTRY_NAME.search(hlo_text)
        already_partitioned = bool(entry and entry.group(1).endswith("_spmd"))
    else:
        already_partitioned = not spmd
    disabled = list(_MERGING_PASSES)
    if partitions > 1 and already_partitioned:
        disabled.append(_PARTITIONER_PASSES)
    with tempfile.TemporaryDirectory(prefix="hlo-dedup-xla-memory-") as tmp:
        _compile(hlo_text, replicas, partitions, ",".join(disabled), tmp)
        found = sorted(Path(tmp).glob("*.cpu_after_optimizations.txt"))
        if not found:
            raise XlaError("XLA:CPU compiled the module but wrote no scheduled module to its dump")
        scheduled = found[0]
        memory = read_xla_memory(scheduled)
        owners = _owners(scheduled.read_text())
    by_computation: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for value in memory.ranges:
        owner = owners.get(value[0])
        if owner is not None:
            by_computation.setdefault(owner, []).append(value)
    return {
        "peak_bytes": memory.in_use_peak,
        "allocated_bytes": memory.total_allocation,
        "reported_peak_bytes": memory.reported_peak,
        "computations": {name: in_use_peak_of(memory, values) for name, values in sorted(by_computation.items())},
    }


def _compile(hlo_text: str, replicas: int, partitions: int, disabled_passes: str, dump_dir: str) -> None:
    import jax

    from hlo_dedup.xla.execute import compile_hlo
    from hlo_dedup.xla.oracle import parse_text

    num_devices = replicas * partitions
    if jax.device_count() < num_devices:
        raise XlaError(f"module needs {num_devices} devices, XLA:CPU has {jax.device_count()}")
    proto = parse_text(hlo_text).as_serialized_hlo_module_proto()
    compile_hlo(hlo_text, proto, replicas, partitions, tuple(jax.devices()[:num_devices]),
                disabled_passes=disabled_passes, dump_to=dump_dir)


def _owners(scheduled_text: str) -> dict[str, str]:
    """Instruction name -> the computation of the compiled module that defines it."""
    owners: dict[str, str] = {}
    headers = [(m.start(), m.group(1)) for m in _COMPUTATION.finditer(scheduled_text)]
    bounds = [start for start, _ in headers] + [len(scheduled_text)]
    for (start, name), end in zip(headers, bounds[1:]):
        for m in _INSTRUCTION.finditer(scheduled_text, start, end):
            owners[m.group(1)] = name
    return owners

