"""A run's checks as matrix row parts: the derivation of one (candidate, platform)'s cells
from its latest complete run (``survey.verdicts.matrix`` adds the candidate, platform and
provenance; ``survey.verdicts.summary`` keeps them in the store).

What a complete run says of each (backend, mode) depends on its report and on the
other complete runs of its environment (``survey.verdicts.stability``: a check seen
unstable in any of them is published unstable), so it is worked out once per store,
report and set of such runs (keyed by the store's engine, the report's sha256, which a
store holds once, and their ids: two stores in one process share report and run ids,
not rows) and kept in a cache bounded in bytes.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from sqlalchemy import inspect, select
from sqlalchemy.orm import Session, selectinload

from db import models as m
from survey.core import errortext
from survey.core.sizes import approx_bytes
from survey.evidence.queries import mode_label
from survey.verdicts import stability
from survey.verdicts.modes import ModeVerdict, published_verdicts
from survey.verdicts.verdict import runs_here

# The keys of one cell, in a matrix row's order (survey.verdicts.rows.FIELDS): what the
# derivation gives and the ``cells`` table holds.
KEYS = ("backend", "mode", "mode_arg", "outcome", "verdict", "verdict_source", "here", "cause", "stub_outcome",
        "library", "reason", "capture_outcome", "capture_kernel_count", "capture_gpu_time_ns")
# ... and the rest of the published verdict it comes from (ModeVerdict), kept beside them
VERDICT_KEYS = ("verdict_reason", "rule", "stub_rule", "message", "live_id", "stub_id")
ALL_KEYS = KEYS + VERDICT_KEYS


def row_part(cell: dict[str, Any]) -> dict[str, Any]:
    """The matrix row's keys of a cell."""
    return {k: cell[k] for k in KEYS}


def verdict_of(cell: dict[str, Any]) -> ModeVerdict:
    """The published verdict a cell was worked out from (its ``verdict`` an Acceptance)."""
    return ModeVerdict(cell["backend"], cell["mode_arg"], cell["outcome"], cell["verdict"],
                       cell["verdict_source"], cell["verdict_reason"], cell["library"], cell["stub_outcome"],
                       cell["rule"], cell["message"], cell["live_id"], cell["stub_id"], cell["stub_rule"])


Key = tuple[int, str, tuple[int, ...]]  # (the store's engine, the report's sha256, the environment's runs)
V = TypeVar("V")

_engines: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_numbers = itertools.count(1)
_engines_lock = threading.Lock()


def store_key(s: Session) -> int:
    """A number for the engine ``s`` reads through, never given to another engine of this
    process (a store opened again, as ``survey store replace`` does, gets a new engine)."""
    bind = s.get_bind()
    engine = getattr(bind, "engine", bind)
    with _engines_lock:
        number = _engines.get(engine)
        if number is None:
            number = _engines[engine] = next(_numbers)
        return number


class Cells(Generic[V]):
    """Values by key (for :data:`_CELLS`: (report sha256, the complete runs of its
    environment) -> the run's checks, as matrix row parts); at most ``max_bytes`` of them
    (:func:`survey.core.sizes.approx_bytes`, or the size :meth:`put` is told), the least
    recently used going first."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: V, size: int | None = None) -> None:
        """Keep ``value``; ``size``: its bytes, when it is not a list of cells (:func:`cells_bytes`)."""
        size = (cells_bytes(value) if size is None else size) + approx_bytes(key)  # type: ignore[arg-type]
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if size > self.max_bytes:
                return
            self._entries[key] = (value, size)
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
_CELLS: Cells[list[dict[str, Any]]] = Cells(CELLS_BYTES)


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
            "verdict_reason": v.reason,
            "rule": v.rule,
            "stub_rule": v.stub_rule,
            "message": v.message,
            "live_id": v.live_id,
            "stub_id": v.stub_id,
        })
    return out


def run_cells(s: Session, runs: list[m.Run]) -> dict[int, list[dict[str, Any]]]:
    """Each complete run's checks (backend, mode, outcome, verdict, reason, capture),
    loading the checks only of runs not seen before."""
    sig = stability.signature(s, runs)
    store = store_key(s)
    known: dict[int, list[dict[str, Any]]] = {}
    for r in runs:
        found = _CELLS.get((store, r.report_hash, sig[r.id])) if r.report_hash else None
        if found is not None:
            known[r.id] = found
    loaded = list({r.id: r for r in runs if r.id not in known}.values())
    if loaded:
        # what _cells_of reads, unless the caller's query loaded it (a writer's does)
        bare = [r.id for r in loaded if {"modes", "captures"} & inspect(r).unloaded]
        if bare:
            s.scalars(select(m.Run).where(m.Run.id.in_(bare))
                      .options(selectinload(m.Run.modes), selectinload(m.Run.captures))).all()
        stability.pooled(s, loaded)  # every environment's runs in one query
        for r in loaded:
            cells = known[r.id] = _cells_of(r)
            if r.report_hash:
                _CELLS.put((store, r.report_hash, sig[r.id]), cells)
    return known
