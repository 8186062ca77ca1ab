"""Many rows in one executemany (db/bulk.py): what each row stores is what SQLAlchemy's own
``insert`` stores, value for value, on both stores - NUL shown as U+2400, JSON, booleans,
floats, NULL, a column left to its default - and the statements it sends are counted
like any other."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, insert, select

from db import bulk
from db import models as m
from db.store import Store

pytestmark = pytest.mark.both_stores


def _run(store: Store) -> int:
    """A candidate and a run for the child rows to belong to."""
    from survey.evidence.ingest import ingest
    from tests.conftest import report_bytes

    with store.session() as s:
        return ingest(s, report_bytes("cpu-triton-3.6.0.json"), candidate="bulk", label="Bulk").run_id


def _mode_rows(run_id: int, first: int) -> list[dict[str, Any]]:
    # stderr_tail and hung_at_exit are left out: their column defaults fill them
    return [{"run_id": run_id, "ord": first + i, "backend": b, "mode": mode, "env": "live", "stub": stub,
             "outcome": "ok", "rule": None, "library": lib, "signal": None, "exc_type": exc,
             "message_id": None, "exit_code": code, "duration_s": dur, "attempts": attempts,
             "outcome_counts": counts}
            for i, (b, mode, stub, lib, exc, code, dur, attempts, counts) in enumerate([
                ("cupti", None, False, None, None, 0, 0.25, None, None),
                ("roctracer", "pcsampling", True, "lib\x00rocm.so", "Err\x00or", -11, 1e-7,
                 [{"outcome": "ok", "note": "a\x00b"}], {"ok": 2}),
                ("instrumentation", "periodic_flushing", False, "libü.so", "ValueError", None, 3.0, [], {}),
            ])]


def _stored(store: Store, run_id: int, first: int) -> list[dict[str, Any]]:
    table = m.ModeRow.__table__
    with store.session() as s:
        return [{k: v for k, v in row._mapping.items() if k != "ord"} for row in s.execute(
            select(table).where(table.c.run_id == run_id, table.c.ord >= first, table.c.ord < first + 3)
            .order_by(table.c.ord))]


def test_rows_stored_by_one_executemany_read_back_as_sqlalchemy_stores_them(store: Store) -> None:
    run_id = _run(store)
    table = m.Base.metadata.tables["mode_results"]
    sent: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    with store.engine.begin() as conn:
        conn.execute(insert(table), _mode_rows(run_id, 1000))
        sent.clear()
        bulk.insert_rows(conn, table, _mode_rows(run_id, 2000))
        assert len(sent) == 1 and sent[0].startswith("INSERT INTO mode_results")
        bulk.insert_rows(conn, table, [])  # nothing to insert: no statement
        assert len(sent) == 1
    theirs, ours = _stored(store, run_id, 1000), _stored(store, run_id, 2000)
    assert len(ours) == 3 and ours == theirs
    assert ours[1]["library"] == "lib\u2400rocm.so" and ours[1]["exc_type"] == "Err\u2400or"  # NUL shown
    assert ours[1]["attempts"] == [{"outcome": "ok", "note": "a\x00b"}]  # JSON keeps what JSON can hold
    assert ours[0]["stderr_tail"] == "" and ours[0]["hung_at_exit"] is False  # the columns' defaults


def test_a_left_out_column_whose_default_is_a_function_is_refused(store: Store) -> None:
    table = m.Base.metadata.tables["library_results"]  # backends: default=list
    row = {"run_id": _run(store), "ord": 0, "name": "libcupti.so", "loads": True, "error_id": None,
           "versioned_only": False, "fix_id": None}
    with store.engine.begin() as conn, pytest.raises(ValueError, match="library_results.backends"):
        bulk.insert_rows(conn, table, [row])
