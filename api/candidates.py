"""``/candidates`` and ``/candidates/{name}``: what is stored per candidate, the
latest evidence and the whole history of runs (unobtainable and failed runs
with their error included).

Candidate names may hold ``/`` and ``:`` (``python:/usr/bin/python3``,
``image:rocm/pytorch:latest``); links quote them. A name that itself ends in
``.json``, ``.csv`` or ``.md`` is served as HTML when no candidate without the
suffix exists.

Both lists are paginated (:mod:`api.pages`): ``/candidates?_size=&_next=``
(``_next``: an offset) and the runs of ``/candidates/{name}?_size=&_next=``
(``_next``: continue with runs older than this id). The candidate list changes
only on ingest and is cached per matrix version (:mod:`api.cache`); evidence
text in its rows (``last_error``) is cut at ``api.shared.TEXT`` characters.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.responses import Response

from api import cache as cache_mod
from api import clip, formats, pages
from api.cache import Entry
from api.formats import Resource
from api.render import q
from api.schemas import ERRORS, CandidateResponse, CandidatesResponse
from api.shared import MAX_ID, cut_text, run_summary
from db import models as m
from survey.core import credentials, errortext
from survey.core.errors import UnknownTarget
from survey.evidence import queries
from survey.verdicts import modes as survey_verdicts
from survey.verdicts.verdict import runs_here

LIST_COLUMNS = ["name", "label", "kind", "scope", "platform", "status", "runs", "latest_run", "latest_date",
                "triton_version", "last_attempt", "last_attempt_date", "tries", "last_error"]
RUN_COLUMNS = ["id", "status", "source", "finished_at", "triton_version", "host", "probe_version", "image_digest",
               "error"]


def candidate_rows(s: Session, scope: str = "all") -> list[dict[str, Any]]:
    """Every stored candidate (catalog and ad hoc; ``scope`` catalog: the catalog's only),
    one row per platform it has evidence on."""
    counts = dict(s.execute(select(m.Run.candidate_id, func.count()).group_by(m.Run.candidate_id)).all())
    rows = []
    for slot in queries.slots(s, scope, checks=False):  # the list shows no check: none is loaded
        c, complete, last = slot.candidate, slot.complete, slot.last
        status = "measured" if complete is not None else (last.status if last is not None else "not_probed")
        rows.append(cut_text({
            "name": c.name, "label": c.label, "kind": c.kind, "scope": c.scope, "platform": slot.platform_key,
            "platform_label": slot.platform_label, "status": status, "runs": counts.get(c.id, 0),
            "latest_run": complete.id if complete else None,
            "latest_date": queries.iso(complete.finished_at) if complete else None,
            "triton_version": complete.triton_version if complete else None,
            "last_attempt": last.status if last is not None else None,
            "last_attempt_date": queries.iso(last.last_tried_at or last.finished_at) if last is not None else None,
            "tries": last.tries if last is not None else None,
            "last_error": errortext.cause(last.error, c.spec) if last is not None and last.error else None,
            "url": f"/candidates/{q(c.name)}",
        }, f"/runs/{last.id}.json" if last is not None else None))
    return rows


def all_rows(store: Any, scope: str = "all") -> list[dict[str, Any]]:
    with store.session() as s:
        return candidate_rows(s, scope)


def _candidates_entry(request: Request, fmt: str, rows: list[dict[str, Any]], size: int, start: int) -> Entry:
    page = pages.offset_page(request, rows, size, start)
    data = {"candidates": page.rows, "total": page.total, "next": page.next, "next_url": page.next_url}
    res = Resource(data, "candidates.html", {"title": "Candidates", "candidates": page.rows, "page": page},
                   rows=page.rows, columns=LIST_COLUMNS)
    return Entry.of(formats.body(res, fmt, request), formats.MEDIA_TYPES[fmt], page.headers())


async def candidates_view(
    request: Request,
    fmt: str,
    size: pages.Size = pages.DEFAULT_SIZE,
    start: pages.Offset = 0,
    if_none_match: cache_mod.IfNoneMatch = None,
) -> Response:
    if fmt == "md":  # a Markdown table shows at most clip.ROWS rows: pages no larger, so next_url skips none
        size = min(size, clip.ROWS)
    version = await cache_mod.version(request)
    key = ("candidates", fmt, size, start)
    entry = request.app.state.matrix_cache.get(version, key)
    if entry is None:  # the rows once per version, each page's body once
        scope = formats.site_of(request) or "all"  # a published site: the scope it was published with
        rows = await cache_mod.memo(request, version, ("candidate rows", scope),
                                    lambda: all_rows(request.app.state.store, scope))
        entry = await cache_mod.memo(request, version, key, lambda: _candidates_entry(request, fmt, rows, size, start))
    return cache_mod.answer(request, version, entry, if_none_match)


def _find(s: Session, name: str, fmt: str) -> tuple[m.Candidate, str]:
    """The candidate (and the format to answer in) for a path ``name`` + ``.fmt``."""
    cand = queries.find_candidate(s, name)
    if cand is None and fmt != formats.HTML:
        whole = queries.find_candidate(s, f"{name}.{fmt}")
        if whole is not None:
            return whole, formats.HTML
    if cand is None:
        raise UnknownTarget(f"no candidate named {name!r} in the store",
                            hint="/candidates lists the stored candidates")
    return cand, fmt


def _with_here(run: m.Run, v: survey_verdicts.ModeVerdict) -> dict[str, Any]:
    """A verdict with the matrix's ``here`` and ``cause`` (survey.verdicts.verdict.runs_here)."""
    here, cause = runs_here(run, v.backend, v.mode, v)
    return {**asdict(v), "here": here, "cause": cause}


def candidate_view(
    request: Request,
    fmt: str,
    name: str,
    size: pages.Size = pages.DEFAULT_SIZE,
    before: Annotated[int | None, Query(alias="_next", ge=1, le=MAX_ID,
                                        description="show runs older than this run id: the `next` of the previous "
                                                    "page")] = None,
) -> Any:
    with request.app.state.store.session() as s:
        cand, fmt = _find(s, name, fmt)
        if fmt == "md":  # as for the list: no row between two pages goes unshown
            size = min(size, clip.ROWS)
        latest = queries.latest_complete(s, cand.id)
        runs_q = select(m.Run).where(m.Run.candidate_id == cand.id)
        total = s.scalar(select(func.count()).select_from(runs_q.subquery())) or 0
        last = s.scalar(runs_q.order_by(m.Run.id.desc()).limit(1))
        if before is not None:
            runs_q = runs_q.where(m.Run.id < before)
        runs = list(s.scalars(runs_q.order_by(m.Run.id.desc()).limit(size + 1)))
        verdicts = survey_verdicts.published_verdicts(latest) if latest is not None else []  # as the matrix
        latest_data = None
        if latest is not None:
            latest_data = {**run_summary(latest), "provenance": queries.provenance(latest),
                           "verdicts": [_with_here(latest, v) for v in verdicts]}
        page = pages.page_after(request, [run_summary(r) for r in runs], size, total, "id")
        info = {"name": cand.name, "label": cand.label, "kind": cand.kind, "scope": cand.scope,
                "spec": credentials.mask(cand.spec),
                "position": cand.position, "created_at": queries.iso(cand.created_at),
                "updated_at": queries.iso(cand.updated_at)}
        data = {"candidate": info, "latest": latest_data,
                "last_attempt": run_summary(last) if last is not None else None, "runs": page.rows,
                "runs_total": total, "next": page.next, "next_url": page.next_url}
        ctx: dict[str, Any] = {"title": f"Candidate {cand.name}", "candidate": info, "latest": latest_data,
                               "last": data["last_attempt"], "page": page}
        if fmt == formats.HTML:  # pages show a bounded part of the evidence (api.clip)
            latest_shown = {k: v for k, v in latest_data.items() if k != "verdicts"} if latest_data else None
            kept, cut = clip.clip({"candidate": info, "latest": latest_shown, "last": data["last_attempt"],
                                   "verdicts": latest_data["verdicts"] if latest_data else [], "runs": page.rows},
                                  "", 96_000)
            ctx.update(candidate=kept.get("candidate", {}), latest=kept.get("latest"), last=kept.get("last"),
                       verdicts=kept.get("verdicts", []), runs=kept.get("runs", []), truncated=cut)
    res = Resource(data, "candidate.html", ctx, rows=page.rows, columns=RUN_COLUMNS, headers=page.headers())
    return formats.respond(request, res, fmt)


def routes(router: APIRouter) -> None:
    formats.add_resource(router, "/candidates", candidates_view, name="candidates",
                         summary="Every stored candidate with its latest status (paginated)",
                         json_model=CandidatesResponse,
                         errors={422: ERRORS[422], 304: {"description": "If-None-Match matched: unchanged"}})
    formats.add_resource(
        router, "/candidates/{name:path}", candidate_view, name="candidate",
        summary="One candidate: latest evidence and the history of its runs (paginated)",
        json_model=CandidateResponse, errors={404: ERRORS[404], 422: ERRORS[422]},
        descriptions={"csv": "the candidate's runs as CSV", "md": "the candidate's runs as Markdown"},
    )
