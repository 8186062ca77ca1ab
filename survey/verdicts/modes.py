"""Does this build accept (backend, mode)? One verdict per check, from the live
result, else from the stub-library rerun where the library failed first.

verdict: an :class:`Acceptance`; source: live | stub | None.

``run_verdicts`` reads a run's own checks; ``published_verdicts`` reads them as
published, pooled over every run of the same environment (``survey.verdicts.stability``:
a check seen unstable in any of them is unstable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session, object_session

from db import models as m
from probes import outcomes as O
from survey.verdicts.stability import published_rows

MODE_ORDER = {None: 0, "pcsampling": 1, "periodic_flushing": 2, "default": 3, "mma": 4}
BACKEND_ORDER = {b: i for i, b in enumerate(O.BACKENDS)}


class Acceptance(StrEnum):
    """Does the build accept (backend, mode)? The verdict of one check."""

    ACCEPTED = "accepted"  # proton.start() succeeded (live, or with a stub library)
    REFUSED = "refused"  # the build refuses the mode
    ABSENT = "absent"  # the build has no such backend
    UNKNOWN = "unknown"  # no answer here: no GPU, a crash, a hang, unstable, a library missing with no stub


REFUSAL_REASONS = {
    "unsupported-mode": "unsupported mode",
    "unknown-mode": "unknown mode",
    "pcsampling-not-built": "built without rocprofiler-sdk PC sampling support",
}


@dataclass
class ModeVerdict:
    """Does this build accept (backend, mode)? From the live check, else the stub."""

    backend: str
    mode: str | None
    outcome: str  # the live (clean) outcome
    verdict: Acceptance
    source: str | None  # live | stub | None
    reason: str
    library: str | None = None
    stub_outcome: str | None = None
    rule: str | None = None
    message: str | None = None
    live_id: int | None = None  # the live check's place in its run's modes (db.models.ModeRow.ord)
    stub_id: int | None = None  # the stub rerun's
    stub_rule: str | None = None


def mode_verdict(live: Any, stub: Any | None) -> ModeVerdict:
    """From a stored check (``db.models.ModeRow``) or a published one
    (``survey.verdicts.stability.PublishedRow``), and its stub rerun."""
    v = ModeVerdict(live.backend, live.mode, live.outcome, Acceptance.UNKNOWN, None, "", live.library,
                    stub.outcome if stub else None, live.rule, live.message, live.ord, stub.ord if stub else None,
                    stub.rule if stub else None)
    o = live.outcome
    if o == O.OK:
        v.verdict, v.source, v.reason = Acceptance.ACCEPTED, "live", "proton.start() succeeded"
    elif o == O.UNSUPPORTED_MODE:
        v.verdict, v.source = Acceptance.REFUSED, "live"
        v.reason = REFUSAL_REASONS.get(live.rule or "", "refused") + f": {live.message}"
    elif o == O.UNKNOWN_BACKEND:
        v.verdict, v.source, v.reason = Acceptance.ABSENT, "live", f"backend absent: {live.message}"
    elif o == O.LIBRARY_MISSING:
        base = f"`{live.library}` did not load before the mode was looked at"
        if stub is None:
            v.reason = base + " (no stub rerun)"
        elif stub.outcome == O.OK:
            v.verdict, v.source = Acceptance.ACCEPTED, "stub"
            v.reason = base + "; with a stub library proton.start() succeeded"
        elif stub.outcome == O.UNSUPPORTED_MODE:
            v.verdict, v.source = Acceptance.REFUSED, "stub"
            v.reason = base + "; with a stub library: " + REFUSAL_REASONS.get(stub.rule or "", "refused") + \
                f" ({stub.message})"
        else:
            v.reason = base + f"; with a stub library: {stub.outcome} ({stub.message or stub.signal or ''})"
    elif o == O.NO_GPU:
        v.reason = f"no GPU where it was probed: {live.message}"
    elif o == O.UNSTABLE:
        counts = ", ".join(f"{k} x{n}" for k, n in sorted((live.outcome_counts or {}).items()))
        runs = getattr(live, "runs", 1)
        over = f" over {runs} runs of this environment" if runs > 1 else ""
        v.reason = f"unstable: repeated attempts disagreed{over} ({counts})"
    elif o == O.CRASH:
        v.reason = f"the check crashed ({live.signal})"
    elif o == O.TIMEOUT:
        v.reason = "the check hung and was killed at the timeout"
    elif o == O.DISABLED:
        v.reason = "Proton is disabled (TRITON_PROTON_DISABLE)"
    elif o == O.DEVICES_ENV_REJECTED:
        v.reason = live.message or "device-visibility variable rejected"
    else:
        v.reason = f"not recognised: {live.message}"
    return v


def run_verdicts(run: m.Run, rows: Sequence[Any] | None = None) -> list[ModeVerdict]:
    """The run's verdicts, from its own checks (or ``rows``: the same checks as published)."""
    checks = run.modes if rows is None else rows
    live = [r for r in checks if r.env == "clean" and not r.stub]
    stubs = {(r.backend, r.mode): r for r in checks if r.env == "clean" and r.stub}
    out = [mode_verdict(r, stubs.get((r.backend, r.mode))) for r in live]
    out.sort(key=lambda v: (BACKEND_ORDER.get(v.backend, 99), MODE_ORDER.get(v.mode, 9)))
    return out


_PUBLISHED = "proton-survey.verdicts.published"


def remember(s: Session, run_id: int, verdicts: list[ModeVerdict]) -> None:
    """Give :func:`published_verdicts` the run's verdicts as a reader already has them
    (``survey.verdicts.summary``: from the stored cells), for this database session."""
    s.info.setdefault(_PUBLISHED, {})[run_id] = verdicts
    s.info.get(_BY_CHECK, {}).pop(run_id, None)


_BY_CHECK = "proton-survey.verdicts.published-by-check"


def published_checks(run: m.Run) -> dict[tuple[str, str | None], ModeVerdict]:
    """(backend, mode) -> the run's published verdict (the first of :func:`published_verdicts`
    for it), kept for the database session as they are."""
    s = object_session(run)
    memo: dict[int, dict[tuple[str, str | None], ModeVerdict]] = s.info.setdefault(_BY_CHECK, {}) \
        if s is not None else {}
    found = memo.get(run.id)
    if found is None:
        found = {}
        for v in published_verdicts(run):
            found.setdefault((v.backend, v.mode), v)
        if s is not None:
            memo[run.id] = found
    return found


def published_verdicts(run: m.Run) -> list[ModeVerdict]:
    """The run's verdicts as published: each check pooled over every complete run
    of the same environment, platform and probe version (``survey.verdicts.stability``).
    Worked out once per run and Session (kept in ``Session.info``, as stability keeps
    its pools: a Session is one command or one request)."""
    s = object_session(run)
    if s is None:
        return run_verdicts(run, published_rows(run))
    memo = s.info.setdefault(_PUBLISHED, {})
    found = memo.get(run.id)
    if found is None:
        found = memo[run.id] = run_verdicts(run, published_rows(run))
    return list(found)
