"""Analyses over the IR: buffer liveness and the memory price of folds.

A scheduled module is priced as written; one before optimizations as a compiler would
fuse and schedule it (`fusion_model`, `schedule`), and each price says which schedule it
assumes (``price.schedule``). bf16 and f16 are priced as a backend with 16-bit arithmetic
runs them unless ``f32_arithmetic=True`` says it computes them in f32, as XLA:CPU does
(`f32_arithmetic`; `PRICE_BACKENDS` by name).

    >>> from hlo_dedup.analysis import FoldPricer, parse_budget
    >>> pricer = FoldPricer(module)                  # before the pass rewrites anything
    >>> price = pricer.apply_within(comp, kept, removed, parse_budget("64MiB"))
    >>> price.live_range_extension, price.peak_bytes_before, price.peak_bytes_after
"""

from .budget import parse_budget
from .fold_price import FoldPrice, FoldPricer
from .liveness import BufferRange, ComputationLiveness
from .module_liveness import PRICE_BACKENDS, ModuleLiveness, analyze

__all__ = [
    "BufferRange",
    "ComputationLiveness",
    "FoldPrice",
    "FoldPricer",
    "ModuleLiveness",
    "PRICE_BACKENDS",
    "analyze",
    "parse_budget",
]
