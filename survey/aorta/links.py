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
   captures: ``recorded`` against ``expected``; for instrumentation, the session
   that launches an unscoped kernel after a scoped one, option ``kernels=mixed``).

The first link that does not hold decides: ``no`` (exit 2: no profile, with the
cause) or ``unknown`` (exit 3: not enough evidence, with why); every link holding
is exit 0. A link after an unknown one is still evaluated and shown where it can
be, but does not decide: its evidence is of an environment that may not be the
trial's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from db import models as m
from probes import outcomes as O
from survey.core import exitcodes

YES, NO, UNKNOWN, NOT_APPLICABLE = "yes", "no", "unknown", "not_applicable"
ORDER = ("recipe", "options", "cell", "attach", "collector", "environment", "start", "capture")


@dataclass
class Link:
    link: str  # one of ORDER
    answer: str  # yes | no | unknown
    basis: str  # what the answer rests on: a measurement (and where), aorta's or Triton's code, or why unknown
    cause: Optional[str] = None  # for no / unknown
    fix: Optional[str] = None
    source: Optional[str] = None  # recipe | aorta <version> | measured: run #N | Triton's code
    facts: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Decision:
    exit_code: int
    verdict: str  # runs | cannot_run | not_enough_evidence
    cause: Optional[str]
    reason: str
    fix: Optional[str]
    link: Optional[str]  # the deciding link; None when every link holds


def decide(links: list[Link]) -> Decision:
    """The first link that does not hold decides; all holding: a profile is left."""
    for lk in links:
        if lk.answer == NO:
            return Decision(exitcodes.CANNOT_RUN, "cannot_run", lk.cause, f"{lk.link}: {lk.basis}", lk.fix, lk.link)
        if lk.answer == UNKNOWN:
            return Decision(exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence", lk.cause, f"{lk.link}: {lk.basis}",
                            lk.fix, lk.link)
    last = {lk.link: lk for lk in links}
    said = [last[k].basis for k in ("start", "capture") if k in last]
    return Decision(exitcodes.OK, "runs", None, "; ".join(said) or "every link holds", None, None)


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
        return Link("start", NO, f"{what}: this build refuses it: {msg}", "mode_refused", None, run_src,
                    {"option": what, "outcome": outcome, "rule": cap.get("rule")})
    word = {O.CRASH: "crashed", O.TIMEOUT: "hung"}.get(str(outcome), "option_failed")
    return Link("start", NO, f"{what}: a capture with it failed here: {outcome}: {msg}", word, None, run_src,
                {"option": what, "outcome": outcome, "rule": cap.get("rule"), "signal": cap.get("signal")})


def capture_link(cap: Optional[dict[str, Any]], what: str, run_src: str, schema: Optional[int]) -> Link:
    """Whether one capture recorded what its backend measures."""
    if cap is None:
        return Link("capture", UNKNOWN, f"no capture of {what} was measured here, so whether its profile records "
                                        "anything is not established", "not_checked",
                    "probe again with captures (`survey probe`: captures run where a GPU is)", run_src)
    outcome = cap.get("outcome")
    rec = cap.get("recorded")
    facts = {"capture": what, "outcome": outcome, "expected": cap.get("expected"), "recorded": recorded_text(rec)}
    if outcome == O.OK:
        said = recorded_text(rec) if rec else f"{cap.get('kernel_count')} kernel launches"
        return Link("capture", YES, f"a capture of {what} recorded {said}", None, None, run_src, facts)
    if outcome == O.EMPTY_CAPTURE:
        if (schema or 0) >= 3:
            return Link("capture", NO, f"a capture of {what} ran what the backend measures and recorded nothing: "
                                       f"{cap.get('message')}", "capture_empty",
                        "check that your kernels give this backend something to record", run_src, facts)
        return Link("capture", UNKNOWN, f"proton.start() succeeded here, but the GELU capture of {what} recorded no "
                                        f"kernel ({cap.get('message')}); whether your run's capture will hold data "
                                        "is not established", "capture_empty",
                    "check that your kernels give this backend something to record", run_src, facts)
    msg = cap.get("message") or cap.get("signal") or outcome
    word = {O.CRASH: "crashed", O.TIMEOUT: "hung"}.get(str(outcome), "capture_failed")
    return Link("capture", NO, f"a capture of {what} failed here: {outcome}: {msg}", word, None, run_src, facts)


def mixed_link(view: ReportView, mode: Optional[str], run_src: str) -> Link:
    """Instrumentation: a session that launches an unscoped Triton kernel after a
    scoped one (option ``kernels=mixed``), in the session's mode."""
    cap = view.option("kernels", "mixed", "instrumentation", mode, any_mode=False)
    what = "an instrumentation session that launches an unscoped Triton kernel after a scoped one"
    if cap is None:
        other = view.option("kernels", "mixed", "instrumentation")
        if other is not None:
            why = (f"{what} was measured here in mode {other.get('mode') or 'default'} only, not in "
                   f"{mode or 'default'}")
        else:
            why = (f"whether {what} survives was not measured here (this report predates that check); a workload "
                   "with both kinds of kernel needs it")
        return Link("capture", UNKNOWN, why, "not_checked", "probe again with the current probe on that GPU",
                    run_src)
    outcome = cap.get("outcome")
    facts = {"capture": "kernels=mixed", "outcome": outcome, "signal": cap.get("signal"),
             "recorded": recorded_text(cap.get("recorded"))}
    if outcome == O.OK:
        return Link("capture", YES, f"{what} recorded {recorded_text(cap.get('recorded'))}", None, None, run_src,
                    facts)
    msg = cap.get("signal") or cap.get("message") or outcome
    word = {O.CRASH: "crashed", O.TIMEOUT: "hung"}.get(str(outcome), "capture_failed")
    return Link("capture", NO, f"{what} failed here ({outcome}: {msg}); a workload whose Triton kernels are all "
                               "scoped, or all unscoped, does not do that", word,
                "scope every Triton kernel the session launches, or profile with a tracing backend", run_src, facts)
