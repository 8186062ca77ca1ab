"""Revision 0008 on PostgreSQL with data: a store of bench_scale.py's 5,000 runs written by
an older checkout (at revision 0007), then opened by this one (which upgrades it), timed,
with the rows the upgrade moves counted before and after.

    .venv/bin/python bench/measured/dev-2core-2026-12-05e-store/pg_upgrade.py OLD_CHECKOUT
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, func, select, text  # noqa: E402

from tests.pgserver import PgServer, find_bindir  # noqa: E402

N = 5000


def main() -> None:
    old = Path(sys.argv[1]).resolve()
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed")
    server = PgServer(bindir).start()
    try:
        url = server.url(server.new_database(migrated=False))
        code = (f"import sys; sys.path[:0] = [{str(old)!r}, {str(old / 'bench')!r}]\n"
                f"import bench_scale\nprint(bench_scale.fill({url!r}, {N}, 50, 500))")
        print(subprocess.run([sys.executable, "-c", code], cwd=old, check=True, capture_output=True,
                             text=True).stdout.strip())
        engine = create_engine(url)
        with engine.connect() as conn:
            print("before:", conn.execute(text("SELECT version_num FROM alembic_version")).scalar(),
                  "mode rows, with a message:", conn.execute(text("SELECT count(*), count(message) FROM mode_results"))
                  .one(), "library rows, with an error, a fix:",
                  conn.execute(text("SELECT count(*), count(error), count(fix) FROM library_results")).one())
        engine.dispose()
        from db import models as m
        from db.store import Store

        t0 = time.perf_counter()
        store = Store(url)
        print(f"upgrade to {store.revision}: {time.perf_counter() - t0:.2f} s")
        with store.session() as s:
            print("after: mode rows, with a message:",
                  s.execute(select(func.count(), func.count(m.ModeRow.message_id))).one(),
                  "library rows, with an error, a fix:",
                  s.execute(select(func.count(), func.count(m.LibraryRow.error_id), func.count(m.LibraryRow.fix_id)))
                  .one(), "texts:", s.scalar(select(func.count()).select_from(m.StoredText)))
        store.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
