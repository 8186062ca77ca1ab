"""``/`` (to the matrix), ``/healthz``, ``/schema.json`` and ``/favicon.ico`` (an SVG)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from api import formats, render
from api.schemas import Health
from probes import SCHEMA_VERSION
from survey.evidence.report import json_schema


def root() -> RedirectResponse:
    return RedirectResponse("/matrix", status_code=302)


async def healthz(request: Request) -> Response:
    """The service answers. It asks nothing of the store (a store that does not answer
    never holds it up): ``store`` is what the last call to the store found, ``ok`` or
    the outage in one line (api.pool), and ``matrix_version`` the last version read."""
    state = request.app.state
    problem = state.pool.problem
    body = {"status": "ok" if problem is None else "degraded", "schema_revision": state.store.revision,
            "matrix_version": state.matrix_cache.last_version(),
            "store": "ok" if problem is None else problem.message}
    return Response(formats.json_bytes(body), media_type="application/json", headers={"Cache-Control": "no-store"})


def favicon() -> Response:
    return Response((render.STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml",
                    headers={"Cache-Control": "public, max-age=86400"})


def schema() -> Response:
    return Response(formats.json_bytes(json_schema()), media_type="application/json")


def routes(router: APIRouter) -> None:
    router.add_api_route("/", root, methods=["GET"], include_in_schema=False)
    router.add_api_route("/favicon.ico", favicon, methods=["GET"], include_in_schema=False)
    router.add_api_route("/healthz", healthz, methods=["GET"],
                         summary="Is the service up, and what did its store last answer?",
                         response_class=Response, responses={200: {"model": Health}})
    router.add_api_route("/schema.json", schema, methods=["GET"],
                         summary=f"JSON Schema of the probe report (v{SCHEMA_VERSION})", response_class=Response,
                         responses={200: {"content": {"application/json": {}}, "description": "JSON Schema"}})
