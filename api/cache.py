"""What changes only when evidence arrives is computed once per matrix version
and kept until ``survey.evidence.ingest`` bumps the ``matrix_version`` meta row (it does
so in the same transaction as every new run): the matrix per (format, filters),
the candidate list per (format, page), the ``/check`` answers, the stored
candidate names (to check filters against) and the OpenAPI document.

Each cached body carries an ETag (a hash of the body); a request whose
``If-None-Match`` names it gets 304 and no body, decided before any work: the
version is one indexed read (on SQLite a plain read outside the ORM), then the
cache answers. Clients are told to revalidate every time (``Cache-Control:
no-cache``): the version can change at any moment.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

from fastapi import Header
from starlette.requests import Request
from starlette.responses import Response

from db.store import Store
from survey.core.sizes import approx_bytes
from survey.evidence.ingest import matrix_version

if TYPE_CHECKING:
    from api.pool import StorePool

T = TypeVar("T")

IfNoneMatch = Annotated[str | None, Header(description="an ETag of an earlier answer: 304 if unchanged")]
SLOT = "survey.replay"  # filled by answer(): api.replay may repeat the answer while the version stands


@dataclass(frozen=True)
class Entry:
    body: bytes
    media_type: str
    etag: str
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, body: bytes, media_type: str, headers: dict[str, str] | None = None) -> Entry:
        return cls(body, media_type, etag_for(body), headers=tuple((headers or {}).items()))


def etag_for(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 weak comparison of If-None-Match against our (strong) tag."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        if tag == etag:
            return True
    return False


class MatrixCache:
    """Rendered bodies (and the rows they are made of) keyed by (version, key); at most
    ``max_bytes`` of them (:func:`survey.core.sizes.approx_bytes`), the least recently
    used going first; cleared when the version moves."""

    def __init__(self, store: Store, max_bytes: int = 64 * 2**20):
        self.store = store
        self.max_bytes = max_bytes
        self.bytes = 0
        self._lock = threading.Lock()
        self._version: str | None = None
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._seen: str | None = None
        self.inflight: dict[Hashable, asyncio.Future[Any]] = {}  # (version, key) being computed (event loop only)
        self._raw: sqlite3.Connection | None = None
        self._raw_lock = threading.Lock()
        self.epoch = 0  # moves when the store is reopened (api.storewatch): nothing computed before is kept
        self.attach()

    def attach(self) -> None:
        """Open the version's own connection to the store (again, after :meth:`detach`)."""
        url = self.store.engine.url
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:" \
                and not url.database.startswith("file:"):
            # Read on every request, so skip the ORM: one autocommit connection of
            # our own (each SELECT sees the latest commit; WAL: a writer never blocks it).
            wait = self.store.timeout_s[1] if self.store.timeout_s else 30
            self._raw = sqlite3.connect(url.database, timeout=wait, isolation_level=None, check_same_thread=False)

    def detach(self) -> None:
        """Forget everything computed and close the version's connection: the store is
        being reopened (another file now answers at its path).

        First the old file's WAL is checkpointed into it and emptied, through this
        connection (which is certain to be the old file's): SQLite finds a WAL by the
        file's name, so a WAL left beside the new file would be read as the new file's."""
        with self._lock:
            self.epoch += 1
            self._entries.clear()
            self.bytes = 0
            self._version = None
        with self._raw_lock:
            if self._raw is not None:
                try:
                    self._raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                except sqlite3.Error:
                    pass  # read-only, or busy: the new file is still opened; nothing else to do here
        self.close()

    def version(self) -> str:
        """The store's matrix version now (one indexed read)."""
        raw = self._raw
        if raw is not None:
            with self._raw_lock:
                self._seen = matrix_version(raw)
        else:
            with self.store.engine.connect() as conn:
                self._seen = matrix_version(conn)
        return self._seen

    def last_version(self) -> str | None:
        """The version read last, without asking the store (None: none read yet)."""
        return self._seen

    def close(self) -> None:
        with self._raw_lock:
            if self._raw is not None:
                self._raw.close()
                self._raw = None

    def get(self, version: str, key: Hashable) -> Any:
        with self._lock:
            if version != self._version:
                return None
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, version: str, key: Hashable, entry: Any, epoch: int | None = None) -> None:
        with self._lock:
            if epoch is not None and epoch != self.epoch:
                return  # computed from the store before it was reopened
            if version != self._version:
                self._entries.clear()
                self.bytes = 0
                self._version = version
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            size = approx_bytes(entry) + approx_bytes(key)
            if size > self.max_bytes:
                return  # answered, not kept
            self._entries[key] = (entry, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped


# ------------------------------------------------------------------ in views
async def version(request: Request) -> str:
    cache: MatrixCache = request.app.state.matrix_cache
    pool: StorePool = request.app.state.pool
    return await pool.run(cache.version)


async def memo(request: Request, version_: str, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()`` (run in a worker thread) once per matrix version. Requests that miss
    while it runs wait for that one computation instead of starting their own. The cache
    holds values of many types; a key is always computed by the same ``compute``, so what
    it holds under ``key`` is a ``T``."""
    cache: MatrixCache = request.app.state.matrix_cache
    pool: StorePool = request.app.state.pool
    held = cache.get(version_, key)
    if held is not None:
        return cast(T, held)
    running = cache.inflight.get((version_, key))
    if running is not None:
        return cast(T, await asyncio.shield(running))
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    cache.inflight[(version_, key)] = future
    epoch = cache.epoch
    try:
        value = await pool.run(compute)
    except BaseException as e:
        future.set_exception(e)
        future.exception()  # retrieved: waiters re-raise it, nobody logs "never retrieved"
        raise
    else:
        cache.put(version_, key, value, epoch)
        future.set_result(value)
    finally:
        cache.inflight.pop((version_, key), None)
    return value


def answer(request: Request, version_: str, entry: Entry, if_none_match: str | None, *,
           replay: bool = True) -> Response:
    """The body, or 304 when the client already holds it. :mod:`api.replay` may repeat it
    for the same request until the matrix version moves; ``replay=False`` for an answer that
    also depends on something else (the clock: an evidence age)."""
    slot = request.scope.get(SLOT)
    if slot is not None and replay:
        slot.update(version=version_, etag=entry.etag)
    headers = {"ETag": entry.etag, "Cache-Control": "no-cache", **dict(entry.headers)}
    if etag_matches(if_none_match, entry.etag):
        return Response(status_code=304, headers=headers)
    return Response(entry.body, status_code=entry.status, media_type=entry.media_type, headers=headers)
