"""Text made safe to put in the HTML page."""

from __future__ import annotations


def escape(text: str) -> str:
    """`html.escape(text)`: `&`, `<`, `>`, `"` and `'` as character references, so that text
    from a module can stand in element content and in quoted attribute values; and each
    character past ASCII as a numeric reference, which keeps the page ASCII (its own marks
    are written as references too): a page of one-byte characters is encoded without work
    per character, a tenth of what writing the page cost. The standard library's `html`
    package would also load its entity tables, which nothing here reads. Most of a page's
    texts (names, opcodes) hold none of the five: a look for each costs less than a
    replacement."""
    if "&" in text or "<" in text or ">" in text or '"' in text or "'" in text:
        text = (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                .replace('"', "&quot;").replace("'", "&#x27;"))
    if not text.isascii():
        return text.encode("ascii", "xmlcharrefreplace").decode("ascii")
    return text
