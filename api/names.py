"""What a name given to the service may hold (``POST /runs?candidate=&label=``).

Names are shown on pages, in terminals and in the docs table, so they hold no
character that is invisible or that changes how the text around it is shown:
no control characters (C0, DEL, C1), no bidirectional controls (U+202A-U+202E,
U+2066-U+2069, the marks U+200E/U+200F/U+061C), no zero-width or other
invisible format characters, no line or paragraph separators, no
noncharacters, and no whitespace at either end. Everything else (any script,
punctuation, ``/`` and ``:``) is fine.

:data:`PATTERN` says exactly this and is published in the OpenAPI document;
:func:`check` applies the same expression and names the first offending
character.
"""

from __future__ import annotations

import re
import unicodedata

from api.errors import ApiError

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
_INNER = f"[^{_FORBIDDEN}]"
_EDGE = f"[^{_FORBIDDEN}{_SPACE}]"
PATTERN = f"^{_EDGE}(?:{_INNER}*{_EDGE})?$"
_RE = re.compile(PATTERN)
_BAD_CHAR = re.compile(f"[{_FORBIDDEN}]")
RULE = "no control, bidi or invisible characters and no whitespace at either end"


def _describe(ch: str) -> str:
    name = unicodedata.name(ch, "") or {"\x7f": "DELETE"}.get(ch, "a control character")
    return f"U+{ord(ch):04X} ({name})"


def check(value: str | None, field: str, limit: int) -> str | None:
    """``value`` if it is a good name of at most ``limit`` characters, else 422 naming ``field``."""
    if value is None:
        return None
    if not 1 <= len(value) <= limit:
        raise ApiError(422, "invalid_input", f"{field}: 1 to {limit} characters ({len(value)} given)", field=field)
    if _RE.match(value):
        return value
    bad = _BAD_CHAR.search(value)
    if bad is not None:
        what = f"{_describe(bad.group())} at position {bad.start() + 1}"
    else:
        what = "whitespace at " + ("the start" if value[:1] != value.lstrip()[:1] else "the end")
    raise ApiError(422, "invalid_input", f"{field}: {what} is not allowed ({RULE})", field=field)
