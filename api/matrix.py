"""``/matrix``: every candidate x backend x mode, from ``survey.evidence.matrix``.

``/matrix.md`` is the docs table, byte for byte what ``survey table`` prints.
Bodies are cached per (format, filters) until the matrix version moves (see
``api.cache``), and carry an ETag.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api import formats, render
from api.cache import Entry, etag_for, etag_matches
from api.errors import ApiError
from api.schemas import ERRORS, MatrixResponse
from db.store import Store
from probes import outcomes as O
from survey import docs_table, queries
from survey import matrix as survey_matrix
from survey import table as table_mod
from survey import verdicts as survey_verdicts

COLUMNS = [
    "candidate", "label", "kind", "scope", "platform", "platform_label", "status", "triton_version", "environment",
    "backend", "mode", "mode_arg", "outcome", "verdict",
    "verdict_source", "stub_outcome", "library", "reason", "capture_outcome", "capture_kernel_count",
    "capture_gpu_time_ns", "run_id", "date", "image_digest", "evidence", "last_attempt", "error", "tries",
]
MODE_LABELS = (queries.NO_MODE, *(m for m in O.COMMON_MODES if m), *O.INSTRUMENTATION_MODES)
FILTER_NAMES = ("backend", "mode", "candidate", "outcome", "platform", "scope")


def matrix_rows(s: Session, filters: dict[str, str | None]) -> list[dict[str, Any]]:
    f = dict(filters)
    scope = f.pop("scope", None) or "catalog"
    return survey_matrix.matrix(s, scope=scope, **f)


def _column_key(col: tuple[str, str | None]) -> tuple[int, int]:
    return survey_verdicts.BACKEND_ORDER.get(col[0], 99), survey_verdicts.MODE_ORDER.get(col[1], 9)


def grid(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows -> candidates (in catalog order) x (backend, mode) columns, for the HTML page."""
    cands: dict[str, dict[str, Any]] = {}
    cells: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    cols: set[tuple[str, str | None]] = set()
    for r in rows:
        c = cands.setdefault(r["candidate"], {"name": r["candidate"], "label": r["label"], "kind": r["kind"],
                                              "status": r["status"], "error": r.get("error"),
                                              "run_id": r.get("run_id"), "date": r.get("date"),
                                              "triton_version": r.get("triton_version"),
                                              "last_attempt": r.get("last_attempt")})
        if r["status"] == "measured":
            key = (r["backend"], r["mode_arg"])
            cols.add(key)
            cells[(c["name"], *key)] = r
    columns = sorted(cols, key=_column_key)
    backends: list[tuple[str, int]] = []
    for b, _m in columns:
        if backends and backends[-1][0] == b:
            backends[-1] = (b, backends[-1][1] + 1)
        else:
            backends.append((b, 1))
    return {"candidates": list(cands.values()), "columns": columns, "backends": backends, "cells": cells}


def _check_filters(backend: str | None, mode: str | None, candidate: str | None,
                   outcome: str | None, platform: str | None = None,
                   scope: str | None = None) -> dict[str, str | None]:
    filters = {"backend": backend or None, "mode": mode or None, "candidate": candidate or None,
               "outcome": outcome or None, "platform": platform or None, "scope": scope or None}
    if filters["scope"] and filters["scope"] not in queries.SCOPES:
        raise ApiError(422, "invalid_input", f"unknown scope {scope!r}; one of {', '.join(queries.SCOPES)}",
                       field="scope")
    if filters["backend"] and filters["backend"] not in O.BACKENDS:
        raise ApiError(422, "invalid_input", f"unknown backend {backend!r}; one of {', '.join(O.BACKENDS)}",
                       field="backend")
    if filters["outcome"] and filters["outcome"] not in O.OUTCOMES:
        raise ApiError(422, "invalid_input", f"unknown outcome {outcome!r}; one of {', '.join(O.OUTCOMES)}",
                       field="outcome")
    return filters


def build(store: Store, fmt: str, filters: dict[str, str | None], version: str) -> Entry:
    with store.session() as s:
        if fmt == "md":
            if any(v for k, v in filters.items() if k != "scope"):
                raise ApiError(422, "invalid_input", "the docs table (/matrix.md) is not filtered; drop the filters, "
                               "or ask /matrix.csv or /matrix.json for the filtered rows",
                               field=next(k for k, v in filters.items() if v))
            table = docs_table.table_rows(s, filters.get("scope") or "catalog")
            text = table_mod.render(table_mod.frame(table, docs_table.columns(table)), "md")
            body = text.encode("utf-8")
        else:
            rows = matrix_rows(s, filters)
            if fmt == "json":
                body = formats.json_bytes({"matrix_version": version, "filters": filters, "count": len(rows),
                                           "rows": rows})
            elif fmt == "csv":
                body = formats.body(formats.Resource(None, "", rows=rows, columns=COLUMNS), "csv")
            else:
                names = [c.name for c in queries.candidates(s)]
                body = render.page("matrix.html", {
                    "title": "Availability matrix", "rows": rows, "grid": grid(rows), "filters": filters,
                    "choices": {"backend": O.BACKENDS, "mode": MODE_LABELS, "candidate": names,
                                "outcome": O.OUTCOMES},
                    "version": version,
                    "formats": {"json": "/matrix.json" + render.qs(**filters),
                                "csv": "/matrix.csv" + render.qs(**filters), "md": "/matrix.md"},
                }).encode("utf-8")
    return Entry(body, formats.MEDIA_TYPES[fmt], etag_for(body))


async def matrix_view(
    request: Request,
    fmt: str,
    backend: Annotated[str | None, Query(description="only this backend: " + ", ".join(O.BACKENDS))] = None,
    mode: Annotated[str | None, Query(description="only this mode; `none` means no mode")] = None,
    candidate: Annotated[str | None, Query(description="only this candidate (by name)")] = None,
    outcome: Annotated[str | None, Query(description="only this outcome: " + ", ".join(O.OUTCOMES))] = None,
    platform: Annotated[str | None, Query(description="only this platform (its key)")] = None,
    scope: Annotated[str | None, Query(description="catalog (default: what the docs publish) or all (ad-hoc "
                                                   "evidence too)")] = None,
    if_none_match: Annotated[str | None, Header(description="an ETag of an earlier answer: 304 if unchanged")]
    = None,
) -> Response:
    filters = _check_filters(backend, mode, candidate, outcome, platform, scope)
    state = request.app.state
    cache = state.matrix_cache
    version = cache.version() if cache.local else await run_in_threadpool(cache.version)
    key = (fmt, *(filters[k] for k in FILTER_NAMES))
    entry = state.matrix_cache.get(version, key)
    if entry is None:
        entry = await run_in_threadpool(build, state.store, fmt, filters, version)
        state.matrix_cache.put(version, key, entry)
    headers = {"ETag": entry.etag, "Cache-Control": "no-cache"}
    if fmt == formats.HTML:
        headers.update(formats.HTML_SECURITY)
    if etag_matches(if_none_match, entry.etag):
        return Response(status_code=304, headers=headers)
    return Response(entry.body, status_code=entry.status, media_type=entry.media_type, headers=headers)


def routes(router: APIRouter) -> None:
    formats.add_resource(
        router, "/matrix", matrix_view, name="matrix", summary="The Availability matrix",
        json_model=MatrixResponse, errors={422: ERRORS[422], 304: {"description": "If-None-Match matched: unchanged"}},
        descriptions={
            "json": "every candidate x backend x mode: outcome, verdict (live or stub-derived), provenance, "
                    "and the run that is its evidence",
            "csv": "the matrix rows as CSV",
            "md": "the docs Availability table, byte for byte what `survey table` prints (takes no filters)",
        },
    )
