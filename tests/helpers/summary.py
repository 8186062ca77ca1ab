"""The stored cells (survey.verdicts.summary) against the cells worked out from the runs:
``assert_kept`` holds after every write that keeps the summary current."""

from __future__ import annotations

from typing import Any

from db.store import Store
from survey.evidence import queries
from survey.verdicts import cells as cells_mod
from survey.verdicts import facts as facts_mod
from survey.verdicts import summary

NAMES = ("cpu-triton-3.6.0.json", "cpu-triton-3.7.1.json", "cpu-triton-3.8.0.json", "cpu-triton-3.9.0.json",
         "h200-sm90-triton-3.6.0.json")


def worked_out(store: Store) -> dict[int, list[dict[str, Any]]]:
    """Slot id -> its cells worked out from the runs, in a fresh session and cache."""
    cells_mod._CELLS.clear()
    with store.session() as s:
        slots = [sl for sl in queries.slots(s, "all", checks=False) if sl.complete is not None]
        worked = cells_mod.run_cells(s, [sl.complete for sl in slots])  # type: ignore[misc]
        return {sl.id: worked[sl.complete.id] for sl in slots}  # type: ignore[misc, union-attr]


def kept(store: Store) -> dict[int, list[dict[str, Any]]]:
    with store.session() as s:
        assert summary.current(s), "the stamp is not current"
        ids = [sl.id for sl in queries.slots(s, "all", checks=False) if sl.complete is not None]
        stored = summary.stored_cells(s, [i for i in ids if i is not None])
        return {i: stored.get(i, []) for i in ids}  # type: ignore[misc]


def facts_worked_out(store: Store) -> dict[int, facts_mod.Facts]:
    """Slot id -> its facts worked out from the runs (their published verdicts pooled
    again, not read back from the cells), in a fresh session and cache."""
    cells_mod._CELLS.clear()
    with store.session() as s:
        slots = [sl for sl in queries.slots(s, "all") if sl.complete is not None]
        worked = cells_mod.run_cells(s, [sl.complete for sl in slots])  # type: ignore[misc]
        return {sl.id: facts_mod.facts_of(sl.complete, worked[sl.complete.id])  # type: ignore[misc, union-attr]
                for sl in slots}


def assert_kept(store: Store) -> None:
    want = worked_out(store)
    assert want and all(want.values())
    assert kept(store) == want
    facts = facts_worked_out(store)
    assert facts.keys() == want.keys()
    with store.session() as s:  # the docs table's facts of each slot, kept beside its cells
        assert summary.stored_facts(s, facts) == facts
