"""The probe report (schema version 3; versions 1 and 2 still read) as typed models.

This is the one contract every layer reads. ``schema/probe-report.v3.schema.json``
is generated from these models (``survey schema``) and a test keeps the committed
file in step; changing the shape means a new ``SCHEMA_VERSION`` and a migration.
The vocabularies are spelled out here for the type checker and tested against
``probes.outcomes``, which is where the probe takes them from.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from db import widths
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
    "unstable",
    "self_check_failed",
    "hang_after_capture",
    "empty_capture",
]
Backend = Literal["cupti", "roctracer", "rocprofiler", "instrumentation"]
FactStatus = Literal["found", "absent", "failed"]
EnvKind = Literal["clean", "inherited"]


MAX_INT = 2**53 - 1  # I-JSON (RFC 7493): integers every JSON reader holds exactly
# Every integer the schema types is held to bounds, by the models themselves: 32 bits for
# those stored in 32-bit columns (PostgreSQL INTEGER), +-MAX_INT for the rest. Free-form
# evidence (``Any``, ``Open`` models' extra members) is left open.
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
JsonInt = Annotated[int, Field(ge=-MAX_INT, le=MAX_INT)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Open(BaseModel):
    """Raw evidence whose inner shape is the environment's, not ours."""

    model_config = ConfigDict(extra="allow", defer_build=True)


class ProbeInfo(Strict):
    version: str
    repeats: JsonInt | None = None
    started_at: str
    finished_at: str
    duration_s: float
    timeout_s: float
    jobs: JsonInt
    isolation: str
    interpreters_started: JsonInt
    forked_checks: JsonInt = 0
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


class PythonFact(Fact):
    version: str | None = None
    executable: str | None = None
    prefix: str | None = None
    base_prefix: str | None = None


class HostFact(Fact):
    hostname: str | None = None
    machine: str | None = None
    system: str | None = None


class Environment(Strict):
    python: PythonFact
    platform: HostFact
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


class Attempt(Strict):
    outcome: Outcome
    rule: str | None
    signal: str | None
    exc_type: str | None
    message: str | None
    exit_code: Int32 | None
    timed_out: bool
    duration_s: float


class ModeResult(Strict):
    backend: str = Field(max_length=widths.BACKEND)
    mode: str | None = Field(max_length=widths.MODE)
    env: EnvKind
    call: str
    argv: list[str]
    stub: bool
    outcome: Outcome
    rule: str | None = Field(max_length=widths.RULE)
    library: str | None = Field(max_length=widths.LIBRARY)
    signal: str | None = Field(max_length=widths.SIGNAL)
    exc_type: str | None = Field(max_length=widths.EXC_TYPE)
    message: str | None
    exit_code: Int32 | None
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
    attempts: list[Attempt] | None = None
    outcome_counts: dict[str, JsonInt] | None = None


class Candidate(Strict):
    path: str
    file: str
    where: str


class LibraryResult(Strict):
    name: str = Field(max_length=widths.LIBRARY)
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
    count: JsonInt
    time_ns: float


class HatchetMetrics(Strict):
    kernel_count: JsonInt
    gpu_time_ns: float
    top_kernel: str | None
    top_kernel_time_ns: float | None
    kernels: list[HatchetKernel]


class Artifact(Strict):
    file: str
    bytes: Int32
    sha256: str
    kept: bool
    content: str | None
    metrics: HatchetMetrics | None = None
    parse_error: str | None = None
    saved_to: str | None = None


class ProfileFile(Strict):
    name: str
    bytes: JsonInt


class ScopeRecord(Strict):
    kernel: str
    name: str
    cycles: float | None
    normalized_cycles: float | None


class Recorded(Strict):
    """What a capture's profile records, read from the file Proton wrote (schema 3)."""

    format: str | None
    files: list[ProfileFile]
    kernels: list[str]
    launches: JsonInt | None
    scopes: list[ScopeRecord]
    cycle_metrics: list[str]
    pc_samples: JsonInt | None
    trace_events: JsonInt | None
    metric_names: list[str]
    nodes: JsonInt
    parse_error: str | None


class CaptureResult(Strict):
    backend: str | None = Field(max_length=widths.BACKEND)
    mode: str | None = Field(max_length=widths.MODE)
    env: EnvKind
    argv: list[str]
    outcome: Outcome
    exit_code: Int32 | None
    signal: str | None
    message: str | None
    fix: str | None
    max_abs_err: float | None
    loop_s: float | None
    size: JsonInt
    iters: JsonInt
    device: str | None
    duration_s: float
    timed_out: bool
    stdout_tail: str
    stderr_tail: str
    artifact: Artifact | None
    kernel_count: Int32 | None
    gpu_time_ns: float | None
    top_kernel: str | None
    top_kernel_time_ns: float | None
    # schema 3: how the capture was taken, what the payload ran, and what it recorded
    attach: Literal["start", "cli"] = "start"
    context: str | None = Field(default=None, max_length=40)
    data: str | None = Field(default=None, max_length=40)
    rule: str | None = Field(default=None, max_length=80)
    kernel: Literal["plain", "scoped", "mixed"] | None = None
    scopes: dict[str, Any] | None = None
    session_mode: str | None = None
    launches_in_session: JsonInt | None = None
    expected: Literal["kernels", "scopes"] | None = None
    recorded: Recorded | None = None


class OptionResult(Strict):
    """One of Proton's options past the mode, measured by a capture of its own (schema 3)."""

    option: Literal["context", "data", "mode", "cli", "kernels"]
    value: str | None
    capture: CaptureResult


class Stubs(Open):
    status: FactStatus
    libraries: list[str] = Field(default_factory=list)
    reason: str | None = None


class Device(Open):
    index: JsonInt | None = None
    model: str | None = None
    arch: str | None = None


class Platform(Strict):
    """The machine the probe ran on (probes/gpuinfo.py)."""

    key: str
    vendor: Literal["nvidia", "amd", "none"]
    model: str | None
    arch: str | None
    driver: str | None
    runtime: str | None
    devices: list[Device]
    errors: list[str]


class Origin(Strict):
    """Where the report came from, written by the host side (survey/launchers)."""

    kind: Literal["interpreter", "pip", "image", "reported"]
    target: str | None
    identity: dict[str, Any]
    interpreter: dict[str, Any] | None = None
    pip: dict[str, Any] | None = None
    image: dict[str, Any] | None = None
    host: dict[str, Any] | None = None
    recorded_by: str
    recorded_at: str


class Report(Strict):
    """One probe run inside one environment, on one platform."""

    schema_version: Literal[1, 2, 3]
    probe: ProbeInfo
    platform: Platform | None = Field(default=None, description="written by every schema-2 probe; where it is "
                                                                  "absent the platform is derived from "
                                                                  "environment.gpu (vendor only)")
    origin: Origin | None = Field(default=None, description="written by the host side; absent when the probe "
                                                            "was run by hand")
    environment: Environment
    registry: Registry
    modes: list[ModeResult]
    libraries: list[LibraryResult]
    captures: list[CaptureResult]
    options: list[OptionResult] = Field(default_factory=list, description="schema 3: Proton's options past the "
                                                                           "mode, for the backends that started")
    stubs: Stubs
    sections: dict[str, dict[str, Any]]


assert SCHEMA_VERSION == 3, "bump the Report model (and migrate the store if its columns change) with the schema"
READABLE_VERSIONS = (1, 2, 3)
MAX_DEPTH = 64  # deeper than any report the probe writes; deep enough to refuse before recursion fails


class ReportError(ValueError):
    """A report that is not valid JSON or does not match the schema.

    ``field`` names the first failing field in dotted form (``modes.3.outcome``).
    """

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def canonical_json(data: Any) -> bytes:
    """The form a report is hashed and stored in: sorted keys, no spaces, UTF-8."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def report_hash(data: Any) -> str:
    """Identity of a report: sha256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(data)).hexdigest()


def _no_constant(name: str) -> Any:
    raise ReportError(f"{name} is not a JSON number (NaN and Infinity are not allowed)")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ReportError(f"the number {text[:30]} is out of range for a double")
    return value


def decode_text(raw: bytes | str) -> str:
    """UTF-8 text (a leading BOM is dropped); anything else is refused by name."""
    if isinstance(raw, str):
        return raw[1:] if raw.startswith("\ufeff") else raw
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ReportError("the report is UTF-16; a probe report is UTF-8 JSON (convert it, e.g. iconv -t UTF-8)")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        hint = " (it looks like UTF-16)" if b"\x00" in raw[:64] else ""
        raise ReportError(f"not UTF-8 at byte {e.start}{hint}; a probe report is UTF-8 JSON") from e


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def check_values(data: Any, text: str | None = None) -> None:
    """Refuse what JSON allows but no store or page can hold: nesting deeper than
    MAX_DEPTH, integers beyond +-(2**53-1), lone surrogates and NUL in strings.
    Iterative, so a hostile depth cannot exhaust the stack. ``text``: the JSON ``data``
    was read from; when it holds no surrogate, raw or escaped, only the depth is
    walked (the full walk then names what is wrong)."""
    if text is not None and _SURROGATE_ESCAPE.search(text) is None and _encodes(text) and _shallow(data):
        return
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise ReportError(f"nested more than {MAX_DEPTH} levels deep", field=".".join(path[:8]) + ".…")
        if isinstance(value, dict):
            for k, v in value.items():
                _check_string(k, path + (k,))
                stack.append((v, path + (k,)))
        elif isinstance(value, list):
            stack.extend((v, path + (str(i),)) for i, v in enumerate(value))
        elif isinstance(value, str):
            _check_string(value, path)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shallow(data: Any, depth: int = 0) -> bool:
    """No container nested deeper than MAX_DEPTH. Recursive, as deep as MAX_DEPTH at most
    (it stops there): a loop over each container's values, which are mostly not
    containers, costs half what a stack of (value, depth) pairs did (0.12 against 0.26 ms
    on the scale benchmark's reports). ``data`` is what ``json.loads`` made: dicts, lists, scalars."""
    values: Iterable[Any]
    if type(data) is dict:
        values = data.values()
    elif type(data) is list:
        values = data
    else:
        return True
    if depth >= MAX_DEPTH:
        return False
    depth += 1
    for value in values:
        kind = type(value)
        if (kind is dict or kind is list) and not _shallow(value, depth):
            return False
    return True


def _check_string(text: str, path: tuple[str, ...]) -> None:
    where = ".".join(path) or "(root)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ReportError(f"{where}: a string holds a lone surrogate (not valid Unicode)", field=where) from None


def parse_report(raw: bytes | str, *, exact: bool = False) -> tuple[Report, dict[str, Any]]:
    """Parse and validate; returns the model and the JSON object.

    ``exact`` holds the report to its JSON Schema exactly, as uploads and ``survey ingest``
    are: each value of the JSON type declared (the lenient reading, pydantic's lax mode,
    turns ``false`` into 0.0 and ``"3"`` into 3). A report invalid either way is refused
    as the lenient reading refuses it (its message names the first field)."""
    text = decode_text(raw)
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise ReportError(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as e:
        if isinstance(e, ReportError):
            raise
        raise ReportError(f"not JSON: {e}") from e
    if not isinstance(data, dict):
        raise ReportError("a probe report is a JSON object", field="(root)")
    check_values(data, text)
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise ReportError(
            f"schema_version is {str(version)[:40]!r}; this proton-survey reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}",
            field="schema_version",
        )
    strict: ValidationError | None = None
    if exact:
        try:
            return Report.model_validate(data, strict=True), data  # one validation for a valid report
        except ValidationError as e:
            strict = e
    try:
        report = Report.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        raise ReportError(f"{loc}: {err['msg']} (and {e.error_count() - 1} more)" if e.error_count() > 1
                          else f"{loc}: {err['msg']}", field=loc) from e
    if strict is not None:
        # JSON Schema counts 3.0 as an integer; pydantic's strict mode does not.
        errs = [x for x in strict.errors() if not (x["type"] == "int_type" and isinstance(x.get("input"), float)
                                                   and x["input"].is_integer())]
        if errs:
            err = errs[0]
            loc = ".".join(str(x) for x in err["loc"]) or "(root)"
            raise ReportError(f"{loc}: {err['msg']} (a {type(err.get('input')).__name__} was given)", field=loc)
    return report, data


NO_NUL = "^[^\\x00]*$"


def _held_to_parse_rules(node: Any) -> Any:
    """Every integer the schema types within +-MAX_INT: the models give their integers
    bounds (``JsonInt``, ``Int32``); this adds them where a model's type carries none (the
    integers of a ``Literal``), so the published schema says it everywhere. (NUL is
    allowed: the stored JSON escapes it, and ingest shows it as U+2400 in the columns it
    copies, which PostgreSQL could not hold.)"""
    if isinstance(node, dict):
        out = {k: _held_to_parse_rules(v) for k, v in node.items()}
        if out.get("type") == "integer":
            out.setdefault("minimum", -MAX_INT)
            out.setdefault("maximum", MAX_INT)
        return out
    if isinstance(node, list):
        return [_held_to_parse_rules(x) for x in node]
    return node


def json_schema() -> dict[str, Any]:
    return copy.deepcopy(_schema())


@functools.cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = _held_to_parse_rules(Report.model_json_schema())
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://proton-survey.invalid/schema/probe-report.v3.schema.json"
    schema["title"] = ("proton-survey probe report, schema version 3 (version 2: no options, nor what a capture "
                       "recorded; version 1: no platform, origin, attempts)")
    return schema


# ------------------------------------------------------------------ what any report is held to
MAX_REPORT_BYTES_ENV = "SURVEY_MAX_UPLOAD_BYTES"
DEFAULT_MAX_REPORT_BYTES = 8 * 1024 * 1024  # the largest report stored, by upload or `survey ingest`


def max_report_bytes() -> int:
    """``$SURVEY_MAX_UPLOAD_BYTES`` (a positive number of bytes), else 8 MiB: the one limit
    the service's uploads and ``survey ingest`` hold a report to."""
    text = os.environ.get(MAX_REPORT_BYTES_ENV)
    if not text:
        return DEFAULT_MAX_REPORT_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{MAX_REPORT_BYTES_ENV}={text!r} is not a number of bytes")
    return value
