"""The collector's thresholds, A/B: bench_scale.py's first 3,000 reports of a 100,000-run
store read (identify) and stored in batches of 500 (ingest_many) into a new SQLite store,
per report, with CPython's thresholds (700, 10, 10) and with survey/core/collector.py's,
alternating, each in a fresh process.

    .venv/bin/python bench/measured/dev-2core-2026-12-05f-gc/gc_ab.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHILD = r"""
import gc, json, sys, tempfile, time
sys.path[:0] = [sys.argv[2], sys.argv[2] + "/bench"]
gc.set_threshold(*json.loads(sys.argv[1]))
import bench_scale as b
from db.store import Store
from survey.evidence import ingest as I
import survey.verdicts.summary  # noqa: F401
N, n = 100_000, 3000
tpls = b.templates()
raws = [b.variant(tpls, i, N) for i in range(n)]
t0 = time.perf_counter()
items = [(I.identify(raw), I.Filing(name, name, position=i % (N // 10), scope="catalog"))
         for i, (name, raw) in enumerate(raws)]
t1 = time.perf_counter()
store = Store(f"sqlite:///{tempfile.mkdtemp()}/s.db")
with store.session() as s:
    I.ingest_many(s, items, batch=500)
t2 = time.perf_counter()
print(json.dumps({"identify_ms": round(1000 * (t1 - t0) / n, 2), "write_ms": round(1000 * (t2 - t1) / n, 2)}))
"""


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from survey.core.collector import THRESHOLDS

    for _round in range(2):
        for thresholds in ((700, 10, 10), THRESHOLDS):
            out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(thresholds), str(ROOT)], check=True,
                                 capture_output=True, text=True).stdout
            print(thresholds, out.strip(), flush=True)


if __name__ == "__main__":
    main()
