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

from fastapi import APIRouter, Query, Request

from api import cache as cache_mod
from api import formats
from api.cache import Entry
from api.errors import ApiError
from api.formats import Resource
from api.schemas import ERRORS
from api.shared import MODE_LABELS, backend_and_mode, stored_names
from db import widths
from probes import outcomes as O
from survey.environments import catalog as catalog_mod
from survey.environments import targets
from survey.evidence import queries
from survey.flows import check as survey_check
from survey.verdicts.verdict import Cause, CheckResult, Verdict

COLUMNS = ["target", "backend", "mode", "exit_code", "verdict", "cause", "reason", "fix", "details", "candidate",
           "platform", "run_id", "live_outcome", "evidence_date", "evidence_age"]


def _command(target: str, backend: str, mode: str | None) -> str:
    cmd = f"survey check {shlex.quote(target)} --backend {shlex.quote(backend)}"
    return cmd + (f" --mode {shlex.quote(mode)}" if mode else "")


def answer(s: Any, target: str, backend: str, mode: str | None, platform: str | None = None) -> dict[str, Any]:
    """From stored evidence only, through the CLI's own resolver (survey.environments.targets):
    a target the CLI would refuse (a name that is nothing) is refused here too (404)."""
    name = targets.stored_candidate(s, target)
    if name is not None:
        return survey_check.check_stored(s, name, target, backend, mode, platform).as_dict()
    targets.kind_of(s, target, catalog_mod.load())  # a name that names nothing: 404, as for /diff and /candidates
    fix = (f"run `{_command(target, backend, queries.mode_label(mode) if mode else None)}` on a host that can "
           "probe it (it probes the target and stores the evidence), or run `survey probe` there and upload the "
           "report (POST /runs)")
    return CheckResult(verdict=Verdict.NOT_ENOUGH_EVIDENCE, cause=Cause.NOT_PROBED,
                       reason=f"no stored evidence for {target!r}", fix=fix, target=target, backend=backend,
                       mode=mode).as_dict()


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
    return {**result, "evidence_age": queries.age_text(when)}


def answer_in(store: Any, target: str, backend: str, mode: str | None, platform: str | None) -> dict[str, Any]:
    with store.session() as s:
        return answer(s, target, backend, mode, platform)


async def check_view(
    request: Request,
    fmt: str,
    target: Annotated[str, Query(description="a candidate name, an interpreter path or an image",
                                 json_schema_extra={"minLength": 1, "maxLength": MAX_TARGET})] = "",
    backend: Annotated[str, Query(description="the Proton backend",
                                  json_schema_extra={"enum": list(O.BACKENDS)})] = "",
    mode: Annotated[str, Query(description="its mode (empty or `none`: no mode)",
                               json_schema_extra={"enum": ["", *MODE_LABELS]})] = "",
    platform: Annotated[str, Query(description="the platform whose evidence answers (a key, or a part of one: "
                                               "sm_90, gfx942); needed when there are several",
                                   json_schema_extra={"maxLength": widths.PLATFORM_KEY})] = "",
    if_none_match: cache_mod.IfNoneMatch = None,
) -> Any:
    form = {"target": target, "backend": backend, "mode": mode}
    ctx: dict[str, Any] = {"title": "Check", "form": form, "result": None, "modes": MODE_LABELS, "names": []}
    if fmt == formats.HTML:  # the form offers the stored candidates
        ctx["names"] = await cache_mod.memo(request, await cache_mod.version(request), ("names",),
                                            lambda: stored_names(request.app.state.store))
    if fmt == formats.HTML and not target and not backend:  # the empty form: no other format answers it
        return Resource(None, "check.html", {**ctx, "formats": None})
    if not target:
        raise ApiError(422, "invalid_input", "target: which environment? ?target=NAME", field="target")
    if len(target) > MAX_TARGET:
        raise ApiError(422, "invalid_input", f"target: at most {MAX_TARGET} characters", field="target")
    the_mode = backend_and_mode(backend, mode)
    store = request.app.state.store
    version = await cache_mod.version(request)
    if len(platform) > widths.PLATFORM_KEY:
        raise ApiError(422, "invalid_input", f"platform: at most {widths.PLATFORM_KEY} characters", field="platform")
    result = with_age(await cache_mod.memo(request, version, ("check", target, backend, the_mode, platform),
                                           lambda: answer_in(store, target, backend, the_mode, platform or None)))
    ctx.update(title=f"Check {target}: {backend} {queries.mode_label(result['mode'])}", result=result)
    row = {**result, "mode": queries.mode_label(result["mode"])}
    res = Resource(result, "check.html", ctx, rows=[row], columns=COLUMNS, cut_cells=False)
    entry = Entry.of(formats.body(res, fmt, request), formats.MEDIA_TYPES[fmt])
    return cache_mod.answer(request, version, entry, if_none_match, replay=False)  # the age moves with the clock


def routes(router: APIRouter) -> None:
    formats.add_resource(
        router, "/check", check_view, name="check",
        summary="Will a run with this backend and mode work in TARGET? (stored evidence only)",
        json_model=CheckResult,
        errors={404: ERRORS[404], 422: ERRORS[422], 304: {"description": "If-None-Match matched: unchanged"}},
        required=("target", "backend"),
        descriptions={"json": "the CheckResult of `survey check --json`, plus the stored candidate that answered"},
    )
