"""hlo-dedup: the Neuron compiler's all-gather and preprocess-kernel dedup passes in Python.

    >>> import hlo_dedup
    >>> module = hlo_dedup.load("model.hlo")
    >>> result = hlo_dedup.run_passes(module)          # neuronx-cc order: #76 then #106
    >>> result.changed, len(result.folds), result.hazards
    >>> hlo_dedup.save(module, "model.dedup.hlo")

The core is pure Python; proto formats and the XLA oracle need `pip install 'hlo-dedup[xla]'`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from .ir import HloComputation, HloInstruction, HloIrError, HloModule, PrimitiveType, Shape
from .passes import DEFAULT_PIPELINE, PassError, Pipeline, PipelineResult, pass_names
from .text import HloParseError, parse_module, parse_modules

__version__ = "0.1.0"

Result = PipelineResult


def load_all(source: str | os.PathLike[str], *, spmd: bool = True, format: str | None = None) -> list[HloModule]:
    """Every module in a file (HLO text or a proto container, as `hlo-dedup` reads it) or in
    a string of HLO text. A string with a line break is the text itself (every module XLA
    prints spans lines; no file name has one), any other string a path."""
    if isinstance(source, str) and "\n" in source:
        return parse_modules(source, "<string>", spmd=spmd)
    from .io.formats import read_modules

    return read_modules(Path(source), spmd=spmd, format=format)


def load(source: str | os.PathLike[str], *, spmd: bool = True, format: str | None = None) -> HloModule:
    """The (first) module in a path or an HLO text string."""
    return load_all(source, spmd=spmd, format=format)[0]


def run_passes(
    module: HloModule, passes: Sequence[str] | None = None, *, strict: bool = False
) -> PipelineResult:
    """Run registered passes by name (default: neuronx-cc's #76 then #106)."""
    names = DEFAULT_PIPELINE if passes is None else tuple(passes)
    return Pipeline.from_names(names, strict=strict).run(module)


def save(module: HloModule, path: str | os.PathLike[str], *, format: str | None = None) -> None:
    """Write `module` as HLO text or (`.pb` / format="pb") an HloModuleProto, the way the command
    writes `-o` (see `hlo_dedup.io.files`: through symlinks and devices, mode and owner kept)."""
    from .io.formats import write_module

    write_module(module, Path(path), format=format)


def verify_structure(module: HloModule) -> None:
    """Check the IR's invariants; raises HloVerifyError naming the instruction."""
    from .ir.verifier import verify_structure as _verify

    _verify(module)


__all__ = [
    "DEFAULT_PIPELINE",
    "HloComputation",
    "HloInstruction",
    "HloIrError",
    "HloModule",
    "HloParseError",
    "PassError",
    "PrimitiveType",
    "Result",
    "Shape",
    "load",
    "load_all",
    "pass_names",
    "parse_module",
    "parse_modules",
    "run_passes",
    "save",
    "verify_structure",
]
