"""Stores as the tests fill and read them: every text a store holds (``stored_text``), a
SQLite store filled and cleanly closed (``filled_sqlite``) and its table rows
(``read_rows``), and a reader that may not write what root owns (``unprivileged``; the
directory it can reach is conftest's ``shared_dir``)."""

from __future__ import annotations

import json
import os
import pwd
import select
import signal
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from db import compression
from db.store import Store
from survey.render import docs_table
from tests.conftest import report_bytes


def stored_text(store: Store) -> str:
    """Every text the store holds about candidates and runs, in one string."""
    with store.engine.connect() as conn:
        rows = [conn.execute(text(q)).all() for q in (
            "SELECT name, label, kind, spec FROM candidates", "SELECT error, error_key FROM runs",
            "SELECT resolved, label FROM environments")]
        reports = [compression.decompress(body).decode() for (body,) in conn.execute(text("SELECT body FROM reports"))]
    return repr(rows) + repr(reports)  # the report text is stored compressed (db.models.Report)


def filled_sqlite(path: Path) -> list[dict[str, Any]]:
    """A SQLite store holding two real reports, cleanly closed (no -wal/-shm left);
    returns its table rows as read by its writer."""
    from survey.evidence.ingest import ingest

    store = Store(f"sqlite:///{path}")
    for v in ("3.8.0", "3.9.0"):
        with store.session() as s:
            ingest(s, report_bytes(f"cpu-triton-{v}.json"), candidate=f"triton-{v}", scope="catalog")
    rows = read_rows(store)
    store.close()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    return rows


def read_rows(store: Store) -> list[dict[str, Any]]:
    with store.session() as s:
        return [dict(r) for r in docs_table.table_rows(s, "all")]


def unprivileged(fn: Callable[[], Any], timeout: float = 60) -> Any:
    """``fn()`` in a forked child that may not write what root owns: as root the child
    becomes ``nobody`` (root ignores file modes, so a 0444 file would prove nothing).
    Returns fn's result (JSON), or raises with the child's traceback."""
    nobody = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            if nobody is not None:
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            payload = {"ok": fn()}
        except BaseException:
            payload = {"error": traceback.format_exc()}
        with os.fdopen(w, "w") as f:
            json.dump(payload, f, default=str)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        ready, _, _ = select.select([f], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the unprivileged reader did not answer in {timeout} s")
        data = f.read()
    os.waitpid(pid, 0)
    payload = json.loads(data)
    if "error" in payload:
        raise AssertionError("in the unprivileged reader:\n" + payload["error"])
    return payload["ok"]
