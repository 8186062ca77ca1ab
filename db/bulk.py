"""Many rows into one table: one ``executemany`` whose rows go to the driver as tuples.

SQLAlchemy's ``conn.execute(insert(table), rows)`` builds every row's parameters
through its general statement machinery: a dictionary per row, and each value looked
up by name and passed through its column type's bind processor one call at a time. For
the wide rows a write adds by the thousand (a report's normalised rows, a slot's cells)
that machinery costs more than the database's own work. :func:`insert_rows` asks each
column's type for its bind processor once per call and applies it to that column's
values; the values the driver receives are the ones SQLAlchemy would have sent
(tests/test_bulk.py reads both ways' rows back equal, on both stores).

SQLite cannot say in which order a multi-row ``INSERT ... RETURNING`` returns its ids, so
SQLAlchemy's ORM inserts new rows whose ids it must learn one statement each. A batch
that holds the write lock already (it moved the matrix version first) knows them
beforehand: :func:`number` gives its new rows the ids SQLite would give, and the flush
then inserts them in one ``executemany``. PostgreSQL's RETURNING keeps the order, and its
sequences hand ids out: there the flush batches the rows as it is.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Table, func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.schema import ScalarElementColumnDefault

from db import models


def _processors(conn: Connection, table: Table, names: Sequence[str]) -> list[Callable[[Any], Any] | None]:
    dialect = conn.dialect
    return [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names]


def _nul_only(conn: Connection, table: Table, name: str) -> bool:
    """Does the column's type do nothing to a value but show NUL (``db.models.String``)?"""
    type_ = table.c[name].type
    return isinstance(type_, models.String) and type_.impl_instance.dialect_impl(conn.dialect).bind_processor(
        conn.dialect) is None


def _has_nul(values: tuple[Any, ...]) -> bool:
    """Does any of these (str or None) values hold NUL? One scan in C, not a call per value."""
    try:
        return "\x00" in "".join(filter(None, values))
    except TypeError:  # not only text: ask each
        return True


def _defaults(table: Table, names: Sequence[str]) -> dict[str, Any]:
    """The Python-side scalar defaults of the columns the rows leave out (as ``insert``
    fills them in); a left-out column whose default is a function is refused."""
    out = {}
    for col in table.c:
        if col.name in names or col.default is None:
            continue
        if not isinstance(col.default, ScalarElementColumnDefault):
            raise ValueError(f"db.bulk: give {table.name}.{col.name} in every row (its default is not a constant)")
        out[col.name] = col.default.arg
    return out


def insert_rows(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys: column names of ``table``) into ``table``
    in one ``executemany``, each value processed as its column's type processes it."""
    if not rows:
        return
    names = list(rows[0])
    defaults = _defaults(table, names)
    # each row's values in the names' order (itemgetter: in C, not a Python list per row), as columns
    values = map(operator.itemgetter(*names), rows) if len(names) > 1 else ((row[names[0]],) for row in rows)
    columns = list(zip(*values, strict=True))
    columns += [(value,) * len(rows) for value in defaults.values()]
    names += defaults
    procs = _processors(conn, table, names)
    for i, proc in enumerate(procs):
        if proc is not None and not (_nul_only(conn, table, names[i]) and not _has_nul(columns[i])):
            columns[i] = tuple(proc(v) for v in columns[i])  # processors take None as the type does
    preparer = conn.dialect.identifier_preparer
    marks = _marks(conn.dialect.paramstyle, len(names))
    sql = (f"INSERT INTO {preparer.format_table(table)} "
           f"({', '.join(preparer.quote(n) for n in names)}) VALUES ({marks})")
    conn.exec_driver_sql(sql, list(zip(*columns, strict=True)))


def _marks(paramstyle: str, n: int) -> str:
    if paramstyle == "qmark":
        return ", ".join("?" * n)
    if paramstyle in ("format", "pyformat"):
        return ", ".join(["%s"] * n)
    raise ValueError(f"db.bulk: no positional parameters in paramstyle {paramstyle!r}")


def number(s: Session, rows: Sequence[Any]) -> None:
    """Give new ORM rows of one table (integer primary key ``id``, not flushed yet; two or
    more) the ids SQLite would give them (the largest stored id, plus one, onwards), so that the flush
    inserts them together. Only inside a transaction that holds SQLite's write lock (no
    other writer can take an id meanwhile); nothing on another database."""
    rows = [row for row in rows if row.id is None]
    if len(rows) < 2 or s.get_bind().dialect.name != "sqlite":  # one row: one statement either way
        return
    model = type(rows[0])
    with s.no_autoflush:  # the rows are pending: not one by one now
        start = (s.scalar(select(func.max(model.id))) or 0) + 1
    for i, row in enumerate(rows):
        row.id = start + i
