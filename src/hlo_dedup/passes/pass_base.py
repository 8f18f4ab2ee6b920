"""The pass interface: a named object whose `run(module)` returns whether it changed it.

Mirrors XLA's HloModulePass (`name()`, `Run(module) -> StatusOr<bool>`): a failing
check raises `PassError` (XLA's RET_CHECK status) and must leave the module untouched.
Passes may attach what they did (`records`) for reports.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..ir.module import HloModule


class PassError(RuntimeError):
    """A pass failed (XLA would return a non-OK status, e.g. a RET_CHECK failure)."""


def ret_check_failure(file: str, line: int, condition: str, detail: str = "") -> PassError:
    """XLA's TF_RET_CHECK message: `RET_CHECK failure (<file>:<line>) <cond> <detail>`."""
    message = f"RET_CHECK failure ({file}:{line}) {condition} "
    return PassError((message + detail).rstrip())


@dataclass
class PassResult:
    """What one pass run did: whether it changed the module and its records."""

    pass_name: str
    changed: bool
    folds: list[Any] = field(default_factory=list)
    hazards: list[Any] = field(default_factory=list)
    seconds: float = 0.0


class HloPass:
    """Base class: subclasses set `name` and implement `run_on_module`."""

    name: ClassVar[str] = ""
    #: Source file name XLA's logging would show for this pass (for `--vmodule`).
    source_file: ClassVar[str] = ""

    def __init__(self) -> None:
        self.last_result: PassResult | None = None

    @property
    def logger(self) -> logging.Logger:
        from ..logs import pass_logger

        return pass_logger(self.source_file or self.name)

    def run(self, module: HloModule) -> bool:
        """Run on `module`; True if it changed."""
        result = self.run_with_result(module)
        return result.changed

    def run_with_result(self, module: HloModule) -> PassResult:
        import time

        start = time.perf_counter()
        result = self.run_on_module(module)
        result.seconds = time.perf_counter() - start
        self.last_result = result
        return result

    def run_on_module(self, module: HloModule) -> PassResult:  # pragma: no cover - abstract
        raise NotImplementedError
