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
  it, so a store that never answers holds at most ``size`` threads. An upload, which
  reads and checks the whole report within its call, has four times the deadline. The threads are
  daemons, so a stopping server (SIGTERM) does not wait for them, and they end with the app's
  lifespan (:meth:`StorePool.close`).

The store timeout (``SURVEY_STORE_TIMEOUT``, default :data:`DEFAULT_STORE_TIMEOUT_S`)
also bounds the driver (:meth:`db.store.Store.limit_time`): PostgreSQL's
``connect_timeout`` is the timeout, its ``statement_timeout`` and SQLite's busy timeout
the deadline.

The pool remembers the last outage it saw (:attr:`StorePool.problem`, cleared by the
next call that succeeds): ``/healthz`` reports it without asking the store.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

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


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return  # its request gave up on it (cancelled)
    if error is not None:
        future.set_exception(error)
        future.exception()  # retrieved: a request that gave up on it logs nothing
    else:
        future.set_result(value)


class StorePool:
    def __init__(self, store: Store, timeout_s: float = DEFAULT_STORE_TIMEOUT_S, size: int = DEFAULT_SIZE):
        self.store = store
        self.timeout_s = timeout_s
        self.size = size
        self.problem: Problem | None = None
        self._places: anyio.CapacityLimiter | None = None
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()  # None: a worker ends
        self._workers: list[threading.Thread] = []

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

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def close(self) -> None:
        """Let the workers end, each once the calls queued before this have run (the app's
        lifespan is over: api.app). One waiting on a store that does not answer ends when
        the store answers it. A call after this starts workers again."""
        for _ in self._workers:
            self._jobs.put(None)
        self._workers.clear()
        self._places = None

    def _start(self) -> anyio.CapacityLimiter:
        """One worker per place: a call that holds a place always has a thread. The threads
        are daemons: one that waits on a store that never answers does not keep a stopping
        server alive (SIGTERM)."""
        if self._places is None:
            self._places = anyio.CapacityLimiter(self.size)
            for i in range(self.size):
                worker = threading.Thread(target=self._work, name=f"store-{i}", daemon=True)
                worker.start()
                self._workers.append(worker)
        return self._places

    async def run(self, fn: Callable[..., T], *args: Any, deadline_s: float | None = None, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread, within the pool's bounds (503 past them;
        ``deadline_s``: another deadline than the pool's, for a call that also does much work
        of its own, such as reading a whole upload)."""
        deadline = deadline_s if deadline_s is not None else self.deadline_s
        places = self._start()
        token = object()
        with anyio.move_on_after(self.timeout_s) as waiting:
            await places.acquire_on_behalf_of(token)
        if waiting.cancelled_caught:
            raise self._late(f"is busy: {self.size} calls to it are still waiting for answers")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def answer(value: Any, error: BaseException | None) -> None:
            places.release_on_behalf_of(token)  # the place is free when the work is over, whoever waits for it
            _settle(future, value, error)

        def job() -> None:
            value, error = None, None
            try:
                value = fn(*args, **kwargs)
            except BaseException as e:  # handed to the request, which raises it
                error = e
            try:
                loop.call_soon_threadsafe(answer, value, error)
            except RuntimeError:  # the loop is closed: the server stopped meanwhile
                pass

        self._jobs.put(job)
        try:
            with anyio.move_on_after(deadline) as late:
                value = await asyncio.shield(future)
        except Exception as e:
            problem = classify(e, self.store.describe())
            if problem is not None:
                self.problem = problem
            raise
        if late.cancelled_caught:
            raise self._late(f"did not answer within {deadline:g} s")
        self.problem = None
        return value
