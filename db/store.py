"""Open the store, bring its schema to this version, hand out sessions.

``Store`` upgrades an older database (Alembic) and refuses one written by a
newer proton-survey, naming both revisions. SQLite runs in WAL mode, so readers
(the service) never block on a survey that is writing. PostgreSQL is reached
through psycopg 3 (a plain ``postgresql://`` URL is given that driver); several
processes may share one PostgreSQL database, and the first to open an empty one
creates the schema while the others wait for it.

URLs are printed through :func:`mask_url`, so a password never reaches an error
message, a log or a repr.

A long-lived reader (the service) asks :meth:`Store.replaced` on every request: a
SQLite store is the file's identity (device and inode) when it was opened, so a
file replaced under it (``mv new.db survey.db``) is noticed with one ``stat`` and
:meth:`Store.reopen` opens the new one. PostgreSQL connections are checked before
use (``pool_pre_ping``), so the first request after a server restart is answered.
A store that may not be written here (a file or directory without write access,
a PostgreSQL database whose transactions are read-only) is opened read-only:
``Store.read_only``.
"""

from __future__ import annotations

import errno
import os
import re
import threading
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from db import outage

MIGRATIONS = Path(__file__).with_name("migrations")
DEFAULT_DB_ENV = "SURVEY_DB"
# Key of the PostgreSQL advisory lock held while the schema is created or upgraded.
SCHEMA_LOCK = zlib.crc32(b"proton-survey schema") & 0x7FFFFFFF
_PASSWORD_IN_URL = re.compile(r"(?P<head>://[^:/?#@]*:)[^@/?#]*@")
_PASSWORD_IN_QUERY = re.compile(r"(?P<head>[?&]password=)[^&#]*", re.IGNORECASE)


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


class NoStoreError(StoreError):
    """``create=False`` and there is no store at that URL."""


def mask_url(url: str | URL) -> str:
    """The URL as it may be shown: its password (in the authority or as a
    ``password=`` query parameter) replaced by ``***``. A URL that does not
    parse is masked textually."""
    if isinstance(url, URL):
        parsed: URL | None = url
        raw = url.render_as_string(hide_password=False)
    else:
        raw = url
        try:
            parsed = make_url(url)
        except Exception:
            parsed = None
    if parsed is None:
        return _PASSWORD_IN_QUERY.sub(r"\g<head>***", _PASSWORD_IN_URL.sub(r"\g<head>***@", raw))
    if parsed.password is None and not any(k.lower() == "password" for k in parsed.query):
        return raw  # nothing to hide: show it exactly as given
    hidden = "proton-survey-hidden-password"
    query = {k: (hidden if k.lower() == "password" else v) for k, v in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=True).replace(hidden, "***")


def _scrub(message: str, url: str | URL) -> str:
    """``message`` (an error about ``url``) with ``url``'s password hidden in every spelling."""
    raw = url.render_as_string(hide_password=False) if isinstance(url, URL) else url
    message = message.replace(raw, mask_url(raw))
    try:
        parsed = make_url(raw)
    except Exception:
        return mask_url(message)
    secrets: list[str] = [parsed.password] if parsed.password else []
    for key, value in parsed.query.items():
        if key.lower() == "password":
            secrets += [value] if isinstance(value, str) else list(value)
    for secret in filter(None, secrets):
        message = message.replace(secret, "***").replace(quote(secret, safe=""), "***")
    return message


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def normalize_url(url: str) -> str:
    """A plain file path (``survey.db``, ``~/x/survey.db``: no ``scheme:``) is that SQLite
    file, made absolute; ``postgresql://`` (and ``postgres://``) name the psycopg 3 driver
    (SQLAlchemy would otherwise pick psycopg2, which proton-survey does not install)."""
    if url and not _SCHEME.match(url):
        return f"sqlite:///{Path(url).expanduser().absolute()}"
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    return url


def shown(url: str) -> str:
    """The store as a person reads it: a SQLite file's path, else the URL (password hidden)."""
    try:
        parsed = make_url(normalize_url(url))
    except Exception:
        return mask_url(url)
    if parsed.get_backend_name() == "sqlite" and not parsed.query:
        path = _sqlite_file(parsed)
        if path is not None:
            return str(path)
    return mask_url(parsed)


def _query(url: URL, key: str) -> str:
    """One query parameter of ``url`` ('' when absent; the last of repeated ones)."""
    value = url.query.get(key, "")
    return value if isinstance(value, str) else (value[-1] if value else "")


def _sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL, or None for an in-memory database."""
    db = url.database
    if not db or db == ":memory:" or _query(url, "mode") == "memory":
        return None
    if db.startswith("file:"):
        if _query(url, "uri").lower() not in ("true", "1"):
            return Path(db)  # without uri=true the driver takes it as a plain file name
        path = db[len("file:"):]
        if path.startswith("//"):  # file://localhost/abs/path or file:///abs/path
            path = "/" + path[2:].partition("/")[2]
        path = path.split("?", 1)[0].split("#", 1)[0]
        if not path or path == ":memory:":
            return None
        return Path(unquote(path))
    return Path(db)


def _is_read_only(url: URL) -> bool:
    return _query(url, "mode") == "ro" or _query(url, "immutable").lower() in ("1", "true")


def _read_only_url(url: URL, path: Path) -> URL:
    """The same SQLite file opened read-only, as far as this process's permissions require.

    A file we may not write is opened with ``mode=ro``. In a directory we may not
    write, SQLite cannot create the WAL index (``-shm``): if a writer is attached
    (the index exists) ``mode=ro`` reads through it; if none is (no ``-shm``, no
    ``-wal``: every change is in the file itself) the file is opened ``immutable``,
    the only way SQLite reads a WAL database without its index.
    """
    directory = path.parent if str(path.parent) else Path(".")
    dir_writable = os.access(directory, os.W_OK | os.X_OK)
    file_writable = os.access(path, os.W_OK)
    sidecars = [Path(f"{path}-shm"), Path(f"{path}-wal")]
    if dir_writable and file_writable:
        return url
    if dir_writable or any(p.exists() for p in sidecars):
        extra = {"mode": "ro"}
    else:
        extra = {"mode": "ro", "immutable": "1"}
    if url.database and url.database.startswith("file:") and _query(url, "uri"):
        return url.update_query_dict(extra)
    return url.set(database="file:" + quote(str(path.absolute())),
                   query={**url.query, **extra, "uri": "true"})


def _sqlite_pragmas(read_only: bool) -> Any:
    def connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        if read_only:
            cur.execute("PRAGMA query_only=ON")
        else:
            # WAL is a property of the file: set it on our own stores and new files, never
            # on a foreign database that ensure_schema is about to refuse.
            mode = cur.execute("PRAGMA journal_mode").fetchone()[0]
            names = {r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if mode != "wal" and (not names or "alembic_version" in names):
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    return connect


def _need_psycopg() -> None:
    """PostgreSQL's driver is an extra (``proton-survey[postgres]``): without it, say so in one line."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise StoreError("a postgresql:// store needs the PostgreSQL driver, which is not installed: "
                         "pip install 'proton-survey[postgres]'") from None


def make_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for ``url``. With ``create`` a missing SQLite file (and its
    directory) is created; without, it is :class:`NoStoreError`, and a file this
    process may not write is opened read-only."""
    url = normalize_url(url)
    try:
        parsed = make_url(url)
    except Exception as e:
        raise StoreError(f"cannot use database URL {mask_url(url)!r}: {_scrub(str(e), url)}") from e
    read_only = False
    if parsed.get_backend_name() == "sqlite":
        path = _sqlite_file(parsed)
        if path is not None:
            if not create:
                if not path.is_file() or path.stat().st_size == 0:  # a store is never 0 bytes
                    raise NoStoreError(f"no proton-survey store at {path} "
                                       "(run `survey run` first, or point --db at an existing store)")
                parsed = _read_only_url(parsed, path)
            elif path.is_file() and path.stat().st_size > 0:  # an existing store: nothing to create
                parsed = _read_only_url(parsed, path)
            else:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StoreError(f"cannot create the store's directory {path.parent}: {e.strerror}") from e
        read_only = _is_read_only(parsed)
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() == "psycopg":
        _need_psycopg()
    try:
        # A server's connections may die with it (a restart): each is checked before use.
        extra: dict[str, Any] = {"pool_pre_ping": True} if parsed.get_backend_name() != "sqlite" else {}
        if parsed.get_backend_name() == "sqlite" and _sqlite_file(parsed) is None:
            # in memory, the database is its connection: every thread uses that one (its callers
            # take turns: api.pool gives such a store one thread)
            extra = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
        engine = create_engine(parsed, future=True, **extra)
    except Exception as e:  # ArgumentError, NoSuchModuleError, ...
        raise StoreError(f"cannot use database URL {mask_url(url)!r}: {_scrub(str(e), url)}") from e
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas(read_only))
    return engine


def _limit_time(engine: Engine, connect_s: float, statement_s: float) -> None:
    ms = max(1, int(statement_s * 1000))
    if engine.dialect.name == "postgresql":
        @event.listens_for(engine, "do_connect")
        def connect_timeout(_dialect: Any, _rec: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
            cparams["connect_timeout"] = max(2, round(connect_s))  # libpq takes whole seconds (at least 2)

        @event.listens_for(engine, "connect")
        def statement_timeout(dbapi_conn: Any, _rec: Any) -> None:
            autocommit = dbapi_conn.autocommit
            dbapi_conn.autocommit = True
            try:
                dbapi_conn.execute(f"SET statement_timeout = {ms}")
            finally:
                dbapi_conn.autocommit = autocommit
    elif engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def busy_timeout(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.execute(f"PRAGMA busy_timeout={ms}")


# The newest migration. Opening a store already at this revision reads one row and
# imports no Alembic (half a second of a CLI command); tests/test_db.py holds this
# constant to Alembic's own head.
HEAD_REVISION = "0013"


def _at_head(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except Exception:  # no such table, not a database, ...: the full path says what is wrong
        return False
    return [r[0] for r in rows] == [HEAD_REVISION]


def alembic_config(connection: Any = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


# Alembic keeps the running migration in module globals: one upgrade at a time per process.
_UPGRADE_LOCK = threading.Lock()


def _lock_schema(conn: Connection) -> None:
    """Take the database's write lock for the whole upgrade, so that processes opening
    one new store at once create its schema once (the others wait, then find it made).

    On SQLite this also makes the upgrade one transaction: the driver would otherwise
    run each CREATE TABLE in autocommit, and a killed first run would leave half a schema.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
    elif conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def ensure_schema(engine: Engine, *, create: bool = True) -> str:
    """Upgrade to head; refuse a database from a newer proton-survey, a foreign one,
    and (without ``create``) one that holds no proton-survey store at all."""
    if _at_head(engine):
        return HEAD_REVISION
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    known = {rev.revision for rev in script.walk_revisions()}
    head = script.get_current_head()
    assert head is not None
    where = mask_url(engine.url)
    try:
        # The tables first, then the revision: an opener that makes the schema meanwhile
        # commits its tables and its revision together, so tables seen here come with a
        # revision read after them (read the other way round, a schema made between the two
        # reads looked like a foreign database's tables).
        tables = set(inspect(engine).get_table_names())
        current = current_revision(engine)
    except Exception as e:
        sqlite = engine.url.get_backend_name() == "sqlite"
        problem = outage.classify(e, path=_sqlite_file(engine.url) if sqlite else None)
        if problem is not None and problem.kind == outage.FULL:  # said as the full disk it is (exit 65)
            raise StoreError(f"cannot open the database at {where!r}: the disk holding it is full") \
                from OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise StoreError(f"cannot open the database at {where!r}: {_scrub(str(e), engine.url)}") from e
    if current is not None and current not in known:
        raise NewerDatabaseError(
            f"the database at {where!r} has schema revision {current}, written by a newer proton-survey; "
            f"this one knows up to {head}. Upgrade proton-survey, or point --db elsewhere."
        )
    if current is None:
        if tables - {"alembic_version"}:
            raise StoreError(
                f"the database at {where!r} has tables {sorted(tables)} but no proton-survey schema revision; "
                "refusing to touch it"
            )
        if not create:
            raise NoStoreError(f"no proton-survey store at {where} "
                               "(run `survey run` first, or point --db at an existing store)")
    if current == head:
        return head
    if engine.dialect.name == "sqlite" and _is_read_only(engine.url):
        raise StoreError(f"the store at {where!r} has schema revision {current} and this proton-survey needs "
                         f"{head}; it is open read-only, so it cannot be upgraded: open it once with write access")
    sqlite = engine.dialect.name == "sqlite"
    try:
        with _UPGRADE_LOCK, engine.connect() as conn:
            if sqlite:
                # Batch migrations copy tables; SQLite enforces foreign keys on the copy's
                # DROP unless they are off, and they can only be switched outside a transaction.
                conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
                conn.commit()
            try:
                with conn.begin():
                    _lock_schema(conn)
                    # Another process may have upgraded it while we waited for the lock.
                    if MigrationContext.configure(conn).get_current_revision() != head:
                        command.upgrade(alembic_config(conn), "head")
            finally:
                if sqlite:
                    conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                    conn.commit()
    except Exception as e:
        raise StoreError(f"cannot bring the database at {where!r} to schema revision {head}: "
                         f"{_scrub(str(e), engine.url)}") from e
    return head


class Store:
    """An engine with an up-to-date schema and a session factory.

    ``create=False`` opens only an existing store: a missing SQLite file is
    :class:`NoStoreError` (and nothing is created), and a file or directory this
    process may not write is opened read-only.
    """

    def __init__(self, url: str | None = None, *, create: bool = True):
        self.url = normalize_url(url or default_url())
        self.timeout_s: tuple[float, float] | None = None  # (connect, statement): limit_time
        self._open(create)

    def _open(self, create: bool) -> None:
        self.engine = make_engine(self.url, create=create)
        if self.timeout_s is not None:
            _limit_time(self.engine, *self.timeout_s)
        try:
            self.revision = ensure_schema(self.engine, create=create)
            self.read_only = self._read_only()
        except BaseException:
            self.engine.dispose()
            raise
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.identity = self._file_identity()

    def limit_time(self, connect_s: float, statement_s: float) -> None:
        """Bound the waits on the store from now on (the service): PostgreSQL's
        ``connect_timeout`` (``connect_s``), its ``statement_timeout`` and SQLite's busy
        timeout (``statement_s``: lock waits included). The connections open so far are
        closed (the next ones get the limits)."""
        self.timeout_s = (connect_s, statement_s)
        _limit_time(self.engine, connect_s, statement_s)
        if self.engine.dialect.name != "sqlite" or self.sqlite_file() is not None:
            self.engine.dispose()  # (an in-memory database lives in its one connection: it is kept)

    def _read_only(self) -> bool:
        if self.engine.dialect.name == "sqlite":
            return _is_read_only(self.engine.url)
        if self.engine.dialect.name == "postgresql":
            with self.engine.connect() as conn:
                return conn.execute(text("SHOW transaction_read_only")).scalar() == "on"
        return False

    def _file_identity(self) -> tuple[int, int] | None:
        path = self.sqlite_file()
        if path is None:
            return None
        st = path.stat()
        return st.st_dev, st.st_ino

    def replaced(self) -> bool:
        """Is the SQLite file at this store's path another file than the one opened
        (replaced, or removed)? One ``stat``; always False for PostgreSQL."""
        if self.identity is None:
            return False
        path = self.sqlite_file()
        try:
            st = os.stat(path) if path is not None else None
        except OSError:
            return True
        return st is None or (st.st_dev, st.st_ino) != self.identity

    def reopen(self) -> None:
        """Close every pooled connection and open the store at the same URL again (the
        file now at the path). Connections still in use are closed when they are returned."""
        old = self.engine
        old.dispose()
        self._open(create=False)

    def describe(self) -> str:
        """The store, for a one-line message: its kind and where it is, never a password."""
        url = self.engine.url
        if url.get_backend_name() == "sqlite":
            path = self.sqlite_file()
            return f"the store (the SQLite file {path})" if path else "the store (SQLite in memory)"
        if url.get_backend_name() == "postgresql":
            return f"the store (PostgreSQL at {url.host or 'localhost'}:{url.port or 5432}/{url.database})"
        return f"the store ({mask_url(url)})"

    def read_each_table(self) -> None:
        """Read a row of every table and, on SQLite, its quick_check: a store whose pages are
        damaged fails here, at once (``survey serve`` asks before it listens), not in the
        first request that reads them. (quick_check reads every page: seconds on a large store.)"""
        from sqlalchemy import select

        from db import models

        with self.engine.connect() as conn:
            for table in models.Base.metadata.sorted_tables:
                conn.execute(select(table).limit(1)).all()
            if self.engine.dialect.name == "sqlite":  # pages past the first rows: SQLite's own check of its b-trees
                said = [row[0] for row in conn.exec_driver_sql("PRAGMA quick_check(1)")]
                if said != ["ok"]:
                    import sqlite3

                    raise sqlite3.DatabaseError(f"database disk image is malformed ({'; '.join(map(str, said))})")

    def session(self) -> Session:
        return self.sessions()

    @property
    def in_memory(self) -> bool:
        """An in-memory SQLite database: one connection, which every caller shares in turn."""
        return self.engine.dialect.name == "sqlite" and self.sqlite_file() is None

    def sqlite_file(self) -> Path | None:
        """The SQLite file this store reads; None for PostgreSQL or an in-memory database."""
        url = self.engine.url
        return _sqlite_file(url) if url.get_backend_name() == "sqlite" else None

    def close(self) -> None:
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"Store({mask_url(self.url)!r}, revision={self.revision!r})"
