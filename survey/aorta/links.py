"""Will an aorta cell leave a profile? The chain of links, each answered from
measurement or said unknown with why.

A cell leaves a profile when every link holds, in order:

1. ``recipe``: aorta reads the recipe (survey/aorta/recipe.py, its loader's rules);
2. ``options``: the cell's effective ``proton`` options (the recipe's ``collect:``
   or the cell's, which replaces it; aorta's defaults);
3. ``cell``: the cell as the recipe expands to it, with the variables its
   mitigations set (a probe cell's two axes; survey/aorta/mitigations.py);
4. ``attach``: how aorta attaches Proton (``mode: cli``: Proton's command line
   around the command; ``mode: env``: ``AORTA_PROTON_*`` for a workload that calls
   ``proton.start`` itself);
5. ``collector``: whether the workload gets the collector at all
   (survey/aorta/workloads.py);
6. ``environment``: where the trial runs (TARGET, an aorta environment) and what
   every variable aorta sets there does (survey/aorta/overlays.py);
7. ``start``: ``proton.start`` with the backend (``auto`` resolved), the mode that
   really arrives (the command line of Triton < 3.8.0 drops ``--mode``) and the
   options past them, from the report's mode rows and ``options`` records;
8. ``capture``: whether a capture there recorded something (the report's
   captures: ``recorded`` against ``expected``). For instrumentation what a capture
   does depends on the workload's kernels, so each shape is measured apart (option
   ``kernels``: ``scoped`` only, ``plain`` (unscoped) only, ``mixed`` in one
   session, per session mode) and the link says which shapes collect.

Each link answers ``yes``, ``no``, ``unknown`` or ``conditional`` (a profile is left
for some shapes of workload and not for others, each measured: the condition is
stated). The cell's answer is three-valued logic over them: one definite ``no``
decides (exit 2: no profile, with the cause), whatever else is unknown, except a
``no`` measured at run time (``start``, ``capture``) in evidence whose environment
lacked a variable the cell sets with an unknown effect: that evidence may not be the
trial's. Otherwise the first ``unknown`` decides (exit 3: not enough evidence, with
why); otherwise the first ``conditional`` (exit 8: a profile only on that
condition); every link holding is exit 0.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from db import models as m
from probes import outcomes as O
from survey.core import exitcodes
from survey.verdicts.verdict import Cause, CheckEvidence, Verdict

LinkWord = Literal["yes", "no", "unknown", "conditional", "not_applicable"]
YES: Literal["yes"] = "yes"
NO: Literal["no"] = "no"
UNKNOWN: Literal["unknown"] = "unknown"
CONDITIONAL: Literal["conditional"] = "conditional"
NOT_APPLICABLE: Literal["not_applicable"] = "not_applicable"
ORDER = ("recipe", "options", "cell", "attach", "command", "collector", "environment", "start", "capture")
# Links measured at run time in the evidence's environment: a "no" of theirs holds for
# the trial only where that environment is the trial's (the environment link holds).
RUN_TIME = ("start", "capture")
# A start "no" that is a fact of the build, whatever the environment's variables.
BUILD_CAUSES = (Cause.BACKEND_ABSENT, O.UNKNOWN_BACKEND, Cause.MODE_REFUSED, Cause.NO_TRITON)


class CellVerdict(StrEnum):
    """Will a recipe cell leave a profile? ``survey check``'s three verdicts, and two of
    a cell's own: a profile only on a stated condition, and no proton collector at all."""

    RUNS = Verdict.RUNS.value
    CANNOT_RUN = Verdict.CANNOT_RUN.value
    NOT_ENOUGH_EVIDENCE = Verdict.NOT_ENOUGH_EVIDENCE.value
    CONDITIONAL = "conditional"
    NOT_APPLICABLE = "not_applicable"

    @property
    def exit_code(self) -> int:
        return _CELL_EXIT[self]


_CELL_EXIT = {CellVerdict.RUNS: exitcodes.OK, CellVerdict.CANNOT_RUN: exitcodes.CANNOT_RUN,
              CellVerdict.NOT_ENOUGH_EVIDENCE: exitcodes.NOT_ENOUGH_EVIDENCE,
              CellVerdict.CONDITIONAL: exitcodes.CONDITIONAL, CellVerdict.NOT_APPLICABLE: exitcodes.OK}


@dataclass
class Link:
    __pydantic_config__ = ConfigDict(extra="forbid")

    link: str  # one of ORDER
    answer: LinkWord
    basis: str  # what the answer rests on: a measurement (and where), aorta's or Triton's code, or why unknown
    cause: Optional[str] = None  # for no / unknown
    fix: Optional[str] = None
    source: Optional[str] = None  # recipe | aorta <version> | measured: run #N | Triton's code
    facts: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Decision:
    verdict: CellVerdict  # never not_applicable: a cell without proton has no decision
    cause: Optional[str]
    reason: str
    fix: Optional[str]
    link: Optional[str]  # the deciding link; None when every link holds

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


# --------------------------------------------------------------------------- the answer printed
class _CellHead(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cell: str
    where: Annotated[str, Field(description="where the cell was checked, and why there")]
    cell_environment: Annotated[str | None, Field(
        description="the environment the cell names (null: the recipe's shape names none)")]
    mitigations: list[str]
    checked_in: Annotated[str | None, Field(
        description="TARGET, or aorta:<name> (null: nothing could be checked)")]
    configuration: Annotated[dict[str, str] | None, Field(
        description="aorta's proton options for the cell (null: no proton collector)")]
    proton_mode: Annotated[str | None, Field(description="the --mode aorta renders from them")]
    auto: Annotated[str | None, Field(description="how backend: auto resolves there")]
    mode_dropped: Annotated[str | None, Field(description="why the mode never reaches Proton there")]
    collectors: list[str]


class _CellDecision(BaseModel):
    exit_code: Annotated[int, Field(description="the verdict's: 0 runs or not_applicable, 2 cannot_run, "
                                                "3 not_enough_evidence, 8 conditional")]
    verdict: CellVerdict
    cause: Annotated[str | None, Field(description="the deciding link's cause")]
    reason: Annotated[str, Field(description="the deciding link and what it rests on")]
    fix: str | None

    @model_validator(mode="after")
    def _exit_is_the_verdicts(self) -> _CellDecision:
        if self.exit_code != self.verdict.exit_code:
            raise ValueError(f"exit code {self.exit_code} is not {self.verdict}'s ({self.verdict.exit_code})")
        return self


class RecipeCellAnswer(CheckEvidence, _CellDecision, _CellHead):
    """A recipe cell with a proton collector: will it leave a profile, decided over its
    links, with what ``proton.start`` there rests on (the fields of a check's evidence)."""

    model_config = ConfigDict(extra="forbid")

    decided_by: Annotated[str | None, Field(description="the deciding link (null: every link holds)")]
    condition: Annotated[str | None, Field(description="for conditional: the condition on the workload")]
    links: list[Link]

    @model_validator(mode="after")
    def _decided(self) -> RecipeCellAnswer:
        if self.verdict is CellVerdict.NOT_APPLICABLE:
            raise ValueError("a cell with a proton collector is decided")
        return self


class RecipeCellSkipped(_CellDecision, _CellHead):
    """A recipe cell that collects no proton: nothing to decide."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal[CellVerdict.NOT_APPLICABLE]
    cause: None
    fix: None
    links: Annotated[list[Link], Field(max_length=0)]


RecipeCell = RecipeCellAnswer | RecipeCellSkipped


def decide(links: list[Link]) -> Decision:
    """Three-valued, link by link: a definite no decides whatever else is unknown
    (a run-time no in evidence of an environment that may not be the trial's is
    not definite); then the first unknown; then the first condition; every link
    holding: a profile is left."""
    env_unknown = any(lk.link == "environment" and lk.answer == UNKNOWN for lk in links)
    for lk in links:
        if lk.answer == NO and not (env_unknown and lk.link in RUN_TIME and lk.cause not in BUILD_CAUSES):
            return Decision(CellVerdict.CANNOT_RUN, lk.cause, f"{lk.link}: {lk.basis}", lk.fix, lk.link)
    for lk in links:
        if lk.answer in (NO, UNKNOWN):
            basis = lk.basis if lk.answer == UNKNOWN else (
                f"{lk.basis} (measured where the environment lacked a variable this cell sets, whose effect is "
                "not known: not definite for this cell)")
            return Decision(CellVerdict.NOT_ENOUGH_EVIDENCE, lk.cause, f"{lk.link}: {basis}",
                            lk.fix, lk.link)
    for lk in links:
        if lk.answer == CONDITIONAL:
            return Decision(CellVerdict.CONDITIONAL, lk.cause, f"{lk.link}: {lk.basis}", lk.fix,
                            lk.link)
    last = {lk.link: lk for lk in links}
    said = [last[k].basis for k in ("start", "capture") if k in last]
    return Decision(CellVerdict.RUNS, None, "; ".join(said) or "every link holds", None, None)


# --------------------------------------------------------------------------- the report behind a run
class ReportView:
    """The raw report of one run, read once: option records, captures as written."""

    def __init__(self, run: m.Run):
        self.run = run
        doc: dict[str, Any] | None = None
        if run.report is not None:
            try:
                loaded = json.loads(run.report.raw)
                doc = loaded if isinstance(loaded, dict) else None
            except ValueError:
                doc = None
        self.doc = doc
        self.schema = run.schema_version or (doc or {}).get("schema_version")

    @property
    def options(self) -> Optional[list[dict[str, Any]]]:
        """The ``options`` records; None where the report has none (schema < 3)."""
        raw = (self.doc or {}).get("options")
        return [o for o in raw if isinstance(o, dict)] if isinstance(raw, list) else None

    def option(self, option: str, value: Optional[str], backend: str,
               mode: Optional[str] = None, any_mode: bool = True) -> Optional[dict[str, Any]]:
        """The capture of one option record (``mode``: its session's, None and
        "default" being the same; ``any_mode``: do not compare it)."""
        for o in self.options or []:
            cap = o.get("capture") or {}
            if o.get("option") != option or o.get("value") != value or cap.get("backend") != backend:
                continue
            if any_mode or _same_mode(cap.get("mode"), mode):
                return dict(cap)
        return None

    def capture(self, backend: str, mode: Optional[str]) -> Optional[dict[str, Any]]:
        for c in (self.doc or {}).get("captures") or []:
            if isinstance(c, dict) and c.get("backend") == backend and c.get("mode") == mode:
                return c
        return None


def _same_mode(a: Optional[str], b: Optional[str]) -> bool:
    return (a or "default") == (b or "default")


def recorded_text(rec: Optional[dict[str, Any]]) -> str:
    """What a capture's profile records, in words."""
    if not rec:
        return "nothing recorded"
    parts = []
    if rec.get("launches"):
        kernels = rec.get("kernels") or []
        parts.append(f"{rec['launches']} kernel launches" + (f" ({len(kernels)} kernels)" if kernels else ""))
    scopes = rec.get("scopes") or []
    if scopes:
        names = sorted({str(s["name"]) for s in scopes if isinstance(s, dict) and s.get("name")})
        metrics = "/".join(rec.get("cycle_metrics") or []) or "no cycle metric"
        parts.append(f"{len(scopes)} scopes with {metrics} ({', '.join(names)})")
    if rec.get("pc_samples"):
        parts.append(f"{rec['pc_samples']} PC samples")
    if rec.get("trace_events") and not parts:
        parts.append(f"{rec['trace_events']} trace events")
    fmt = rec.get("format")
    return (f"{fmt}: " if fmt else "") + ("; ".join(parts) if parts else "nothing measured")


def option_capture_link(cap: dict[str, Any], what: str, run_src: str) -> Optional[Link]:
    """A start-link failure from an option's capture (None when it started)."""
    outcome = cap.get("outcome")
    if outcome in (O.OK, O.EMPTY_CAPTURE):
        return None
    msg = cap.get("message") or cap.get("signal") or outcome
    if outcome == O.UNSUPPORTED_MODE:
        return Link("start", NO, f"{what}: this build refuses it: {msg}", Cause.MODE_REFUSED, None, run_src,
                    {"option": what, "outcome": outcome, "rule": cap.get("rule")})
    word = {O.CRASH: Cause.CRASHED, O.TIMEOUT: Cause.HUNG}.get(str(outcome), "option_failed")
    return Link("start", NO, f"{what}: a capture with it failed here: {outcome}: {msg}", word, None, run_src,
                {"option": what, "outcome": outcome, "rule": cap.get("rule"), "signal": cap.get("signal")})


def capture_link(cap: Optional[dict[str, Any]], what: str, run_src: str, schema: Optional[int]) -> Link:
    """Whether one capture recorded what its backend measures."""
    if cap is None:
        return Link("capture", UNKNOWN, f"no capture of {what} was measured here, so whether its profile records "
                                        "anything is not established", Cause.NOT_CHECKED,
                    "probe again with captures (`survey probe`: captures run where a GPU is)", run_src)
    outcome = cap.get("outcome")
    rec = cap.get("recorded")
    facts = {"capture": what, "outcome": outcome, "expected": cap.get("expected"), "recorded": recorded_text(rec),
             "signal": cap.get("signal")}
    if outcome == O.OK:
        said = recorded_text(rec) if rec else f"{cap.get('kernel_count')} kernel launches"
        return Link("capture", YES, f"a capture of {what} recorded {said}", None, None, run_src, facts)
    if outcome == O.EMPTY_CAPTURE:
        if (schema or 0) >= 3:
            return Link("capture", NO, f"a capture of {what} ran what the backend measures and recorded nothing: "
                                       f"{cap.get('message')}", Cause.CAPTURE_EMPTY,
                        "check that your kernels give this backend something to record", run_src, facts)
        return Link("capture", UNKNOWN, f"proton.start() succeeded here, but the GELU capture of {what} recorded no "
                                        f"kernel ({cap.get('message')}); whether your run's capture will hold data "
                                        "is not established", Cause.CAPTURE_EMPTY,
                    "check that your kernels give this backend something to record", run_src, facts)
    msg = (cap.get("signal") if outcome == O.CRASH else None) or cap.get("message") or cap.get("signal") or outcome
    word = {O.CRASH: Cause.CRASHED, O.TIMEOUT: Cause.HUNG}.get(str(outcome), Cause.CAPTURE_FAILED)
    return Link("capture", NO, f"a capture of {what} failed here: {outcome}: {msg}", word, None, run_src, facts)


# What a shape of workload does where its capture's cause is this.
_WHAT_IT_DOES: dict[str, str] = {Cause.CRASHED: "dies", Cause.HUNG: "hangs", Cause.CAPTURE_EMPTY: "records nothing"}
# The shapes of an instrumentation workload's kernels (probes/options.py KERNEL_SHAPES).
SHAPES = ("scoped", "plain", "mixed")
SHAPE_WORDS = {"scoped": "every Triton kernel in the session carries a proton.language scope",
               "plain": "no Triton kernel in the session carries a scope",
               "mixed": "the session launches scoped and unscoped Triton kernels"}


def shape_links(view: ReportView, mode: Optional[str], run_src: str) -> dict[str, Link]:
    """Instrumentation: what a capture does with each shape of workload, in the
    session's mode, from the option records ``kernels=scoped|plain|mixed`` (the
    scoped shape, where the report predates its record: the backend's own capture,
    which runs the scoped kernel)."""
    out: dict[str, Link] = {}
    for shape in SHAPES:
        cap = view.option("kernels", shape, "instrumentation", mode, any_mode=False)
        if cap is None and shape == "scoped":
            cap = view.capture("instrumentation", mode) or (view.capture("instrumentation", None)
                                                            if mode in (None, "default") else None)
        what = f"a session where {SHAPE_WORDS[shape]} (mode {mode or 'default'})"
        if cap is None:
            other = view.option("kernels", shape, "instrumentation")
            why = (f"{what} was measured here in mode {other.get('mode') or 'default'} only" if other is not None
                   else f"{what} was not measured here (this report predates that check)")
            out[shape] = Link("capture", UNKNOWN, why, Cause.NOT_CHECKED,
                              "probe again with the current probe on that GPU", run_src)
            continue
        lk = capture_link(cap, what, run_src, view.schema)
        lk.facts["kernels"] = shape
        out[shape] = lk
    return out


def kernels_link(view: ReportView, mode: Optional[str], run_src: str) -> Link:
    """One capture link over the shapes: yes where every shape collects, no where
    none does, else the condition (which shapes collect, what the others do,
    each measured), or unknown where nothing measured collects and something is
    unmeasured. Never a no taken from one shape."""
    shapes = shape_links(view, mode, run_src)
    answers = {k: lk.answer for k, lk in shapes.items()}
    facts: dict[str, Any] = {"kernels": {k: {"answer": lk.answer, "basis": lk.basis, "cause": lk.cause}
                                         for k, lk in shapes.items()}}
    if all(a == YES for a in answers.values()):
        return Link("capture", YES, "; ".join(lk.basis for lk in shapes.values()), None, None, run_src, facts)
    if all(a == NO for a in answers.values()):
        first = shapes["scoped"]
        return Link("capture", NO, "every shape of workload fails here: " + "; ".join(
            lk.basis for lk in shapes.values()), first.cause, first.fix, run_src, facts)
    yes = [k for k, a in answers.items() if a == YES]
    if not yes:
        unknown = next(lk for lk in shapes.values() if lk.answer == UNKNOWN)
        said = "; ".join(lk.basis for lk in shapes.values())
        return Link("capture", UNKNOWN, f"no shape of workload measured to collect here: {said}", unknown.cause,
                    unknown.fix, run_src, facts)
    parts = [f"collects if {' or '.join(SHAPE_WORDS[k] for k in yes)}"]
    for k, lk in shapes.items():
        if lk.answer == NO:
            what = _WHAT_IT_DOES.get(str(lk.cause), "fails")
            detail = lk.facts.get("signal") or lk.facts.get("outcome") or lk.cause
            parts.append(f"where {SHAPE_WORDS[k]}, it {what} on this build ({detail})")
        elif lk.answer == UNKNOWN:
            parts.append(f"where {SHAPE_WORDS[k]}: not measured")
    condition = "; ".join(parts) + " (measured)"
    facts["condition"] = condition
    fix = ("scope every Triton kernel the session launches (proton.language enter_scope/exit_scope), or profile "
           "with a tracing backend") if "scoped" in yes else "profile with a tracing backend"
    return Link("capture", CONDITIONAL, condition, "depends_on_kernels", fix, run_src, facts)
