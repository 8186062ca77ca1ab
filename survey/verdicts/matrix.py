"""The matrix: every (candidate, platform) x backend x mode, in one tidy row each
(every key of ``survey.verdicts.rows.MatrixRow``, in its order).

Catalog candidates only, unless ``scope="all"``: ad-hoc evidence (targets checked
by path or image, reports ingested under no catalog name) is kept but not
published. A (candidate, platform) without a complete run gives one row with its
status (unobtainable, failed, not_probed) and no outcome.

What a complete run says of each (backend, mode) is its cells (``survey.verdicts.cells``):
kept in the store by the writer (``survey.verdicts.summary``) and read from there while
they are current, else worked out from the runs.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from survey.core import errortext
from survey.evidence import queries
from survey.evidence.queries import iso, mode_from_label
from survey.verdicts import summary
from survey.verdicts.cells import row_part, run_cells
from survey.verdicts.rows import EMPTY


def matrix(
    s: Session,
    *,
    backend: str | None = None,
    mode: str | None = None,
    candidate: str | None = None,
    outcome: str | None = None,
    verdict: str | None = None,
    platform: str | None = None,
    scope: str = "catalog",
) -> list[dict[str, Any]]:
    """Every row of the ``scope``'s slots, filtered (``mode``: a label, ``none`` for no mode)."""
    only = summary.matching(backend, mode, outcome, verdict) if summary.current(s) else None
    slots = queries.slots(s, scope, candidate, checks=False, platform=platform or None, only=only)
    return rows_of(s, slots, backend=backend, mode=mode, outcome=outcome, verdict=verdict)


def page(s: Session, start: int, size: int, *, candidate: str | None = None, platform: str | None = None,
         scope: str = "catalog", backend: str | None = None, mode: str | None = None, outcome: str | None = None,
         verdict: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """The rows of (candidate, platform) slots ``start`` to ``start + size`` of those with
    a row that passes the filters, and how many such slots there are: a page of the
    grid, reading only its own slots (while the stored cells are current, the filters
    are part of the query; otherwise a filtered page works every slot out)."""
    filtered = bool(backend or outcome or verdict or mode is not None)
    only = summary.matching(backend, mode, outcome, verdict) if filtered and summary.current(s) else None
    if filtered and only is None:
        groups: list[list[dict[str, Any]]] = []
        for r in matrix(s, backend=backend, mode=mode, candidate=candidate, outcome=outcome, verdict=verdict,
                        platform=platform, scope=scope):
            if groups and (groups[-1][0]["candidate"], groups[-1][0]["platform"]) == (r["candidate"], r["platform"]):
                groups[-1].append(r)
            else:
                groups.append([r])
        return [r for g in groups[start:start + size] for r in g], len(groups)
    slots = queries.slots(s, scope, candidate, checks=False, platform=platform or None, start=start, size=size,
                          only=only)
    # The count takes a condition of its own, which reads the filter's cells through their
    # index (the page's stops at its last slot; a count reads every slot).
    return (rows_of(s, slots, backend=backend, mode=mode, outcome=outcome, verdict=verdict),
            queries.count_slots(s, scope, candidate, platform or None,
                                summary.matching(backend, mode, outcome, verdict, counting=True)
                                if only is not None else None))


def rows_of(s: Session, slots: list[queries.Slot], *, backend: str | None = None, mode: str | None = None,
            outcome: str | None = None, verdict: str | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    mode_filter = mode_from_label(mode) if mode is not None else "__any__"
    cells = _cells(s, slots)
    parts: dict[int, dict[str, Any]] = {}  # a cell's row keys, once per cell (stored cells are shared)
    for slot in slots:
        cand = slot.candidate
        base = {**EMPTY, "candidate": cand.name, "label": cand.label, "kind": cand.kind, "scope": cand.scope,
                "platform": slot.platform_key, "platform_label": slot.platform_label}
        complete, last = slot.complete, slot.last
        if complete is None:
            if outcome or backend or verdict or mode is not None:
                continue
            rows.append({**base, "status": last.status if last is not None else "not_probed",
                         "error": errortext.cause(last.error, cand.spec) if last is not None else None,
                         "date": iso(last.finished_at) if last else None, "run_id": last.id if last else None,
                         "tries": last.tries if last else None,
                         "backend": None, "mode": None, "mode_arg": None, "outcome": None, "verdict": None})
            continue
        head = {**base, "status": "measured", "triton_version": complete.triton_version,
                "environment": complete.environment.label if complete.environment else None,
                "run_id": complete.id, "date": iso(complete.finished_at), "image_digest": complete.image_digest,
                "evidence": f"/runs/{complete.id}",
                "last_attempt": last.status if last is not None and last.id != complete.id else None}
        for cell in cells.get(complete.id, []):
            if backend and cell["backend"] != backend:
                continue
            if mode_filter != "__any__" and cell["mode_arg"] != mode_filter:
                continue
            if outcome and cell["outcome"] != outcome:
                continue
            if verdict and cell["verdict"] != verdict:
                continue
            part = parts.get(id(cell))
            if part is None:
                part = parts[id(cell)] = row_part(cell)
            rows.append({**head, **part})  # the keys in FIELDS order: base holds every one
    return rows



def _cells(s: Session, slots: list[queries.Slot]) -> dict[int, list[dict[str, Any]]]:
    """Complete run id -> its cells: stored while current (``survey.verdicts.summary``),
    else worked out from the runs."""
    measured = [(slot.id, slot.complete) for slot in slots if slot.complete is not None]
    if summary.current(s):
        stored = summary.stored_cells(s, [slot_id for slot_id, _ in measured if slot_id is not None])
        return {run.id: stored.get(slot_id, []) for slot_id, run in measured if slot_id is not None}
    return run_cells(s, [run for _, run in measured])
