"""Text in another IR that users hand us for HLO text, told apart so that the error says
what to write instead.

JAX's ``jax.jit(f).lower(...).as_text()`` prints MLIR (StableHLO: ``module @jit_f
attributes {...} { func.func public @main(...) ...``), and so do XLA's PJRT reproducers
(``module.mlir``); HLO text is what ``as_text(dialect="hlo")`` and ``--xla_dump_to`` write.
"""

from __future__ import annotations

import re

# A module or function header, or a location alias (`#loc1 = loc(...)`), after comments;
# possessive, so that a long run of blank space that leads elsewhere fails at once.
_MLIR_START = re.compile(r"\A\ufeff?(?:\s++|//[^\n]*+)*+(?:module\s*+(?:@|attributes\b|\{)|func\.func\b|#\w++\s*+=)")

MLIR_TEXT = ("MLIR (StableHLO) text, not HLO text; give HLO text instead, as "
             "jax.jit(f).lower(...).as_text(dialect='hlo') or XLA_FLAGS=--xla_dump_to=DIR writes it")


def is_mlir_text(text: str) -> bool:
    """Whether `text` (its start is enough) opens as an MLIR module does."""
    return _MLIR_START.match(text) is not None
