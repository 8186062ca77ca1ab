"""What a full garbage collection costs a request in the service, without and with the
startup's objects frozen: the app on a copy of a store, two pages asked (warm), then 60
times an upload and the first page; the length of each generation-2 collection.

    python gc_cost.py plain|freeze STORE.db
"""

import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_scale  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from api.app import create_app  # noqa: E402
from db.store import Store  # noqa: E402


def main() -> None:
    mode, db = sys.argv[1], sys.argv[2]
    work = Path(tempfile.mkdtemp())
    shutil.copy(db, work / "s.db")
    client = TestClient(create_app(Store(f"sqlite:///{work / 's.db'}"), token="t"))
    tpls = bench_scale.templates()
    client.get("/matrix.json")
    client.get("/matrix.md")
    if mode == "freeze":
        gc.freeze()
    started: dict[str, float] = {}
    lengths: list[float] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
        elif info["generation"] == 2:
            lengths.append(time.perf_counter() - started["t"])

    gc.callbacks.append(watch)
    for i in range(60):
        name, raw = bench_scale.variant(tpls, 10000 + i, 100000)
        client.post(f"/runs?candidate={name}", content=raw, headers={"Authorization": "Bearer t"})
        client.get("/matrix.json")
    print(mode, "objects tracked", len(gc.get_objects()), "frozen", gc.get_freeze_count(), "gen2 collections",
          len(lengths), "each ms", [round(x * 1000) for x in lengths])


if __name__ == "__main__":
    main()
