"""Store work off the event loop: a bounded pool of threads and a deadline per call.

Every read or write of the store that a request needs runs through :meth:`StorePool.run`:

- in a worker thread, never on the event loop, so a store that does not answer (a
  PostgreSQL frozen or cut off by the network, a stuck disk) never holds up
  ``/healthz``, ``/static/*``, ``/openapi.json`` or any other request;
- at most :attr:`StorePool.size` calls at once; a call that waits for a free place
  longer than the store timeout is answered 503;
- within a deadline (six times the store timeout: 30 s by default; writers queue for
  the store's write lock within it): past it the request is answered 503 naming the
  store (``the store (PostgreSQL at host:5432/db) did not answer within 30 s``). The
  thread is let go, not killed: it keeps its place in the pool until the store answers
  it, so a store that never answers holds at most ``size`` threads.

The store timeout (``SURVEY_STORE_TIMEOUT``, default :data:`DEFAULT_STORE_TIMEOUT_S`)
also bounds the driver (:meth:`db.store.Store.limit_time`): PostgreSQL's
``connect_timeout`` is the timeout, its ``statement_timeout`` and SQLite's busy timeout
the deadline.

The pool remembers the last outage it saw (:attr:`StorePool.problem`, cleared by the
next call that succeeds): ``/healthz`` reports it without asking the store.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from api.errors import ApiError
from db.outage import UNREACHABLE, Problem, classify
from db.store import Store

T = TypeVar("T")
# Paths answered without the store: they answer while it is down, slow or being replaced.
STORE_FREE = ("/healthz", "/schema.json", "/openapi.json", "/docs")
STORE_FREE_PREFIXES = ("/static/",)


def store_free(path: str) -> bool:
    return path in STORE_FREE or path.startswith(STORE_FREE_PREFIXES)

DEFAULT_STORE_TIMEOUT_S = 5.0
DEFAULT_SIZE = 16
DEADLINE_FACTOR = 6  # a whole call (its lock waits and statements included): 30 s by default


class StorePool:
    def __init__(self, store: Store, timeout_s: float = DEFAULT_STORE_TIMEOUT_S, size: int = DEFAULT_SIZE):
        self.store = store
        self.timeout_s = timeout_s
        self.size = size
        self.problem: Problem | None = None
        self._places: anyio.CapacityLimiter | None = None
        self._threads: anyio.CapacityLimiter | None = None

    @staticmethod
    def deadline_for(timeout_s: float) -> float:
        return DEADLINE_FACTOR * timeout_s

    @property
    def deadline_s(self) -> float:
        return DEADLINE_FACTOR * self.timeout_s

    def _late(self, what: str) -> ApiError:
        problem = Problem(UNREACHABLE, f"{self.store.describe()} {what}")
        self.problem = problem
        return ApiError(503, "store_unavailable", problem.message, hint="try again in a moment")

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread, within the pool's bounds (503 past them)."""
        if self._places is None:
            self._places = anyio.CapacityLimiter(self.size)
            # threads: never the bound (a let-go thread keeps its place, and places are the bound)
            self._threads = anyio.CapacityLimiter(self.size * 4 + 8)
        places = self._places
        token = object()
        with anyio.move_on_after(self.timeout_s) as waiting:
            await places.acquire_on_behalf_of(token)
        if waiting.cancelled_caught:
            raise self._late(f"is busy: {self.size} calls to it are still waiting for answers")
        loop = asyncio.get_running_loop()
        call = functools.partial(fn, *args, **kwargs)
        given_back = threading.Lock()  # taken when the place is given back: that happens once
        began = threading.Event()

        def give_back() -> None:
            if given_back.acquire(blocking=False):
                places.release_on_behalf_of(token)

        def work() -> T:
            began.set()
            try:
                return call()
            finally:  # the place is given back when the work is over, even if its request gave up on it
                loop.call_soon_threadsafe(give_back)

        try:
            with anyio.move_on_after(self.deadline_s) as late:
                value = await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=self._threads)
        except Exception as e:
            problem = classify(e, self.store.describe())
            if problem is not None:
                self.problem = problem
            raise
        except BaseException:  # cancelled (the client went away): a call that never began gives its place back
            if not began.is_set():
                give_back()
            raise
        if late.cancelled_caught:
            if not began.is_set():
                give_back()
            raise self._late(f"did not answer within {self.deadline_s:g} s")
        self.problem = None
        return value
