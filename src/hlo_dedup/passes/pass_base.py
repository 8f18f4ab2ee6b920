"""The pass interface: a named object whose `run(module)` returns whether it changed it.

Mirrors XLA's HloModulePass (`name()`, `Run(module) -> StatusOr<bool>`): a failing check
raises `PassError` (XLA's RET_CHECK status). Unlike XLA, a failed pass leaves the module
exactly as it was: every pass runs inside a `ModuleTransaction` and calls
`transaction.before_rewrite()` just before its first edit; if the pass then raises, the
module is rolled back. Passes attach what they did (`folds`, `hazards`) for reports.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from ..ir.module import HloModule
from ..logs import pass_logger, vlog_is_on, vlog_level
from ..plain import Record

if TYPE_CHECKING:
    import logging


class PassError(RuntimeError):
    """A pass failed (XLA would return a non-OK status, e.g. a RET_CHECK failure)."""


def ret_check_failure(file: str, line: int, condition: str, detail: str = "") -> PassError:
    """XLA's TF_RET_CHECK message: `RET_CHECK failure (<file>:<line>) <cond> <detail>`."""
    message = f"RET_CHECK failure ({file}:{line}) {condition} "
    return PassError((message + detail).rstrip())


class PassResult(Record):
    """What one pass run did: whether it changed the module and its records.

    `instructions`: an InstructionFate per instruction considered; `deleted`: (computation,
    name, line) of what the pass's closing DCE deleted in the computations it rewrote;
    `notes`: what a user should know, in words; `profiles`: per computation with a priced
    fold, its live bytes before and after (`analysis.live_profile.LiveProfile`);
    `price_seconds`: the part of `seconds` spent pricing folds in memory (what --price=none saves).
    """

    __slots__ = ("pass_name", "changed", "folds", "hazards", "seconds", "instructions", "near_misses", "deleted",
                 "notes", "profiles", "price_seconds")

    def __init__(self, pass_name: str, changed: bool, folds: list[Any] | None = None,
                 hazards: list[Any] | None = None, seconds: float = 0.0, instructions: list[Any] | None = None,
                 near_misses: list[Any] | None = None, deleted: list[tuple[str, str, str]] | None = None,
                 notes: list[str] | None = None, profiles: list[Any] | None = None,
                 price_seconds: float = 0.0) -> None:
        self.pass_name = pass_name
        self.changed = changed
        self.folds = [] if folds is None else folds
        self.hazards = [] if hazards is None else hazards
        self.seconds = seconds
        self.instructions = [] if instructions is None else instructions
        self.near_misses = [] if near_misses is None else near_misses
        self.deleted = [] if deleted is None else deleted
        self.notes = [] if notes is None else notes
        self.profiles = [] if profiles is None else profiles
        self.price_seconds = price_seconds


class ModuleTransaction:
    """Undo for a pass that fails after it started editing.

    `before_rewrite()` keeps the module's text the first time it is called (free while the
    module is as read: its text is its source); `rollback()` reads that text again into
    the same HloModule object. A pass that fails before its first rewrite costs nothing.
    An untracked transaction keeps nothing and rolls nothing back.
    """

    def __init__(self, module: HloModule, *, tracked: bool = True) -> None:
        self.module = module
        self.tracked = tracked
        self._text: str | None = None

    def before_rewrite(self) -> None:
        if self._text is None and self.tracked:
            self._text = self.module.to_text()

    def rollback(self) -> None:
        if self._text is None:
            return
        from ..text.parser import parse_module

        module = self.module
        source = module.source
        same_text = source is not None and self._text == source.text
        fresh = parse_module(
            self._text,
            module.filename,
            spmd=module.use_spmd_partitioning,
            first_line=source.first_line if same_text and source is not None else 1,
        )
        module.restore_from(fresh)


class HloPass:
    """Base class: subclasses set `name` and implement `run_on_module`."""

    name: ClassVar[str] = ""
    #: Source file name XLA's logging would show for this pass (for `--vmodule`).
    source_file: ClassVar[str] = ""

    @property
    def logger(self) -> logging.Logger:
        return pass_logger(self.source_file or self.name)

    def vlog_is_on(self, level: int) -> bool:
        """XLA's VLOG_IS_ON(level) for this pass's source file."""
        return vlog_is_on(self.source_file or self.name, level)

    def vlog(self, level: int, message: str, *args: object) -> None:
        """XLA's VLOG(level) << ...: logged with the caller's line."""
        self.logger.log(vlog_level(level), message, *args, stacklevel=2)

    def run(self, module: HloModule) -> bool:
        """Run on `module`; True if it changed."""
        return self.run_with_result(module).changed

    def run_with_result(self, module: HloModule) -> PassResult:
        """Run on `module` inside a transaction: on any error the module is rolled back."""
        start = time.perf_counter()
        transaction = ModuleTransaction(module)
        try:
            result = self.run_on_module(module, transaction)
        except BaseException:
            transaction.rollback()
            raise
        result.seconds = time.perf_counter() - start
        return result

    def run_on_module(self, module: HloModule, transaction: ModuleTransaction) -> PassResult:  # pragma: no cover
        raise NotImplementedError
