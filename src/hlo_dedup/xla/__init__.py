"""Optional bridge to XLA itself (jax/jaxlib), used as the oracle for parsing, printing and running.

Nothing here imports jax at module import: ``hlo_dedup`` must work without the ``xla`` extra, and
the run oracle must set ``XLA_FLAGS`` in a child process before jax is first imported. The public
functions live in :mod:`hlo_dedup.xla.oracle` and are loaded on first attribute access.
"""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "pip install 'hlo-dedup[xla]'"

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
