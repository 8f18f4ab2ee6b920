"""Optional bridge to XLA itself (jax/jaxlib), used as the oracle for parsing, printing and running.

Nothing here imports jax at module import: ``hlo_dedup`` must work without the ``xla`` extra, and
the run oracle must set ``XLA_FLAGS`` in a child process before jax is first imported. The public
functions live in :mod:`hlo_dedup.xla.oracle` and are loaded on first attribute access.
"""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "pip install 'hlo-dedup[xla]'"
#: The most virtual XLA:CPU devices a module may ask for: each is a thread and its buffers
#: (a module asking for 262,144 took 12 GB and minutes before failing).
MAX_CPU_DEVICES = 256


def too_many_devices(needed: int) -> str | None:
    """Why a module that needs `needed` devices cannot run here, or None if it can."""
    if needed <= MAX_CPU_DEVICES:
        return None
    return (f"the module needs {needed} devices; XLA:CPU runs at most {MAX_CPU_DEVICES} virtual devices "
            "here (state fewer with --replicas/--partitions if the module allows)")

__all__ = [
    "Comparison",
    "RunResult",
    "XlaError",
    "XlaUnavailableError",
    "compare_results",
    "module_proto_to_text",
    "run_module",
    "text_to_module_proto",
    "xla_canonical_text",
    "xla_reparse_equal",
]


class XlaUnavailableError(ImportError):
    """jax/jaxlib (the ``xla`` extra) is not installed; an ImportError so optional callers can skip."""

    def __init__(self, detail: str = "") -> None:
        self.detail = detail  # what is missing, in the import system's words
        message = f"the XLA oracle needs jax and jaxlib: {INSTALL_HINT}"
        super().__init__(f"{message} ({detail})" if detail else message)


class XlaError(RuntimeError):
    """XLA rejected a module (parse, compile or run) or its child process crashed; carries XLA's message."""


def __getattr__(name: str) -> Any:
    if name in __all__:
        from hlo_dedup.xla import oracle

        return getattr(oracle, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
