"""``/history?candidate=&backend=&mode=&platform=``: one matrix cell over time.

What every run of the candidate said of (backend, mode), newest first, with
``changed`` where the answer moved (:mod:`survey.verdicts.history`); each cell of the
matrix page links here. Paginated like the other lists (:mod:`api.pages`);
cached per matrix version, like the matrix. ``candidate`` and ``backend`` are
required (the bare HTML path without them is the empty form, whose fields are
choices). An unknown candidate, or a platform it has no run on, is 404 (the
message lists its platforms); a backend or mode that names nothing is 422 listing
the valid values.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from api import cache as cache_mod
from api import formats, pages
from api.cache import Entry
from api.errors import ApiError
from api.formats import Resource
from api.schemas import ERRORS, HistoryResponse
from api.shared import MODE_LABELS, backend_and_mode, stored_names
from db import widths
from probes import outcomes as O
from survey.core.errors import UnknownTarget
from survey.evidence import queries
from survey.verdicts import history


def rows_for(store: Any, candidate: str, backend: str, mode: str | None, platform: str) -> dict[str, Any]:
    with store.session() as s:
        try:
            cand = queries.get_candidate(s, candidate)
        except UnknownTarget as e:
            raise ApiError(404, "not_found", e.message, field="candidate", hint="/candidates lists them")
        keys = history.platforms(s, cand)
        if platform and platform not in keys:  # a cell that is not there (as an unknown candidate is)
            raise ApiError(404, "not_found", f"candidate {cand.name!r} has no run on platform {platform!r}; it has "
                           f"runs on: {', '.join(keys) or '(none)'}", field="platform")
        rows = history.cell_history(s, cand, backend, mode, platform or None)
        return {"candidate": cand.name, "label": cand.label, "platforms": keys, "rows": rows,
                "changes": sum(1 for r in rows if r["changed"])}


def _entry(request: Request, fmt: str, found: dict[str, Any], backend: str, mode_text: str, platform: str,
           size: int, start: int) -> Entry:
    page = pages.offset_page(request, found["rows"], size, start)
    data = {"candidate": found["candidate"], "label": found["label"], "backend": backend, "mode": mode_text,
            "platform": platform or None, "changes": found["changes"], "total": page.total, "next": page.next,
            "next_url": page.next_url, "runs": page.rows}
    ctx = {"title": f"History: {found['label']} · {backend} {mode_text}", "form": None, "history": data,
           "page": page, "platforms": found["platforms"]}
    res = Resource(data, "history.html", ctx, rows=page.rows, columns=history.COLUMNS, headers=page.headers())
    return Entry.of(formats.body(res, fmt, request), formats.MEDIA_TYPES[fmt], page.headers())


async def history_view(
    request: Request,
    fmt: str,
    candidate: Annotated[str, Query(description="a stored candidate's name",
                                    json_schema_extra={"minLength": 1, "maxLength": widths.NAME})] = "",
    backend: Annotated[str, Query(description="the Proton backend", json_schema_extra={"enum": list(O.BACKENDS)})]
    = "",
    mode: Annotated[str, Query(description="its mode (empty or `none`: no mode)",
                               json_schema_extra={"enum": ["", *MODE_LABELS]})] = "",
    platform: Annotated[str, Query(description="only runs on this platform, by key (empty: every platform)",
                                   json_schema_extra={"maxLength": widths.PLATFORM_KEY})] = "",
    size: pages.Size = pages.DEFAULT_SIZE,
    start: pages.Offset = 0,
    if_none_match: cache_mod.IfNoneMatch = None,
) -> Any:
    store = request.app.state.store
    version = await cache_mod.version(request)
    if fmt == formats.HTML and not candidate and not backend:
        names = await cache_mod.memo(request, version, ("names",), lambda: stored_names(store))
        return Resource(None, "history.html", {"title": "History of a cell", "history": None, "names": names,
                                               "modes": MODE_LABELS})
    if not candidate:
        raise ApiError(422, "invalid_input", "candidate: whose history? ?candidate=NAME", field="candidate")
    the_mode = backend_and_mode(backend, mode)
    if len(candidate) > widths.NAME or len(platform) > widths.PLATFORM_KEY:
        field = "candidate" if len(candidate) > widths.NAME else "platform"
        raise ApiError(422, "invalid_input", f"{field}: too long", field=field)
    mode_text = queries.mode_label(the_mode)
    key = ("history", fmt, candidate, backend, the_mode, platform, size, start)
    entry = request.app.state.matrix_cache.get(version, key)
    if entry is None:
        found = await cache_mod.memo(request, version, ("history rows", candidate, backend, the_mode, platform),
                                     lambda: rows_for(store, candidate, backend, the_mode, platform))
        entry = await cache_mod.memo(request, version, key, lambda: _entry(request, fmt, found, backend, mode_text,
                                                                           platform, size, start))
    return cache_mod.answer(request, version, entry, if_none_match)


def routes(router: APIRouter) -> None:
    formats.add_resource(
        router, "/history", history_view, name="history",
        summary="One matrix cell over time: what every run of a candidate said of a backend and mode (paginated)",
        json_model=HistoryResponse,
        errors={404: ERRORS[404], 422: ERRORS[422], 304: {"description": "If-None-Match matched: unchanged"}},
        required=("candidate", "backend"),
        descriptions={"csv": "the cell's runs as CSV", "md": "the cell's runs as Markdown"},
    )
