"""``/docs``: the API reference as a plain server-rendered page, made from the
OpenAPI document (``/openapi.json``) - no script, nothing loaded from elsewhere.
``/openapi.json`` is the document itself (see :mod:`api.openapi`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api import cache as cache_mod
from api import formats, openapi, render
from api.errors import ApiError
from api.shared import stored_names, stored_platforms

METHODS = ("get", "post", "put", "patch", "delete")


async def spec(request: Request) -> dict[str, Any]:
    """The document with the stored names as enums; while the store is out (the last call
    to it failed: api.pool), or when it fails now, the document without them: the API's
    reference answers whatever the store does."""
    app = request.app
    if app.state.pool.problem is None:
        try:
            version = await cache_mod.version(request)
            names = await cache_mod.memo(request, version, ("names",), lambda: stored_names(app.state.store))
            keys = await cache_mod.memo(request, version, ("platforms",), lambda: stored_platforms(app.state.store))
            return await cache_mod.memo(request, version, ("openapi",), lambda: openapi.document(app, names, keys))
        except (ApiError, SQLAlchemyError):  # the store is out: api.pool remembers it for the next requests
            pass
    return openapi.base(app)


async def openapi_json(request: Request) -> Response:
    doc = await spec(request)
    body = await run_in_threadpool(formats.json_bytes, doc)
    return Response(body, media_type="application/json")


def _schema_text(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(repr(v) if v == "" else str(v) for v in schema["enum"])
    if "anyOf" in schema:
        text = " or ".join(_schema_text(s) for s in schema["anyOf"])
    else:
        text = str(schema.get("type", "any"))
    bounds = [f"{k} {schema[k]}" for k in ("minimum", "maximum", "minLength", "maxLength") if k in schema]
    if "pattern" in schema:
        bounds.append("a pattern: see /openapi.json")
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def operations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for path, ops in doc["paths"].items():
        for method in METHODS:
            op = ops.get(method)
            if op is None:
                continue
            params = [{"name": p["name"], "in": p["in"], "required": bool(p.get("required")),
                       "type": _schema_text(p.get("schema", {})), "description": p.get("description", "")}
                      for p in op.get("parameters", [])]
            responses = [{"status": k, "description": v.get("description", ""),
                          "types": ", ".join(v.get("content", {}))} for k, v in op.get("responses", {}).items()]
            out.append({"method": method.upper(), "path": path, "summary": op.get("summary", ""),
                        "description": op.get("description", ""), "params": params, "responses": responses,
                        "auth": bool(op.get("security")), "anchor": render.anchor(method, path)})
    return out


async def docs_page(request: Request) -> Response:
    doc = await spec(request)
    html = render.page("docs.html", {"title": "API", "doc": doc, "operations": operations(doc)})
    return formats.html_response(html)


def routes(router: APIRouter) -> None:
    router.add_api_route("/openapi.json", openapi_json, methods=["GET"], include_in_schema=False)
    router.add_api_route("/docs", docs_page, methods=["GET"], include_in_schema=False)
