"""The outermost layer: the store this service answers from, checked on every request.

- **A replaced file.** Each request first asks :meth:`db.store.Store.replaced` (one
  ``stat``). When the SQLite file at the store's path is another file than the one
  opened (``mv new.db survey.db``), the service empties the old file's WAL into it
  (SQLite finds a WAL by name: left beside the new file, it would be read as the new
  file's), closes every connection to the old file, waits until none is left, and
  opens the new one; the per-version caches are emptied.
  Until it is reopened, requests are answered 503. An upload stored while the file
  was being replaced is not acknowledged (:mod:`api.upload` asks again after its
  commit).
- **An outage.** A store error that escapes a view or a middleware is answered in
  one line (:mod:`db.outage`): 503 when the store cannot be reached, 507 when its
  disk is full, 403 when it may not be written; the log gets one line, no traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.cache import MatrixCache
from api.errors import ApiError, error_response, outage_error
from api.pool import StorePool, store_free
from db.outage import Problem, classify
from db.store import Store, StoreError

log = logging.getLogger("api")
REOPEN_WAIT_S = 10.0


def _open_fds_of(identity: tuple[int, int]) -> int:
    """How many of this process's descriptors are the file ``identity`` (device, inode)."""
    n = 0
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return 0  # no /proc: nothing to wait for that can be seen
    for fd in fds:
        try:
            st = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == identity:
            n += 1
    return n


def _wait_closed(identity: tuple[int, int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _open_fds_of(identity):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class StoreWatch:
    def __init__(self, app: ASGIApp, store: Store, cache: MatrixCache, pool: StorePool):
        self.app = app
        self.pool = pool
        self.store = store
        self.cache = cache
        self._lock: asyncio.Lock | None = None

    async def _reopen(self) -> Problem | None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.store.replaced():
                return None  # another request reopened it
            old = self.store.identity
            where = self.store.describe()
            self.cache.detach()
            self.store.engine.dispose()
            if old is not None and not await run_in_threadpool(_wait_closed, old, REOPEN_WAIT_S):
                return Problem("unreachable", f"{where} was replaced and the old file is still in use; "
                                              "try again in a moment")
            try:
                await run_in_threadpool(self.store.reopen)
            except StoreError as e:
                return Problem("unreachable", f"{where} was replaced by a file that cannot be used: "
                                              f"{str(e).splitlines()[0]}")
            except Exception as e:
                problem = classify(e, where)
                if problem is None:
                    raise
                return problem
            self.cache.attach()
            log.warning("%s was replaced; reopened it", where)
            return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or store_free(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self.store.replaced():
            problem = await self._reopen()
            if problem is not None:
                await self._answer(scope, receive, send, problem)
                return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except ApiError as e:  # the store did not answer in time (api.pool), in a middleware
            if started:
                raise
            log.warning("%s %s: %s", scope.get("method"), scope.get("path"), e.message)
            await error_response(Request(scope, receive), e)(scope, receive, send)
        except Exception as e:
            problem = classify(e, self.store.describe())
            if problem is None or started:
                raise
            await self._answer(scope, receive, send, problem)

    async def _answer(self, scope: Scope, receive: Receive, send: Send, problem: Problem) -> None:
        log.warning("%s %s: %s", scope.get("method"), scope.get("path"), problem.message)
        if problem.kind != "full" and problem.kind != "read_only":
            self.pool.problem = problem
        response = error_response(Request(scope, receive), outage_error(problem))
        await response(scope, receive, send)
