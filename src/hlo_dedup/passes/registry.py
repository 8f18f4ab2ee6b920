"""The one place pass names map to pass classes (as hlo-opt's RegisterPass does)."""

from __future__ import annotations

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


def create_pass(name: str, *, strict: bool = False, max_peak_increase: int | None = None) -> HloPass:
    """Instantiate the pass registered as `name`; KeyError lists the known names.
    `strict` and `max_peak_increase` (bytes) configure the all-gather pass."""
    cls = _PASSES.get(name)
    if cls is None:
        raise KeyError(f"Pass {name} not found. Known passes: {', '.join(pass_names())}")
    if cls is NeuronAllGatherDuplicateRemover:
        return NeuronAllGatherDuplicateRemover(strict=strict, max_peak_increase=max_peak_increase)
    return cls()
