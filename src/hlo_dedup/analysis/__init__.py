"""Analyses over the IR: buffer liveness and the memory price of folds."""

from .liveness import BufferRange, ComputationLiveness, ModuleLiveness, analyze

__all__ = ["BufferRange", "ComputationLiveness", "ModuleLiveness", "analyze"]
