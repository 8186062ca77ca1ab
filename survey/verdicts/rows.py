"""The matrix rows as a contract: one row per environment x platform x backend x
mode, the same snake_case keys on every row.

``survey table --format json|csv`` print these rows (``/matrix.json`` serves
the rows of ``survey.verdicts.matrix.matrix``, which ``tidy`` completes to this shape);
``schema/matrix-rows.v1.schema.json`` is generated from ``MatrixRow`` and kept
in step by a test. A (candidate, platform) with no complete run is one row with
its status and no backend, mode or outcome.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from probes import outcomes as O

SCHEMA_ID = "https://proton-survey.invalid/schema/matrix-rows.v1.schema.json"

Outcome = Literal[O.OUTCOMES]  # type: ignore[valid-type]
Backend = Literal[O.BACKENDS]  # type: ignore[valid-type]


class MatrixRow(BaseModel):
    """One check of one environment on one platform (or one environment without evidence)."""

    model_config = ConfigDict(extra="forbid")

    candidate: str = Field(description="the candidate's name (its catalog key)")
    label: str = Field(description="the candidate's docs label (Markdown: `code` in backticks)")
    kind: str = Field(description="how it is obtained: pip, python, image, or ingested")
    scope: Literal["catalog", "adhoc"] = Field(description="catalog: published; adhoc: checked by path or image")
    platform: str | None = Field(description="the platform key, e.g. nvidia:sm_90:NVIDIA H200; null: none yet")
    platform_label: str = Field(description="the platform in words")
    status: Literal["measured", "unobtainable", "failed", "not_probed"]
    triton_version: str | None
    environment: str | None = Field(description="the environment, in words")
    backend: Backend | None  # type: ignore[valid-type]
    mode: str | None = Field(description="the mode's label: `none` for no mode")
    mode_arg: str | None = Field(description="the mode as passed to proton.start (null: no mode)")
    outcome: Outcome | None = Field(description="the live check's outcome")  # type: ignore[valid-type]
    verdict: Literal["accepted", "refused", "absent", "unknown"] | None
    verdict_source: Literal["live", "stub"] | None = Field(description="stub: answered through a stub library")
    stub_outcome: Outcome | None  # type: ignore[valid-type]
    library: str | None = Field(description="the library that did not load, where one did not")
    reason: str | None
    capture_outcome: Outcome | None  # type: ignore[valid-type]
    capture_kernel_count: int | None
    capture_gpu_time_ns: float | None
    run_id: int | None = Field(description="the run that is the evidence (or the last failed attempt)")
    date: str | None = Field(description="ISO 8601")
    image_digest: str | None
    evidence: str | None = Field(description="the run's path in the service, e.g. /runs/4")
    last_attempt: str | None = Field(description="the status of a later attempt that did not complete")
    error: str | None = Field(description="why there is no evidence, in one line")
    tries: int | None = Field(description="attempts that failed the same way")


FIELDS = list(MatrixRow.model_fields)
_ROWS = TypeAdapter(list[MatrixRow])


def tidy(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``survey.verdicts.matrix.matrix`` rows with every key on every row, validated."""
    return [MatrixRow.model_validate({k: r.get(k) for k in FIELDS}).model_dump(mode="json") for r in rows]


def to_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, indent=1, ensure_ascii=False) + "\n"


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if r.get(k) is None else r[k] for k in FIELDS})
    return buf.getvalue()


def json_schema() -> dict[str, Any]:
    schema = _ROWS.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "proton-survey matrix rows, version 1 (survey table --format json)"
    return schema
