"""What a dedup pass did, for reports: one record per fold and per hazard, the fate of every
instruction the pass considered, and the near misses it saw."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hazard:
    """A fold the faithful key allows although the two values may differ."""

    computation: str
    kept: str
    removed: str
    reasons: tuple[str, ...]
    refused: bool  # True in strict mode: the fold was not made


@dataclass(frozen=True)
class FoldRecord:
    """One duplicate folded onto a kept instruction."""

    pass_name: str
    computation: str
    kept: str
    removed: str
    key: dict[str, Any] = field(default_factory=dict)
    bytes_output: int = 0
    bytes_per_device: int = 0
    replacement: str | None = None  # the clone that replaced `removed` (preprocess pass)
    hazardous: bool = False


@dataclass(frozen=True)
class InstructionFate:
    """One instruction a pass considered (an all-gather, a kernel) and what became of it.

    Fates of the all-gather pass: `kept` (duplicates were folded onto it), `folded` (onto
    `folded_into`), `refused` (a fold was refused: `reason`), `not_traced` (the walk stopped
    at `stop`, an (opcode, instruction) pair, before a parameter), `unique` (traced, no
    duplicate), `not_candidate` (e.g. `all-gather-start`). Of the preprocess-kernel pass:
    `first`, `rewritten` (onto a clone of `folded_into`), `not_matched` (`reason`).
    `key` is the traced key; `op_name` and `source` (file:line) come from the metadata.
    """

    computation: str
    name: str
    opcode: str
    fate: str
    folded_into: str | None = None
    reason: str | None = None
    stop: tuple[str, str] | None = None
    key: dict[str, Any] | None = None
    bytes_output: int = 0
    op_name: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class NearMiss:
    """Instructions that would fold but for one thing.

    `kind`: `key_field` (same parameter, a key field differs), `same_operand` (the walks
    stopped at the same non-parameter value), `cross_computation` (the same parameter,
    gathered in different computations). `reason` says it in words.
    """

    kind: str
    reason: str
    computations: tuple[str, ...]
    instructions: tuple[str, ...]
