"""How old a piece of evidence is, in words ("3 days old").
"""

from __future__ import annotations

import datetime as dt

from survey.core import clock


def age_text(t: dt.datetime | None, now: dt.datetime | None = None) -> str:
    if t is None:
        return "unknown age"
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    now = now or clock.now()
    secs = max(0, int((now - t).total_seconds()))
    for unit, n in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if secs >= n:
            k = secs // n
            return f"{k} {unit}{'s' if k != 1 else ''} old"
    return f"{secs} seconds old"
