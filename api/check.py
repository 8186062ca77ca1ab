"""``/check?target=&backend=&mode=``: the verdict, reason and fix of ``survey
check``, from stored evidence only (the service never probes anything).

The target is a candidate name; ad-hoc targets are stored by ``survey check``
and ``survey probe --store`` as ``python:/path`` and ``image:ref``, so those
names are tried too. Without evidence the answer is ``not_enough_evidence``
(exit code 3) and says where to get some.

The answer changes only when evidence arrives, so it is cached per matrix
version (:mod:`api.cache`); only its ``evidence_age`` is worked out anew for
each request. ``target`` and ``backend`` are required (the bare HTML path
without them is the empty form); ``backend`` and ``mode`` are checked against
the known values (422 listing them).
"""

from __future__ import annotations

import datetime as dt
import shlex
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from sqlalchemy import select

from api import cache as cache_mod
from api import formats
from api.cache import Entry
from api.errors import ApiError
from api.formats import Resource
from api.matrix import MODE_LABELS, one_of
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


MAX_TARGET = 4096


def with_age(result: dict[str, Any]) -> dict[str, Any]:
    """The cached answer with the age of its evidence as of now."""
    date = result.get("evidence_date")
    if not date:
        return result
    try:
        when = dt.datetime.fromisoformat(date)
    except ValueError:
        return result
    return {**result, "evidence_age": evidence.age_text(when)}


def answer_in(store: Any, target: str, backend: str, mode: str | None) -> dict[str, Any]:
    with store.session() as s:
        return answer(s, target, backend, mode)


async def check_view(
    request: Request,
    fmt: str,
    target: Annotated[str, Query(description="a candidate name, an interpreter path or an image",
                                 json_schema_extra={"minLength": 1, "maxLength": MAX_TARGET})] = "",
    backend: Annotated[str, Query(description="the Proton backend",
                                  json_schema_extra={"enum": list(O.BACKENDS)})] = "",
    mode: Annotated[str, Query(description="its mode (empty or `none`: no mode)",
                               json_schema_extra={"enum": ["", *MODE_LABELS]})] = "",
    if_none_match: Annotated[str | None, Header(description="an ETag of an earlier answer: 304 if unchanged")]
    = None,
) -> Any:
    form = {"target": target, "backend": backend, "mode": mode}
    ctx: dict[str, Any] = {"title": "Check", "form": form, "result": None}
    if fmt == formats.HTML and not target and not backend:
        return Resource(None, "check.html", ctx)
    if not target:
        raise ApiError(422, "invalid_input", "target: which environment? ?target=NAME", field="target")
    if len(target) > MAX_TARGET:
        raise ApiError(422, "invalid_input", f"target: at most {MAX_TARGET} characters", field="target")
    if not backend:
        raise ApiError(422, "invalid_input", "backend: which Proton backend? ?backend=" + "|".join(O.BACKENDS),
                       field="backend")
    if backend not in O.BACKENDS:
        raise one_of("backend", backend, O.BACKENDS)
    if mode and mode not in MODE_LABELS:
        raise one_of("mode", mode, MODE_LABELS)
    store = request.app.state.store
    version = await cache_mod.version(request)
    the_mode = evidence.mode_from_label(mode or None)
    result = with_age(await cache_mod.memo(request, version, ("check", target, backend, the_mode),
                                           lambda: answer_in(store, target, backend, the_mode)))
    ctx.update(title=f"Check {target}: {backend} {evidence.mode_label(result['mode'])}", result=result)
    row = {**result, "mode": evidence.mode_label(result["mode"])}
    res = Resource(result, "check.html", ctx, rows=[row], columns=COLUMNS)
    return cache_mod.answer(Entry.of(formats.body(res, fmt, request), formats.MEDIA_TYPES[fmt]), if_none_match)


def routes(router: APIRouter) -> None:
    formats.add_resource(
        router, "/check", check_view, name="check",
        summary="Will a run with this backend and mode work in TARGET? (stored evidence only)",
        json_model=CheckResponse,
        errors={422: ERRORS[422], 304: {"description": "If-None-Match matched: unchanged"}},
        required=("target", "backend"),
        descriptions={"json": "the CheckResult of `survey check --json`, plus the stored candidate that answered"},
    )
