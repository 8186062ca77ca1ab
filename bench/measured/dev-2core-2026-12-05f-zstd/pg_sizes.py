"""Where a run's bytes go on PostgreSQL: bench_scale.py's generator fills a new database with
N runs; each relation's size per run (main fork and TOAST), the dead tuples autovacuum left,
then the same after VACUUM FULL (what the rows themselves take).

    .venv/bin/python bench/measured/dev-2core-2026-12-05f-zstd/pg_sizes.py 30000
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_scale as b  # noqa: E402
from sqlalchemy import Connection, create_engine, text  # noqa: E402

SIZES = """SELECT c.relname, c.relkind, pg_relation_size(c.oid) AS main,
  COALESCE(pg_total_relation_size(c.reltoastrelid), 0) AS toast, c.reltuples
  FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = 'public'
  ORDER BY pg_relation_size(c.oid) + COALESCE(pg_total_relation_size(c.reltoastrelid), 0) DESC"""
DEAD = """SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, last_autovacuum
  FROM pg_stat_user_tables ORDER BY n_dead_tup DESC"""


def sizes(c: Connection, n: int, rows: int, title: str, tuples: bool) -> None:
    total = c.execute(text("SELECT pg_database_size(current_database())")).scalar() or 0
    print(title, total, total / n)
    for r in c.execute(text(SIZES)).all()[:rows]:
        print(f"{r.relname:40s} {r.relkind} main {r.main / n:8.1f} toast {r.toast / n:8.1f}"
              + (f" tuples {r.reltuples}" if tuples else ""))


def main() -> None:
    n = int(sys.argv[1])
    pg = b.Postgres()
    try:
        url = pg.new()
        print(b.fill(url, n, 50, 500))
        e = create_engine(url)
        with e.connect() as c:
            sizes(c, n, 30, "db", True)
            for r in c.execute(text(DEAD)).all()[:8]:
                print("stat", r)
        with e.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text("VACUUM FULL"))
            sizes(c, n, 22, "after VACUUM FULL db", False)
        e.dispose()
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
