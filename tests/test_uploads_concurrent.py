"""Concurrent uploads over HTTP: 8 writers x 50 uploads, each creating a new
candidate, against a real uvicorn server on 127.0.0.1, on SQLite and PostgreSQL. Every
upload is acknowledged (201, or 200 for a duplicate), no connection is reset, and the
stored runs are exactly the acknowledged ones. Timing is bench/bench_load.py's job."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import func, select

from api.app import create_app
from db import models as m
from db.store import Store
from tests.conftest import report_bytes
from tests.helpers.api import Server

pytestmark = pytest.mark.both_stores  # the store itself is under test

TOKEN = "writers-token"
WRITERS, EACH = 8, 50


def reports() -> list[tuple[str, bytes]]:
    base = json.loads(report_bytes("cpu-triton-3.8.0.json"))
    out = []
    for w in range(WRITERS):
        for i in range(EACH):
            base["probe"]["finished_at"] = f"2026-12-03T{w:02d}:{i // 60:02d}:{i % 60:02d}+00:00"
            out.append((f"writer{w}-{i:02d}", json.dumps(base).encode()))
    # one duplicate per writer: the same report again, under its own name
    return out + [out[w * EACH] for w in range(WRITERS)]


def test_eight_writers_fifty_uploads_each(store: Store) -> None:
    todo = reports()
    with Server(create_app(store, token=TOKEN)) as server:
        base = f"http://127.0.0.1:{server.port}"

        def writer(chunk: list[tuple[str, bytes]]) -> list[tuple[str, int, int | None]]:
            out = []
            with httpx.Client(base_url=base, timeout=60,
                              headers={"Authorization": f"Bearer {TOKEN}"}) as c:
                for name, raw in chunk:
                    r = c.post("/runs", params={"candidate": name}, content=raw,
                               headers={"Content-Type": "application/json"})
                    out.append((name, r.status_code, r.json().get("run_id")))
            return out

        chunks = [todo[w::WRITERS] for w in range(WRITERS)]
        with ThreadPoolExecutor(WRITERS) as pool:
            results = [x for part in pool.map(writer, chunks) for x in part]
    codes = [code for _, code, _ in results]
    assert sorted(set(codes)) == [200, 201], codes  # no 500, no other answer; a reset would have raised
    assert codes.count(201) == WRITERS * EACH and codes.count(200) == WRITERS
    acknowledged = {rid for _, code, rid in results if code == 201}
    with store.session() as s:
        stored = set(s.scalars(select(m.Run.id)))
        assert stored == acknowledged
        assert s.scalar(select(func.count()).select_from(m.Candidate)) == WRITERS * EACH
        assert s.scalar(select(func.count()).select_from(m.Environment)) == 1
