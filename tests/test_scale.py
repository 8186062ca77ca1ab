"""A request reads what its answer needs, not the store: on a store of 1,000 runs
(bench/bench_scale.py's generator: 100 candidates, ten runs each, platforms rotating)
the first matrix page, the filtered pages and ``/matrix.json`` each issue at most a
fixed number of statements (counted on the engine), and none of those statements
scans a table that grows with the runs (SQLite's ``EXPLAIN QUERY PLAN``;
PostgreSQL's ``EXPLAIN`` with sequential scans priced out, so one shows only where
no index serves). A write of a batch of reports reads what it writes: no more look-ups
for eight reports than for one. Both stores: the database decides the plan."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select, text
from sqlalchemy.engine.default import CACHE_MISS

from db import models as m
from db.store import Store
from survey.evidence.ingest import Filing, Identified, identify, ingest_many
from survey.render import docs_table
from survey.verdicts import cells as cells_mod
from survey.verdicts import matrix as survey_matrix
from survey.verdicts import summary
from tests.helpers.scripts import load_script

pytestmark = pytest.mark.both_stores

RUNS = 1000
# Tables that grow with the runs: no statement of a request may read one whole.
GROWING = ("runs", "reports", "mode_results", "library_results", "capture_results", "slots", "cells",
           "slot_facts")
MAX_STATEMENTS = 30  # a page's own reads; a per-slot or per-run query would pass this at once
PAGE = 20  # slots per filtered page: a small part of the store's (about 280)


def _bench() -> Any:
    return load_script(Path(__file__).parent.parent / "bench" / "bench_scale.py", "bench_scale")


@pytest.fixture(scope="module")
def reports() -> list[tuple[Identified, Filing]]:
    """bench/bench_scale.py's RUNS reports, read and identified once for both stores."""
    bench = _bench()
    tpls = bench.templates()
    items = []
    for i in range(RUNS):
        name, raw = bench.variant(tpls, i, RUNS)
        items.append((identify(raw), Filing(name, name, position=i % (RUNS // 10), scope="catalog")))
    return items


@contextmanager
def statements(store: Store) -> Iterator[list[tuple[str, Any]]]:
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", record)


@contextmanager
def runs_loaded() -> Iterator[list[int]]:
    """The ids of the runs the ORM builds while the block runs."""
    seen: list[int] = []

    def record(run: m.Run, _context: Any) -> None:
        seen.append(run.id)

    event.listen(m.Run, "load", record)
    try:
        yield seen
    finally:
        event.remove(m.Run, "load", record)


def plan_of(store: Store, statement: str, params: Any) -> str:
    """The store's plan of a statement (PostgreSQL's with sequential scans off: a table of a
    few rows is read whole whatever its indexes)."""
    with store.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        cur = raw.cursor()
        try:
            if store.engine.dialect.name == "sqlite":
                cur.execute("EXPLAIN QUERY PLAN " + statement, params)
                return "\n".join(str(row[-1]) for row in cur.fetchall())
            cur.execute("SET enable_seqscan = off")
            cur.execute("EXPLAIN " + statement, params)
            plan = "\n".join(str(row[0]) for row in cur.fetchall())
            cur.execute("RESET enable_seqscan")
            return plan
        finally:
            cur.close()


def full_scans(store: Store, seen: list[tuple[str, Any]], growing: tuple[str, ...] = GROWING) -> list[str]:
    """The statements (with their plan) that read a growing table whole."""
    bad = []
    for statement, params in seen:
        if not statement.lstrip().upper().startswith("SELECT"):
            continue
        plan = plan_of(store, statement, params)
        scans = re.findall(r"\bSCAN (\w+)" if store.engine.dialect.name == "sqlite" else r"Seq Scan on (\w+)", plan)
        if any(t in growing for t in scans):
            bad.append(f"{statement}\n{plan}")
    return bad


@pytest.fixture
def big_store(store: Store, reports: list[tuple[Identified, Filing]]) -> Store:
    with store.session() as s:
        ingest_many(s, reports)
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text("ANALYZE"))  # SQLite without statistics takes every table for a large one
    return store


def test_a_request_reads_its_own_slots_on_a_store_of_a_thousand_runs(big_store: Store, make_client: Any) -> None:
    store = big_store
    with store.session() as s:
        total = survey_matrix.queries.count_slots(s, "catalog")
    assert total > 200  # 100 candidates on two or three platforms each
    asks = {  # what -> (slots asked for, the ask)
        "first page": (100, lambda s: survey_matrix.page(s, 0, 100)),
        "a later page": (50, lambda s: survey_matrix.page(s, 200, 50)),
        "one platform": (100, lambda s: survey_matrix.page(s, 0, 100, platform="none:aarch64")),
        "one candidate": (100, lambda s: survey_matrix.page(s, 0, 100, candidate="scale-00042")),
        "one backend": (PAGE, lambda s: survey_matrix.page(s, 0, PAGE, backend="cupti")),
        "a later page of one backend": (PAGE, lambda s: survey_matrix.page(s, 100, PAGE, backend="instrumentation")),
        "one mode": (PAGE, lambda s: survey_matrix.page(s, 0, PAGE, mode="pcsampling")),
        "one outcome": (PAGE, lambda s: survey_matrix.page(s, 0, PAGE, outcome="no_gpu")),
        "one verdict": (PAGE, lambda s: survey_matrix.page(s, 0, PAGE, verdict="refused")),
        "backend and outcome": (PAGE, lambda s: survey_matrix.page(s, 0, PAGE, backend="cupti", outcome="ok")),
    }
    for what, (size, ask) in asks.items():
        with statements(store) as seen, runs_loaded() as loaded, store.session() as s:
            rows, _total = ask(s)
        assert rows, what
        # a page builds its own slots' runs (latest and latest complete), not every slot's
        assert len(loaded) <= 2 * size, f"{what}: {len(loaded)} runs loaded"
        assert len(seen) <= MAX_STATEMENTS, f"{what}: {len(seen)} statements"
        assert full_scans(store, seen) == [], what + ":\n" + "\n\n".join(full_scans(store, seen))
    # A filtered page's count of its slots reads the cells of the value asked for, through its
    # index: read slot by slot, every slot's cells were 70-100 ms of a filtered page at 100,000 runs.
    for flt, index in (({"outcome": "no_gpu"}, "ix_cells_outcome"), ({"verdict": "refused"}, "ix_cells_verdict"),
                       ({"backend": "cupti"}, "ix_cells_backend")):
        with statements(store) as seen, store.session() as s:
            survey_matrix.page(s, 0, 10, **flt)
        counts = [(statement, params) for statement, params in seen if "count(*)" in statement]
        assert len(counts) == 1 and index in plan_of(store, *counts[0]), (flt, counts, plan_of(store, *counts[0]))
    # The detector detects: a read by a column no index leads with is a scan of every run.
    with statements(store) as seen, store.session() as s:
        s.execute(select(m.Run.id).where(m.Run.host == "host-1")).all()
    assert len(full_scans(store, seen)) == 1

    # The docs table (`survey table`, /matrix.md) reads each slot's kept facts, not its runs: no run
    # is built, and its statements do not grow with the slots (a store of 100,000 runs has 10,000 rows).
    with statements(store) as seen, runs_loaded() as loaded, store.session() as s:
        table = docs_table.build(s)
    assert len(table.rows) >= 100 and loaded == [] and len(seen) <= MAX_STATEMENTS, (len(loaded), len(seen))

    # The service's candidate filter looks up the one name asked for (a store of 100,000 runs
    # has 10,000 candidates: checking the name read them all, again after every upload).
    c = make_client(store)
    with statements(store) as seen:
        r = c.get("/matrix.json?candidate=scale-00042")
    assert r.status_code == 200 and {row["candidate"] for row in r.json()["rows"]} == {"scale-00042"}
    assert full_scans(store, seen, GROWING + ("candidates",)) == []
    r = c.get("/matrix.json?candidate=scale-nope")  # a name that is not stored: the answer lists the stored
    assert r.status_code == 422 and "no stored candidate is named 'scale-nope'; one of scale-00000" in r.text

    # `survey check` of a stored candidate looks up its name, and names where else a backend or mode
    # is from the cells of that backend and mode: it read every candidate, and the whole matrix.
    from survey.environments import catalog as catalog_mod
    from survey.flows import check as check_flow

    with store.session() as s:
        platform = survey_matrix.queries.slots(s, candidate="scale-00042", checks=False)[0].platform_key
    with statements(store) as seen, runs_loaded() as loaded, store.session() as s:
        target = check_flow.targets.resolve(s, "scale-00042", catalog_mod.load(None))
        answers = [check_flow.check_stored(s, "scale-00042", "scale-00042", backend, mode, platform)
                   for backend, mode in (("rocprofiler", None), ("roctracer", "pcsampling"), ("cupti", "pcsampling"))]
    assert target.how == "stored" and {a.cause for a in answers} >= {"backend_absent", "mode_refused"}
    assert len(loaded) <= 10 and len(seen) <= MAX_STATEMENTS * len(answers), (len(loaded), len(seen))
    assert all("and " in a.fix and " more" in a.fix for a in answers if a.cause == "backend_absent")
    where_else = [(st, p) for st, p in seen if "cells.verdict IN" in st and "count(" not in st]
    assert where_else
    if store.engine.dialect.name == "sqlite":  # PostgreSQL plans a store this small by its statistics
        assert all("ix_cells_backend (backend=? AND mode=? AND verdict=?)" in plan_of(store, st, p)
                   for st, p in where_else), [plan_of(store, st, p) for st, p in where_else]
    assert full_scans(store, seen, GROWING + ("candidates",)) == [], "\n\n".join(
        full_scans(store, seen, GROWING + ("candidates",)))

    # A write reads what it writes, not the store: a batch of eight reports of stored candidates
    # and platforms (as uploads that arrive together are) sends no more SELECTs than a batch of one,
    # a look-up per kind of row and not per report (on SQLite, besides the largest id of each table
    # whose new rows it numbers: db.bulk.number); none of them scans a growing table; and the eight
    # go in with as many writes as the one, but one per table of rows the one report had none of:
    # their runs, environments and slots in one statement each.
    bench = _bench()
    tpls = bench.templates()

    def write(first: int, n: int) -> list[tuple[str, Any]]:
        items = []
        for i in range(first, first + n):
            name, raw = bench.variant(tpls, i, RUNS)
            items.append((identify(raw), Filing(name, name, position=i % (RUNS // 10), scope="catalog")))
        with statements(store) as seen, store.session() as s:
            assert all(res.created for res in ingest_many(s, items, batch=n))
        return seen

    def selects(seen: list[tuple[str, Any]]) -> int:
        return sum(1 for statement, _ in seen if statement.lstrip().upper().startswith("SELECT"))

    def numbering(seen: list[tuple[str, Any]]) -> int:
        return sum(1 for statement, _ in seen if statement.startswith("SELECT max("))

    one, eight = write(RUNS, 1), write(RUNS + 1, 8)
    assert numbering(one) == 0 and numbering(eight) <= (3 if store.engine.dialect.name == "sqlite" else 0)
    assert selects(eight) - numbering(eight) <= selects(one), (selects(one), selects(eight))
    assert len(eight) - selects(eight) <= len(one) - selects(one) + 3, \
        "\n".join(statement.split("\n")[0][:70] for statement, _ in eight)
    assert full_scans(store, one + eight) == [], "\n\n".join(full_scans(store, one + eight))


def test_a_table_of_every_slot_reads_the_kept_rows_by_ranges_of_slots(big_store: Store,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs table (`survey table`, /matrix.md) reads every slot's kept facts, and a whole
    matrix its kept cells, ``summary.CHUNK`` slots a statement: as a list of their ids, each
    statement was bound, planned and probed id by id (55 statements, 0.42 of `survey table`'s
    2.3 s on PostgreSQL at 100,000 runs); slots as dense as a whole table's are a range now, its
    gaps skipped. With ``CHUNK`` at 50, this store's slots are as many statements as 100,000
    runs' are at 500."""
    store = big_store
    with store.session() as s:
        assert summary.current(s)
        table = docs_table.build(s).markdown()
        ids = sorted(s.scalars(select(m.Slot.id)))
        cells = summary.stored_cells(s, ids)
        facts = summary.stored_facts(s, ids)
    assert len(ids) > 4 * 50
    monkeypatch.setattr(summary, "CHUNK", 50)

    def reads(seen: list[tuple[str, Any]], table_name: str) -> tuple[int, int]:
        """(statements that read the table by a range of slots, by a list of slots)"""
        mine = [statement for statement, _ in seen if re.search(rf"FROM {table_name}\b", statement)]
        return (sum(1 for st in mine if re.search(r"slot_id BETWEEN", st)),
                sum(1 for st in mine if re.search(r"slot_id IN \(", st)))

    chunks = -(-len(ids) // 50)
    with statements(store) as seen, store.session() as s:
        assert docs_table.build(s).markdown() == table
    assert reads(seen, "slot_facts") == (chunks, 0), [st.split("\n")[0] for st, _ in seen]
    with statements(store) as seen, store.session() as s:
        assert summary.stored_cells(s, ids) == cells
    assert reads(seen, "cells") == (chunks, 0)
    # every third slot: lists (a range would read three times what is asked for); all but every
    # third: ranges, and what is in their gaps is not answered
    sparse, dense = ids[::3], [i for n, i in enumerate(ids) if n % 3]
    with statements(store) as seen, store.session() as s:
        assert summary.stored_facts(s, sparse) == {i: facts[i] for i in sparse if i in facts}
        assert summary.stored_cells(s, sparse) == {i: cells[i] for i in sparse if i in cells}
    assert reads(seen, "slot_facts") == reads(seen, "cells") == (0, -(-len(sparse) // 50))
    with statements(store) as seen, store.session() as s:
        assert summary.stored_facts(s, dense) == {i: facts[i] for i in dense if i in facts}
        assert summary.stored_cells(s, dense) == {i: cells[i] for i in dense if i in cells}
    assert reads(seen, "slot_facts") == reads(seen, "cells") == (-(-len(dense) // 50), 0)


def test_the_cells_cache_is_bounded_in_bytes_and_drops_the_least_recently_used() -> None:
    cells = cells_mod.Cells(max_bytes=20_000)
    one = [{"backend": "cupti", "mode": "none", "reason": "x" * 1000}]

    def key(i: int) -> tuple[str, tuple[int, ...]]:
        return (f"{i:064x}", (i,))

    i = 0
    while True:  # fill it to the brim
        cells.put(key(i), one)
        if len(cells) <= i:
            break
        i += 1
    full = len(cells)
    assert 3 < full < 20 and cells.bytes <= 20_000
    first = i - full + 1  # the oldest kept
    assert cells.get(key(first)) == one  # used: now the most recent
    cells.put(key(i + 1), one)
    assert cells.get(key(first)) == one and cells.get(key(first + 1)) is None  # the least recently used went
    assert cells.bytes <= 20_000
    cells.put(("big", ()), [{"reason": "y" * 50_000}])  # larger than the whole cache: not kept
    assert cells.get(("big", ())) is None and cells.bytes <= 20_000


def test_what_a_session_read_is_forgotten_when_it_writes(store: Store) -> None:
    """Slots, pools and verdicts are kept for a Session; a run stored through it drops them."""
    from survey.evidence.ingest import ingest
    from tests.conftest import report_bytes

    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="first", scope="catalog")
        assert [sl.candidate.name for sl in survey_matrix.queries.slots(s, "catalog")] == ["first"]
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="second", scope="catalog")
        assert [sl.candidate.name for sl in survey_matrix.queries.slots(s, "catalog")] == ["first", "second"]


def test_a_server_s_first_pages_compile_no_statement(filled_store: Store, portal: Any) -> None:
    """A serving process compiles the matrix's statements before it serves (api.matrix.warm):
    its first page, plain or filtered by what the cells hold, finds each statement in
    SQLAlchemy's cache (a compile on the first request was half of its time)."""
    import gc

    from api import serve
    from tests.helpers.api import Client

    try:
        app = serve.serving_app(filled_store)
    finally:
        gc.unfreeze()
    misses: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, _params: Any, context: Any, _many: bool) -> None:
        if context.cache_hit is CACHE_MISS:
            misses.append(statement)

    c = Client(portal, app)
    event.listen(filled_store.engine, "after_cursor_execute", record)
    try:
        for path in ("/matrix.json", "/matrix.json?backend=instrumentation", "/matrix.json?mode=pcsampling",
                     "/matrix.json?outcome=ok", "/matrix.json?verdict=refused", "/matrix.json?_size=10"):
            r = c.get(path)
            assert r.status_code == 200, (path, r.text)
    finally:
        event.remove(filled_store.engine, "after_cursor_execute", record)
        c.close()
    assert misses == [], "\n\n".join(misses)


_FIRST_REQUESTS = """
import asyncio, gc, json, sys
import httpx, pydantic
from api import serve
from db.store import Store

app = serve.serving_app(Store(sys.argv[1], create=False))
gc.unfreeze()
made = []
plain = pydantic.TypeAdapter.__init__

def counted(self, *args, **kwargs):
    made.append(repr(args[0] if args else kwargs.get("type")))
    plain(self, *args, **kwargs)

pydantic.TypeAdapter.__init__ = counted

async def main():
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as c:
        await c.get("/healthz")  # the client's own first call (the app answers it without the store)
        modules = set(sys.modules)
        status = [(await c.get(path)).status_code for path in sys.argv[2:]]
    return status, sorted(set(sys.modules) - modules)

status, imported = asyncio.run(main())
print(json.dumps({"status": status, "made": made, "imported": imported}))
"""


def test_a_server_s_first_requests_build_no_model_and_import_no_module(filled_store: Store) -> None:
    """A server's first page cost what its next did not: FastAPI makes each route's parameter
    models (220 pydantic type adapters) on the first request it routes, and anyio loads its
    asyncio backend when the store pool first runs (together about 80 ms). A serving process
    routes one request of its own and starts its pool before it serves (api.serve.serving_app):
    its first pages make no model and import no module. (In a process of its own: this one
    has imported everything.)"""
    import json
    import subprocess
    import sys

    paths = ["/matrix.json", "/matrix.json?outcome=ok", "/runs/1.json"]
    r = subprocess.run([sys.executable, "-c", _FIRST_REQUESTS, filled_store.url, *paths], capture_output=True,
                       text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.splitlines()[-1])
    assert seen == {"status": [200] * len(paths), "made": [], "imported": []}


def test_a_server_whose_store_fails_its_warm_up_still_starts_and_says_why_on_request(tmp_path: Path,
                                                                                     portal: Any) -> None:
    """The warm-up is no gate: a store that cannot answer it (here a table gone from under the
    server) leaves the server up, and the request that needs the table is the one that fails,
    with the service's own error (500, its JSON error body)."""
    import functools
    import gc
    import sqlite3

    import httpx

    from api import serve

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    with sqlite3.connect(tmp_path / "s.db") as raw:
        raw.execute("DROP TABLE slots")
    try:
        app = serve.serving_app(store)
    finally:
        gc.unfreeze()
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                             base_url="http://testserver")
    try:
        assert portal.call(functools.partial(http.get, "/healthz")).status_code == 200
        r = portal.call(functools.partial(http.get, "/matrix.json"))
        assert r.status_code == 500 and set(r.json()) == {"error"}, r.text
    finally:
        portal.call(http.aclose)
        store.close()
