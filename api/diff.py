"""``/diff?a=&b=``: what changed between two runs (or two candidates' latest
complete runs), as ``survey diff`` says it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from api import formats
from api.errors import ApiError
from api.formats import Resource
from api.schemas import ERRORS, DiffResponse
from api.shared import MAX_ID
from survey.core.errors import UnknownTarget
from survey.evidence import queries
from survey.verdicts import diff as survey_diff

SECTIONS = ("verdicts", "environment", "modes", "libraries", "captures")
COLUMNS = ["section", "key", "a", "b"]
REF_DOC = "a run (`12`, `#12`, `run:12`) or a candidate name (its latest complete run)"


def _resolve(s: Any, ref: str, field: str) -> Any:
    digits = ref.strip().removeprefix("run:").removeprefix("#")
    if digits.isascii() and digits.isdigit() and int(digits) > MAX_ID:
        raise ApiError(404, "not_found", f"no run #{digits} in the store", field=field)
    try:
        return queries.resolve_ref(s, ref)
    except UnknownTarget as e:
        raise ApiError(404, "not_found", e.message, field=field, hint=e.hint)


def diff_view(
    request: Request,
    fmt: str,
    a: Annotated[str, Query(description=REF_DOC, json_schema_extra={"minLength": 1})] = "",
    b: Annotated[str, Query(description=REF_DOC, json_schema_extra={"minLength": 1})] = "",
) -> Resource:
    if not a or not b:
        if fmt == formats.HTML and not a and not b:  # the empty form
            return Resource(None, "diff.html", {"title": "Diff", "diff": None, "a": "", "b": "", "formats": None})
        missing = "a" if not a else "b"
        raise ApiError(422, "invalid_input", f"{missing}: give two runs or candidates, ?a=...&b=...", field=missing)
    with request.app.state.store.session() as s:
        d = survey_diff.diff_runs(_resolve(s, a, "a"), _resolve(s, b, "b"))
    rows = [{"section": "fields", "key": k, "a": v["a"], "b": v["b"]} for k, v in d["fields"].items()]
    for section in SECTIONS:
        rows += [{"section": section, **c} for c in d[section]]
    ctx = {"title": f"Diff {a} → {b}", "diff": d, "a": a, "b": b, "sections": SECTIONS}
    return Resource(d, "diff.html", ctx, rows=rows, columns=COLUMNS)


def routes(router: APIRouter) -> None:
    formats.add_resource(router, "/diff", diff_view, name="diff", summary="What changed between two runs",
                         json_model=DiffResponse, errors={404: ERRORS[404], 422: ERRORS[422]}, required=("a", "b"),
                         descriptions={"csv": "one row per change (section, key, a, b)",
                                       "md": "one row per change (section, key, a, b)"})
