"""bench/bench_api.py sets /matrix.json against datasette running one SQL query over the
same file: that query must run on the schema the store has now, and answer as many rows
as the page it stands in for. (Migration 0010 keyed a run's checks by their place and
kept their messages in ``texts``; the query still asked for ``m.id`` and ``m.message``,
and datasette answered 400 until a measurement tried it.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app
from db.store import Store
from tests.helpers.scripts import load_script

ROOT = Path(__file__).parent.parent


def _bench_api() -> Any:
    return load_script(ROOT / "bench" / "bench_api.py", "bench_api")


def test_the_canned_query_answers_as_many_rows_as_the_page(tmp_path: Path) -> None:
    bench = _bench_api()
    db = tmp_path / "survey.db"
    bench.fill_store(str(db))
    store = Store(f"sqlite:///{db}")
    try:
        with TestClient(create_app(store)) as client:
            page = client.get("/matrix.json")
        assert page.status_code == 200
        ours = json.loads(page.content)
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(bench.MATRIX_SQL, {"limit": 10_000})]
    assert ours["count"] > 0 and len(rows) == ours["count"]
    mine = sorted((r["candidate"], r["backend"], r["mode"], r["outcome"]) for r in ours["rows"])
    theirs = sorted((r["candidate"], r["backend"], r["mode"], r["outcome"]) for r in rows)
    assert theirs == mine  # the same checks of the same runs, each with its outcome
