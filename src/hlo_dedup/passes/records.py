"""What a dedup pass did, for reports: one record per fold and per hazard."""

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
