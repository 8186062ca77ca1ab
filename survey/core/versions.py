"""Release versions (Triton's), read one way: the forms PEP 440 allows that Triton
uses (``3.9.0``, ``3.8.0rc1``, ``3.8.0.post1``, ``3.8.0.dev0``, ``3.6.0+rocm7.2.4``).

:func:`version_key` orders them (3.9.0 < 3.10.0, never by name) and
:func:`release` gives the (major, minor, micro) a rule about a release compares
against; both read a version through the same expression.
"""

from __future__ import annotations

import re
from typing import Any

_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pren>\d*))?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?(?P<post>\d*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:\+(?P<local>[a-z0-9._-]+))?$",
    re.IGNORECASE,
)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def _match(text: str) -> re.Match[str] | None:
    return _VERSION.match(text.strip())


def version_key(text: str) -> tuple[Any, ...]:
    """A sort key that orders release versions as PEP 440 does for the forms
    Triton uses (3.9.0 < 3.10.0; 3.8.0rc1 < 3.8.0 < 3.8.0.post1; 3.6.0 <
    3.6.0+rocm7.2.4). Text that is no version sorts after every version."""
    m = _match(text)
    if m is None:
        return (1, text)
    release_ = [int(x) for x in m.group("release").split(".")]
    while len(release_) > 1 and release_[-1] == 0:
        release_.pop()
    if m.group("pre"):
        stage: tuple[int, ...] = (1, _PRE[m.group("pre").lower()], int(m.group("pren") or 0))
    elif m.group("dev") is not None and m.group("post") is None:
        stage = (0,)
    else:
        stage = (2,)
    post = int(m.group("post") or 0) if m.group("post") is not None else -1
    dev = int(m.group("dev") or 0) if m.group("dev") is not None else 1 << 62
    local = tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[._-]", m.group("local") or "") if p)
    return (0, tuple(release_), stage, post, dev, local)


def release(text: str) -> tuple[int, int, int]:
    """The (major, minor, micro) of a version ('3.7.1+rocm7.2' -> (3, 7, 1); '3.8' ->
    (3, 8, 0)). Raises ValueError for text that is no version, or names no minor."""
    m = _match(text)
    parts = [int(x) for x in m.group("release").split(".")] if m is not None else []
    if len(parts) < 2:
        raise ValueError(f"not a Triton version: {text!r}")
    return parts[0], parts[1], parts[2] if len(parts) > 2 else 0
