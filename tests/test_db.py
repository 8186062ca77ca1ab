"""The store: migrations from empty (SQLite and PostgreSQL), refusal of newer or
foreign databases, WAL, the migrations matching the models, PostgreSQL URLs,
schema creation by processes racing to open one new store, passwords kept out of
messages, ``create=False`` and read-only SQLite stores."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import pwd
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.exc import OperationalError

from db.models import Base
from db.store import NewerDatabaseError, NoStoreError, Store, StoreError, ensure_schema, head_revision, mask_url
from survey.evidence import queries
from tests.conftest import Clock, report_bytes, survey_cli
from tests.helpers.store import filled_sqlite, read_rows, unprivileged
from tests.pgserver import PgServer

pytestmark = pytest.mark.both_stores  # the store itself is under test

ROOT = Path(__file__).resolve().parents[1]
TABLES = {"candidates", "environments", "runs", "reports", "mode_results", "library_results", "capture_results",
          "meta", "alembic_version"}


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with nothing in it: a SQLite file not yet made, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'new.db'}"
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.new_database(migrated=False)
    yield server.url(name)
    server.drop_database(name)


def execute(url: str, *sql: str) -> list[Any]:
    """Run statements on a plain engine of our own (not the store's); the last one's rows."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = None
            for stmt in sql:
                result = conn.execute(text(stmt))
            return list(result) if result is not None and result.returns_rows else []
    finally:
        engine.dispose()


def table_names(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- migrations
def test_migration_from_an_empty_database(empty_url: str, tmp_path: Path) -> None:
    store = Store(empty_url)
    assert TABLES <= set(inspect(store.engine).get_table_names())
    assert store.revision == head_revision()
    store.close()
    if empty_url.startswith("sqlite"):
        with sqlite3.connect(tmp_path / "new.db") as c:
            assert c.execute("pragma journal_mode").fetchone()[0] == "wal"
    # opening again is a no-op
    again = Store(empty_url)
    assert again.revision == head_revision()
    assert execute(empty_url, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
    again.close()


def test_head_revision_constant_is_alembics_head() -> None:
    """db.store opens a store at HEAD_REVISION without importing Alembic: it must be the head."""
    from db.store import HEAD_REVISION

    assert HEAD_REVISION == head_revision()


def test_migrations_match_the_models(store: Store) -> None:
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_newer_database_is_refused_with_a_clear_message(empty_url: str) -> None:
    Store(empty_url).close()
    execute(empty_url, "UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(NewerDatabaseError, match="9999.*newer proton-survey"):
        Store(empty_url)
    cli = survey_cli("table", "--db", empty_url)
    assert cli.returncode == 65 and "newer proton-survey" in cli.stderr


def test_foreign_database_is_not_touched(empty_url: str, tmp_path: Path) -> None:
    execute(empty_url, "CREATE TABLE precious (x INTEGER)", "INSERT INTO precious VALUES (1)")
    before = sha256(tmp_path / "new.db") if empty_url.startswith("sqlite") else None
    with pytest.raises(StoreError, match="refusing to touch it"):
        Store(empty_url)
    with pytest.raises(StoreError, match="refusing to touch it"):
        Store(empty_url, create=False)
    assert table_names(empty_url) == {"precious"}
    assert execute(empty_url, "SELECT x FROM precious") == [(1,)]
    if before is not None:  # not even switched to WAL
        assert sha256(tmp_path / "new.db") == before
        with sqlite3.connect(tmp_path / "new.db") as c:
            assert c.execute("pragma journal_mode").fetchone()[0] == "delete"


def test_bad_url_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot use database URL"):
        Store("nosuchdialect://x/y")


def test_any_sqlalchemy_url(tmp_path: Path) -> None:
    # a second spelling of SQLite through a different driver path still works
    url = f"sqlite+pysqlite:///{tmp_path / 'p.db'}"
    store = Store(url)
    assert "runs" in inspect(create_engine(url)).get_table_names()
    store.close()


# --------------------------------------------------------------------------- PostgreSQL
def test_a_plain_postgresql_url_uses_psycopg_3(pg_server: PgServer) -> None:
    name = pg_server.new_database(migrated=False)
    for scheme in ("postgresql", "postgres"):
        url = pg_server.url(name, driver=scheme)
        store = Store(url)  # SQLAlchemy alone would pick psycopg2, which is not installed
        assert store.engine.dialect.name == "postgresql" and store.engine.dialect.driver == "psycopg"
        assert store.url == pg_server.url(name) and store.revision == head_revision()
        store.close()
    assert TABLES <= table_names(pg_server.url(name))
    pg_server.drop_database(name)


def test_cli_on_postgresql_by_flag_and_by_environment(pg_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    report = tmp_path / "r.json"
    report.write_bytes(report_bytes("cpu-triton-3.9.0.json"))
    r = survey_cli("ingest", str(report), "--candidate", "t39", "--new", "--db", plain)
    assert r.returncode == 0 and "stored as run #1 (candidate t39)" in r.stdout, r
    monkeypatch.setenv("SURVEY_DB", plain)
    r = survey_cli("table", "--format", "json", "--all")  # t39 is ad hoc: not a catalog name
    assert r.returncode == 0, r
    assert {row["triton_version"] for row in json.loads(r.stdout)} == {"3.9.0"}
    assert execute(pg_url, "SELECT name FROM candidates") == [("t39",)]


@pytest.mark.parametrize("after", [1, 2, 3, 4])
def test_an_opener_that_finds_a_schema_made_while_it_looked_uses_it(empty_url: str, after: int) -> None:
    """Found by the flake hunt: an opener read "no revision", another opener then made the
    whole schema, and the first read the tables, found them without a revision and
    refused the store as foreign. Here the other opener makes the schema after this one
    has given back its ``after``-th connection: between any two of its reads."""
    engine = create_engine(empty_url)
    given_back: list[int] = []

    def another_opener(_dbapi_conn: Any, _record: Any) -> None:
        given_back.append(1)
        if len(given_back) == after:
            Store(empty_url).close()

    event.listen(engine, "checkin", another_opener)
    try:
        assert ensure_schema(engine) == head_revision()
    finally:
        engine.dispose()
    assert len(given_back) >= after  # the other opener did run
    assert execute(empty_url, "SELECT version_num FROM alembic_version") == [(head_revision(),)]


@pytest.mark.parametrize("how", ["threads", "processes"])
def test_openers_racing_on_a_new_store_create_its_schema_once(empty_url: str, how: str) -> None:
    """Four openers start together on one empty database; every one gets a usable
    store and the schema is made once (no 'table already exists')."""
    n = 4
    if how == "threads":
        gate = threading.Barrier(n)
        errors: list[str] = []

        def open_it() -> None:
            gate.wait()
            try:
                Store(empty_url).close()
            except Exception as e:
                errors.append(repr(e))

        threads = [threading.Thread(target=open_it) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
    else:
        code = ("import sys; from db.store import Store; print('ready', flush=True); sys.stdin.readline(); "
                "s = Store(sys.argv[1]); print(s.revision); s.close()")
        procs = [subprocess.Popen([sys.executable, "-c", code, empty_url], cwd=ROOT, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
        for p in procs:  # every one has imported everything; release them at once
            assert p.stdout is not None and p.stdout.readline() == "ready\n"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [p.communicate(timeout=120) for p in procs]
        assert [(p.returncode, out.strip()) for p, (out, _err) in zip(procs, results, strict=True)] == \
            [(0, head_revision())] * n, [err[-800:] for _out, err in results]
    assert execute(empty_url, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
    assert TABLES <= table_names(empty_url)


# --------------------------------------------------------------------------- passwords
SECRET = "s3cr:t/p@ss"
QUOTED = "s3cr%3At%2Fp%40ss"


def test_mask_url_hides_the_password() -> None:
    assert mask_url(f"postgresql+psycopg://survey:{QUOTED}@db.example:5432/evidence") == \
        "postgresql+psycopg://survey:***@db.example:5432/evidence"
    assert mask_url("postgresql://survey@db/evidence?password=hunter2&sslmode=require") == \
        "postgresql://survey@db/evidence?password=***&sslmode=require"
    # unparsable (the port is not a number): masked all the same
    assert mask_url("postgresql://survey:hunter2@db:port/evidence") == "postgresql://survey:***@db:port/evidence"
    # nothing to hide: shown exactly as given
    assert mask_url("sqlite:////var/lib/s.db") == "sqlite:////var/lib/s.db"
    assert mask_url("sqlite:///file:/x/s.db?mode=ro&uri=true") == "sqlite:///file:/x/s.db?mode=ro&uri=true"


@pytest.mark.parametrize("url", [
    f"nosuchdialect://survey:{QUOTED}@host/db",
    "postgresql://survey:hunter2@host:port/db",
    f"postgresql://survey:{QUOTED}@127.0.0.1:1/db",  # nothing listens on port 1
])
def test_no_message_shows_a_password(url: str) -> None:
    with pytest.raises(StoreError) as e:
        Store(url)
    message = str(e.value)
    assert "***" in message
    for secret in ("hunter2", SECRET, QUOTED, "s3cr"):
        assert secret not in message
    cli = survey_cli("table", "--db", url)
    assert cli.returncode == 65 and "***" in cli.stderr
    assert "hunter2" not in cli.stderr + cli.stdout and "s3cr" not in cli.stderr + cli.stdout


def test_a_real_server_refusing_the_database_does_not_see_the_password_printed(pg_server: PgServer) -> None:
    url = f"postgresql://{pg_server.user}:{QUOTED}@127.0.0.1:{pg_server.port}/no_such_database"
    with pytest.raises(StoreError, match='database "no_such_database" does not exist') as e:
        Store(url)
    assert "s3cr" not in str(e.value) and "***" in str(e.value)


def test_store_repr_hides_the_password(pg_server: PgServer) -> None:
    name = pg_server.new_database()
    store = Store(f"postgresql://{pg_server.user}:{QUOTED}@127.0.0.1:{pg_server.port}/{name}")  # trust auth
    assert repr(store) == f"Store('postgresql+psycopg://{pg_server.user}:***@127.0.0.1:{pg_server.port}/{name}', " \
                          f"revision='{head_revision()}')"
    store.close()
    pg_server.drop_database(name)


# --------------------------------------------------------------------------- create=False
MISSING = "(run `survey run` first, or point --db at an existing store)"


def test_no_store_is_created_by_a_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "not" / "yet" / "survey.db"
    for url, shown in ((f"sqlite:///{path}", path), (f"sqlite:///file:{path}?mode=ro&uri=true", path),
                       ("sqlite:///not/yet/survey.db", Path("not/yet/survey.db"))):
        with pytest.raises(NoStoreError) as e:
            Store(url, create=False)
        assert str(e.value) == f"no proton-survey store at {shown} {MISSING}"
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no file, no directory, no "file:" directory
    cli = survey_cli("table", "--db", f"sqlite:///{path}")
    assert (cli.returncode, cli.stderr.strip()) == (65, f"error: no proton-survey store at {path} {MISSING}")
    assert not (tmp_path / "not").exists()


def test_an_empty_database_is_no_store_to_a_reader(empty_url: str, tmp_path: Path) -> None:
    if empty_url.startswith("sqlite"):
        (tmp_path / "new.db").touch()
    with pytest.raises(NoStoreError, match=r"no proton-survey store at .* \(run `survey run` first"):
        Store(empty_url, create=False)
    assert table_names(empty_url) == set()
    if empty_url.startswith("sqlite"):
        assert (tmp_path / "new.db").stat().st_size == 0


def test_a_reader_opens_an_existing_store(store_url: str) -> None:
    writer = Store(store_url)
    with writer.session() as s:
        from survey.evidence.ingest import ingest

        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="t38")
    writer.close()
    reader = Store(store_url, create=False)
    with reader.session() as s:
        assert [c.name for c in queries.candidates(s)] == ["t38"]
    assert not reader.read_only
    reader.close()


# --------------------------------------------------------------------------- read-only SQLite
def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_read_only_uri_is_honoured_even_as_root(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    want = filled_sqlite(path)
    before = sha256(path)
    store = Store(f"sqlite:///file:{path}?mode=ro&uri=true", create=False)
    assert store.read_only and read_rows(store) == want
    with store.session() as s, pytest.raises(OperationalError, match="readonly database"):
        s.execute(text("DELETE FROM meta"))
    store.close()
    assert sha256(path) == before


def read_as_unprivileged(url: str) -> dict[str, Any]:
    def read() -> dict[str, Any]:
        store = Store(url, create=False)
        out = {"rows": read_rows(store), "read_only": store.read_only, "url": str(store.engine.url)}
        store.close()
        return out

    return unprivileged(read)


def test_a_0444_store_in_a_directory_the_reader_cannot_write(shared_dir: Path) -> None:
    """No -shm exists and none can be made: SQLite reads it only as immutable."""
    d = shared_dir / "ro"
    d.mkdir()
    want = filled_sqlite(d / "s.db")
    os.chmod(d / "s.db", 0o444)
    os.chmod(d, 0o555)
    before = sha256(d / "s.db")
    got = read_as_unprivileged(f"sqlite:///{d / 's.db'}")
    assert got["rows"] == want and got["read_only"]
    assert "immutable=1" in got["url"]
    assert sorted(p.name for p in d.iterdir()) == ["s.db"] and sha256(d / "s.db") == before
    # the read commands too, in the same conditions
    cli = unprivileged(lambda: vars(survey_cli("table", "--format", "json", "--db", f"sqlite:///{d / 's.db'}")))
    assert cli["returncode"] == 0, cli
    assert sorted({row["triton_version"] for row in json.loads(cli["stdout"])}) == ["3.8.0", "3.9.0"]


def test_a_read_only_directory_while_a_writer_is_attached(shared_dir: Path) -> None:
    """The writer's -shm exists: the reader goes through it (mode=ro) and sees the
    writer's latest commit, which an immutable open would not."""
    from survey.evidence.ingest import ingest

    d = shared_dir / "live"
    d.mkdir()
    filled_sqlite(d / "s.db")
    writer = Store(f"sqlite:///{d / 's.db'}")
    with writer.session() as s:
        ingest(s, report_bytes("cpu-triton-3.7.1.json"), candidate="triton-3.7.1")  # in the WAL, not yet the file
    assert (d / "s.db-shm").exists() and (d / "s.db-wal").stat().st_size > 0
    want = read_rows(writer)
    os.chmod(d / "s.db", 0o444)
    os.chmod(d, 0o555)
    try:
        got = read_as_unprivileged(f"sqlite:///{d / 's.db'}")
    finally:
        writer.close()
    assert got["rows"] == want and got["read_only"]
    assert "mode=ro" in got["url"] and "immutable" not in got["url"]
    # each Source cell ends with its footnote marker (the run's provenance)
    assert [row["Source"].rsplit(" ", 1)[0] for row in got["rows"]] == ["triton-3.8.0", "triton-3.9.0", "triton-3.7.1"]


def test_a_0444_store_in_a_writable_directory(shared_dir: Path) -> None:
    d = shared_dir / "mine"
    d.mkdir()
    want = filled_sqlite(d / "s.db")
    os.chmod(d / "s.db", 0o444)
    if os.geteuid() == 0:
        os.chown(d, pwd.getpwnam("nobody").pw_uid, -1)
    before = sha256(d / "s.db")
    got = read_as_unprivileged(f"sqlite:///{d / 's.db'}")
    assert got["rows"] == want and got["read_only"] and "mode=ro" in got["url"]
    assert sha256(d / "s.db") == before


def test_a_writable_store_is_opened_for_writing_by_a_reader(tmp_path: Path) -> None:
    # create=False changes what happens to a missing store, not to one we may write
    filled_sqlite(tmp_path / "s.db")
    store = Store(f"sqlite:///{tmp_path / 's.db'}", create=False)
    assert not store.read_only and str(store.engine.url) == f"sqlite:///{tmp_path / 's.db'}"
    store.close()


# --------------------------------------------------------------------------- the same answers on both stores
ANSWERS = [
    "/matrix.json", "/matrix.md", "/matrix.csv", "/matrix", "/candidates.json", "/candidates.md",
    "/candidates/triton-3.6.0.json", "/candidates/gone.json", "/runs/3.json", "/runs/3.md",
    "/history.json?candidate=triton-3.6.0&backend=cupti&mode=pcsampling",
    "/history.json?candidate=gone&backend=cupti&mode=none",
    "/diff.json?a=triton-3.7.1&b=triton-3.8.0", "/diff.json?a=run:1&b=run:5",
    "/check.json?target=triton-3.8.0&backend=rocprofiler&mode=pcsampling",
    "/check.json?target=triton-3.6.0&backend=cupti&mode=pcsampling&platform=sm_90",
    "/check.json?target=gone&backend=cupti",
]


def fill(store: Store) -> Store:
    """The real reports, one of them measured on a second platform, and two failed attempts."""
    from survey.evidence.identity import PlatformId
    from survey.evidence.ingest import ingest, record_failure

    for pos, v in enumerate(("3.6.0", "3.7.1", "3.8.0", "3.9.0")):
        with store.session() as s:
            ingest(s, report_bytes(f"cpu-triton-{v}.json"), candidate=f"triton-{v}", label=f"Triton {v}",
                   kind="pip", spec={"pip": f"triton=={v}"}, position=pos, source="ingest", scope="catalog")
    with store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="triton-3.6.0")
    for error in ("pip failed: no such index", "pip failed: another error"):
        with store.session() as s:
            record_failure(s, "gone", label="Gone", kind="pip", spec={"pip": "gone==1"}, position=9, error=error,
                           scope="catalog", platform=PlatformId("none:x86_64", "none", None, "x86_64", {}))
    return store


def test_every_answer_is_the_same_on_postgresql_as_on_sqlite(pg_url: str, tmp_path: Path, clock: Clock) -> None:
    """What the service and ``survey table`` answer is computed from the store's rows; the
    same evidence stored in both databases, at the same time by the product's clock, gives
    the same bytes (SQLite is what the other tests of those answers run on). The wall clock
    moves a second between the two fills, as it did on the machine where this failed: no
    time a store holds or an answer shows may come from the wall clock."""
    import time_machine
    from fastapi.testclient import TestClient

    from api.app import create_app

    sqlite_url = f"sqlite:///{tmp_path / 'survey.db'}"
    wall = dt.datetime(2026, 12, 5, 9, 30, 0, 600000, tzinfo=dt.UTC)
    with time_machine.travel(wall, tick=False):
        stores = [fill(Store(sqlite_url))]
    with time_machine.travel(wall + dt.timedelta(seconds=1), tick=False):
        stores.append(fill(Store(pg_url)))
    try:
        answers = []
        for store in stores:
            with TestClient(create_app(store)) as c:
                got = {}
                for path in ANSWERS:
                    r = c.get(path)
                    assert r.status_code == 200, (store.url, path, r.text[:300])
                    got[path] = r.text
            for fmt in ("md", "json"):
                r = survey_cli("table", "--all", "--format", fmt, "--db", store.url)
                assert r.returncode == 0, r
                got[f"survey table --format {fmt}"] = r.stdout
            answers.append(got)
        sqlite, postgresql = answers
        for what in sqlite:
            assert postgresql[what] == sqlite[what], what
    finally:
        for store in stores:
            store.close()
