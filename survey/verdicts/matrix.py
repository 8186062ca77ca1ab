"""The matrix: every (candidate, platform) x backend x mode, in one tidy row each
(every key of ``survey.verdicts.rows.MatrixRow``, in its order).

Catalog candidates only, unless ``scope="all"``: ad-hoc evidence (targets checked
by path or image, reports ingested under no catalog name) is kept but not
published. A (candidate, platform) without a complete run gives one row with its
status (unobtainable, failed, not_probed) and no outcome.

What a complete run says of each (backend, mode) depends on its report and on the
other complete runs of its environment (``survey.verdicts.stability``: a check seen unstable
in any of them is published unstable), so it is worked out once per report and set
of such runs (keyed by the report's sha256, which a store holds once, and their
ids) and kept: after an ingest only the runs of the new run's environment are read.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy.orm import Session

from db import models as m
from survey.core import errortext
from survey.evidence import queries
from survey.evidence.queries import iso, mode_from_label, mode_label
from survey.verdicts import stability
from survey.verdicts.modes import published_verdicts
from survey.verdicts.rows import EMPTY

# (report sha256, the complete runs of its environment) -> the run's checks, as matrix row parts
_CELLS: dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]] = {}
_CELLS_LOCK = threading.Lock()
MAX_CACHED_REPORTS = 50_000


def _cells_of(run: m.Run) -> list[dict[str, Any]]:
    captures = {(c.backend, c.mode): c for c in run.captures}
    out = []
    for v in published_verdicts(run):
        cap = captures.get((v.backend, v.mode))
        out.append({
            "backend": v.backend,
            "mode": mode_label(v.mode),
            "mode_arg": v.mode,
            "outcome": v.outcome,
            "verdict": v.verdict,
            "verdict_source": v.source,
            "stub_outcome": v.stub_outcome,
            "library": v.library,
            "reason": errortext.normalise(v.reason),
            "capture_outcome": cap.outcome if cap else None,
            "capture_kernel_count": cap.kernel_count if cap else None,
            "capture_gpu_time_ns": cap.gpu_time_ns if cap else None,
        })
    return out


def run_cells(s: Session, runs: list[m.Run]) -> dict[int, list[dict[str, Any]]]:
    """Each complete run's checks (backend, mode, outcome, verdict, reason, capture),
    loading the checks only of runs not seen before."""
    sig = stability.signature(s, runs)
    with _CELLS_LOCK:
        known = {r.id: _CELLS[(r.report_hash, sig[r.id])] for r in runs
                 if r.report_hash and (r.report_hash, sig[r.id]) in _CELLS}
    missing = [r.id for r in runs if r.id not in known]
    if missing:
        loaded = list(s.scalars(queries.run_query().where(m.Run.id.in_(missing))))
        stability.pooled(s, loaded)  # every environment's runs in one query
        fresh = {r.id: (r.report_hash, _cells_of(r)) for r in loaded}
        with _CELLS_LOCK:
            if len(_CELLS) + len(fresh) > MAX_CACHED_REPORTS:
                _CELLS.clear()
            for run_id, (digest, cells) in fresh.items():
                if digest:
                    _CELLS[(digest, sig[run_id])] = cells
                known[run_id] = cells
    return known


def _slots(s: Session, scope: str, candidate: str | None, platform: str | None) -> list[queries.Slot]:
    return [slot for slot in queries.slots(s, scope, candidate, checks=False)
            if not platform or slot.platform_key == platform]


def matrix(
    s: Session,
    *,
    backend: str | None = None,
    mode: str | None = None,
    candidate: str | None = None,
    outcome: str | None = None,
    platform: str | None = None,
    scope: str = "catalog",
) -> list[dict[str, Any]]:
    return rows_of(s, _slots(s, scope, candidate, platform), backend=backend, mode=mode, outcome=outcome)


def page(s: Session, start: int, size: int, *, candidate: str | None = None, platform: str | None = None,
         scope: str = "catalog") -> tuple[list[dict[str, Any]], int]:
    """The rows of (candidate, platform) slots ``start`` to ``start + size``, and how
    many slots there are: a page of the grid, reading only its own slots (without a
    backend, mode or outcome filter every slot gives at least one row)."""
    slots = _slots(s, scope, candidate, platform)
    return rows_of(s, slots[start:start + size]), len(slots)


def rows_of(s: Session, slots: list[queries.Slot], *, backend: str | None = None, mode: str | None = None,
            outcome: str | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    mode_filter = mode_from_label(mode) if mode is not None else "__any__"
    cells = run_cells(s, [slot.complete for slot in slots if slot.complete is not None])
    for slot in slots:
        cand = slot.candidate
        base = {**EMPTY, "candidate": cand.name, "label": cand.label, "kind": cand.kind, "scope": cand.scope,
                "platform": slot.platform_key, "platform_label": slot.platform_label}
        complete, last = slot.complete, slot.last
        if complete is None:
            if outcome or backend or mode is not None:
                continue
            rows.append({**base, "status": last.status if last is not None else "not_probed",
                         "error": errortext.cause(last.error, cand.spec) if last is not None else None,
                         "date": iso(last.finished_at) if last else None, "run_id": last.id if last else None,
                         "tries": last.tries if last else None,
                         "backend": None, "mode": None, "mode_arg": None, "outcome": None, "verdict": None})
            continue
        prov = {"status": "measured", "triton_version": complete.triton_version,
                "environment": complete.environment.label if complete.environment else None}
        tail = {"run_id": complete.id, "date": iso(complete.finished_at), "image_digest": complete.image_digest,
                "evidence": f"/runs/{complete.id}",
                "last_attempt": last.status if last is not None and last.id != complete.id else None}
        for cell in cells[complete.id]:
            if backend and cell["backend"] != backend:
                continue
            if mode_filter != "__any__" and cell["mode_arg"] != mode_filter:
                continue
            if outcome and cell["outcome"] != outcome:
                continue
            rows.append({**base, **prov, **cell, **tail})
    return rows

