"""Credentials in URLs, hidden wherever a URL is stored or shown.

A catalog may give a package index with its credentials
(``index_url = "https://alice:hunter2@host/simple"``): pip needs them, so the
launcher is handed the URL as written, but nothing else is. The candidate's spec,
the environment's identity and the report's origin, error texts, progress lines and
every page keep the URL with its password replaced by ``***``
(``https://alice:***@host/simple``); a user name given without a password (a token
used as the user, ``https://TOKEN@host/``) is replaced whole. Database URLs are
masked the same way by :func:`db.store.mask_url`.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
# scheme://userinfo@ - userinfo up to the first '@' that ends the authority (no '/', '?', '#' or space before it)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#@\s\"'<>]+)@")


def _mask_userinfo(match: re.Match[str]) -> str:
    user, sep, _password = match.group("userinfo").partition(":")
    if match.group("userinfo") == MASK or (sep and _password == MASK):
        return match.group(0)  # already masked
    return f"{match.group('scheme')}{user}:{MASK}@" if sep else f"{match.group('scheme')}{MASK}@"


def mask_text(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _USERINFO.sub(_mask_userinfo, text) if "@" in text else text


def mask(value: Any) -> Any:
    """A copy of ``value`` (str, list, dict, nested) with every URL's credentials masked."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, tuple):
        return tuple(mask(v) for v in value)
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items()}
    return value
