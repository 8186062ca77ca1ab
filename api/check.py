"""``/check?target=&backend=&mode=``: the verdict, reason and fix of ``survey
check``, from stored evidence only (the service never probes anything).

The target is a candidate name; ad-hoc targets are stored by ``survey check``
and ``survey probe --store`` as ``python:/path`` and ``image:ref``, so those
names are tried too. Without evidence the answer is ``not_enough_evidence``
(exit code 3) and says where to get some.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy import select

from api import formats
from api.errors import ApiError
from api.formats import Resource
from api.schemas import ERRORS, CheckResponse
from db import models as m
from probes import outcomes as O
from survey import evidence, exitcodes
from survey.evidence import CheckResult

COLUMNS = ["target", "backend", "mode", "exit_code", "verdict", "reason", "fix", "details", "candidate", "run_id",
           "outcome", "evidence_date", "evidence_age"]


def names_for(target: str) -> list[str]:
    return [target, f"python:{target}", f"image:{target}"]


def _command(target: str, backend: str, mode: str | None) -> str:
    cmd = f"survey check {shlex.quote(target)} --backend {shlex.quote(backend)}"
    return cmd + (f" --mode {shlex.quote(mode)}" if mode else "")


def answer(s: Any, target: str, backend: str, mode: str | None) -> dict[str, Any]:
    tried: list[m.Candidate] = []
    for name in names_for(target):
        cand = s.scalar(select(m.Candidate).where(m.Candidate.name == name))
        if cand is None:
            continue
        run = evidence.latest_complete(s, cand.id)
        if run is not None:
            res = evidence.check_run(s, run, target, backend, mode)
            return {**res.as_dict(), "candidate": cand.name}
        tried.append(cand)
    reason = f"no stored evidence for {target!r}"
    for cand in tried:
        last = max(cand.runs, key=lambda r: r.id, default=None)
        if last is not None:
            first = (last.error or "").strip().splitlines()
            reason += (f"; candidate {cand.name!r} was last tried {evidence.iso(last.finished_at)}: {last.status}"
                       + (f" ({first[-1][:200]})" if first else ""))
    fix = (f"run `{_command(target, backend, evidence.mode_label(mode) if mode else None)}` on a host that can "
           "probe it (it probes the target and stores the evidence), or run `survey probe` there and upload the "
           "report (POST /runs)")
    res = CheckResult(exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence", reason, fix, target, backend, mode)
    return {**res.as_dict(), "candidate": tried[0].name if tried else None}


def check_view(
    request: Request,
    fmt: str,
    target: Annotated[str | None, Query(description="a candidate name, an interpreter path or an image")] = None,
    backend: Annotated[str | None, Query(description="the Proton backend: " + ", ".join(O.BACKENDS))] = None,
    mode: Annotated[str | None, Query(description="its mode (empty or `none`: no mode)")] = None,
) -> Resource:
    form = {"target": target or "", "backend": backend or "", "mode": mode or ""}
    ctx: dict[str, Any] = {"title": "Check", "form": form, "result": None}
    if fmt == formats.HTML and not target and not backend:
        return Resource(None, "check.html", ctx)
    if not target:
        raise ApiError(422, "invalid_input", "target: which environment? ?target=NAME", field="target")
    if not backend:
        raise ApiError(422, "invalid_input", "backend: which Proton backend? ?backend=" + "|".join(O.BACKENDS),
                       field="backend")
    if backend not in O.BACKENDS:
        raise ApiError(422, "invalid_input", f"unknown backend {backend!r}; one of {', '.join(O.BACKENDS)}",
                       field="backend")
    with request.app.state.store.session() as s:
        result = answer(s, target, backend, evidence.mode_from_label(mode))
    ctx.update(title=f"Check {target}: {backend} {evidence.mode_label(result['mode'])}", result=result)
    row = {**result, "mode": evidence.mode_label(result["mode"])}
    return Resource(result, "check.html", ctx, rows=[row], columns=COLUMNS)


def routes(router: APIRouter) -> None:
    formats.add_resource(
        router, "/check", check_view, name="check",
        summary="Will a run with this backend and mode work in TARGET? (stored evidence only)",
        json_model=CheckResponse, errors={422: ERRORS[422]},
        descriptions={"json": "the CheckResult of `survey check --json`, plus the stored candidate that answered"},
    )
