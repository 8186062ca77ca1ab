"""Uploads that arrive while a write is under way are stored together
(survey.flows.group_commit): in one transaction, each caller answered with its own run
once it is committed, and the stored cells still what the runs say. When the group's
transaction fails, each report is stored alone, so one report's failure is its own.

A write under way is the test holding the writer's turn: the callers are made to wait
by an event, not a timer."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import select

from db import models as m
from db.store import Store
from survey.core.errors import InvalidReport
from survey.environments import catalog as catalog_mod
from survey.evidence.ingest import MATRIX_VERSION, IngestResult, identify
from survey.flows.filing import new_filing
from survey.flows.group_commit import GroupCommit
from tests.conftest import report_bytes
from tests.conftest import report_variant as variant
from tests.helpers.summary import NAMES, assert_kept

pytestmark = pytest.mark.both_stores  # one transaction and its rollback are the store's


def version(store: Store) -> int:
    with store.session() as s:
        return int(s.scalar(select(m.Meta.value).where(m.Meta.key == MATRIX_VERSION)) or 0)


def runs(store: Store) -> dict[int, str]:
    with store.session() as s:
        return {r.id: r.candidate.name for r in s.scalars(select(m.Run))}


def store_together(writer: GroupCommit, uploads: list[tuple[bytes, str | None]]) -> list[Any]:
    """Each upload by a thread of its own while the test holds a write under way; what
    each caller got (its result, or what it raised)."""
    catalog = catalog_mod.load(None)
    answers: list[Any] = [None] * len(uploads)

    def upload(i: int, raw: bytes, candidate: str | None) -> None:
        ident = identify(raw, exact=True)
        try:
            answers[i] = writer.store_report(ident, new_filing(ident, candidate=candidate, label=None,
                                                               catalog=catalog))
        except Exception as e:  # noqa: BLE001 - the test looks at what it was
            answers[i] = e

    threads = [threading.Thread(target=upload, args=(i, raw, name)) for i, (raw, name) in enumerate(uploads)]
    with writer._turn:  # a write under way: every upload waits for the next one
        for t in threads:
            t.start()
        assert writer.wait_for(len(uploads), timeout=120), f"{writer.waiting()} of {len(uploads)} uploads came"
    for t in threads:
        t.join()
    assert writer.waiting() == 0
    return answers


def test_uploads_waiting_for_a_write_are_stored_in_one_transaction(store: Store) -> None:
    writer = GroupCommit(store, source="upload")
    first = writer.store_report(identify(report_bytes(NAMES[0])), new_filing(
        identify(report_bytes(NAMES[0])), candidate="alone", label=None, catalog=catalog_mod.load(None)))
    assert first.created and version(store) == 1  # alone: written at once, its own transaction
    uploads = [(variant(NAMES[1], "/venvs/a", "2026-12-03T01:00:00+00:00"), "a"),
               (variant(NAMES[2], "/venvs/b", "2026-12-03T02:00:00+00:00"), "b"),
               (variant(NAMES[2], "/venvs/b", "2026-12-03T02:00:00+00:00"), "b-again"),  # the same report
               (report_bytes(NAMES[0]), "elsewhere"),  # stored before the group
               (variant(NAMES[3], "/venvs/c", "2026-12-03T03:00:00+00:00"), None)]
    a, b, b_again, stored_before, c = store_together(writer, uploads)
    assert version(store) == 2  # the five in one transaction
    assert all(isinstance(x, IngestResult) for x in (a, b, b_again, stored_before, c))
    assert (a.created, c.created) == (True, True)
    assert (a.candidate, c.candidate) == ("a", "vm:python:/venvs/c")  # c: named by its origin
    # the same report twice: whichever came first in the group is stored, the other gets its run
    stored_b, again = (b, b_again) if b.created else (b_again, b)
    assert (stored_b.created, again.created, again.run_id) == (True, False, stored_b.run_id)
    assert stored_b.candidate in ("b", "b-again") and again.candidate == stored_b.candidate
    assert (stored_before.created, stored_before.run_id, stored_before.candidate) == (False, first.run_id, "alone")
    assert "already stored as run" in (stored_before.note or "")
    assert runs(store) == {first.run_id: "alone", a.run_id: "a", stored_b.run_id: stored_b.candidate,
                           c.run_id: c.candidate}
    assert_kept(store)  # every slot's stored cells are what its runs say


def test_when_the_group_fails_each_report_is_stored_alone_and_the_failure_is_its_own(store: Store) -> None:
    writer = GroupCommit(store, source="upload")
    # a 3.7.1 report filed as the catalog's triton-3.8.0: refused when it is written
    wrong = (report_bytes("cpu-triton-3.7.1.json"), "triton-3.8.0")
    good = [(variant(NAMES[0], "/venvs/x", "2026-12-03T01:00:00+00:00"), "x"),
            (variant(NAMES[3], "/venvs/y", "2026-12-03T02:00:00+00:00"), "y")]
    x, refused, y = store_together(writer, [good[0], wrong, good[1]])
    assert isinstance(refused, InvalidReport) and "triton-3.8.0" in str(refused)
    assert isinstance(x, IngestResult) and isinstance(y, IngestResult) and x.created and y.created
    assert runs(store) == {x.run_id: "x", y.run_id: "y"}  # nothing of the refused report
    assert version(store) == 2  # the group's transaction rolled back; then x and y, one each
    with store.session() as s:
        assert s.scalar(select(m.Candidate).where(m.Candidate.name == "triton-3.8.0")) is None
    assert_kept(store)
