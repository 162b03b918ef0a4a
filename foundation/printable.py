"""Text a stranger controls, made safe to show a person.

Submitted ids, method names, descriptions and file names reach a reviewer's terminal and the
board's page. :func:`printable` escapes every character that could act instead of being read:
control characters (an ESC starts a terminal sequence that can set the window title, clear the
screen or move the cursor), the bidirectional formatting characters that reorder what is shown
(U+202A-202E, U+2066-2069, U+200E/200F, U+061C), other invisible format characters, line and
paragraph separators and lone surrogates. Each becomes a visible ``\\xNN`` or ``\\uNNNN``, so the
text stays readable and a reviewer sees that something was there.
"""
from __future__ import annotations

import unicodedata
from typing import Any

_ESCAPED = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else (f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")


def printable(text: Any) -> str:
    """``str(text)`` with every control, format (bidi), separator and surrogate character escaped."""
    s = str(text)
    if s.isprintable() and s.isascii():  # the common case: nothing to look at
        return s
    return "".join(_escape(c) if unicodedata.category(c) in _ESCAPED else c for c in s)


__all__ = ["printable"]
