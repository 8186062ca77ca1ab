"""Answers replayed before the framework runs: the outermost ASGI layer.

A ``GET`` or ``HEAD`` that a view answered from the per-version cache
(:func:`api.cache.answer`) is recorded here as it left the service - status,
every header (the security headers included), body - under the request's
method, path and raw query string, and whether its ``If-None-Match`` matched.
The next identical request at the same matrix version is answered from that
record, byte for byte, with no routing, no parameter parsing and no request
object: one version read (on SQLite a plain indexed read) and two ``send`` calls.
A request whose version, path or query differ in any byte goes to the views,
which decide as always (and may record a new answer).

Nothing here decides an answer: it only repeats one a view gave for the same
request at the same version. The matrix version moves in the same transaction
as every new run (:mod:`survey.evidence.ingest`), so a record never outlives its evidence.
The records are bounded (:data:`MAX_ANSWERS` answers and :data:`MAX_BYTES` of
bodies, least recently used first out): raw query strings come from clients. Only the
current version's records are kept: when a request reads another version, the records
of every other version go (none could be replayed again).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.cache import SLOT, MatrixCache, etag_matches
from api.pool import StorePool, store_free

MAX_ANSWERS = 1024
MAX_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Recorded:
    epoch: int  # the cache's epoch (api.cache.MatrixCache.epoch): the store it came from
    version: str
    etag: str
    start: Message
    body: bytes


class Replay:
    def __init__(self, app: ASGIApp, cache: MatrixCache, pool: StorePool):
        self.app = app
        self.cache = cache
        self.pool = pool
        self.max_answers = MAX_ANSWERS
        self.max_bytes = MAX_BYTES
        self.answers: OrderedDict[tuple[Any, ...], Recorded] = OrderedDict()
        self.bytes = 0
        self.replayed = 0  # answers given from a record (a figure for tests and benchmarks)
        self.version: str | None = None  # the version the last request read

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD") or store_free(scope["path"]):
            await self.app(scope, receive, send)
            return
        if_none_match = None
        for name, value in scope["headers"]:
            if name == b"if-none-match":
                if_none_match = value.decode("latin-1")
                break
        base = (scope["method"], scope.get("root_path", ""), scope["path"], scope["query_string"])
        version = await self.pool.run(self.cache.version)
        if version != self.version:  # moved: no request will be answered from another version's records
            self.version = version
            self._keep_only(version)
        for matched in (True, False) if if_none_match else (False,):
            got = self.answers.get((*base, matched))
            if got is not None and got.version == version and got.epoch == self.cache.epoch \
                    and etag_matches(if_none_match, got.etag) == matched:
                self.answers.move_to_end((*base, matched))
                self.replayed += 1
                await send(got.start)
                await send({"type": "http.response.body", "body": got.body, "more_body": False})
                return
        await self._record(scope, receive, send, base, if_none_match)

    async def _record(self, scope: Scope, receive: Receive, send: Send, base: tuple[Any, ...],
                      if_none_match: str | None) -> None:
        slot: dict[str, str] = {}
        epoch = self.cache.epoch
        start: Message | None = None
        chunks: list[bytes] = []
        whole = False

        async def recording(message: Message) -> None:
            nonlocal start, whole
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                whole = not message.get("more_body", False)
            await send(message)

        await self.app({**scope, SLOT: slot}, receive, recording)
        if not (whole and start is not None and slot and start["status"] in (200, 304)) or epoch != self.cache.epoch:
            return
        body = b"".join(chunks)
        matched = etag_matches(if_none_match, slot["etag"])
        key = (*base, matched)
        old = self.answers.pop(key, None)
        if old is not None:
            self.bytes -= len(old.body)
        self.answers[key] = Recorded(epoch, slot["version"], slot["etag"], start, body)
        self.bytes += len(body)
        while self.answers and (len(self.answers) > self.max_answers or self.bytes > self.max_bytes):
            _key, gone = self.answers.popitem(last=False)
            self.bytes -= len(gone.body)

    def _keep_only(self, version: str) -> None:
        for key in [k for k, r in self.answers.items() if r.version != version]:
            self.bytes -= len(self.answers.pop(key).body)
