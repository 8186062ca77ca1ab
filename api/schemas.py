"""Response models, for the OpenAPI document (``/docs``, ``/openapi.json``).

Bodies are built as plain dicts by the views (most mirror ``survey.verdicts``);
these models describe them. Evidence fields are open (``extra="allow"``): their
shape is the probe report's, see ``/schema.json``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from survey.verdicts.modes import Acceptance
from survey.verdicts.rows import MatrixRow


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(BaseModel):
    status: int = Field(description="the HTTP status, repeated")
    code: str = Field(description="a stable machine-readable code: not_found, invalid_report, unauthorized, ...")
    message: str
    field: str | None = Field(None, description="the failing field, dotted (modes.3.outcome), when there is one")
    hint: str | None = Field(None, description="what to do about it, when known")


class ErrorResponse(BaseModel):
    error: ErrorBody


ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "no such resource"},
    422: {"model": ErrorResponse, "description": "a parameter is invalid (`field` names it)"},
}


class MatrixResponse(BaseModel):
    matrix_version: str
    filters: dict[str, str | None] = Field(description="the filters applied (null: any)")
    scope: str = Field(description="catalog (what the docs publish) or all (ad-hoc evidence too)")
    count: int = Field(description="rows on this page")
    total: int = Field(description="(candidate, platform) rows of the grid in all pages")
    next: int | None = Field(description="`_next` of the following page; null on the last page")
    next_url: str | None = Field(description="the following page; null on the last page")
    rows: list[MatrixRow]


class CandidatesResponse(BaseModel):
    candidates: list[Open] = Field(description="one page of candidates, in catalog order")
    total: int = Field(description="how many candidates are stored")
    next: int | None = Field(description="`_next` of the following page; null on the last page")
    next_url: str | None = Field(description="the following page; null on the last page")


class CandidateResponse(BaseModel):
    candidate: Open
    latest: Open | None
    last_attempt: Open | None = Field(description="the newest run, whatever its status")
    runs: list[Open] = Field(description="one page of the candidate's runs, newest first")
    runs_total: int = Field(description="how many runs the candidate has")
    next: int | None = Field(description="`_next` of the following page of runs; null on the last page")
    next_url: str | None = Field(description="the following page of runs; null on the last page")


class RunResponse(BaseModel):
    run: Open
    provenance: Open | None
    verdicts: list[Open]
    environment: Open | None
    report: dict[str, Any] | None = Field(description="the probe report as stored, parsed (see /schema.json)")


class HistoryRow(BaseModel):
    run_id: int
    date: str | None = Field(description="when the run finished (ISO 8601)")
    status: Literal["complete", "unobtainable", "failed"]
    platform: str | None = Field(description="the platform key the run was on")
    triton_version: str | None
    environment: str | None = Field(description="the environment, in words (complete runs)")
    outcome: str | None = Field(description="the live check's outcome (complete runs that checked this cell)")
    attempts: str | None = Field(None, description="what this run's attempts of the live check said, per outcome "
                                                    "(`crash x4, library_missing x2`)")
    published: str | None = Field(None, description="the outcome published for this run's environment: "
                                                     "`unstable` once any of its runs disagreed (the matrix's)")
    verdict: Acceptance | None
    verdict_source: Literal["live", "stub"] | None
    stub_outcome: str | None
    reason: str | None
    library: str | None = Field(description="the library that did not load, where one did not")
    changed: bool | None = Field(description="the (outcome, verdict) differs from the previous complete run's on "
                                             "the same platform (null: not a complete run, or the first)")
    error: str | None = Field(description="why the run says nothing of this cell")
    tries: int | None = Field(description="attempts that failed the same way (runs that did not complete)")
    evidence: str = Field(description="the run's path")


class HistoryResponse(BaseModel):
    candidate: str
    label: str
    backend: str
    mode: str = Field(description="the mode's label; `none` is no mode")
    platform: str | None = Field(description="the platform filter (null: every platform)")
    changes: int = Field(description="complete runs whose answer differs from the previous one's")
    total: int = Field(description="runs in all pages")
    next: int | None = Field(description="`_next` of the following page; null on the last page")
    next_url: str | None = Field(description="the following page; null on the last page")
    runs: list[HistoryRow] = Field(description="one page of runs, newest first")


class DiffResponse(Open):
    a: Open
    b: Open
    same: bool


class UploadResponse(BaseModel):
    run_id: int
    created: bool = Field(description="false: this exact report was already stored (nothing was added)")
    candidate: str = Field(description="the candidate the run is stored under")
    url: str
    note: str | None = Field(description="for a duplicate: where it is already stored, and that the candidate "
                                         "asked for was not used; null for a new run")


class Health(BaseModel):
    status: str = Field(description="`ok`, or `degraded` when the last call to the store failed")
    schema_revision: str
    matrix_version: str | None = Field(description="the last matrix version read (none yet: null)")
    store: str = Field(description="`ok`, or what the last call to the store found, in one line")
