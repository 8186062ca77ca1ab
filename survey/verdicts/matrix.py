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
from collections import OrderedDict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from db import models as m
from survey.core import errortext
from survey.core.sizes import approx_bytes
from survey.evidence import queries
from survey.evidence.queries import iso, mode_from_label, mode_label
from survey.verdicts import stability
from survey.verdicts.modes import published_verdicts
from survey.verdicts.rows import EMPTY
from survey.verdicts.verdict import runs_here


class Cells:
    """(report sha256, the complete runs of its environment) -> the run's checks, as matrix
    row parts; at most ``max_bytes`` of them (:func:`survey.core.sizes.approx_bytes`), the
    least recently used going first."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, tuple[int, ...]], tuple[list[dict[str, Any]], int]] = OrderedDict()

    def get(self, key: tuple[str, tuple[int, ...]]) -> list[dict[str, Any]] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, tuple[int, ...]], cells: list[dict[str, Any]]) -> None:
        size = cells_bytes(cells) + approx_bytes(key)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if size > self.max_bytes:
                return
            self._entries[key] = (cells, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


def cells_bytes(cells: list[dict[str, Any]]) -> int:
    """What one run's cells hold, from their shape (every cell has the same keys): the
    walk of :func:`survey.core.sizes.approx_bytes` for the first, the text of the rest."""
    if not cells:
        return approx_bytes(cells)
    first = approx_bytes(cells[0])
    base = first - sum(len(v) for v in cells[0].values() if isinstance(v, str))
    return approx_bytes([]) + 8 * len(cells) + first + sum(
        base + sum(len(v) for v in c.values() if isinstance(v, str)) for c in cells[1:])


CELLS_BYTES = 64 * 2**20
_CELLS = Cells(CELLS_BYTES)


def _cells_of(run: m.Run) -> list[dict[str, Any]]:
    captures = {(c.backend, c.mode): c for c in run.captures}
    out = []
    for v in published_verdicts(run):
        cap = captures.get((v.backend, v.mode))
        here, cause = runs_here(run, v.backend, v.mode, v)
        out.append({
            "backend": v.backend,
            "mode": mode_label(v.mode),
            "mode_arg": v.mode,
            "outcome": v.outcome,
            "verdict": v.verdict,
            "verdict_source": v.source,
            "here": here,
            "cause": cause,
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
    known: dict[int, list[dict[str, Any]]] = {}
    for r in runs:
        found = _CELLS.get((r.report_hash, sig[r.id])) if r.report_hash else None
        if found is not None:
            known[r.id] = found
    missing = [r.id for r in runs if r.id not in known]
    if missing:
        loaded = list(s.scalars(select(m.Run).where(m.Run.id.in_(missing))  # what _cells_of reads
                                .options(selectinload(m.Run.modes), selectinload(m.Run.captures))))
        stability.pooled(s, loaded)  # every environment's runs in one query
        for r in loaded:
            cells = known[r.id] = _cells_of(r)
            if r.report_hash:
                _CELLS.put((r.report_hash, sig[r.id]), cells)
    return known


def _slots(s: Session, scope: str, candidate: str | None, platform: str | None) -> list[queries.Slot]:
    return queries.slots(s, scope, candidate, checks=False, platform=platform or None)


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
    slots = queries.slots(s, scope, candidate, checks=False, platform=platform or None, start=start, size=size)
    return rows_of(s, slots), queries.count_slots(s, scope, candidate, platform or None)


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

