"""The probe report (schema version 1) as typed models.

This is the one contract every layer reads. ``schema/probe-report.v1.schema.json``
is generated from these models (``survey schema``) and a test keeps the committed
file in step; changing the shape means a new ``SCHEMA_VERSION`` and a migration.
The vocabularies are spelled out here for the type checker and tested against
``probes.outcomes``, which is where the probe takes them from.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from probes import SCHEMA_VERSION

Outcome = Literal[
    "ok",
    "unknown_backend",
    "unsupported_mode",
    "library_missing",
    "no_gpu",
    "devices_env_rejected",
    "disabled",
    "crash",
    "timeout",
    "error",
    "self_check_failed",
    "hang_after_capture",
    "empty_capture",
]
Backend = Literal["cupti", "roctracer", "rocprofiler", "instrumentation"]
FactStatus = Literal["found", "absent", "failed"]
EnvKind = Literal["clean", "inherited"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Open(BaseModel):
    """Raw evidence whose inner shape is the environment's, not ours."""

    model_config = ConfigDict(extra="allow")


class ProbeInfo(Strict):
    version: str
    started_at: str
    finished_at: str
    duration_s: float
    timeout_s: float
    jobs: int
    isolation: str
    interpreters_started: int
    forked_checks: int = 0
    argv: list[str] = Field(default_factory=list)


class Fact(Open):
    status: FactStatus
    error: str | None = None


class Distribution(Strict):
    name: str
    version: str | None


class TritonFact(Fact):
    distribution: str | None = None
    version: str | None = None
    package_dir: str | None = None
    libproton: str | None = None


class TorchFact(Fact):
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    imported: dict[str, Any] | None = Field(
        default=None, description="torch imported for real, after triton.profiler, in the inspect worker"
    )


class RocmFact(Fact):
    layout: str | None = None


class GpuFact(Fact):
    vendors: list[str] = Field(default_factory=list)


class Variable(Strict):
    name: str
    value: str
    controlled: bool


class Environment(Strict):
    python: Fact
    platform: Fact
    triton: TritonFact
    torch: TorchFact
    rocm: RocmFact
    gpu: GpuFact
    variables: list[Variable]
    distributions: list[Distribution]
    distributions_error: str | None = None


class Knob(Strict):
    attr: str
    variable: str | None
    value: str | None
    from_env: bool


class Registry(Strict):
    status: str | None
    profilers: list[str] | None
    cli_backends: list[str] | None
    note: str | None = None
    cli: dict[str, Any] = Field(default_factory=dict)
    knobs: list[Knob] = Field(default_factory=list)
    triton_import: dict[str, Any] = Field(default_factory=dict)


class ModeResult(Strict):
    backend: str
    mode: str | None
    env: EnvKind
    call: str
    argv: list[str]
    stub: bool
    outcome: Outcome
    rule: str | None
    library: str | None
    signal: str | None
    exc_type: str | None
    message: str | None
    exit_code: int | None
    timed_out: bool
    hung_at_exit: bool
    duration_s: float
    last_phase: str | None
    stderr_tail: str
    stdout_tail: str
    traceback_tail: list[str] | None
    overrides: dict[str, str]
    stubs_mapped: list[str]
    stub_for: str | None = None
    finalize_error: str | None = None


class Candidate(Strict):
    path: str
    file: str
    where: str


class LibraryResult(Strict):
    name: str
    backends: list[str]
    dlopen: str | None
    via: str | None
    loads: bool | None
    loaded_path: str | None
    error: str | None
    candidates: list[Candidate]
    versioned_only: bool
    ld_cache_read: bool
    fix: str | None


class HatchetKernel(Strict):
    name: str
    count: int
    time_ns: float


class HatchetMetrics(Strict):
    kernel_count: int
    gpu_time_ns: float
    top_kernel: str | None
    top_kernel_time_ns: float | None
    kernels: list[HatchetKernel]


class Artifact(Strict):
    file: str
    bytes: int
    sha256: str
    kept: bool
    content: str | None
    metrics: HatchetMetrics | None = None
    parse_error: str | None = None
    saved_to: str | None = None


class CaptureResult(Strict):
    backend: str | None
    mode: str | None
    env: EnvKind
    argv: list[str]
    outcome: Outcome
    exit_code: int | None
    signal: str | None
    message: str | None
    fix: str | None
    max_abs_err: float | None
    loop_s: float | None
    size: int
    iters: int
    device: str | None
    duration_s: float
    timed_out: bool
    stdout_tail: str
    stderr_tail: str
    artifact: Artifact | None
    kernel_count: int | None
    gpu_time_ns: float | None
    top_kernel: str | None
    top_kernel_time_ns: float | None


class Stubs(Open):
    status: FactStatus
    libraries: list[str] = Field(default_factory=list)
    reason: str | None = None


class Report(Strict):
    """One probe run inside one environment."""

    schema_version: Literal[1]
    probe: ProbeInfo
    environment: Environment
    registry: Registry
    modes: list[ModeResult]
    libraries: list[LibraryResult]
    captures: list[CaptureResult]
    stubs: Stubs
    sections: dict[str, dict[str, Any]]


assert SCHEMA_VERSION == 1, "bump the Report model and add a migration with the schema version"


class ReportError(ValueError):
    """A report that is not valid JSON or does not match the schema.

    ``field`` names the first failing field in dotted form (``modes.3.outcome``).
    """

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def report_hash(data: Any) -> str:
    """Identity of a report: sha256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(data)).hexdigest()


def parse_report(raw: bytes | str) -> tuple[Report, dict[str, Any]]:
    """Parse and validate; returns the model and the verbatim JSON object."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ReportError(f"not JSON: {e}") from e
    if not isinstance(data, dict):
        raise ReportError("a probe report is a JSON object", field="(root)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ReportError(
            f"schema_version is {version!r}; this proton-survey reads version {SCHEMA_VERSION}",
            field="schema_version",
        )
    try:
        return Report.model_validate(data), data
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        raise ReportError(f"{loc}: {err['msg']} (and {e.error_count() - 1} more)" if e.error_count() > 1
                          else f"{loc}: {err['msg']}", field=loc) from e


def json_schema() -> dict[str, Any]:
    schema = Report.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://proton-survey.invalid/schema/probe-report.v1.schema.json"
    schema["title"] = "proton-survey probe report, schema version 1"
    return schema
