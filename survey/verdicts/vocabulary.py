"""The words and colours of a verdict, declared once: every surface (``survey
table`` and its grid, ``survey check``, ``/matrix`` in HTML, JSON, CSV and Markdown,
an environment's page, ``/check``, badges, ``/diff``) says a cell with these.

A cell answers two questions, and says both when they differ:

- **here** (:data:`HERE`): will (backend, mode) run in this environment, on this
  platform? ``runs``, ``cannot_run`` or ``not_enough_evidence``, with a cause
  (:data:`CAUSES`); this is ``survey check``'s verdict
  (``survey.verdicts.verdict.runs_here``), and it gives the cell its colour.
- **the build** (:data:`BUILD`): does this Triton build accept the mode at all?
  ``accepted``, ``refused``, ``absent`` or ``unknown``, answered live or through a
  stub library (``survey.verdicts.modes``).

"supported by the build; runtime library missing here" is one cell: the build
accepts the mode (through a stub library), and it cannot run here because a
library does not load. A stub-derived answer is never "runs".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from survey.verdicts.modes import Acceptance
from survey.verdicts.verdict import Cause, Verdict


@dataclass(frozen=True)
class Term:
    """How one verdict is said: its words, its mark, its colour."""

    key: Verdict  # the value stored and served (``cannot_run``)
    words: str  # what a reader is told (``cannot run``)
    mark: str  # one character for the terminal grid and the page's cells
    colour: str  # the colour, in words
    terminal: str  # the colour on a terminal (Rich)
    hex: str  # the badge's colour
    shields: str  # the colour's name for a shields.io endpoint


HERE: dict[str, Term] = {t.key: t for t in (
    Term(Verdict.RUNS, "runs", "✓", "green", "green", "#2e7d32", "success"),
    Term(Verdict.CANNOT_RUN, "cannot run", "✗", "red", "red", "#c62828", "critical"),
    Term(Verdict.NOT_ENOUGH_EVIDENCE, "not enough evidence", "?", "grey", "blue", "#6d6d6d", "inactive"),
)}

# Why it cannot run, or why there is not enough evidence: in words, as a reader is told.
CAUSES: dict[str, str] = {
    Cause.NO_TRITON: "no Triton here",
    Cause.NOT_CHECKED: "not checked by the probe",
    Cause.DISABLED: "Proton disabled by the environment",
    Cause.DEVICES_ENV_REJECTED: "device-visibility variable rejected",
    Cause.BACKEND_ABSENT: "no such backend in the build",
    Cause.MODE_REFUSED: "mode refused by the build",
    Cause.LIBRARY_MISSING: "runtime library missing here",
    Cause.CAPTURE_EMPTY: "the capture recorded nothing",
    Cause.CAPTURE_FAILED: "the capture failed",
    Cause.NO_GPU: "no GPU here",
    Cause.UNSTABLE: "unstable: attempts disagreed",
    Cause.CRASHED: "the check crashed",
    Cause.HUNG: "the check hung",
    Cause.UNRECOGNISED_ERROR: "an unrecognised error",
    Cause.NOT_PROBED: "not probed here",
    Cause.UNOBTAINABLE: "cannot be obtained here",
}

# What the build does with the mode, in words.
BUILD: dict[str, str] = {
    Acceptance.ACCEPTED: "supported by the build",
    Acceptance.REFUSED: "refused by the build",
    Acceptance.ABSENT: "no such backend in the build",
    Acceptance.UNKNOWN: "build support unknown",
}

STUB = "stub-derived"  # the build's answer came through a stub library, never a live result


def term(here: str | None) -> Term | None:
    return HERE.get(here or "")


def build_words(verdict: str | None, source: str | None) -> str | None:
    """The build's answer in words (``supported by the build (stub-derived)``)."""
    words = BUILD.get(verdict or "")
    if words is None:
        return None
    return words + (f" ({STUB})" if source == "stub" else "")


def differs(row: Mapping[str, Any]) -> bool:
    """Does the build's answer say something the verdict here does not? (The build
    supports the mode but it does not run here; or its answer is stub-derived.)"""
    if row.get("verdict_source") == "stub":
        return True
    return row.get("verdict") == Acceptance.ACCEPTED and row.get("here") != Verdict.RUNS


def build_note(row: Mapping[str, Any]) -> str | None:
    """The build's answer, where a cell must say it beside its verdict here: the build
    supports the mode but it does not run here (``supported by the build``); None
    where the verdict and its cause say it already."""
    if not differs(row) or row.get("cause") in (Cause.MODE_REFUSED, Cause.BACKEND_ABSENT):
        return None
    return BUILD.get(row.get("verdict") or "")


def say(row: Mapping[str, Any]) -> str:
    """A cell in words: ``cannot run: runtime library missing here; supported by the
    build (stub-derived)``. ``row`` is a matrix row (``here``, ``cause``, ``verdict``,
    ``verdict_source``) or anything with those keys."""
    t = term(row.get("here"))
    if t is None:
        return ""
    text = t.words
    cause = CAUSES.get(row.get("cause") or "")
    if cause:
        text += f": {cause}"
    note = build_note(row)
    if note:
        text += f"; {note}"
    if row.get("verdict_source") == "stub":
        text += f" ({STUB})"
    return text


def legend() -> list[tuple[Term, str]]:
    """Each verdict with what it means, for a legend."""
    meaning = {
        Verdict.RUNS: "proton.start() took it here (and its GELU capture worked, where one ran)",
        Verdict.CANNOT_RUN: "it will not run here (survey check says why, and the fix)",
        Verdict.NOT_ENOUGH_EVIDENCE: "not answered here (no GPU, nothing recorded, not checked)",
    }
    return [(t, meaning[t.key]) for t in HERE.values()]
