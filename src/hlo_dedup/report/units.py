"""Sizes and durations as people read them, for every human-facing output."""

from __future__ import annotations

from ..analysis.budget import spell_bytes
from .memo import Memo


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB' (binary units; plain bytes below 1 KiB; -1536 -> '-1.5 KiB').
    Remembered by value: a report spells the same few sizes (a layer's shapes) thousands
    of times."""
    return _SPELLED[n]


_SPELLED: Memo[int, str] = Memo(spell_bytes)


def bytes_change(n: int) -> str:
    """A change of bytes with its sign: "+1.5 MiB", "unchanged", "-2.0 KiB"."""
    return f"+{human_bytes(n)}" if n > 0 else ("unchanged" if n == 0 else human_bytes(n))


def human_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} \u00b5s"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def plural(n: int, word: str) -> str:
    """'1 fold', '2 folds'."""
    return f"{n} {word}{'' if n == 1 else 's'}"
