"""``/candidates`` and ``/candidates/{name}``: what is stored per candidate, the
latest evidence and the whole history of runs (unobtainable and failed runs
with their error included).

Candidate names may hold ``/`` and ``:`` (``python:/usr/bin/python3``,
``image:rocm/pytorch:latest``); links quote them. A name that itself ends in
``.json``, ``.csv`` or ``.md`` is served as HTML when no candidate without the
suffix exists.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from api import formats
from api.formats import Resource
from api.render import q
from api.runs import run_summary
from api.schemas import ERRORS, CandidateResponse, CandidatesResponse
from db import models as m
from survey import errortext, queries
from survey import verdicts as survey_verdicts
from survey.errors import UnknownTarget

LIST_COLUMNS = ["scope", "platform", "tries", "name", "label", "kind", "status", "runs", "latest_run", "latest_date",
                "triton_version",
                "last_attempt", "last_attempt_date", "last_error"]
RUN_COLUMNS = ["id", "status", "source", "finished_at", "triton_version", "host", "probe_version", "image_digest",
               "error"]


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else None


def candidates_view(request: Request, fmt: str) -> Resource:
    """Every stored candidate (catalog and ad hoc), one row per platform it has evidence on."""
    with request.app.state.store.session() as s:
        counts = dict(s.execute(select(m.Run.candidate_id, func.count()).group_by(m.Run.candidate_id)).all())
        rows = []
        for slot in queries.slots(s):
            c, complete, last = slot.candidate, slot.complete, slot.last
            status = "measured" if complete is not None else (last.status if last is not None else "not_probed")
            rows.append({
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
            })
    return Resource({"candidates": rows}, "candidates.html", {"title": "Candidates", "candidates": rows},
                    rows=rows, columns=LIST_COLUMNS)


def _find(s: Session, name: str, fmt: str) -> tuple[m.Candidate, str]:
    """The candidate (and the format to answer in) for a path ``name`` + ``.fmt``."""
    query = select(m.Candidate).options(selectinload(m.Candidate.runs))
    cand = s.scalar(query.where(m.Candidate.name == name))
    if cand is None and fmt != formats.HTML:
        whole = s.scalar(query.where(m.Candidate.name == f"{name}.{fmt}"))
        if whole is not None:
            return whole, formats.HTML
    if cand is None:
        raise UnknownTarget(f"no candidate named {name!r} in the store",
                            hint="/candidates lists the stored candidates")
    return cand, fmt


def candidate_view(request: Request, fmt: str, name: str) -> Any:
    with request.app.state.store.session() as s:
        cand, fmt = _find(s, name, fmt)
        latest = queries.latest_complete(s, cand.id)
        runs = sorted(cand.runs, key=lambda r: r.id, reverse=True)
        last = runs[0] if runs else None
        verdicts = survey_verdicts.run_verdicts(latest) if latest is not None else []
        latest_data = None
        if latest is not None:
            latest_data = {**run_summary(latest), "provenance": queries.provenance(latest),
                           "verdicts": [asdict(v) for v in verdicts]}
        run_rows = [run_summary(r) for r in runs]
        info = {"name": cand.name, "label": cand.label, "kind": cand.kind, "spec": cand.spec,
                "position": cand.position, "created_at": queries.iso(cand.created_at),
                "updated_at": queries.iso(cand.updated_at)}
        data = {"candidate": info, "latest": latest_data,
                "last_attempt": run_summary(last) if last is not None else None, "runs": run_rows}
        ctx = {"title": f"Candidate {cand.name}", "candidate": info, "latest": latest_data, "verdicts": verdicts,
               "runs": run_rows, "last": data["last_attempt"]}
    res = Resource(data, "candidate.html", ctx, rows=run_rows, columns=RUN_COLUMNS)
    return formats.respond(request, res, fmt)


def routes(router: APIRouter) -> None:
    formats.add_resource(router, "/candidates", candidates_view, name="candidates",
                         summary="Every stored candidate with its latest status", json_model=CandidatesResponse)
    formats.add_resource(
        router, "/candidates/{name:path}", candidate_view, name="candidate",
        summary="One candidate: latest evidence and the history of its runs", json_model=CandidateResponse,
        errors={404: ERRORS[404]},
        descriptions={"csv": "the candidate's runs as CSV", "md": "the candidate's runs as Markdown"},
    )
