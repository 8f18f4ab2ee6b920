"""The HLO of a JAX program at the stage a user asks for, as XLA:CPU writes it.

`jax.jit(f).lower(*args)` holds the program before XLA's passes. For a GSPMD program
that is annotations only: the all-gathers Neuron's pass folds appear when XLA's SPMD
partitioner runs, which a user would otherwise find by dumping and digging. This module
compiles the lowered program on XLA:CPU in this process (jax is already loaded: the
object came from it) with XLA's dump switched on for the partitioner, and returns the
module as the partitioner left it, or as XLA's whole pipeline did.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

__all__ = ["STAGES", "stage_text"]

#: The stages `hlo_dedup.load(lowered, stage=...)` can give, in pipeline order.
STAGES = ("before_optimizations", "after_spmd_partitioning", "after_optimizations")
#: What XLA's dump names the module after the partitioner (`--xla_dump_hlo_pass_re`).
_PARTITIONED = ".after_spmd-partitioning."
_OPTIMIZED = ".cpu_after_optimizations.txt"


def stage_text(lowered: Any, stage: str) -> str:
    """The HLO text of `lowered` (a `jax.stages.Lowered`) at `stage` (one of `STAGES`)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}: expected one of {', '.join(STAGES)}")
    if stage == "before_optimizations":
        return lowered.as_text(dialect="hlo")
    with tempfile.TemporaryDirectory(prefix="hlo-dedup-stage-") as dump:
        lowered.compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_as_text": True,
                                          "xla_dump_hlo_pass_re": "spmd-partitioning"})
        suffix = _PARTITIONED if stage == "after_spmd_partitioning" else _OPTIMIZED
        found = sorted(name for name in os.listdir(dump) if suffix in name and name.endswith(".txt"))
        if not found:
            raise ValueError(f"XLA wrote no module {stage.replace('_', ' ')} (its dump holds "
                             f"{len(os.listdir(dump))} files): a program on one device is not partitioned")
        with open(os.path.join(dump, found[-1]), encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
