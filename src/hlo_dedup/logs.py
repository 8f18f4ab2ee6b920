"""XLA-style verbose logging (`--v=N`, `--vmodule=file=N`) on top of Python `logging`.

Each pass logs through a logger named after the C++ source file it mirrors
(`hlo_dedup.vlog.neuron_all_gather_duplicate_remover`). `VLOG(n)` maps to the logging
level `INFO - n`, so `--v=2` is "enable levels >= INFO-2 everywhere" and `--vmodule`
overrides it per file, as glog does. Lines are written in glog's form:

    I1129 12:00:00.000000   4242 neuron_all_gather_duplicate_remover.cc:57] message

where the file is the mirrored C++ file and the line number is that of our Python
implementation (the C++ line numbers are not known).

`logging` itself is imported only once a VLOG line can be on (`--v`, `--vmodule`, or an
application that imported it to set levels of its own): a plain run never needs it, and its
imports would be a tenth of the command's start-up.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import logging

ROOT_LOGGER = "hlo_dedup.vlog"
#: `logging.INFO` and `logging.WARNING`, the levels VLOG is measured from and silenced at.
_INFO, _WARNING = 20, 30


def vlog_level(n: int) -> int:
    """The Python logging level of XLA's VLOG(n)."""
    return _INFO - n


def vlog_is_on(source_file: str, level: int) -> bool:
    """XLA's VLOG_IS_ON(level) for the pass mirroring `source_file`. False without asking
    `logging` while nothing has imported it: no logger can be set below its default
    WARNING before that, and `configure` imports it for any `--v` or `--vmodule`."""
    if "logging" not in sys.modules:
        return False
    return pass_logger(source_file).isEnabledFor(vlog_level(level))


#: `--vmodule` entries as (file pattern, logging level), applied to every pass logger,
#: including those first asked for after `configure`.
_vmodule: list[tuple[str, int]] = []


@functools.lru_cache(maxsize=None)
def pass_logger(source_file: str) -> logging.Logger:
    """The logger of a pass, named after the C++ source file it mirrors (one object for
    the process: `configure` updates it in place; passes ask once per computation)."""
    import logging

    stem = source_file.rsplit("/", 1)[-1].removesuffix(".cc")
    name = f"{ROOT_LOGGER}.{stem}"
    known = name in logging.root.manager.loggerDict
    logger = logging.getLogger(name)
    if not known:
        _apply_vmodule(stem, logger)
    return logger


def _apply_vmodule(stem: str, logger: logging.Logger) -> None:
    import fnmatch

    logger.setLevel(0)  # logging.NOTSET: the level of the root vlog logger
    for pattern, level in _vmodule:
        if fnmatch.fnmatch(stem, pattern):
            logger.setLevel(level)


class GlogFormatter:
    """Formats records like glog: severity letter, MMDD, time, pid, file:line] (what a
    handler asks of a `logging.Formatter`, without importing logging to subclass it)."""

    def format(self, record: logging.LogRecord) -> str:
        letter = "I" if record.levelno <= _INFO else record.levelname[0]
        t = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        stem = record.name.rsplit(".", 1)[-1]
        return (
            f"{letter}{t.tm_mon:02d}{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}."
            f"{micros:06d} {os.getpid():>6d} {stem}.cc:{record.lineno}] {record.getMessage()}"
        )


def configure(v: int = 0, vmodule: str = "", stream: TextIO | None = None) -> None:
    """Apply `--v` and `--vmodule` (comma-separated `file=N`, file without `.cc`, globs ok).

    With nothing enabled, the vlog loggers stay silent (level above INFO).
    """
    entries: list[tuple[str, int]] = []
    for item in filter(None, (s.strip() for s in vmodule.split(","))):
        pattern, _, level = item.partition("=")
        if not level.lstrip("-").isdigit():
            raise ValueError(f"--vmodule entry {item!r} is not file=N")
        entries.append((pattern.removesuffix(".cc"), vlog_level(int(level)) if int(level) > 0 else _WARNING))
    _vmodule[:] = entries
    if v <= 0 and not entries and "logging" not in sys.modules:
        return  # no logger to silence yet (see `vlog_is_on`)
    import logging

    root = logging.getLogger(ROOT_LOGGER)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(GlogFormatter())
    root.addHandler(handler)
    root.propagate = False
    root.setLevel(vlog_level(v) if v > 0 else _WARNING)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(ROOT_LOGGER + "."):
            _apply_vmodule(name.rsplit(".", 1)[-1], logging.getLogger(name))
