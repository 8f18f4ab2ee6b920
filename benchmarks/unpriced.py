"""`hlo-dedup ARGS` with the memory price made free: what the rest of the pipeline costs.

    python benchmarks/unpriced.py MODULE.hlo -o OUT.hlo

A measuring aid, not a mode of the tool: every fold is priced at zero without building a
model (no fusion decisions, no schedule, no live profile), so the run costs what the
default pipeline would cost if pricing cost nothing. Without a budget the folds do not
depend on their prices, so the rewritten module is the default run's, byte for byte
(`real_modules.py` checks it); only the summary's memory figures are empty. A speed
target the default pipeline misses even here cannot be met by making the price cheaper.
"""

from __future__ import annotations

import sys

import hlo_dedup.passes.all_gather_duplicate_remover as remover
from hlo_dedup import cli
from hlo_dedup.analysis.fold_price import FoldPrice
from hlo_dedup.analysis.live_profile import LiveProfile, Peak


class FreePricer:
    """Stands in for `FoldPricer`: every fold changes no peak, and nothing is modelled."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def apply(self, computation, kept, removed) -> FoldPrice:  # type: ignore[no-untyped-def]
        return FoldPrice(computation.name, kept.name, removed.name, 0, 0, 0, False, "")


def empty_profile(pricer, computation, prices) -> LiveProfile:  # type: ignore[no-untyped-def]
    none = Peak(0, -1, "")
    return LiveProfile(computation.name, "", 0, (), (), none, none, len(prices), ())


if __name__ == "__main__":
    if any(a.startswith("--max-peak-increase") or a.startswith("--price") for a in sys.argv[1:]):
        sys.exit("unpriced.py: a budget or another price needs the real price")
    remover.FoldPricer = FreePricer  # type: ignore[misc,assignment]
    remover.live_profile = empty_profile  # type: ignore[assignment]
    sys.argv[0] = "hlo-dedup"
    cli.entry()
