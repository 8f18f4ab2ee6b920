"""Passes: XLA's `dce` and the two Neuron dedup passes, registered by name."""

from .all_gather_duplicate_remover import NeuronAllGatherDuplicateRemover
from .dce import HloDCE, run_dce
from .pass_base import HloPass, PassError, PassResult
from .pipeline import Pipeline, PipelineResult
from .preprocess_kernel_duplicate_remover import NeuronPreprocessKernelDuplicateRemover
from .records import FoldRecord, Hazard, InstructionFate, NearMiss
from .registry import DEFAULT_PIPELINE, create_pass, pass_names

__all__ = [
    "DEFAULT_PIPELINE",
    "FoldRecord",
    "Hazard",
    "HloDCE",
    "HloPass",
    "InstructionFate",
    "NeuronAllGatherDuplicateRemover",
    "NearMiss",
    "NeuronPreprocessKernelDuplicateRemover",
    "PassError",
    "PassResult",
    "Pipeline",
    "PipelineResult",
    "create_pass",
    "pass_names",
    "run_dce",
]
