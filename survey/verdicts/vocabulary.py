"""The words and colours of a verdict, declared once: every surface (``survey
table`` and its grid, ``survey check``, ``/matrix`` in HTML, JSON, CSV and Markdown,
an environment's page, ``/check``, badges, ``/diff``) says a cell with these.

A cell answers two questions, and says both when they differ:

- **here** (:data:`HERE`): will (backend, mode) run in this environment, on this
  platform? ``runs``, ``cannot_run`` or ``not_enough_evidence``, with a cause
  (:data:`CAUSES`); this is ``survey check``'s verdict
  (``survey.verdicts.answers.runs_here``), and it gives the cell its colour.
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


@dataclass(frozen=True)
class Term:
    """How one verdict is said: its words, its mark, its colour."""

    key: str  # the value stored and served (``cannot_run``)
    words: str  # what a reader is told (``cannot run``)
    mark: str  # one character for the terminal grid and the page's cells
    colour: str  # the colour, in words
    terminal: str  # the colour on a terminal (Rich)
    hex: str  # the badge's colour
    shields: str  # the colour's name for a shields.io endpoint


HERE: dict[str, Term] = {t.key: t for t in (
    Term("runs", "runs", "✓", "green", "green", "#2e7d32", "success"),
    Term("cannot_run", "cannot run", "✗", "red", "red", "#c62828", "critical"),
    Term("not_enough_evidence", "not enough evidence", "?", "grey", "blue", "#6d6d6d", "inactive"),
)}

# Why it cannot run, or why there is not enough evidence: in words, as a reader is told.
CAUSES: dict[str, str] = {
    "no_triton": "no Triton here",
    "not_checked": "not checked by the probe",
    "disabled": "Proton disabled by the environment",
    "devices_env_rejected": "device-visibility variable rejected",
    "backend_absent": "no such backend in the build",
    "mode_refused": "mode refused by the build",
    "library_missing": "runtime library missing here",
    "capture_empty": "the capture recorded nothing",
    "capture_failed": "the capture failed",
    "no_gpu": "no GPU here",
    "unstable": "unstable: attempts disagreed",
    "crashed": "the check crashed",
    "hung": "the check hung",
    "unrecognised_error": "an unrecognised error",
    "not_probed": "not probed here",
    "unobtainable": "cannot be obtained here",
}

# What the build does with the mode, in words.
BUILD: dict[str, str] = {
    "accepted": "supported by the build",
    "refused": "refused by the build",
    "absent": "no such backend in the build",
    "unknown": "build support unknown",
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
    return row.get("verdict") == "accepted" and row.get("here") != "runs"


def build_note(row: Mapping[str, Any]) -> str | None:
    """The build's answer, where a cell must say it beside its verdict here: the build
    supports the mode but it does not run here (``supported by the build``); None
    where the verdict and its cause say it already."""
    if not differs(row) or row.get("cause") in ("mode_refused", "backend_absent"):
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
        "runs": "proton.start() took it here (and its GELU capture worked, where one ran)",
        "cannot_run": "it will not run here (survey check says why, and the fix)",
        "not_enough_evidence": "not answered here (no GPU, nothing recorded, not checked)",
    }
    return [(t, meaning[t.key]) for t in HERE.values()]
