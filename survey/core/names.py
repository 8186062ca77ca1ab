"""Names and labels given to candidates: one rule, for the CLI, ingest and the API.

A name is shown in terminals, HTML, Markdown docs and URLs, so it holds no
character that is invisible or that changes how the text around it is shown:
no control characters (C0, DEL, C1), no bidirectional controls (U+202A-U+202E,
U+2066-U+2069, the marks U+200E/U+200F/U+061C), no zero-width or other
invisible format characters, no line or paragraph separators, no
noncharacters, and no whitespace at either end. Everything else (any script,
punctuation, ``/`` and ``:``) is fine.

:data:`PATTERN` says exactly this (``api.names`` publishes it in the OpenAPI
document); :func:`problem` applies the same expression and names the first
offending character, so what the published schema allows is what is accepted.
"""

from __future__ import annotations

import re
import unicodedata

from db import widths

MAX_NAME = widths.NAME  # db.models.Candidate.name
MAX_LABEL = widths.LABEL  # db.models.Candidate.label

# Characters no name may hold (ranges written so that Python's `re`, ECMA 262 and
# the Rust `regex` crate read them alike).
_FORBIDDEN = (
    "\\u0000-\\u001f\\u007f-\\u009f"  # C0, DEL, C1
    "\\u00ad\\u034f\\u061c\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f"  # soft hyphen, invisible joiners/fillers
    "\\u200b-\\u200f"  # zero-width space/joiners, LRM, RLM
    "\\u2028-\\u202e"  # line/paragraph separators, bidi embeddings and overrides
    "\\u2060-\\u206f"  # word joiner, invisible operators, bidi isolates, deprecated format controls
    "\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\\ufffe\\uffff"  # fillers, variation selectors, BOM, specials
)
# Whitespace that may not start or end a name.
_SPACE = "\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000"
# The same characters, for the renderers (survey.render.escape), which show them as escapes.
CONTROL_OR_INVISIBLE = f"[{_FORBIDDEN}]"
_INNER = f"[^{_FORBIDDEN}]"
_EDGE = f"[^{_FORBIDDEN}{_SPACE}]"
PATTERN = f"^{_EDGE}(?:{_INNER}*{_EDGE})?$"
_RE = re.compile(PATTERN)
_BAD_CHAR = re.compile(f"[{_FORBIDDEN}]")
_SPACES = re.compile(f"[{_SPACE}]+")
_EDGES = re.compile(f"^[{_SPACE}]+|[{_SPACE}]+$")
RULE = "no control, bidi or invisible characters and no whitespace at either end"
# Names the catalog and documented claims give: plain ASCII, usable in a URL and a file name.
CATALOG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._\-]*$"


def describe(ch: str) -> str:
    """``U+202E (RIGHT-TO-LEFT OVERRIDE)``."""
    name = unicodedata.name(ch, "") or {"\x7f": "DELETE"}.get(ch, "a control character")
    return f"U+{ord(ch):04X} ({name})"


def bad_character(text: str) -> str | None:
    """The first character that may not appear anywhere in a name, described."""
    bad = _BAD_CHAR.search(text)
    return f"{describe(bad.group())} at position {bad.start() + 1}" if bad else None


def problem(text: str, what: str = "name", limit: int = MAX_NAME) -> str | None:
    """Why ``text`` cannot be a name (or label), or None."""
    if not 1 <= len(text) <= limit:
        return f"the {what} must be 1 to {limit} characters ({len(text)} given)"
    if _RE.match(text):
        return None
    bad = bad_character(text)
    where = bad or "whitespace at " + ("the start" if text[:1] != text.lstrip()[:1] else "the end")
    return f"the {what} holds {where}, which is not allowed ({RULE})"


def derived(text: str, limit: int = MAX_NAME) -> str:
    """A name made from reported text (a hostname, a path): offending characters
    become '?', runs of whitespace one space, and an over-long one keeps its start
    and end. Always passes :func:`problem`."""
    clean = _EDGES.sub("", _SPACES.sub(" ", _BAD_CHAR.sub("?", text))) or "unnamed"
    if len(clean) > limit:
        half = (limit - 1) // 2
        clean = clean[:half] + "…" + clean[-(limit - half - 1):]
    return clean
