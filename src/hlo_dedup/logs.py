"""XLA-style verbose logging (`--v=N`, `--vmodule=file=N`) on top of Python `logging`.

Each pass logs through a logger named after the C++ source file it mirrors
(`hlo_dedup.vlog.neuron_all_gather_duplicate_remover`). `VLOG(n)` maps to the logging
level `INFO - n`, so `--v=2` is "enable levels >= INFO-2 everywhere" and `--vmodule`
overrides it per file, as glog does. Lines are written in glog's form:

    I1129 12:00:00.000000   4242 neuron_all_gather_duplicate_remover.cc:57] message

where the file is the mirrored C++ file and the line number is that of our Python
implementation (the C++ line numbers are not known).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
from typing import TextIO

ROOT_LOGGER = "hlo_dedup.vlog"


def vlog_level(n: int) -> int:
    """The Python logging level of XLA's VLOG(n)."""
    return logging.INFO - n


#: `--vmodule` entries as (file pattern, logging level), applied to every pass logger,
#: including those first asked for after `configure`.
_vmodule: list[tuple[str, int]] = []


@functools.lru_cache(maxsize=None)
def pass_logger(source_file: str) -> logging.Logger:
    """The logger of a pass, named after the C++ source file it mirrors (one object for
    the process: `configure` updates it in place; passes ask once per computation)."""
    stem = source_file.rsplit("/", 1)[-1].removesuffix(".cc")
    name = f"{ROOT_LOGGER}.{stem}"
    known = name in logging.root.manager.loggerDict
    logger = logging.getLogger(name)
    if not known:
        _apply_vmodule(stem, logger)
    return logger


def _apply_vmodule(stem: str, logger: logging.Logger) -> None:
    import fnmatch

    logger.setLevel(logging.NOTSET)
    for pattern, level in _vmodule:
        if fnmatch.fnmatch(stem, pattern):
            logger.setLevel(level)


class GlogFormatter(logging.Formatter):
    """Formats records like glog: severity letter, MMDD, time, pid, file:line]."""

    def format(self, record: logging.LogRecord) -> str:
        letter = "I" if record.levelno <= logging.INFO else record.levelname[0]
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
        entries.append((pattern.removesuffix(".cc"), vlog_level(int(level)) if int(level) > 0 else logging.WARNING))
    root = logging.getLogger(ROOT_LOGGER)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(GlogFormatter())
    root.addHandler(handler)
    root.propagate = False
    root.setLevel(vlog_level(v) if v > 0 else logging.WARNING)
    _vmodule[:] = entries
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(ROOT_LOGGER + "."):
            _apply_vmodule(name.rsplit(".", 1)[-1], logging.getLogger(name))
