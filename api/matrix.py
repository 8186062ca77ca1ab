"""``/matrix``: every (candidate, platform) x backend x mode, from ``survey.verdicts.matrix.matrix``.

``/matrix.md`` is the docs table, byte for byte what ``survey table`` prints (it
takes no filters). Bodies are cached per (format, filters) until the matrix
version moves (see ``api.cache``), and carry an ETag.

Pages (:mod:`api.pages`): ``/matrix``, ``.json`` and ``.csv`` hold at most
``_size`` (candidate, platform) rows of the grid -- each with all its backend x
mode rows -- per page (default 100, at most 1000), so a page is at most
``_size`` x (backends x modes) rows of at most :data:`api.shared.TEXT` characters of
evidence text each; ``next_url`` (and ``Link: rel="next"``) names the next.

Filters: ``backend``, ``mode`` (``none``: no mode), ``outcome``, ``verdict``
and ``candidate``; empty means any. A value that names nothing is refused (422,
listing the valid values) before the cache is looked at, so made-up values
neither fill the cache nor cost a query. Evidence text longer than
:data:`api.shared.TEXT` characters (an unobtainable candidate's error) is cut in the rows;
the run behind the row holds it whole.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy.orm import Session
from starlette.responses import Response

from api import cache as cache_mod
from api import formats, pages, render
from api.cache import Entry
from api.errors import ApiError
from api.schemas import ERRORS, MatrixResponse
from api.shared import MODE_LABELS, cut_text, is_stored, one_of, stored_names, stored_platforms
from db import widths
from db.store import Store
from probes import outcomes as O
from survey.environments import catalog as catalog_mod
from survey.evidence import queries
from survey.evidence.ingest import matrix_version
from survey.render import docs_table
from survey.render import grid as grid_mod
from survey.verdicts import documented as survey_documented
from survey.verdicts import matrix as survey_matrix
from survey.verdicts import summary
from survey.verdicts.modes import Acceptance
from survey.verdicts.rows import FIELDS

COLUMNS = FIELDS  # survey.verdicts.rows.MatrixRow: the rows of .json, the columns of .csv
VERDICTS = tuple(Acceptance)
FILTER_NAMES = ("backend", "mode", "candidate", "outcome", "verdict", "platform")


def documented_claims(s: Session, filters: dict[str, str | None]) -> list[dict[str, Any]]:
    """The documented claims (survey.verdicts.documented) the page shows beside the
    measurements, as the filters allow: none when an outcome, verdict or platform is
    asked for (claims have none of these), else those of the backend, mode and
    candidate asked for."""
    if any(filters.get(k) for k in ("outcome", "verdict", "platform")):
        return []
    mode = filters.get("mode")
    catalog = catalog_mod.load()
    out = []
    for c in survey_documented.assess(s, survey_documented.load()):
        if (filters.get("backend") and c["backend"] != filters["backend"]) or (mode and c["mode"] != mode) \
                or (filters.get("candidate") and c["candidate"] != filters["candidate"]):
            continue
        entry = catalog.get(c["candidate"])
        if c["label"] == c["candidate"] and entry is not None:  # not stored yet: the catalog's label
            c = {**c, "label": entry.display_label}
        out.append(c)
    return out


def grid(rows: list[dict[str, Any]], claims: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Rows -> candidates (in catalog order) x (backend, mode) columns, for the HTML
    page: ``survey.render.grid``'s grid, each row with the cells it draws; then one row
    per candidate that documented claims are about (``claims``), marked documented:
    shown beside the measurements, never merged with them."""
    g = grid_mod.grid_of(rows)
    documented: dict[str, dict[str, Any]] = {}
    for c in claims or []:
        row = documented.setdefault(c["candidate"], {"name": c["candidate"], "label": c["label"], "cells": {}})
        row["cells"].setdefault((c["backend"], c["mode_arg"]), []).append(c)
    extra = {k for d in documented.values() for k in d["cells"]} - set(g.columns)
    if extra:
        g.columns = sorted(set(g.columns) | extra, key=grid_mod.column_key)
    cands = []
    for e in g.rows:
        r = e.row
        cands.append({"key": e.key, "name": r["candidate"], "label": r["label"], "kind": r["kind"],
                      "status": r["status"], "error": r.get("error"), "run_id": r.get("run_id"),
                      "date": r.get("date"), "triton_version": r.get("triton_version"),
                      "last_attempt": r.get("last_attempt"), "platform": r.get("platform"),
                      "platform_label": r.get("platform_label"), "several_platforms": e.several_platforms,
                      "spans": g.spans(e)})
    backends = [(b, len(modes)) for b, modes in g.modes().items()]
    return {"candidates": cands, "columns": g.columns, "backends": backends,
            "documented": list(documented.values())}


def check_filters(filters: dict[str, str | None]) -> None:
    """422 for a filter value that names no backend, mode, outcome or verdict (a stored
    candidate: :func:`api.shared.is_stored`)."""
    for what, valid in (("backend", O.BACKENDS), ("mode", MODE_LABELS), ("outcome", O.OUTCOMES),
                        ("verdict", VERDICTS)):
        value = filters.get(what)
        if value and value not in valid:
            raise one_of(what, value, valid)


def docs_entry(store: Store, scope: str) -> Entry:
    with store.session() as s:
        return Entry.of(docs_table.markdown(s, scope).encode("utf-8"), formats.MEDIA_TYPES["md"])


def page_rows(store: Store, filters: dict[str, str | None], scope: str, size: int,
              start: int) -> tuple[list[dict[str, Any]], int]:
    """One page of rows: only the page's slots are read (``survey.verdicts.matrix.page``)."""
    with store.session() as s:
        rows, total = survey_matrix.page(s, start, size, scope=scope, **filters)
    return [cut_text(r, f"/runs/{r['run_id']}.json" if r.get("run_id") else None) for r in rows], total


def warm(store: Store) -> None:
    """Read a one-slot page of the matrix, unfiltered and through each filter on the cells,
    so that its statements are compiled (SQLAlchemy's per-engine cache) and the mappers set
    up before the first request comes: a server's first page costs what the next does
    (about half, bench/README.md). Nothing is kept but what SQLAlchemy keeps."""
    with store.engine.connect() as conn:  # as api.cache.MatrixCache reads it on every request
        matrix_version(conn)
    none = dict.fromkeys(FILTER_NAMES)
    for one in ({}, {"backend": O.BACKENDS[0]}, {"mode": "none"}, {"outcome": O.OUTCOMES[0]},
                {"verdict": str(VERDICTS[0])}):
        page_rows(store, {**none, **one}, "catalog", 1, 0)
    with store.session() as s:  # a page of one slot reads its cells by a list of ids; of consecutive slots, a range
        summary.stored_cells(s, [1, 2])


def build(request: Request, fmt: str, filters: dict[str, str | None], version: str, scope: str,
          rows: list[dict[str, Any]], total: int, size: int, start: int) -> Entry:
    """One page of the matrix in ``fmt``: ``rows`` are the page's, of ``total`` grid rows."""
    nxt = start + size if start + size < total else None
    page = pages.Page(rows, total, nxt, pages.url_with(request, _size=size, _next=nxt) if nxt is not None else None)
    paging = {"total": page.total, "next": page.next, "next_url": page.next_url}
    if fmt == "json":
        body = formats.json_bytes({"matrix_version": version, "filters": filters, "scope": scope,
                                   "count": len(rows), **paging, "rows": rows})
    elif fmt == "csv":
        body = formats.body(formats.Resource(None, "", rows=rows, columns=COLUMNS), "csv")  # every row is whole
    else:
        store = request.app.state.store
        with store.session() as s:
            names = [c.name for c in queries.candidates(s)]
            platforms = stored_platforms(store)
            claims = documented_claims(s, filters) if start == 0 else []
        body = render.page("matrix.html", {
            "title": "Availability matrix", "rows": rows, "grid": grid(rows, claims), "filters": filters, "page": page,
            "choices": {"backend": O.BACKENDS, "mode": MODE_LABELS, "candidate": names,
                        "outcome": O.OUTCOMES, "verdict": VERDICTS, "platform": platforms},
            "version": version, "site": formats.site_of(request),
            "formats": {"json": "/matrix.json" + render.qs(**filters),
                        "csv": "/matrix.csv" + render.qs(**filters), "md": "/matrix.md"},
        }).encode("utf-8")
    return Entry.of(body, formats.MEDIA_TYPES[fmt], page.headers())


def _enum(valid: tuple[str, ...]) -> dict[str, Any]:
    return {"enum": ["", *valid]}


# The candidate filter's enum is the stored names: api.openapi adds it per matrix version.
BackendFilter = Annotated[str, Query(description="only this backend (empty: any)", json_schema_extra=_enum(O.BACKENDS))]
ModeFilter = Annotated[str, Query(description="only this mode; `none` means no mode (empty: any)",
                                  json_schema_extra=_enum(MODE_LABELS))]
CandidateFilter = Annotated[str, Query(description="only this stored candidate, by name (empty: any)")]
OutcomeFilter = Annotated[str, Query(description="only this outcome (empty: any)", json_schema_extra=_enum(O.OUTCOMES))]
VerdictFilter = Annotated[str, Query(description="only this verdict (empty: any)", json_schema_extra=_enum(VERDICTS))]
PlatformFilter = Annotated[str, Query(description="only this platform, by key (empty: any)",
                                      json_schema_extra={"maxLength": widths.PLATFORM_KEY})]
ScopeParam = Annotated[str, Query(description="catalog (empty, the default: what the docs publish) or all (ad-hoc "
                                              "evidence too)", json_schema_extra=_enum(queries.SCOPES))]


async def matrix_view(
    request: Request,
    fmt: str,
    backend: BackendFilter = "",
    mode: ModeFilter = "",
    candidate: CandidateFilter = "",
    outcome: OutcomeFilter = "",
    verdict: VerdictFilter = "",
    platform: PlatformFilter = "",
    scope: ScopeParam = "",
    size: Annotated[int, Query(alias="_size", ge=1, le=pages.MAX_SIZE,
                               description=f"(candidate, platform) rows of the grid per page, each with all its "
                                           f"backend x mode rows (default {pages.DEFAULT_SIZE}, at most "
                                           f"{pages.MAX_SIZE})")] = pages.DEFAULT_SIZE,
    start: pages.Offset = 0,
    if_none_match: cache_mod.IfNoneMatch = None,
) -> Response:
    state = request.app.state
    if fmt == "md":
        given = [k for k in (*FILTER_NAMES, "_size", "_next") if request.query_params.get(k)]
        if given:
            raise ApiError(422, "invalid_input", "the docs table (/matrix.md) is not filtered or paged; drop "
                           f"{given[0]}, or ask /matrix.csv or /matrix.json for the filtered rows", field=given[0])
    filters: dict[str, str | None] = {"backend": backend or None, "mode": mode or None,
                                      "candidate": candidate or None, "outcome": outcome or None,
                                      "verdict": verdict or None, "platform": platform or None}
    if scope and scope not in queries.SCOPES:
        raise one_of("scope", scope, queries.SCOPES)
    the_scope = scope or formats.site_of(request) or "catalog"
    version = await cache_mod.version(request)
    if fmt == "md":
        entry = await cache_mod.memo(request, version, ("matrix", "md", the_scope),
                                     lambda: docs_entry(state.store, the_scope))
        return cache_mod.answer(request, version, entry, if_none_match)
    check_filters(filters)
    name = filters["candidate"]
    if name and not await cache_mod.memo(request, version, ("stored", name), lambda: is_stored(state.store, name)):
        # every name only for the answer that lists them
        raise one_of("candidate", name, await cache_mod.memo(request, version, ("names",),
                                                             lambda: stored_names(state.store)))
    if filters["platform"]:
        keys = await cache_mod.memo(request, version, ("platforms",), lambda: stored_platforms(state.store))
        if filters["platform"] not in keys:
            raise one_of("platform", filters["platform"], keys)
    key = ("matrix", fmt, the_scope, *filters.values(), size, start)
    entry = state.matrix_cache.get(version, key)
    if entry is None:  # the page's grid rows alone (after an ingest, the first answer)
        rows, total = await cache_mod.memo(request, version, ("matrix page", the_scope, *filters.values(), size,
                                                               start),
                                           lambda: page_rows(state.store, filters, the_scope, size, start))
        entry = await cache_mod.memo(request, version, key, lambda: build(request, fmt, filters, version,
                                                                          the_scope, rows, total, size, start))
    return cache_mod.answer(request, version, entry, if_none_match)


def routes(router: APIRouter) -> None:
    formats.add_resource(
        router, "/matrix", matrix_view, name="matrix", summary="The Availability matrix",
        json_model=MatrixResponse, errors={422: ERRORS[422], 304: {"description": "If-None-Match matched: unchanged"}},
        drop={"md": (*FILTER_NAMES, "size", "start")},
        descriptions={
            "json": "every candidate x backend x mode: outcome, verdict (live or stub-derived), provenance, "
                    "and the run that is its evidence",
            "csv": "the matrix rows as CSV",
            "md": "the docs Availability table, byte for byte what `survey table` prints (takes no filters)",
        },
    )
