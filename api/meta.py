"""``/`` (to the matrix), ``/healthz`` and ``/schema.json``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from api import formats
from api.errors import ApiError
from api.schemas import Health
from db.outage import classify
from probes import SCHEMA_VERSION
from survey.evidence.report import json_schema


def root() -> RedirectResponse:
    return RedirectResponse("/matrix", status_code=302)


async def healthz(request: Request) -> Response:
    state = request.app.state
    try:
        version = await run_in_threadpool(state.matrix_cache.version)
    except Exception as e:  # the database is gone or unreadable: say which part
        problem = classify(e, state.store.describe())
        raise ApiError(503, "store_unavailable", problem.message if problem is not None else
                       f"{state.store.describe()} cannot be read: {type(e).__name__}")
    body = {"status": "ok", "schema_revision": state.store.revision, "matrix_version": version}
    return Response(formats.json_bytes(body), media_type="application/json", headers={"Cache-Control": "no-store"})


def schema() -> Response:
    return Response(formats.json_bytes(json_schema()), media_type="application/json")


def routes(router: APIRouter) -> None:
    router.add_api_route("/", root, methods=["GET"], include_in_schema=False)
    router.add_api_route("/healthz", healthz, methods=["GET"], summary="Is the service up and its store readable?",
                         response_class=Response, responses={200: {"model": Health}})
    router.add_api_route("/schema.json", schema, methods=["GET"],
                         summary=f"JSON Schema of the probe report (v{SCHEMA_VERSION})", response_class=Response,
                         responses={200: {"content": {"application/json": {}}, "description": "JSON Schema"}})
