"""``/runs/{id}``: everything the probe recorded in one run, the raw report included."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from api import formats
from api.errors import ApiError
from api.formats import Resource
from api.schemas import ERRORS, RunResponse
from db import models as m
from survey import queries
from survey import verdicts as survey_verdicts

MAX_ID = 2**63 - 1
MODE_COLUMNS = ["backend", "mode", "env", "stub", "outcome", "rule", "library", "signal", "exc_type", "message",
                "exit_code", "duration_s", "hung_at_exit"]


def run_summary(run: m.Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "url": f"/runs/{run.id}",
        "candidate": run.candidate.name,
        "status": run.status,
        "source": run.source,
        "started_at": queries.iso(run.started_at),
        "finished_at": queries.iso(run.finished_at),
        "host": run.host,
        "probe_version": run.probe_version,
        "schema_version": run.schema_version,
        "report_hash": run.report_hash,
        "triton_version": run.triton_version,
        "image_digest": run.image_digest,
        "profilers": run.profilers,
        "cli_backends": run.cli_backends,
        "error": run.error,
    }


def get_run(s: Any, run_id: int) -> m.Run:
    if run_id > MAX_ID:
        raise ApiError(404, "not_found", f"no run #{run_id} in the store")
    return queries.get_run(s, run_id)


def parsed_report(run: m.Run) -> dict[str, Any] | None:
    if run.report is None:
        return None
    data = json.loads(run.report.raw)
    return data if isinstance(data, dict) else None


def mode_groups(report: dict[str, Any] | None, verdicts: list[survey_verdicts.ModeVerdict]) -> list[dict[str, Any]]:
    """The report's mode entries grouped per (backend, mode): the live check, its
    stub rerun and the inherited-environment check side by side, with the verdict."""
    if not report:
        return []
    by_key = {(v.backend, v.mode): v for v in verdicts}
    captures = {(c.get("backend"), c.get("mode")): c for c in report.get("captures", [])}
    groups: dict[tuple[str, str | None], dict[str, Any]] = {}
    for e in report.get("modes", []):
        key = (e.get("backend"), e.get("mode"))
        g = groups.setdefault(key, {"backend": key[0], "mode": key[1], "verdict": by_key.get(key),
                                    "capture": captures.get(key), "entries": []})
        g["entries"].append(e)
    for g in groups.values():
        g["entries"].sort(key=lambda e: (e.get("env") != "clean", bool(e.get("stub"))))
    return sorted(groups.values(), key=lambda g: (survey_verdicts.BACKEND_ORDER.get(g["backend"], 99),
                                                  survey_verdicts.MODE_ORDER.get(g["mode"], 9)))


def run_view(request: Request, fmt: str, run_id: int) -> Resource:
    with request.app.state.store.session() as s:
        run = get_run(s, run_id)
        verdicts = survey_verdicts.run_verdicts(run) if run.status == "complete" else []
        report = parsed_report(run)
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
        ctx = {
            "title": f"Run #{run.id} of {run.candidate.name}",
            "run": summary,
            "candidate": {"name": run.candidate.name, "label": run.candidate.label},
            "provenance": data["provenance"],
            "environment": environment,
            "report": report,
            "groups": mode_groups(report, verdicts),
            "report_raw": run.report.raw if run.report is not None else None,
        }
    return Resource(data, "run.html", ctx, rows=rows, columns=MODE_COLUMNS)


def raw_report(request: Request, run_id: int) -> Response:
    """The probe report exactly as it was received (e.g. to ingest it elsewhere)."""
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
