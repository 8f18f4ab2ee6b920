"""Text made safe to put in the HTML page."""

from __future__ import annotations

import re

from .undecodable import spell

#: A reference to a C1 control (U+0080-U+009F), which HTML reads as a Windows-1252
#: character: such a control stays as it is.
_C1_REFERENCE = re.compile(r"&#(12[89]|1[3-5][0-9]);")


def escape(text: str, quote: bool = True) -> str:
    """`html.escape(text, quote)`: `&`, `<`, `>` and, with `quote`, `"` and `'` as character
    references, so that text from a module can stand in element content and in quoted
    attribute values; element content needs no quotes escaped (`quote=False`), which leaves
    most instruction lines, quoted metadata and all, as they are. Each character past ASCII
    becomes a numeric reference, which keeps the page ASCII (its own marks are written as
    references too): a page of one-byte characters is encoded without work per character,
    a tenth of what writing the page cost. The standard library's `html` package would
    also load its entity tables, which nothing here reads. Most of a page's texts (names,
    opcodes) hold none of the five: a look for each costs less than a replacement."""
    if "&" in text or "<" in text or ">" in text:
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if quote and ('"' in text or "'" in text):
        text = text.replace('"', "&quot;").replace("'", "&#x27;")
    if not text.isascii():
        text = spell(text).encode("ascii", "xmlcharrefreplace").decode("ascii")
        if "&#1" in text:
            text = _C1_REFERENCE.sub(lambda m: chr(int(m.group(1))), text)
    return text


def breakable(text: str) -> str:
    """`escape(text)` with a line-break opportunity after each `/`: an op_name or a source
    path wraps between its parts, never inside a name, and its column needs no more width
    than its longest part."""
    return escape(text).replace("/", "/<wbr>")
