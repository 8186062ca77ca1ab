"""The slots of bench_scale.py's 100,000-run store, one run each: runs 0-29,999 of its
generator (10,000 catalog candidates on three platforms each), so `survey table` has
the 100,000-run store's 10,000 rows from 30,000 slots in a store filled in about 3.5
minutes instead of 12.

    .venv/bin/python bench/measured/dev-2core-2026-12-05e-store/slots30k.py STORE.db
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_scale  # noqa: E402

from db.store import Store  # noqa: E402
from survey.evidence.ingest import Filing, identify, ingest_many  # noqa: E402
from survey.verdicts import summary  # noqa: E402,F401  (each write keeps its slots' cells and facts)

N = 100_000  # the generator's store: its candidate of run i
SLOTS = 30_000


def main() -> None:
    path = sys.argv[1]
    if os.path.exists(path):
        os.remove(path)
    tpls = bench_scale.templates()
    store = Store(f"sqlite:///{path}")
    t0 = time.time()
    for start in range(0, SLOTS, 500):
        items = []
        for i in range(start, start + 500):
            name, raw = bench_scale.variant(tpls, i, N)
            items.append((identify(raw), Filing(name, name, position=i % (N // 10), scope="catalog")))
        with store.session() as s:
            ingest_many(s, items)
    store.close()
    print(f"{SLOTS} runs in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
