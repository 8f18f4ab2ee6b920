"""The one place pass names map to pass classes (as hlo-opt's RegisterPass does)."""

from __future__ import annotations

from typing import Mapping

from .all_gather_duplicate_remover import NeuronAllGatherDuplicateRemover
from .dce import HloDCE
from .pass_base import HloPass
from .preprocess_kernel_duplicate_remover import NeuronPreprocessKernelDuplicateRemover

_PASSES: dict[str, type[HloPass]] = {
    cls.name: cls
    for cls in (HloDCE, NeuronAllGatherDuplicateRemover, NeuronPreprocessKernelDuplicateRemover)
}

#: neuronx-cc registry order: #76 then #106.
DEFAULT_PIPELINE: tuple[str, ...] = (
    NeuronPreprocessKernelDuplicateRemover.name,
    NeuronAllGatherDuplicateRemover.name,
)


def pass_names() -> list[str]:
    """Registered names, sorted as hlo-opt's --list-passes prints them."""
    return sorted(_PASSES)


def _spelling(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def suggest_pass(name: str) -> str | None:
    """The registered name `name` was probably meant as: the same words with the other
    separator (the real names mix `-` and `_`), or the closest name; None if none is close."""
    by_spelling = {_spelling(known): known for known in _PASSES}
    if _spelling(name) in by_spelling:
        return by_spelling[_spelling(name)]
    import difflib  # a mistyped name only: not worth its import on every run

    close = difflib.get_close_matches(_spelling(name), list(by_spelling), n=1, cutoff=0.6)
    return by_spelling[close[0]] if close else None


def unknown_pass_message(name: str) -> str:
    """hlo-opt's words for an unknown pass, with a suggestion when one is close."""
    hint = suggest_pass(name)
    did_you_mean = f" Did you mean {hint}?" if hint else ""
    return f"Pass {name} not found.{did_you_mean} Known passes: {','.join(pass_names())}"


def create_pass(name: str, *, strict: bool = False, max_peak_increase: int | None = None,
                refused_folds: Mapping[tuple[str, str], str] | None = None, price_backend: str = "native",
                priced: bool = True) -> HloPass:
    """Instantiate the pass registered as `name`; KeyError lists the known names.
    `strict`, `max_peak_increase` (bytes), `refused_folds` ((computation, removed
    all-gather) -> reason), `price_backend` (`analysis.PRICE_BACKENDS`) and `priced`
    (False: no memory price) configure the all-gather pass."""
    cls = _PASSES.get(name)
    if cls is None:
        raise KeyError(unknown_pass_message(name))
    if cls is NeuronAllGatherDuplicateRemover:
        return NeuronAllGatherDuplicateRemover(strict=strict, max_peak_increase=max_peak_increase,
                                               refused_folds=refused_folds, price_backend=price_backend,
                                               priced=priced)
    return cls()
