"""Copies of a SQLite store, made and put in place while it is in use.

- :func:`backup`: the store as one consistent snapshot, through SQLite's backup API,
  into a new file (written beside ``dest`` and renamed into place when whole and
  checked). Every write committed before the copy began is in it; none after.
- :func:`replace`: the store's whole content replaced by another store's, in one
  write transaction under the store's write lock (``BEGIN IMMEDIATE``, the lock every
  writer takes first). The file stays the same file: a running service, and every
  other process that has it open, reads the old content or the new, never a mix, and
  switches between two of its transactions. The matrix version moves past both
  stores' versions in the same transaction, so no per-version cache answers from the
  old content. An upload answered before the replacement is in the old content only;
  one stored after it is in the new.

Renaming another file over a live store (``mv new.db survey.db``) is not one of these:
connections that still have the old file open keep writing its WAL under the name the
new file's WAL has.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from db.store import Store
from survey.core.errors import InputError, StoreUnusable, UsageProblem
from survey.evidence.ingest import MATRIX_VERSION

LOCK_WAIT_S = 30.0  # how long to wait for the store's write lock (a survey storing a run holds it briefly)


@dataclass(frozen=True)
class Copied:
    path: Path
    runs: int
    matrix_version: str


def _sqlite_path(store: Store, what: str) -> Path:
    path = store.sqlite_file()
    if path is None:
        raise UsageProblem(f"`survey store {what}` works on a SQLite store; {store.describe()} is not one "
                           "(for PostgreSQL use pg_dump and pg_restore)")
    if store.read_only and what == "replace":
        raise StoreUnusable(f"{store.describe()} is read-only here: it cannot be replaced")
    return path


def _check(conn: sqlite3.Connection, where: str) -> None:
    try:
        problems = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.DatabaseError as e:
        raise InputError(f"{where} is not a usable SQLite store: {e}")
    if problems != ["ok"]:
        raise InputError(f"{where} is damaged: {problems[0]}")


def _runs(conn: sqlite3.Connection, schema: str = "main") -> int:
    return int(conn.execute(f"SELECT count(*) FROM {schema}.runs").fetchone()[0])


def _version(conn: sqlite3.Connection, schema: str = "main") -> int:
    row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = ?", (MATRIX_VERSION,)).fetchone()
    try:
        return int(row[0]) if row is not None else 0
    except (TypeError, ValueError):
        return 0


def _temp_beside(dest: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    os.close(fd)
    return Path(name)


def _remove(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _snapshot(source: Path, dest: Path) -> None:
    """``source`` copied whole into the new file ``dest`` by SQLite's backup API, in one step
    (one read transaction: a consistent snapshot), left in rollback-journal mode."""
    with contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=LOCK_WAIT_S)) as src, \
            contextlib.closing(sqlite3.connect(dest)) as dst:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
        _check(dst, str(dest))


def backup(store: Store, dest: Path) -> Copied:
    """A consistent copy of the SQLite ``store`` at ``dest`` (which must not exist)."""
    source = _sqlite_path(store, "backup")
    dest = dest.expanduser().absolute()
    if dest.exists() or dest.is_symlink():
        raise InputError(f"{dest} already exists: give a new file")
    if not dest.parent.is_dir():
        raise InputError(f"{dest.parent} is not a directory")
    temp = _temp_beside(dest)
    try:
        _snapshot(source, temp)
        with contextlib.closing(sqlite3.connect(temp)) as conn:
            runs, version = _runs(conn), _version(conn)
        with open(temp, "rb") as f:
            os.fsync(f.fileno())
        os.link(temp, dest)  # refuses to overwrite a file made meanwhile
    finally:
        _remove(temp)
    return Copied(dest, runs, str(version))


def replace(store: Store, new: Path) -> Copied:
    """The content of the SQLite store file ``new`` (checked, and brought to this
    proton-survey's schema on a copy: ``new`` itself is only read) becomes ``store``'s,
    in one transaction."""
    target = _sqlite_path(store, "replace")
    new = new.expanduser().absolute()
    if not new.is_file():
        raise InputError(f"{new}: no such file")
    if new.resolve() == target.resolve():
        raise InputError(f"{new} is the store itself")
    temp = _temp_beside(target)
    try:
        try:
            _snapshot(new, temp)
        except sqlite3.DatabaseError as e:
            raise InputError(f"{new} is not a usable SQLite store: {e}")
        try:
            Store(f"sqlite:///{temp}", create=False).close()  # a proton-survey store, at this schema revision
        except Exception as e:
            raise InputError(f"{new} is not a proton-survey store this version can use: "
                             f"{str(e).splitlines()[0]}".replace(str(temp), str(new)))
        return _swap(target, temp, new)
    finally:
        _remove(temp)


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA {schema}.table_info("{table}")')]


def _tables(conn: sqlite3.Connection, schema: str) -> list[str]:
    return [r[0] for r in conn.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table' "
                                       "AND name NOT LIKE 'sqlite_%' ORDER BY name")]


def _swap(target: Path, source: Path, shown: Path) -> Copied:
    conn = sqlite3.connect(target, timeout=LOCK_WAIT_S, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys=OFF")  # every row is replaced; checked whole before the commit
        conn.execute("ATTACH DATABASE ? AS new", (str(source),))
        tables = _tables(conn, "main")
        if tables != _tables(conn, "new"):
            raise InputError(f"{shown} has other tables than the store: {_tables(conn, 'new')}")
        conn.execute("BEGIN IMMEDIATE")  # the store's write lock: every writer takes it first
        try:
            old_version = _version(conn)
            for table in tables:
                cols = _columns(conn, "main", table)
                if sorted(cols) != sorted(_columns(conn, "new", table)):
                    raise InputError(f"{shown}: table {table} has other columns than the store's")
                names = ", ".join(f'"{c}"' for c in cols)
                conn.execute(f'DELETE FROM main."{table}"')
                conn.execute(f'INSERT INTO main."{table}" ({names}) SELECT {names} FROM new."{table}"')
            if _tables(conn, "new") and conn.execute(
                    "SELECT 1 FROM main.sqlite_master WHERE name = 'sqlite_sequence'").fetchone():
                conn.execute("DELETE FROM main.sqlite_sequence")
                if conn.execute("SELECT 1 FROM new.sqlite_master WHERE name = 'sqlite_sequence'").fetchone():
                    conn.execute("INSERT INTO main.sqlite_sequence SELECT * FROM new.sqlite_sequence")
            # past both stores' versions: no per-version cache of a reader answers from the old content
            version = max(old_version, _version(conn, "new")) + 1
            conn.execute("DELETE FROM main.meta WHERE key = ?", (MATRIX_VERSION,))
            conn.execute("INSERT INTO main.meta (key, value) VALUES (?, ?)", (MATRIX_VERSION, str(version)))
            bad = conn.execute("PRAGMA main.foreign_key_check").fetchall()
            if bad:
                raise InputError(f"{shown}: rows that refer to nothing (table {bad[0][0]})")
            runs = _runs(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("DETACH DATABASE new")
    finally:
        conn.close()
    return Copied(target, runs, str(version))
