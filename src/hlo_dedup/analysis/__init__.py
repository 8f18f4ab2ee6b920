"""Analyses over the IR: buffer liveness and the memory price of folds.

A scheduled module is priced as written; one before optimizations as a compiler would
fuse and schedule it (`fusion_model`, `schedule`), and each price says which schedule it
assumes (``price.schedule``).

    >>> from hlo_dedup.analysis import FoldPricer, parse_budget
    >>> pricer = FoldPricer(module)                  # before the pass rewrites anything
    >>> price = pricer.apply_within(comp, kept, removed, parse_budget("64MiB"))
    >>> price.live_range_extension, price.peak_bytes_before, price.peak_bytes_after
"""

from .budget import parse_budget
from .fold_price import FoldPrice, FoldPricer
from .liveness import BufferRange, ComputationLiveness
from .module_liveness import ModuleLiveness, analyze

__all__ = [
    "BufferRange",
    "ComputationLiveness",
    "FoldPrice",
    "FoldPricer",
    "ModuleLiveness",
    "analyze",
    "parse_budget",
]
