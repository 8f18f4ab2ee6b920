"""Bytes of a module or a file name that are not UTF-8, as the reports spell them.

The reader keeps such bytes as lone surrogates (Python's ``surrogateescape``), so the
rewritten module gets them back exactly. A report, a picture or a page is UTF-8 text for
people and parsers: there each such byte reads ``\\xNN``. The JSON report and DOT picture
write a backslash as ``\\\\`` inside their strings, which `ERRORS` (an encoding error
handler) does as it encodes; the page spells them before escaping (`spell`).
"""

from __future__ import annotations

import codecs
import re

__all__ = ["ERRORS", "spell"]

#: The error handler for str.encode that writes each undecodable byte as `\\xNN`, its
#: backslash escaped as a JSON or DOT string needs it.
ERRORS = "hlo-dedup-escaped-bytes"
_LONE = re.compile("[\udc80-\udcff]")


def spell(text: str) -> str:
    """`text` with each undecodable byte written `\\xNN`."""
    return _LONE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)


def _escaped_bytes(exc: UnicodeError) -> tuple[str, int]:
    if isinstance(exc, UnicodeEncodeError):
        bad = exc.object[exc.start:exc.end]
        if not _LONE.sub("", bad):
            return spell(bad).replace("\\", "\\\\"), exc.end
    raise exc


codecs.register_error(ERRORS, _escaped_bytes)
