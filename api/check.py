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

from api import formats
from api.errors import ApiError
from api.formats import Resource
from api.schemas import ERRORS, CheckResponse
from probes import outcomes as O
from survey import check as survey_check
from survey import exitcodes, queries, targets
from survey.check import CheckResult

COLUMNS = ["target", "backend", "mode", "exit_code", "verdict", "cause", "reason", "fix", "details", "candidate",
           "platform", "run_id", "live_outcome", "evidence_date", "evidence_age"]


def _command(target: str, backend: str, mode: str | None) -> str:
    cmd = f"survey check {shlex.quote(target)} --backend {shlex.quote(backend)}"
    return cmd + (f" --mode {shlex.quote(mode)}" if mode else "")


def answer(s: Any, target: str, backend: str, mode: str | None, platform: str | None = None) -> dict[str, Any]:
    """From stored evidence only, through the CLI's own resolver (survey.targets)."""
    name = targets.stored_candidate(s, target)
    if name is not None:
        return survey_check.check_stored(s, name, target, backend, mode, platform).as_dict()
    fix = (f"run `{_command(target, backend, queries.mode_label(mode) if mode else None)}` on a host that can "
           "probe it (it probes the target and stores the evidence), or run `survey probe` there and upload the "
           "report (POST /runs)")
    return CheckResult(exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence", "not_probed",
                       f"no stored evidence for {target!r}", fix, target, backend, mode).as_dict()


def check_view(
    request: Request,
    fmt: str,
    target: Annotated[str | None, Query(description="a candidate name, an interpreter path or an image")] = None,
    backend: Annotated[str | None, Query(description="the Proton backend: " + ", ".join(O.BACKENDS))] = None,
    mode: Annotated[str | None, Query(description="its mode (empty or `none`: no mode)")] = None,
    platform: Annotated[str | None, Query(description="the platform whose evidence answers (a key, or a part "
                                                      "of one: sm_90, gfx942); needed when there are several")]
    = None,
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
        result = answer(s, target, backend, queries.mode_from_label(mode), platform)
    ctx.update(title=f"Check {target}: {backend} {queries.mode_label(result['mode'])}", result=result)
    row = {**result, "mode": queries.mode_label(result["mode"])}
    return Resource(result, "check.html", ctx, rows=[row], columns=COLUMNS)


def routes(router: APIRouter) -> None:
    formats.add_resource(
        router, "/check", check_view, name="check",
        summary="Will a run with this backend and mode work in TARGET? (stored evidence only)",
        json_model=CheckResponse, errors={422: ERRORS[422]},
        descriptions={"json": "the CheckResult of `survey check --json`, plus the stored candidate that answered"},
    )
