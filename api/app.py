"""The FastAPI application: ``create_app(store)``.

One URL per resource, many formats: ``/matrix`` is the HTML page, ``/matrix.json``,
``/matrix.csv`` and ``/matrix.md`` the same resource as JSON, CSV and Markdown
(the docs table). Views are thin: the answers come from ``survey.evidence``.

================================  =============================================
``/matrix``                       every candidate x backend x mode (filters:
                                  ``backend``, ``mode``, ``candidate``, ``outcome``)
``/candidates``                   stored candidates
``/candidates/{name}``            latest evidence and history of one candidate
``/runs/{id}``                    everything a run recorded (``/runs/{id}/report.json``:
                                  the report verbatim)
``/diff?a=&b=``                   what changed between two runs or candidates
``/check?target=&backend=&mode=`` the verdict of ``survey check`` from stored evidence
``POST /runs``                    upload a probe report (bearer token)
``/schema.json``, ``/healthz``    the report's JSON Schema; liveness
================================  =============================================

Every request reads in a short session of its own; SQLite runs in WAL mode, so
reads never wait for a survey that is writing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import candidates, check, diff, errors, matrix, meta, render, runs, upload
from api.cache import MatrixCache
from db.store import Store

TOKEN_ENV = "SURVEY_TOKEN"
MAX_UPLOAD_ENV = "SURVEY_MAX_UPLOAD_BYTES"


@dataclass(frozen=True)
class Settings:
    token: str | None
    max_upload_bytes: int


def _default_max_upload() -> int:
    text = os.environ.get(MAX_UPLOAD_ENV)
    if text:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{MAX_UPLOAD_ENV}={text!r} is not a number of bytes")
    return upload.DEFAULT_MAX_UPLOAD_BYTES


class NoSniff:
    """``X-Content-Type-Options: nosniff`` on every answer (pure ASGI: cheap)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-content-type-options", b"nosniff")]
            await send(message)

        await self.app(scope, receive, send_with_header)


def create_app(store: Store, *, token: str | None = None, max_upload_bytes: int | None = None) -> FastAPI:
    """The service over ``store``.

    ``token``: the bearer token uploads need (default: ``$SURVEY_TOKEN``; none
    means uploads are refused). ``max_upload_bytes``: the largest report accepted
    (default: ``$SURVEY_MAX_UPLOAD_BYTES``, else 8 MiB).
    """
    cache = MatrixCache(store)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        cache.close()

    app = FastAPI(
        lifespan=lifespan,
        title="proton-survey",
        version="1",
        description="Which Triton Proton profiler backends and modes work in which environment: the Availability "
                    "matrix and the evidence behind it. Every resource is an HTML page at its bare path and JSON, "
                    "CSV or Markdown with the suffix `.json`, `.csv`, `.md`. Errors are "
                    '`{"error": {"status", "code", "message", "field", "hint"}}`.',
    )
    app.state.store = store
    app.state.settings = Settings(
        token=(token if token is not None else os.environ.get(TOKEN_ENV)) or None,
        max_upload_bytes=max_upload_bytes if max_upload_bytes is not None else _default_max_upload(),
    )
    app.state.matrix_cache = cache
    errors.install(app)
    router = APIRouter()
    for module in (meta, matrix, candidates, runs, diff, check, upload):
        module.routes(router)
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(render.STATIC)), name="static")
    app.add_middleware(NoSniff)
    return app
