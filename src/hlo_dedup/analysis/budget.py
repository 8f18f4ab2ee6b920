"""Byte counts as users write them (``--max-peak-increase 64MiB``) and read them (``1.5 KiB``)."""

from __future__ import annotations

import re

#: Binary (IEC) units are powers of 1024, decimal (SI) ones powers of 1000; `B` is a byte.
_UNITS = {
    "": 1, "b": 1,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}  # fmt: skip
#: The largest budget: XLA's sizes are int64, so no peak can rise by more.
MAX_BUDGET = (1 << 63) - 1
#: Compiled on first use (by `re`'s cache): most runs set no budget.
_BUDGET = r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*"


def parse_budget(text: str) -> int:
    """Bytes in `text`: ``0``, ``4096``, ``1e6``, ``512KiB``, ``64MiB``, ``1.5GiB``, ``2GB``.

    Units are case-insensitive; a fractional count must come to whole bytes. Raises
    ValueError with the accepted forms for anything else (negative counts included).
    """
    match = re.fullmatch(_BUDGET, text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"invalid byte count {text!r}: expected a non-negative number with an optional unit "
            "B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), "
            "e.g. 0, 1e6, 512KiB, 1.5GiB"
        )
    # Exact decimal arithmetic: 1.5GiB is 1610612736 bytes, not a float rounding of it.
    mantissa, _, exponent = match.group(1).lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = ((whole or "0") + fraction).lstrip("0")
    if not digits:
        return 0
    power = int(exponent or 0) if len(exponent) < 12 else (1 if exponent[0] != "-" else -(10**12))
    power -= len(fraction)
    # Decide on the number of digits first: never build a number of thousands of digits.
    if len(digits) + power > len(str(MAX_BUDGET)) + 1:
        raise ValueError(f"invalid byte count {text!r}: more than {MAX_BUDGET} bytes (8 EiB)")
    if power < -len(digits) - 13:
        raise ValueError(f"invalid byte count {text!r}: it is not a whole number of bytes")
    numerator = int(digits) * _UNITS[unit]
    if power >= 0:
        value = numerator * 10**power
    else:
        value, remainder = divmod(numerator, 10**-power)
        if remainder:
            raise ValueError(f"invalid byte count {text!r}: it is not a whole number of bytes")
    if value > MAX_BUDGET:
        raise ValueError(f"invalid byte count {text!r}: more than {MAX_BUDGET} bytes (8 EiB)")
    return value



def spell_bytes(n: int) -> str:
    """1536 -> '1.5 KiB' (binary units; plain bytes below 1 KiB; -1536 -> '-1.5 KiB')."""
    if n < 0:
        return "-" + spell_bytes(-n)
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            return f"{value:.1f} {unit}"
    raise AssertionError  # unreachable
