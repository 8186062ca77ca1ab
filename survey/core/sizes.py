"""What a cached value costs in memory, roughly: caches are bounded in bytes, not entries.

:func:`approx_bytes` walks the plain values a cache keeps (bytes, text, numbers,
lists, tuples, dicts, dataclass-like objects with a ``body``) and adds CPython's sizes
of their containers; a long list is estimated from its first :data:`SAMPLE` items.
It errs on the large side, so a cache stays under its bound.
"""

from __future__ import annotations

import sys
from typing import Any

SAMPLE = 64


def approx_bytes(value: Any, _depth: int = 0) -> int:
    if value is None or isinstance(value, (bool, int, float)):
        return 32
    if isinstance(value, (bytes, str)):
        return sys.getsizeof(value)
    if _depth > 8:
        return 64
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(approx_bytes(k, _depth + 1) + approx_bytes(v, _depth + 1)
                                          for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value) if not isinstance(value, (list, tuple)) else value
        head = items[:SAMPLE]
        part = sum(approx_bytes(v, _depth + 1) for v in head)
        return sys.getsizeof(value) + (part * len(items) // len(head) if head else 0)
    body = getattr(value, "body", None)
    if isinstance(body, bytes):
        return sys.getsizeof(body) + 512
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict):
        return sys.getsizeof(value) + approx_bytes(fields, _depth + 1)
    return sys.getsizeof(value)
