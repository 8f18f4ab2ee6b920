"""Run passes in order, as HloPassPipeline does: stop at the first error."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ..ir.module import HloModule
from ..plain import Record
from .pass_base import HloPass, PassResult
from .registry import create_pass


class PipelineResult(Record):
    """What a pipeline did: `changed` if any pass changed the module, per-pass results."""

    __slots__ = ("changed", "passes")

    def __init__(self, changed: bool, passes: list[PassResult] | None = None) -> None:
        self.changed = changed
        self.passes = [] if passes is None else passes

    @property
    def folds(self) -> list:
        return [f for p in self.passes for f in p.folds]

    @property
    def hazards(self) -> list:
        return [h for p in self.passes for h in p.hazards]


class Pipeline:
    """A sequence of passes (HloPassPipeline without invariant checkers, like hlo-opt)."""

    def __init__(self, passes: Sequence[HloPass], name: str = "transforms_pipeline") -> None:
        self.passes = list(passes)
        self.name = name

    @classmethod
    def from_names(cls, names: Sequence[str], *, strict: bool = False,
                   max_peak_increase: int | None = None,
                   refused_folds: Mapping[tuple[str, str], str] | None = None,
                   price_backend: str = "native", priced: bool = True) -> Pipeline:
        return cls([create_pass(n, strict=strict, max_peak_increase=max_peak_increase, refused_folds=refused_folds,
                                price_backend=price_backend, priced=priced)
                    for n in names])

    def run(
        self,
        module: HloModule,
        *,
        after_pass: Callable[[HloPass, PassResult], None] | None = None,
    ) -> PipelineResult:
        result = PipelineResult(False)
        for p in self.passes:
            pass_result = p.run_with_result(module)
            result.passes.append(pass_result)
            result.changed |= pass_result.changed
            if after_pass is not None:
                after_pass(p, pass_result)
        return result
