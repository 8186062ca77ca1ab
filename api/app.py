"""The FastAPI application: ``create_app(store)``.

One URL per resource, many formats: ``/matrix`` is the HTML page, ``/matrix.json``,
``/matrix.csv`` and ``/matrix.md`` the same resource as JSON, CSV and Markdown
(the docs table). Views are thin: the answers come from ``survey.verdicts`` over
``survey.evidence.queries``.

================================  =============================================
``/matrix``                       every candidate x backend x mode (filters:
                                  ``backend``, ``mode``, ``candidate``, ``outcome``)
``/candidates``                   stored candidates
``/candidates/{name}``            latest evidence and history of one candidate
``/runs/{id}``                    everything a run recorded (``/runs/{id}/report.json``:
                                  the report verbatim)
``/diff?a=&b=``                   what changed between two runs or candidates
``/changes``, ``/changes.atom``   every answer that moved between consecutive runs,
                                  newest first; the same as an Atom feed
``/check?target=&backend=&mode=`` the verdict of ``survey check`` from stored evidence
``POST /runs``                    upload a probe report (bearer token)
``/schema.json``, ``/healthz``    the report's JSON Schema; liveness
``/docs``, ``/openapi.json``      the API reference (a plain page, no script) and
                                  the OpenAPI document
================================  =============================================

Every ``GET`` also answers ``HEAD``; every HTML answer carries a
Content-Security-Policy that allows no script (:mod:`api.middleware`).

Every request reads in a short session of its own, in a worker thread of the
bounded store pool (:mod:`api.pool`), never on the event loop; SQLite runs in WAL
mode, so reads never wait for a survey that is writing.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.routing import BaseRoute

from api import badges, candidates, changes, check, diff, docs, errors, history, matrix, meta, render, runs, upload
from api.cache import MatrixCache
from api.middleware import HeadAsGet, SecurityHeaders
from api.pool import DEFAULT_SIZE, DEFAULT_STORE_TIMEOUT_S, StorePool
from api.replay import Replay
from api.storewatch import StoreWatch
from db.store import Store
from survey.environments import catalog as catalog_mod
from survey.evidence.report import MAX_REPORT_BYTES_ENV
from survey.flows.group_commit import GroupCommit

TOKEN_ENV = "SURVEY_TOKEN"
MAX_UPLOAD_ENV = MAX_REPORT_BYTES_ENV
BODY_TIMEOUT_ENV = "SURVEY_BODY_TIMEOUT"
STORE_TIMEOUT_ENV = "SURVEY_STORE_TIMEOUT"


@dataclass(frozen=True)
class Settings:
    token: str | None
    max_upload_bytes: int
    body_timeout_s: float
    store_timeout_s: float


def _from_env(name: str, kind: Callable[[str], float], default: float, what: str) -> float:
    text = os.environ.get(name)
    if text:
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"{name}={text!r} is not {what}")
        if value <= 0:
            raise ValueError(f"{name}={text!r} is not {what}")
        return value
    return default


@functools.cache
def _routes() -> tuple[BaseRoute, ...]:
    """Every route of the service, made once in a process and taken by each app made in it.
    A route holds nothing of the app that takes it: a view reads its store, pool, cache and
    settings from ``request.app.state``. Making them analyses each endpoint's parameters
    into validators, most of what making an app cost (tests/test_api.py)."""
    router = APIRouter()
    for module in (meta, matrix, candidates, runs, history, changes, diff, check, upload, docs, badges):
        module.routes(router)
    return tuple(router.routes)


def create_app(store: Store, *, token: str | None = None, max_upload_bytes: int | None = None,
               body_timeout: float | None = None, site: str | None = None,
               store_timeout: float | None = None) -> FastAPI:
    """The service over ``store``.

    ``token``: the bearer token uploads need (default: ``$SURVEY_TOKEN``; none
    means uploads are refused). ``max_upload_bytes``: the largest report accepted
    (default: ``$SURVEY_MAX_UPLOAD_BYTES``, else 8 MiB). ``body_timeout``:
    seconds an upload's body may take to arrive (default: ``$SURVEY_BODY_TIMEOUT``,
    else 60). A bad value in the environment raises ``ValueError``. ``site``: the app
    answers for ``survey publish`` (api.publish), as a static site of this scope
    (catalog | all) holds it: its pages link only to what such a site has (no form, no
    history, check or diff, nothing with a query string). ``store_timeout``: seconds
    any wait on the store may take (default: ``$SURVEY_STORE_TIMEOUT``, else 5; see
    :mod:`api.pool`).
    """
    store_timeout_s = store_timeout if store_timeout is not None else \
        _from_env(STORE_TIMEOUT_ENV, float, DEFAULT_STORE_TIMEOUT_S, "a number of seconds")
    store.limit_time(store_timeout_s, StorePool.deadline_for(store_timeout_s))
    cache = MatrixCache(store)
    pool = StorePool(store, store_timeout_s, size=1 if store.in_memory else DEFAULT_SIZE)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        cache.close()
        pool.close()  # its threads end

    app = FastAPI(
        lifespan=lifespan,
        docs_url=None,  # /docs is our own page (api.docs): Swagger UI would load scripts from a CDN
        redoc_url=None,
        openapi_url=None,  # /openapi.json is served by api.docs (per matrix version, off the event loop)
        title="proton-survey",
        version="1",
        description="Which Triton Proton profiler backends and modes work in which environment: the Availability "
                    "matrix and the evidence behind it. Every resource is an HTML page at its bare path and JSON, "
                    "CSV or Markdown with the suffix `.json`, `.csv`, `.md`. Errors are "
                    '`{"error": {"status", "code", "message", "field", "hint"}}`.',
    )
    app.state.store = store
    app.state.site = site
    app.state.settings = Settings(
        token=(token if token is not None else os.environ.get(TOKEN_ENV)) or None,
        max_upload_bytes=max_upload_bytes if max_upload_bytes is not None else
        int(_from_env(MAX_UPLOAD_ENV, int, upload.DEFAULT_MAX_UPLOAD_BYTES, "a number of bytes")),
        body_timeout_s=body_timeout if body_timeout is not None else
        _from_env(BODY_TIMEOUT_ENV, float, upload.DEFAULT_BODY_TIMEOUT_S, "a number of seconds"),
        store_timeout_s=store_timeout_s,
    )
    app.state.pool = pool
    app.state.writer = GroupCommit(store, source="upload")  # uploads that arrive together go in together
    app.state.catalog = catalog_mod.load(None)  # whose names an upload publishes under: the built-in one, read once
    app.state.matrix_cache = cache
    errors.install(app)
    app.router.routes.extend(_routes())
    app.mount("/static", StaticFiles(directory=str(render.STATIC)), name="static")
    app.add_middleware(SecurityHeaders)
    app.add_middleware(HeadAsGet)
    app.add_middleware(Replay, cache=cache, pool=pool)  # repeats answers a view gave at this version
    app.add_middleware(StoreWatch, store=store, cache=cache, pool=pool)  # outermost: the store replaced, or out
    return app
