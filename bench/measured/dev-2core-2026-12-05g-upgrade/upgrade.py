"""Revisions 0009 and 0010 with data, on SQLite and PostgreSQL: a store of bench_scale.py's
5,000 runs written by an older checkout (at revision 0008), then opened by this one (which
upgrades it), timed; then the cells worked out again (bring_current, as `survey serve`'s
start does), timed. The rows of each table the upgrade copies are counted before and after,
and every stored cell's matrix-row part compared.

    .venv/bin/python bench/measured/dev-2core-2026-12-05g-upgrade/upgrade.py OLD_CHECKOUT
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, text  # noqa: E402

from tests.pgserver import PgServer, find_bindir  # noqa: E402

N = 5000
TABLES = ("mode_results", "library_results", "capture_results")
CELL = ("backend, mode, mode_arg, outcome, verdict, verdict_source, here, cause, stub_outcome, library, "
        "reason, capture_outcome, capture_kernel_count, capture_gpu_time_ns")


def seen(url: str) -> dict[str, Any]:
    engine = create_engine(url)
    with engine.connect() as conn:
        out = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in TABLES}
        out["cells"] = sorted(tuple(map(str, r)) for r in conn.execute(text(
            f"SELECT s.candidate_id, s.platform_id, {CELL} FROM cells c JOIN slots s ON s.id = c.slot_id")))
        out["revision"] = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    return out


def one(url: str, old: Path) -> None:
    code = (f"import sys; sys.path[:0] = [{str(old)!r}, {str(old / 'bench')!r}]\n"
            f"import bench_scale\nprint(bench_scale.fill({url!r}, {N}, 50, 500))")
    print(subprocess.run([sys.executable, "-c", code], cwd=old, check=True, capture_output=True,
                         text=True).stdout.strip())
    before = seen(url)
    from db.store import Store
    from survey.verdicts import summary

    t0 = time.perf_counter()
    store = Store(url)
    print(f"  upgrade {before['revision']} -> {store.revision}: {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    slots = summary.bring_current(store)
    print(f"  cells of {slots} slots worked out again: {time.perf_counter() - t0:.2f} s")
    store.close()
    after = seen(url)
    print("  rows before/after:", {t: (before[t], after[t]) for t in TABLES})
    print("  cells:", len(before["cells"]), "before,", len(after["cells"]), "after; the same:",
          before["cells"] == after["cells"])


def main() -> None:
    old = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as d:
        print("SQLite")
        one(f"sqlite:///{d}/s.db", old)
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed")
    server = PgServer(bindir).start()
    try:
        print("PostgreSQL")
        one(server.url(server.new_database(migrated=False)), old)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
