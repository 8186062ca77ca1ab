"""The answer of ``survey check`` (and ``/check``, and each cell of an aorta recipe),
declared once: its :class:`Verdict` with the exit code it means, its :class:`Cause`
with the verdict it implies, and :class:`CheckResult`, the one model that
``survey check --json`` prints, ``/check.json`` returns and OpenAPI describes.

The probe keeps its own standard-library vocabulary (``probes/outcomes.py``); the
host reads it through one table, :data:`OUTCOME_CAUSES`: the cause a check names
when that outcome decides it (a test fails when an outcome has no entry).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from db import models as m
from probes import outcomes as O
from survey.core import exitcodes
from survey.verdicts.answers import NO, UNKNOWN, Answer, backend_present
from survey.verdicts.modes import Acceptance, ModeVerdict


class Verdict(StrEnum):
    """Will it run? Each verdict is one exit code of ``survey check``."""

    RUNS = "runs"
    CANNOT_RUN = "cannot_run"
    NOT_ENOUGH_EVIDENCE = "not_enough_evidence"

    @property
    def exit_code(self) -> int:
        return _EXIT[self]

    @property
    def meaning(self) -> str:
        return _VERDICT_MEANING[self]


_EXIT = {Verdict.RUNS: exitcodes.OK, Verdict.CANNOT_RUN: exitcodes.CANNOT_RUN,
         Verdict.NOT_ENOUGH_EVIDENCE: exitcodes.NOT_ENOUGH_EVIDENCE}
_VERDICT_MEANING = {
    Verdict.RUNS: "it will run: the evidence says so",
    Verdict.CANNOT_RUN: "this environment cannot run it (the cause says why, the fix what to do)",
    Verdict.NOT_ENOUGH_EVIDENCE: "the evidence does not answer the question (the cause says what is missing)",
}


class Cause(StrEnum):
    """Why it does not run, or why the evidence does not say. Each cause implies one verdict."""

    NO_TRITON = "no_triton"
    NOT_CHECKED = "not_checked"
    DISABLED = "disabled"
    DEVICES_ENV_REJECTED = "devices_env_rejected"
    BACKEND_ABSENT = "backend_absent"
    MODE_REFUSED = "mode_refused"
    LIBRARY_MISSING = "library_missing"
    CAPTURE_EMPTY = "capture_empty"
    CAPTURE_FAILED = "capture_failed"
    NO_GPU = "no_gpu"
    UNSTABLE = "unstable"
    CRASHED = "crashed"
    HUNG = "hung"
    UNRECOGNISED_ERROR = "unrecognised_error"
    NOT_PROBED = "not_probed"
    UNOBTAINABLE = "unobtainable"
    ENVIRONMENT_UNRESOLVED = "environment_unresolved"

    @property
    def verdict(self) -> Verdict:
        return _CAUSE[self][0]

    @property
    def meaning(self) -> str:
        return _CAUSE[self][1]


_CANNOT, _NEE = Verdict.CANNOT_RUN, Verdict.NOT_ENOUGH_EVIDENCE
_CAUSE: dict[Cause, tuple[Verdict, str]] = {
    Cause.NO_TRITON: (_CANNOT, "the environment has no Triton, so no Proton"),
    Cause.NOT_CHECKED: (_NEE, "the probe did not check this backend and mode there"),
    Cause.DISABLED: (_CANNOT, "TRITON_PROTON_DISABLE makes proton.start() a no-op"),
    Cause.DEVICES_ENV_REJECTED: (_CANNOT, "a device-visibility variable is refused (AMD)"),
    Cause.BACKEND_ABSENT: (_CANNOT, "the build has no such backend"),
    Cause.MODE_REFUSED: (_CANNOT, "the build refuses the mode"),
    Cause.LIBRARY_MISSING: (_CANNOT, "a shared library Proton loads for the backend does not load"),
    Cause.CAPTURE_EMPTY: (_NEE, "proton.start() works, but the capture recorded no kernel"),
    Cause.CAPTURE_FAILED: (_CANNOT, "proton.start() works, but the capture failed"),
    Cause.NO_GPU: (_NEE, "probed where there is no GPU"),
    Cause.UNSTABLE: (_CANNOT, "repeated attempts of the check disagreed"),
    Cause.CRASHED: (_CANNOT, "the check was killed by a signal"),
    Cause.HUNG: (_CANNOT, "the check hung and was killed at the timeout"),
    Cause.UNRECOGNISED_ERROR: (_CANNOT, "proton.start() failed with an error the probe does not classify"),
    Cause.NOT_PROBED: (_NEE, "there is no evidence for this environment here"),
    Cause.UNOBTAINABLE: (_NEE, "the environment cannot be obtained here (exit 7)"),
    Cause.ENVIRONMENT_UNRESOLVED: (_NEE, "the aorta environment a recipe cell names cannot be resolved"),
}

# The cause a check names when the probe's outcome decides it (None: it decides nothing
# against running). Every outcome of probes/outcomes.py has an entry (tests/test_verdict.py).
OUTCOME_CAUSES: dict[str, Cause | None] = {
    O.OK: None,
    O.UNKNOWN_BACKEND: Cause.BACKEND_ABSENT,
    O.UNSUPPORTED_MODE: Cause.MODE_REFUSED,
    O.LIBRARY_MISSING: Cause.LIBRARY_MISSING,
    O.NO_GPU: Cause.NO_GPU,
    O.DEVICES_ENV_REJECTED: Cause.DEVICES_ENV_REJECTED,
    O.DISABLED: Cause.DISABLED,
    O.CRASH: Cause.CRASHED,
    O.TIMEOUT: Cause.HUNG,
    O.ERROR: Cause.UNRECOGNISED_ERROR,
    O.UNSTABLE: Cause.UNSTABLE,
    O.SELF_CHECK_FAILED: Cause.CAPTURE_FAILED,
    O.HANG_AFTER_CAPTURE: Cause.CAPTURE_FAILED,
    O.EMPTY_CAPTURE: Cause.CAPTURE_EMPTY,
}


def cause_of(outcome: str) -> Cause | None:
    """The cause a probe outcome names (an outcome outside the table: unrecognised)."""
    return OUTCOME_CAUSES.get(outcome, Cause.UNRECOGNISED_ERROR)


EXIT_CODE = "what `survey check` exits with: 0 runs, 2 cannot run, 3 not enough evidence, 7 cannot be obtained here"


def _not_measured() -> Answer:
    return Answer(UNKNOWN, "not measured")


class CheckEvidence(BaseModel):
    """What a check asked and the evidence that answered it: the part of a
    :class:`CheckResult` that a recipe cell's answer (survey/aorta/links.py) carries too."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False, defer_build=True)

    target: str
    backend: str
    mode: str | None
    backend_present: Answer = Field(default_factory=_not_measured)
    mode_accepted: Answer = Field(default_factory=_not_measured)
    library_loads: Answer = Field(default_factory=_not_measured)
    candidate: str | None = Field(default=None, description="the stored candidate that answered")
    environment: str | None = None
    platform: str | None = Field(default=None, description="the platform whose evidence answered")
    run_id: int | None = None
    evidence_date: str | None = None
    evidence_age: str | None = None
    live_outcome: str | None = Field(
        default=None, description="the live check's outcome (answers none of the questions alone)")
    details: list[str] = Field(default_factory=list)


class _CheckDecision(BaseModel):
    """The verdict of a check, its cause, why, and what to do (before the evidence in
    :class:`CheckResult`'s fields)."""

    verdict: Annotated[Verdict, Field(description="runs (exit 0), cannot_run (exit 2) or not_enough_evidence "
                                                  "(exit 3; 7 when the target cannot be obtained here)")]
    cause: Annotated[Cause | None, Field(
        description="why it does not run, or why there is not enough evidence (null: it runs, or the evidence "
                    "says nothing it can name)")]
    reason: str
    fix: str | None


class CheckResult(CheckEvidence, _CheckDecision):
    """Will (backend, mode) run in TARGET? What ``survey check --json`` prints and
    ``/check.json`` returns. The exit code is the verdict's (``unobtainable``: 7)."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False, defer_build=True)

    @model_validator(mode="after")
    def _cause_fits(self) -> CheckResult:
        if self.cause is not None and self.cause.verdict is not self.verdict:
            raise ValueError(f"cause {self.cause} means {self.cause.verdict}, not {self.verdict}")
        if self.verdict is Verdict.RUNS and self.cause is not None:
            raise ValueError("a run that works has no cause")
        return self

    @computed_field(description=EXIT_CODE)  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> int:
        return exitcodes.UNOBTAINABLE if self.cause is Cause.UNOBTAINABLE else self.verdict.exit_code

    def decide(self, cause: Cause | None, reason: str, fix: str | None,
               verdict: Verdict | None = None) -> CheckResult:
        """Set the answer: the verdict is the cause's (no cause: it runs, unless ``verdict`` says otherwise)."""
        self.verdict = cause.verdict if cause is not None else (verdict or Verdict.RUNS)
        self.cause, self.reason, self.fix = cause, reason, fix
        return self

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer: the exit code first, then the fields in their declared order."""
        data = self.model_dump(mode="json")
        return {"exit_code": data.pop("exit_code"), **data}


_HERE_CAUSES = {O.UNSTABLE: Cause.UNSTABLE, O.CRASH: Cause.CRASHED, O.TIMEOUT: Cause.HUNG,
                O.ERROR: Cause.UNRECOGNISED_ERROR}


def runs_here(run: m.Run, backend: str, mode: str | None, v: ModeVerdict | None) -> tuple[Verdict, Cause | None]:
    """Will (backend, mode) run in the environment of ``run``, on its platform? The
    verdict (``runs``, ``cannot_run``, ``not_enough_evidence``: the keys of
    ``survey.verdicts.vocabulary.HERE``) and its cause, decided once, here: ``survey
    check`` explains it, and the matrix's cells show it. ``v`` is the published
    verdict of (backend, mode) in ``run`` (``verdict_of``). A stub-derived answer
    never gives ``runs``: it exists because a library did not load here."""
    if v is None and not run.modes and run.triton_version is None:
        return Verdict.CANNOT_RUN, Cause.NO_TRITON
    if v is None:
        return Verdict.NOT_ENOUGH_EVIDENCE, Cause.NOT_CHECKED
    inherited = next((r for r in run.modes if r.env == "inherited" and not r.stub and r.backend == backend
                      and r.mode == mode), None)
    if inherited is not None and inherited.outcome in (O.DISABLED, O.DEVICES_ENV_REJECTED):
        return Verdict.CANNOT_RUN, Cause(inherited.outcome)
    if v.verdict == Acceptance.ABSENT or backend_present(run, backend).answer == NO:
        return Verdict.CANNOT_RUN, Cause.BACKEND_ABSENT
    if v.verdict == Acceptance.REFUSED:
        return Verdict.CANNOT_RUN, Cause.MODE_REFUSED
    if v.outcome == O.LIBRARY_MISSING:
        return Verdict.CANNOT_RUN, Cause.LIBRARY_MISSING
    if v.outcome == O.OK:
        cap = next((c for c in run.captures if c.backend == backend and c.mode == mode), None)
        if cap is not None and cap.outcome == O.EMPTY_CAPTURE:
            return Verdict.NOT_ENOUGH_EVIDENCE, Cause.CAPTURE_EMPTY
        if cap is not None and cap.outcome != O.OK:
            return Verdict.CANNOT_RUN, Cause.CAPTURE_FAILED
        return Verdict.RUNS, None
    if v.outcome == O.NO_GPU:
        return Verdict.NOT_ENOUGH_EVIDENCE, Cause.NO_GPU
    if v.outcome in _HERE_CAUSES:
        return Verdict.CANNOT_RUN, _HERE_CAUSES[v.outcome]
    return Verdict.NOT_ENOUGH_EVIDENCE, None
