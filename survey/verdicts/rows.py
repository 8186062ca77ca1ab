"""The matrix rows as a contract: one row per environment x platform x backend x
mode, the same snake_case keys on every row, declared once, here.

``survey.verdicts.matrix.matrix`` builds its rows with these keys (:data:`FIELDS`,
in this order); ``survey table --format json|csv`` prints them (a test validates them against
the published schema); ``/matrix.json|csv`` serves them and its OpenAPI
document describes them with :class:`MatrixRow`;
``schema/matrix-rows.v1.schema.json`` is generated from it and kept in step by a
test. A (candidate, platform) with no complete run is one row with its status and
no backend, mode or outcome.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema

from probes import outcomes as O
from survey.verdicts.modes import Acceptance
from survey.verdicts.verdict import Verdict

SCHEMA_ID = "https://proton-survey.invalid/schema/matrix-rows.v1.schema.json"

Outcome = Literal[O.OUTCOMES]  # type: ignore[valid-type]  # the probe's tuple, spelled once
Backend = Literal[O.BACKENDS]  # type: ignore[valid-type]


# The published schema (schema/matrix-rows.v1.schema.json) spells the enum in place.
_INLINE_ENUM = WithJsonSchema({"enum": [str(a) for a in Acceptance], "type": "string"})
_HERE_ENUM = WithJsonSchema({"enum": [str(v) for v in Verdict], "type": "string"})


class MatrixRow(BaseModel):
    """One check of one environment on one platform (or one environment without evidence)."""

    model_config = ConfigDict(extra="forbid")

    candidate: str = Field(description="the candidate's name (its catalog key)")
    label: str = Field(description="the candidate's docs label (Markdown: `code` in backticks)")
    kind: str = Field(description="how it is obtained: pip, python, image, or ingested")
    scope: Literal["catalog", "adhoc"] = Field(description="catalog: published; adhoc: checked by path or image")
    platform: str | None = Field(description="the platform key, e.g. nvidia:sm_90:NVIDIA H200; null: none yet")
    platform_label: str = Field(description="the platform in words")
    status: Literal["measured", "unobtainable", "failed", "not_probed"] = Field(
        description="measured: a complete run is the evidence; otherwise why there is none")
    triton_version: str | None = Field(description="the Triton release the run found (null: none)")
    environment: str | None = Field(description="the environment, in words")
    backend: Backend | None = Field(description="the Proton backend checked")
    mode: str | None = Field(description="the mode's label: `none` for no mode")
    mode_arg: str | None = Field(description="the mode as passed to proton.start (null: no mode)")
    outcome: Outcome | None = Field(description="the live check's outcome")
    verdict: Annotated[Acceptance, _INLINE_ENUM] | None = Field(
        title="Verdict", description="what the build does with the mode: accepted, refused, absent (no such backend), "
                                     "unknown (not answered here)")
    verdict_source: Literal["live", "stub"] | None = Field(
        description="live, or stub: answered through a stub library (stub-derived, never a live result)")
    here: Annotated[Verdict, _HERE_ENUM] | None = Field(
        title="Here", description="will it run in this environment, on this platform? (survey check's verdict: "
                    "survey.verdicts.vocabulary.HERE)")
    cause: str | None = Field(description="why it cannot run, or why there is not enough evidence (survey check's "
                                          "cause; null when it runs)")
    stub_outcome: Outcome | None = Field(
        description="the outcome through the stub library, where one was used")
    library: str | None = Field(description="the library that did not load, where one did not")
    reason: str | None = Field(description="the verdict's reason, in words")
    capture_outcome: Outcome | None = Field(description="the GELU capture's outcome")
    capture_kernel_count: int | None = Field(description="kernel launches the capture recorded")
    capture_gpu_time_ns: float | None = Field(description="GPU time the capture recorded, in nanoseconds")
    run_id: int | None = Field(description="the run that is the evidence (or the last failed attempt)")
    date: str | None = Field(description="when the evidence was recorded (ISO 8601)")
    image_digest: str | None = Field(description="the image's digest, for an image")
    evidence: str | None = Field(description="the run's path in the service, e.g. /runs/4")
    last_attempt: str | None = Field(description="the status of a later attempt that did not complete")
    error: str | None = Field(description="why there is no evidence, in one line")
    tries: int | None = Field(description="attempts that failed the same way")


FIELDS = list(MatrixRow.model_fields)
EMPTY: dict[str, Any] = dict.fromkeys(FIELDS)  # a row with every key: a matrix row starts as this
_ROWS = TypeAdapter(list[MatrixRow])


def json_schema() -> dict[str, Any]:
    schema = _ROWS.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "proton-survey matrix rows, version 1 (survey table --format json)"
    return schema
