"""Text made safe to put in the HTML page."""

from __future__ import annotations


def escape(text: str) -> str:
    """`html.escape(text)`: `&`, `<`, `>`, `"` and `'` as character references, so that text
    from a module can stand in element content and in quoted attribute values. The standard
    library's `html` package would also load its entity tables, which nothing here reads.
    Most of a page's texts (names, opcodes) hold none of the five: a look for each costs
    less than a replacement."""
    if "&" in text or "<" in text or ">" in text or '"' in text or "'" in text:
        return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                .replace('"', "&quot;").replace("'", "&#x27;"))
    return text
