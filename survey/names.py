"""Candidate names: printable, bounded, no control or bidi characters.

A name is shown in terminals, HTML, Markdown docs and URLs; one with ESC, NUL, DEL,
C1 controls or a bidi override (U+202E) could rewrite what a reader sees.
"""

from __future__ import annotations

import re
import unicodedata

MAX_NAME = 200  # db.models.Candidate.name
MAX_LABEL = 400  # db.models.Candidate.label
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def bad_character(text: str) -> str | None:
    """The first character that may not appear in a name or label, as U+XXXX."""
    for ch in text:
        if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            return f"U+{ord(ch):04X}"
    return None


def problem(text: str, what: str = "name", limit: int = MAX_NAME) -> str | None:
    """Why ``text`` cannot be a name (or label), or None."""
    if not text.strip():
        return f"the {what} is empty"
    if len(text) > limit:
        return f"the {what} is {len(text)} characters long; at most {limit}"
    bad = bad_character(text)
    if bad:
        return f"the {what} holds the control or bidi character {bad}"
    return None


def derived(text: str, limit: int = MAX_NAME) -> str:
    """A name made from reported text (a hostname, a path): offending characters
    become '?', and an over-long one keeps its start and end."""
    clean = "".join("?" if bad_character(ch) else ch for ch in text)
    clean = re.sub(r"\s+", " ", clean).strip() or "unnamed"
    if len(clean) > limit:
        half = (limit - 1) // 2
        clean = clean[:half] + "…" + clean[-(limit - half - 1):]
    return clean
