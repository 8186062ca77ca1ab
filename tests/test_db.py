"""The store: migrations from empty, refusal of newer or foreign databases, WAL,
and the migration matching the models."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from db.models import Base
from db.store import NewerDatabaseError, Store, StoreError, head_revision
from tests.conftest import survey_cli

ROOT = Path(__file__).resolve().parents[1]


def test_migration_from_an_empty_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    store = Store(url)
    tables = set(inspect(store.engine).get_table_names())
    assert {"candidates", "environments", "runs", "reports", "mode_results", "library_results",
            "capture_results", "meta", "alembic_version"} <= tables
    assert store.revision == head_revision()
    with sqlite3.connect(tmp_path / "new.db") as c:
        assert c.execute("pragma journal_mode").fetchone()[0] == "wal"
    store.close()
    # opening again is a no-op
    assert Store(url).revision == head_revision()


def test_migrations_match_the_models(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'm.db'}")
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_newer_database_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    Store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as c:
        c.execute("update alembic_version set version_num = '9999'")
    with pytest.raises(NewerDatabaseError, match="9999.*newer proton-survey"):
        Store(f"sqlite:///{path}")
    cli = survey_cli("table", "--db", f"sqlite:///{path}")
    assert cli.returncode == 65 and "newer proton-survey" in cli.stderr


def test_foreign_database_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("create table precious (x)")
        c.execute("insert into precious values (1)")
    with pytest.raises(StoreError, match="refusing to touch it"):
        Store(f"sqlite:///{path}")
    with sqlite3.connect(path) as c:
        assert c.execute("select name from sqlite_master").fetchall() == [("precious",)]


def test_bad_url_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot use database URL"):
        Store("nosuchdialect://x/y")


def test_any_sqlalchemy_url(tmp_path: Path) -> None:
    # a second spelling of SQLite through a different driver path still works
    url = f"sqlite+pysqlite:///{tmp_path / 'p.db'}"
    store = Store(url)
    assert "runs" in inspect(create_engine(url)).get_table_names()
    store.close()
