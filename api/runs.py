"""``/runs/{id}``: everything the probe recorded in one run, the raw report included.

``/runs/{id}.json`` holds all of it; the HTML page and the Markdown table show a
bounded part (:mod:`api.clip`) and link to ``/runs/{id}/report.json`` when they
cut anything.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from api import clip, formats
from api.errors import ApiError
from api.formats import Resource
from api.pool import StorePool
from api.schemas import ERRORS, RunResponse
from api.shared import MAX_ID, run_summary
from db import models as m
from survey.evidence import queries
from survey.verdicts import modes as survey_verdicts

RunId = Annotated[int, Path(description="the run's id")]
# Budgets (characters of evidence) per part of a run page; see api.clip.
SECTION_BUDGETS = {"modes": 64_000, "captures": 32_000, "libraries": 16_000, "environment": 24_000,
                   "registry": 8_000, "probe": 4_000, "stubs": 4_000, "sections": 8_000}
RAW_SHOWN = 48 * 1024  # the raw report is shown inline up to this many characters, else linked
MODE_COLUMNS = ["backend", "mode", "env", "stub", "outcome", "rule", "library", "signal", "exc_type", "message",
                "exit_code", "duration_s", "hung_at_exit"]


def get_run(s: Any, run_id: int) -> m.Run:
    if run_id > MAX_ID:
        raise ApiError(404, "not_found", f"no run #{run_id} in the store")
    return queries.get_run(s, run_id)


def parsed_report(run: m.Run) -> dict[str, Any] | None:
    if run.report is None:
        return None
    data = json.loads(run.report.raw)
    return data if isinstance(data, dict) else None


def mode_groups(report: dict[str, Any] | None, verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's mode entries grouped per (backend, mode): the live check, its
    stub rerun and the inherited-environment check side by side, with the verdict
    (``verdicts``: :class:`survey.survey_verdicts.ModeVerdict` as dicts, maybe clipped)."""
    if not report:
        return []
    by_key = {(v.get("backend"), v.get("mode")): v for v in verdicts}
    captures = {(c.get("backend"), c.get("mode")): c for c in report.get("captures", []) if isinstance(c, dict)}
    groups: dict[tuple[Any, Any], dict[str, Any]] = {}
    for e in report.get("modes", []):
        if not isinstance(e, dict):
            continue
        key = (e.get("backend"), e.get("mode"))
        g = groups.setdefault(key, {"backend": key[0], "mode": key[1], "verdict": by_key.get(key),
                                    "capture": captures.get(key), "entries": []})
        g["entries"].append(e)
    for g in groups.values():
        g["entries"].sort(key=lambda e: (e.get("env") != "clean", bool(e.get("stub"))))
    return sorted(groups.values(), key=lambda g: (survey_verdicts.BACKEND_ORDER.get(g["backend"], 99),
                                                  survey_verdicts.MODE_ORDER.get(g["mode"], 9), str(g["backend"]),
                                                  str(g["mode"])))


def shown(report: dict[str, Any] | None, verdicts: list[survey_verdicts.ModeVerdict], summary: dict[str, Any],
          environment: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """What the HTML page shows of a run: every part clipped to its budget, and what was cut."""
    cut: list[str] = []

    def part(value: Any, where: str, budget: int) -> Any:
        kept, notes = clip.clip(value, where, budget)
        cut.extend(notes)
        return kept

    rep = None
    if report is not None:
        rep = {k: part(v, k, SECTION_BUDGETS.get(k, 4_000)) for k, v in report.items()}
    kept_verdicts = part([asdict(v) for v in verdicts], "verdicts", 32_000)
    return {
        "run": part(summary, "run", 16_000),
        "environment": part(environment, "resolved environment", 16_000),
        "report": rep,
        "groups": mode_groups(rep, kept_verdicts),
    }, cut


def run_view(request: Request, fmt: str, run_id: RunId) -> Resource:
    with request.app.state.store.session() as s:
        run = get_run(s, run_id)
        verdicts = survey_verdicts.run_verdicts(run) if run.status == "complete" else []
        report = parsed_report(run) if fmt in (formats.HTML, "json") else None  # .csv/.md: the mode rows only
        env = run.environment
        environment = {"identity": env.identity, "kind": env.kind, "resolved": env.resolved} if env else None
        summary = run_summary(run)
        data = {
            "run": summary,
            "provenance": queries.provenance(run) if run.status == "complete" else None,
            "verdicts": [asdict(v) for v in verdicts],
            "environment": environment,
            "report": report,
        }
        rows = [{c: getattr(r, c) for c in MODE_COLUMNS} | {"mode": queries.mode_label(r.mode)} for r in run.modes]
        raw = run.report.raw if run.report is not None else None
        ctx: dict[str, Any] = {
            "title": f"Run #{run.id} of {run.candidate.name}",
            "candidate": {"name": run.candidate.name, "label": run.candidate.label},
            "provenance": data["provenance"],
            "raw_url": f"/runs/{run.id}/report.json" if raw is not None else None,
            "raw_chars": len(raw) if raw is not None else 0,
        }
        if fmt == formats.HTML:
            part, cut = shown(report, verdicts, summary, environment)
            ctx.update(part, truncated=cut, report_raw=raw if raw is not None and len(raw) <= RAW_SHOWN else None)
    whole = f"/runs/{run_id}/report.json" if raw is not None else f"/runs/{run_id}.json"
    return Resource(data, "run.html", ctx, rows=rows, columns=MODE_COLUMNS, whole=whole)


async def raw_report(request: Request, run_id: RunId) -> Response:
    """The probe report exactly as it was received (e.g. to ingest it elsewhere)."""
    pool: StorePool = request.app.state.pool
    return await pool.run(_raw_report, request, run_id)


def _raw_report(request: Request, run_id: int) -> Response:
    with request.app.state.store.session() as s:
        run = get_run(s, run_id)
        if run.report is None:
            raise ApiError(404, "not_found", f"run #{run_id} has no report ({run.status}: {run.error or ''})".strip())
        raw = run.report.raw
    return Response(raw.encode("utf-8"), media_type="application/json",
                    headers={"Content-Disposition": f'inline; filename="run-{run_id}-report.json"'})


def routes(router: APIRouter) -> None:
    router.add_api_route(
        "/runs/{run_id:int}/report.json", raw_report, methods=["GET"], name="run_raw_report",
        summary="The probe report of a run, verbatim", response_class=Response,
        responses={200: {"content": {"application/json": {}}, "description": "the report as received"},
                   404: ERRORS[404]},
    )
    formats.add_resource(
        router, "/runs/{run_id:int}", run_view, name="run", summary="One run: everything the probe recorded",
        json_model=RunResponse, errors={404: ERRORS[404]},
        descriptions={"csv": "the run's mode results as CSV", "md": "the run's mode results as Markdown"},
    )
