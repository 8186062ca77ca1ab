"""The one clock: every "now" the product uses comes from :func:`now`.

Run and ingest times, candidates' created and updated times, failed attempts' times,
evidence ages and freshness, webhook payloads and origins' stamps all read it, so a
test (or anything else that needs a reproducible answer) fixes time for all of them
at once with :func:`fixed` (tests: the ``clock`` fixture of tests/conftest.py).

Durations and timeouts are not "now": they use ``time.monotonic()``, which no
setting of the clock moves. ``tests/test_clock.py`` fails when code in ``survey/``,
``api/`` or ``db/`` reads the wall clock anywhere but here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager


def wall() -> dt.datetime:
    """The wall clock, aware, in UTC: the clock's source unless one is fixed."""
    return dt.datetime.now(dt.UTC)


_source: Callable[[], dt.datetime] = wall


def now() -> dt.datetime:
    """The current time as the product sees it: aware, in UTC."""
    t = _source()
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


@contextmanager
def source(read: Callable[[], dt.datetime]) -> Iterator[None]:
    """Within the block (in every thread of this process), :func:`now` is ``read()``."""
    global _source
    previous, _source = _source, read
    try:
        yield
    finally:
        _source = previous


def fixed(when: dt.datetime) -> AbstractContextManager[None]:
    """Within the block, :func:`now` is ``when`` (a naive time is taken as UTC)."""
    when = when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
    return source(lambda: when)
