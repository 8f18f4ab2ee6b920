"""hlo-dedup: the Neuron compiler's all-gather and preprocess-kernel dedup passes in Python.

    >>> import hlo_dedup
    >>> module = hlo_dedup.load("model.hlo")           # or jax.jit(f).lower(x), or its .compile()
    >>> result = hlo_dedup.run_passes(module)          # neuronx-cc order: #76 then #106
    >>> result.changed, len(result.folds), result.hazards
    >>> hlo_dedup.save(module, "model.dedup.hlo")
    >>> hlo_dedup.check_equivalence(before_text, module.to_text())   # run both on XLA:CPU

The core is pure Python. Reading proto formats needs `pip install 'hlo-dedup[proto]'`;
writing them and the XLA oracle need `pip install 'hlo-dedup[xla]'`.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Sequence

from .ir import HloComputation, HloInstruction, HloIrError, HloModule, PrimitiveType, Shape
from .passes import DEFAULT_PIPELINE, PassError, Pipeline, PipelineResult, pass_names
from .text import HloParseError, parse_module, parse_modules

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`equivalence` and its two names load on first use: the command's plain runs never
    compare on XLA, and its imports (hashlib among them) are start-up every run would pay."""
    if name in ("equivalence", "EquivalenceReport", "check_equivalence"):
        from .equivalence import check_equivalence  # noqa: F401 - binds the submodule here

        module = globals()["equivalence"]
        return module if name == "equivalence" else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

Result = PipelineResult


_ACCEPTED = ("a path, HLO text, bytes (HLO text or an HLO proto, gzip allowed), or what JAX hands "
             "you: jax.jit(f).lower(*args) (HLO before optimization) or its .compile() (after)")


def load_all(source: object, *, spmd: bool = True, format: str | None = None,
             stage: str | None = None) -> list[HloModule]:
    """Every module in `source`: a file (HLO text or a proto container, as `hlo-dedup` reads
    it), a string of HLO text, bytes of either, or a JAX `Lowered` / `Compiled` object (their
    HLO text, before and after XLA's optimizations). A string with a line break, or one that
    starts as a module does, is the text itself; any other string a path. Anything else is a
    TypeError that says what is accepted.

    `stage` (with a `Lowered`): "before_optimizations" (the default), "after_spmd_partitioning"
    (compiled on XLA:CPU, the module as XLA's partitioner left it: where a GSPMD program's
    all-gathers are) or "after_optimizations"."""
    if stage is not None and type(source).__name__ != "Lowered":
        raise TypeError(f"stage= needs a jax.jit(f).lower(*args) object to compile; got {type(source).__name__}")
    if isinstance(source, str) and ("\n" in source or _TEXT_START.match(source)):
        return parse_modules(source, "<string>", spmd=spmd)
    if isinstance(source, (str, os.PathLike)):
        from .io.formats import read_modules

        if isinstance(source, str) and not os.path.lexists(source):
            raise FileNotFoundError(2, "no such file, and not HLO text either (a module starts with "
                                       "'HloModule' or a computation; text with line breaks is read as text)", source)
        return read_modules(source, spmd=spmd, format=format)
    if isinstance(source, (bytes, bytearray, memoryview)):
        from .io.formats import decompress, modules_from_bytes

        return modules_from_bytes(decompress(bytes(source), "<bytes>"), "<bytes>", spmd=spmd, format=format)
    return parse_modules(_jax_hlo_text(source, stage), f"<jax {type(source).__name__}>", spmd=spmd)


def load(source: object, *, spmd: bool = True, format: str | None = None, stage: str | None = None) -> HloModule:
    """The (first) module in `source` (see `load_all`)."""
    return load_all(source, spmd=spmd, format=format, stage=stage)[0]


#: HLO text on one line: the module header, or an ENTRY computation.
_TEXT_START = re.compile(r"\s*(?:HloModule\s|ENTRY\s)")


def _jax_hlo_text(source: object, stage: str | None = None) -> str:
    """The HLO text of a JAX `Lowered` (`as_text(dialect="hlo")`) or `Compiled` (`as_text()`)
    object; a TypeError naming what is accepted for anything else. jax is never imported
    here: an object of its kind means it already was."""
    stages = None
    if "jax" in sys.modules:
        import jax.stages as stages
    kind = type(source).__name__
    if stages is not None and isinstance(source, stages.Lowered):
        if stage is not None:
            from .xla.stages import stage_text

            return stage_text(source, stage)
        return source.as_text(dialect="hlo")
    if stages is not None and isinstance(source, stages.Compiled):
        text = source.as_text()
        if not text:
            raise ValueError("this jax Compiled object has no HLO text (its backend does not print one); "
                             "load jax.jit(f).lower(*args) instead")
        return text
    if callable(getattr(source, "lower", None)):
        raise TypeError(f"hlo_dedup.load got {kind}, which has no HLO until it is lowered: pass "
                        "jax.jit(f).lower(*args), or .lower(*args).compile() for XLA's optimized HLO")
    raise TypeError(f"hlo_dedup.load takes {_ACCEPTED}; got {kind}")


def run_passes(
    module: HloModule, passes: Sequence[str] | None = None, *, strict: bool = False,
    max_peak_increase: int | None = None, price_backend: str = "native", priced: bool = True,
) -> PipelineResult:
    """Run registered passes by name (default: neuronx-cc's #76 then #106). `strict` refuses
    hazardous all-gather folds; `max_peak_increase` (bytes) refuses folds that would raise
    their computation's estimated peak memory by more than that; `price_backend` is the
    backend that estimate is for: ``native`` (bf16 as written) or ``xla-cpu`` (bf16 and f16
    computed in f32); `priced` False makes the same folds without estimating their memory
    (no budget then), which on modules with many folds takes about half the time."""
    names = DEFAULT_PIPELINE if passes is None else tuple(passes)
    return Pipeline.from_names(names, strict=strict, max_peak_increase=max_peak_increase,
                               price_backend=price_backend, priced=priced).run(module)


def save(module: HloModule, path: str | os.PathLike[str], *, format: str | None = None) -> None:
    """Write `module` as HLO text or (`.pb` / format="pb") an HloModuleProto, the way the command
    writes `-o` (see `hlo_dedup.io.files`: through symlinks and devices, mode and owner kept)."""
    from .io.formats import write_module

    write_module(module, path, format=format)


def verify_structure(module: HloModule) -> None:
    """Check the IR's invariants; raises HloVerifyError naming the instruction."""
    from .ir.verifier import verify_structure as _verify

    _verify(module)


__all__ = [
    "DEFAULT_PIPELINE",
    "EquivalenceReport",
    "HloComputation",
    "HloInstruction",
    "HloIrError",
    "HloModule",
    "HloParseError",
    "PassError",
    "PrimitiveType",
    "Result",
    "Shape",
    "check_equivalence",
    "equivalence",
    "load",
    "load_all",
    "pass_names",
    "parse_module",
    "parse_modules",
    "run_passes",
    "save",
    "verify_structure",
]
