"""One cell's history: a candidate's (backend, mode) over every run, newest first.

A cell of the matrix answers from the candidate's latest complete run on one
platform; its history is what every earlier run (and every attempt that did not
complete) said of the same (backend, mode), so a reader sees when an answer
changed and which run changed it. ``changed`` marks a complete run whose
(outcome, verdict) differs from the next older complete run's on the same
platform.

``attempts`` is what the run's own attempts of the live check said (``crash x4,
library_missing x2``); ``published`` is the outcome the environment's runs are
published with (``survey.verdicts.stability``: ``unstable`` once any of them disagreed),
which is what the matrix and the docs table show.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from db import models as m
from survey.core import errortext
from survey.evidence import queries
from survey.evidence.queries import iso, mode_label
from survey.verdicts import stability
from survey.verdicts.modes import run_verdicts

COLUMNS = ["run_id", "date", "status", "platform", "triton_version", "environment", "outcome", "attempts",
           "published", "verdict", "verdict_source", "stub_outcome", "reason", "library", "changed", "error", "tries",
           "evidence"]


def platforms(s: Session, candidate: m.Candidate) -> list[str]:
    """The platform keys the candidate has runs on, sorted."""
    return sorted({slot.platform_key for slot in queries.slots(s, "all", candidate.name, checks=False)
                   if slot.platform_key})


def cell_history(s: Session, candidate: m.Candidate, backend: str, mode: str | None,
                 platform: str | None = None) -> list[dict[str, Any]]:
    """Every run of ``candidate`` (on ``platform``, if given), newest first, with what
    it said of (backend, mode)."""
    runs = list(s.scalars(queries.run_query().where(m.Run.candidate_id == candidate.id)
                          .order_by(m.Run.id.desc())))
    pooled = stability.pooled(s, [r for r in runs if r.status == "complete"])
    rows: list[dict[str, Any]] = []
    for run in runs:
        key = run.platform.key if run.platform is not None else None
        if platform and key != platform:
            continue
        row: dict[str, Any] = {c: None for c in COLUMNS}
        row.update(run_id=run.id, date=iso(run.finished_at), status=run.status, platform=key,
                   triton_version=run.triton_version, evidence=f"/runs/{run.id}")
        if run.status != "complete":
            row.update(error=errortext.cause(run.error, candidate.spec), tries=run.tries)
        else:
            row["environment"] = queries.provenance(run)["environment"]
            v = next((v for v in run_verdicts(run) if v.backend == backend and v.mode == mode), None)
            if v is None:
                row["error"] = f"this run did not check {backend} {mode_label(mode)}"
            else:
                row.update(outcome=v.outcome, verdict=v.verdict, verdict_source=v.source,
                           stub_outcome=v.stub_outcome, reason=errortext.normalise(v.reason), library=v.library)
                own = next((r for r in run.modes if r.ord == v.live_id), None)
                if own is not None and own.outcome_counts:
                    row["attempts"] = stability.counts_text(own.outcome_counts)
                p = pooled.get(run.id, {}).get((backend, mode, "clean", False))
                row["published"] = p.outcome if p is not None else v.outcome
        rows.append(row)
    older: dict[str | None, tuple[Any, Any]] = {}
    for row in reversed(rows):  # oldest first: compare with the previous complete run on the same platform
        if row["status"] != "complete":
            continue
        now = (row["outcome"], row["verdict"])
        before = older.get(row["platform"])
        row["changed"] = before is not None and before != now
        older[row["platform"]] = now
    return rows
