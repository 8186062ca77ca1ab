"""What an error from the store means for the one who asked: one line, and a kind.

- ``full``: the disk (or the store's quota) is full - HTTP 507, CLI exit 65;
- ``read_only``: the store may not be written here - HTTP 403, CLI exit 65;
- ``damaged``: the SQLite file is not a database, or its pages are damaged
  (``database disk image is malformed``) - HTTP 503, CLI exit 65;
- ``io``: the file cannot be read or written (an I/O error, no permission to open
  it) - HTTP 503, CLI exit 74 (EX_IOERR);
- ``unreachable``: the database server cannot be reached, or the store is locked
  past its wait - HTTP 503, CLI exit 65.

Anything else is not an outage: :func:`classify` answers None and the caller
reports it as it would any other error.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

FULL, READ_ONLY, UNREACHABLE, DAMAGED, IO = "full", "read_only", "unreachable", "damaged", "io"
_DAMAGED = ("database disk image is malformed", "file is not a database", "malformed database schema",
            "btreeinitpage", "database corruption", "could not decode to utf-8")
_IO = ("disk i/o error", "unable to open database file")
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# SQLite says "disk I/O error", not "disk is full", when it cannot create or grow its WAL or
# shared-memory file: with less than this left where the file is, that is the disk being full.
FULL_BELOW_BYTES = 256 * 1024


def disk_full(path: str | Path | None) -> bool:
    """Whether the file system holding ``path`` (a SQLite file) has no room left."""
    if path is None:
        return False
    try:
        st = os.statvfs(Path(path).parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str  # one line, without the store's URL or password


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [getattr(e, "orig", None), e.__cause__, e.__context__]
    return seen


def _first_line(e: BaseException) -> str:
    text = str(getattr(e, "orig", None) or e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def classify(exc: BaseException, where: str = "the store", path: str | Path | None = None) -> Problem | None:
    """The outage ``exc`` is, said of ``where`` (``the store (PostgreSQL at host:port/db)``);
    ``path``: the SQLite file, whose file system tells a full disk from another I/O error."""
    try:
        import psycopg
        from psycopg import errors as pg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        psycopg = None  # type: ignore[assignment]
    from sqlalchemy import exc as sa

    for e in _chain(exc):
        text = str(e).lower()
        sqlstate = getattr(e, "sqlstate", None) or ""
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS or "database or disk is full" in text \
                or sqlstate.startswith("53100") or (psycopg is not None and isinstance(e, pg.DiskFull)):
            return Problem(FULL, f"{where} cannot be written: the disk is full")
        if "readonly database" in text or "read-only transaction" in text or sqlstate == "25006" \
                or (isinstance(e, OSError) and e.errno == errno.EROFS):
            return Problem(READ_ONLY, f"{where} is read-only here: it cannot be written")
    for e in _chain(exc):
        text = str(e).lower()
        if psycopg is not None and isinstance(e, psycopg.OperationalError | psycopg.InterfaceError):
            return Problem(UNREACHABLE, f"{where} cannot be reached: {_first_line(e)}")
        if isinstance(e, sa.DisconnectionError | sa.InterfaceError) or getattr(e, "connection_invalidated", False):
            return Problem(UNREACHABLE, f"{where} cannot be reached: {_first_line(e)}")
        if any(t in text for t in _DAMAGED):
            return Problem(DAMAGED, f"{where} is damaged: {_first_line(e)}; restore it from a backup "
                                    "(survey store replace)")
        if any(t in text for t in _IO) or (isinstance(e, OSError) and e.errno in (errno.EIO, errno.EACCES)):
            if disk_full(path):
                return Problem(FULL, f"{where} cannot be written: the disk is full")
            return Problem(IO, f"{where} cannot be read or written: {_first_line(e)}")
        if "database is locked" in text:
            return Problem(UNREACHABLE, f"{where} cannot be used: {_first_line(e)}")
    return None
