"""`--price=xla`: XLA's own peak of each module before and after the passes, and the
`--max-peak-increase` budget decided with it.

The default price (`--price=model`) is the pure-Python liveness model of
`hlo_dedup.analysis`, which judges each fold as the pass makes it. With `--price=xla` the
passes first run without a budget; then XLA:CPU compiles the module as read and as
rewritten (`hlo_dedup.xla.isolated.xla_memory`: XLA's CSE off, its memory-minimizing
scheduler, the peak read from its buffer-assignment dumps) and the report gets both peaks,
the module's and each compiled computation's whose peak changed.

With a budget, a module whose XLA peak rises by more than it gets some folds dropped: the
folds are ordered by the model's estimate (largest estimated rise first), and a bisection
over how many of them to refuse finds the fewest that keep XLA's peak rise within the budget
(it takes dropping more folds never to raise the peak), each try being the passes run again
on the module as read with those folds refused, and compiled. That costs two compiles
(before, after), one with every fold refused, and at most ceil(log2(folds)) more; a module
text compiled once is not compiled again. If even every fold refused leaves the peak over
the budget (another pass raised it), every fold stays refused and the report says the budget
was not met.

jax is imported only in the XLA child process: this module is part of the pure-Python core's
command path.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from .ir import HloModule
from .passes import FoldRecord, NeuronAllGatherDuplicateRemover, PassResult

PRICES = ("model", "xla", "none")

#: The passes again with some folds refused: (computation, removed all-gather) -> reason.
Rerun = Callable[[Mapping[tuple[str, str], str]], tuple[HloModule, list[PassResult]]]


class _Compiler:
    """XLA's figures per module text, each text compiled once; counts the compiles."""

    def __init__(self) -> None:
        self.figures: dict[str, dict[str, Any]] = {}

    def __call__(self, text: str) -> dict[str, Any]:
        from .xla.isolated import xla_memory

        found = self.figures.get(text)
        if found is None:
            found = self.figures[text] = xla_memory(text)
        return found


def estimated_rise(fold: FoldRecord) -> tuple[int, int]:
    """The model's price of a fold, for ordering: its peak rise, then its live-range extension."""
    memory = fold.memory or {}
    rise = memory.get("peak_bytes_after", 0) - memory.get("peak_bytes_before", 0)
    return rise, memory.get("live_range_extension", 0)


def price_with_xla(before_text: str, module: HloModule, passes: list[PassResult], rerun: Rerun,
                   budget: int | None) -> tuple[HloModule, list[PassResult], dict[str, Any]]:
    """XLA's peak of `before_text` and of `module` (what `passes` made of it); with `budget`
    (bytes), the module and pass results whose XLA peak rise is within it (see the module's
    docstring). Returns the module and results to keep and the `xla_price` record for the
    report. XlaError (with XLA's reason) for a module XLA:CPU cannot compile,
    XlaUnavailableError without jax."""
    compile_ = _Compiler()
    before = compile_(before_text)
    after = compile_(module.to_text())
    dropped: list[FoldRecord] = []
    folds = [f for p in passes for f in p.folds if f.pass_name == NeuronAllGatherDuplicateRemover.name]
    rise = after["peak_bytes"] - before["peak_bytes"]
    if budget is not None and rise > budget and folds:
        order = sorted(folds, key=estimated_rise, reverse=True)  # stable: ties in the order they were made
        reason = (f"XLA:CPU's peak of the module rose by {rise} bytes ({before['peak_bytes']} -> "
                  f"{after['peak_bytes']}) with every fold, more than the --max-peak-increase budget of "
                  f"{budget}; folds were dropped largest estimated rise first")
        tries: dict[int, tuple[HloModule, list[PassResult], dict[str, Any]]] = {}

        def attempt(count: int) -> bool:
            refused = {(f.computation, f.removed): reason for f in order[:count]}
            again, results = rerun(refused)
            tries[count] = (again, results, compile_(again.to_text()))
            return tries[count][2]["peak_bytes"] - before["peak_bytes"] <= budget

        low, high = 0, len(order)  # too few dropped at `low`; `high` is the answer once it fits
        if attempt(high):
            while high - low > 1:
                middle = (low + high) // 2
                if attempt(middle):
                    high = middle
                else:
                    low = middle
        module, passes, after = tries[high]
        dropped = order[:high]
    return module, passes, _record(before, after, budget, dropped, len(compile_.figures))


def _record(before: dict[str, Any], after: dict[str, Any], budget: int | None, dropped: Sequence[FoldRecord],
            compiles: int) -> dict[str, Any]:
    rise = after["peak_bytes"] - before["peak_bytes"]
    changed = [{"computation": name, "peak_bytes_before": peak, "peak_bytes_after": after["computations"][name]}
               for name, peak in before["computations"].items()
               if name in after["computations"] and after["computations"][name] != peak]
    return {
        "peak_bytes_before": before["peak_bytes"],
        "peak_bytes_after": after["peak_bytes"],
        "peak_increase_bytes": rise,
        "allocated_bytes_before": before["allocated_bytes"],
        "allocated_bytes_after": after["allocated_bytes"],
        "computations": changed,
        "compiles": compiles,
        "folds_dropped": [{"computation": f.computation, "removed": f.removed} for f in dropped],
        "within_budget": None if budget is None else rise <= budget,
    }
