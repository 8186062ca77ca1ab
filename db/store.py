"""Open the store, bring its schema to this version, hand out sessions.

``open_store`` upgrades an older database (Alembic) and refuses one written by a
newer proton-survey, naming both revisions. SQLite runs in WAL mode, so readers
(the service) never block on a survey that is writing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).with_name("migrations")
DEFAULT_DB_ENV = "SURVEY_DB"


def default_url() -> str:
    """``SURVEY_DB`` if set, else SQLite under the XDG data directory."""
    if os.environ.get(DEFAULT_DB_ENV):
        return os.environ[DEFAULT_DB_ENV]
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'proton-survey' / 'survey.db'}"


class StoreError(Exception):
    """The store cannot be used as it is (bad URL, newer schema, ...)."""


class NewerDatabaseError(StoreError):
    pass


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
        path = Path(url[len("sqlite:///") :])
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        engine = create_engine(url, future=True)
    except Exception as e:  # ArgumentError, NoSuchModuleError, ...
        raise StoreError(f"cannot use database URL {url!r}: {e}") from e
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def alembic_config(connection: Any = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def ensure_schema(engine: Engine) -> str:
    """Upgrade to head; refuse a database from a newer proton-survey."""
    script = ScriptDirectory.from_config(alembic_config())
    known = {rev.revision for rev in script.walk_revisions()}
    try:
        current = current_revision(engine)
    except Exception as e:
        raise StoreError(f"cannot open the database at {engine.url!r}: {e}") from e
    if current is not None and current not in known:
        raise NewerDatabaseError(
            f"the database at {engine.url!r} has schema revision {current}, written by a newer proton-survey; "
            f"this one knows up to {script.get_current_head()}. Upgrade proton-survey, or point --db elsewhere."
        )
    if current is None:
        tables = set(inspect(engine).get_table_names())
        if tables - {"alembic_version"}:
            raise StoreError(
                f"the database at {engine.url!r} has tables {sorted(tables)} but no proton-survey schema revision; "
                "refusing to touch it"
            )
    head = script.get_current_head()
    if current != head:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                # Batch migrations copy tables; SQLite enforces foreign keys on the copy's
                # DROP unless they are off, and they can only be switched outside a transaction.
                conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
                conn.commit()
            try:
                with conn.begin():
                    command.upgrade(alembic_config(conn), "head")
            finally:
                if engine.dialect.name == "sqlite":
                    conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                    conn.commit()
    assert head is not None
    return head


class Store:
    """An engine with an up-to-date schema and a session factory."""

    def __init__(self, url: str | None = None):
        self.url = url or default_url()
        self.engine = make_engine(self.url)
        self.revision = ensure_schema(self.engine)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> Session:
        return self.sessions()

    def close(self) -> None:
        self.engine.dispose()
