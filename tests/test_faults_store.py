"""Faults of the store under a running service: replaced while uploads arrive, frozen.

- ``survey store replace``, 20 times, under a real ``survey serve`` and four clients
  uploading all the while: the file stays whole (``PRAGMA integrity_check``), every
  upload is answered 201, ``/healthz`` answers, SIGTERM stops the server, and every
  acknowledged upload is in the store served now, or was stored before the last
  replacement (and nothing stored before it is still there).
- A PostgreSQL frozen with SIGSTOP (this test's own server): every route that needs the
  store answers 503 naming it, within the pool's deadline; ``/healthz``,
  ``/static/*`` and ``/openapi.json`` answer 200 all the while; after SIGCONT the
  store's routes answer again.

The bounds below (seconds to wait for an answer) are generous limits on events, so a
wedged server fails the test instead of hanging it; nothing measures speed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from api.app import create_app
from db import models as m
from db.store import Store
from survey.evidence import copies
from survey.evidence.ingest import ingest
from tests.conftest import report_bytes, survey_cli
from tests.helpers.api import Server
from tests.pgserver import PgServer

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "faults-token"
REPLACEMENTS, UPLOADERS = 20, 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """``survey serve`` in a process group of its own, with an upload token."""

    def __init__(self, db: str, log: Path):
        self.port = free_port()
        self.log = log
        env = {**os.environ, "SURVEY_TOKEN": TOKEN}
        with log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "survey", "serve", "--db", db, "--port",
                                          str(self.port)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=env)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, log.read_text()
            try:
                if httpx.get(self.url("/healthz"), timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def numbered(n: int) -> bytes:
    """A report of its own (its own finish time): stored as a new run."""
    data = json.loads(report_bytes("cpu-triton-3.8.0.json"))
    day, hour, minute, second = 3 + n // 86400, n // 3600 % 24, n // 60 % 60, n % 60
    data["probe"]["finished_at"] = f"2026-12-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}+00:00"
    return json.dumps(data).encode()


@dataclass
class Upload:
    name: str
    sent_after: int  # replacements finished when it was sent
    answered_after: int  # replacements started when its answer came
    status: int
    run_id: int | None


def test_the_store_replaced_twenty_times_under_four_uploaders(tmp_path: Path) -> None:
    path = tmp_path / "survey.db"
    live = Store(f"sqlite:///{path}")
    with live.session() as s:
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="triton-3.9.0", scope="catalog")
    # the replacements: copies of the store (survey store backup's function), each with a marker of its own
    news = []
    for i in range(REPLACEMENTS):
        new = tmp_path / f"new-{i}.db"
        copies.backup(live, new)
        other = Store(f"sqlite:///{new}", create=False)
        with other.session() as s:
            ingest(s, numbered(100_000 + i), candidate=f"replacement-{i}", scope="all")
        other.close()
        news.append(new)
    live.close()

    server = Serve(str(path), tmp_path / "serve.log")
    lock = threading.Lock()
    finished = started = 0
    stop = threading.Event()
    uploads: list[Upload] = []
    after_last: list[int] = [0] * UPLOADERS

    def uploader(w: int) -> None:
        with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            i = 0
            while not stop.is_set():
                name = f"u{w}-{i}"
                with lock:
                    sent_after = finished
                r = c.post(server.url("/runs"), params={"candidate": name}, content=numbered(w * 10_000 + i),
                           headers={"Content-Type": "application/json"})
                with lock:
                    answered_after = started
                    if sent_after == REPLACEMENTS:
                        after_last[w] += 1
                run_id = r.json().get("run_id") if r.status_code in (200, 201) else None
                uploads.append(Upload(name, sent_after, answered_after, r.status_code, run_id))
                i += 1

    try:
        with ThreadPoolExecutor(UPLOADERS) as pool:
            running = [pool.submit(uploader, w) for w in range(UPLOADERS)]
            for new in news:
                time.sleep(0.2)
                with lock:
                    started += 1
                target = Store(f"sqlite:///{path}", create=False)
                try:
                    copies.replace(target, new)
                finally:
                    target.close()
                with lock:
                    finished += 1
            deadline = time.monotonic() + 120
            while min(after_last) < 3 and time.monotonic() < deadline and not any(f.done() for f in running):
                time.sleep(0.1)
            stop.set()
            for f in running:
                f.result()
        assert min(after_last) >= 3, after_last  # every client uploaded after the last replacement
        assert httpx.get(server.url("/healthz"), timeout=5).status_code == 200
        listed = httpx.get(server.url("/candidates.json?scope=all&_size=1000"), timeout=30)
        assert listed.status_code == 200, listed.text
        served = {row["name"] for row in listed.json()["candidates"]}
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=5) is not None  # TimeoutExpired: SIGTERM did not stop it
    finally:
        stop.set()
        server.kill()

    codes = [u.status for u in uploads]
    assert set(codes) == {201}, [(u.name, u.status) for u in uploads if u.status != 201][:5]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    final = Store(f"sqlite:///{path}", create=False)
    try:
        with final.session() as s:
            names = set(s.scalars(select(m.Candidate.name)))
            runs = set(s.scalars(select(m.Run.id)))
    finally:
        final.close()
    assert names == served
    assert f"replacement-{REPLACEMENTS - 1}" in names
    assert not names & {f"replacement-{i}" for i in range(REPLACEMENTS - 1)}
    kept = {u.name for u in uploads if u.name in names}
    for u in uploads:
        if u.sent_after == REPLACEMENTS:  # sent after the last replacement: it is in the served store
            assert u.name in kept and u.run_id in runs, u
        if u.name in kept:  # stored after the last replacement began, or it would have been replaced
            assert u.answered_after == REPLACEMENTS, u
    assert len(kept) >= sum(after_last)


# --------------------------------------------------------------------------- a frozen PostgreSQL
@pytest.fixture
def own_pg(own_pg: PgServer) -> Iterator[PgServer]:
    """The test's own PostgreSQL server (tests/conftest.py), which it freezes: thawed before
    it is stopped."""
    try:
        yield own_pg
    finally:
        for pid in _server_pids(own_pg):
            with _gone():
                os.kill(pid, signal.SIGCONT)


class _gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *_: object) -> bool:
        return kind is ProcessLookupError


def _server_pids(server: PgServer) -> list[int]:
    """The postmaster and every process it started."""
    pidfile = server.data / "postmaster.pid"
    if not pidfile.exists():
        return []
    top = int(pidfile.read_text().split()[0])
    found = [top]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == top:
            found.append(int(entry))
    return found


def test_a_frozen_postgresql_is_503_naming_it_and_the_store_free_routes_answer(own_pg: PgServer,
                                                                               tmp_path: Path) -> None:
    store = Store(own_pg.url(own_pg.new_database()))
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="triton-3.9.0", scope="catalog")
    store_routes = ["/matrix.json", "/matrix", "/candidates.json", "/candidates/triton-3.9.0.json", "/runs/1.json",
                    "/runs/1/report.json", "/check.json?target=triton-3.9.0&backend=cupti", "/changes.json"]
    free_routes = ["/healthz", "/static/style.css", "/openapi.json", "/schema.json"]
    with Server(create_app(store, token=TOKEN, store_timeout=1.0)) as server:
        base = f"http://127.0.0.1:{server.port}"
        with httpx.Client(base_url=base, timeout=60) as c:
            for path in store_routes + free_routes:
                assert c.get(path).status_code == 200, path
            os.environ["SURVEY_STORE_TIMEOUT"] = "1"
            try:
                served = Serve(store.url, tmp_path / "serve.log")
            finally:
                del os.environ["SURVEY_STORE_TIMEOUT"]
            assert httpx.get(served.url("/matrix.json"), timeout=30).status_code == 200
            frozen = _server_pids(own_pg)
            assert len(frozen) > 1
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            try:
                def ask(path: str) -> tuple[str, int, str]:
                    with httpx.Client(base_url=base, timeout=60) as one:
                        r = one.get(path)
                        return path, r.status_code, r.text

                # many at once, more than the pool holds: each is answered, none hangs
                with ThreadPoolExecutor(24) as pool:
                    answers = list(pool.map(ask, [f"{p}{'&' if '?' in p else '?'}scope=all" if p.startswith(
                        "/matrix.json") else p for p in store_routes * 3]))
                for path, status, body in answers:
                    assert status == 503, (path, status, body[:300])
                    if path.endswith(".json") or ".json?" in path:
                        err = json.loads(body)["error"]
                        assert "PostgreSQL at 127.0.0.1" in err["message"] and "\n" not in err["message"], err
                for path in free_routes:  # while the store is frozen
                    assert c.get(path).status_code == 200, path
                health = c.get("/healthz").json()
                assert health["status"] == "degraded" and "PostgreSQL at 127.0.0.1" in health["store"], health
                up = c.post("/runs", content=report_bytes("cpu-triton-3.8.0.json"),
                            headers={"Authorization": f"Bearer {TOKEN}"})
                assert up.status_code == 503, up.text
                # a real `survey serve` whose store threads wait on the frozen server stops on SIGTERM
                try:
                    deadline = time.monotonic() + 60
                    while True:  # up, and its store calls waiting on the frozen server
                        try:
                            if httpx.get(served.url("/matrix.json"), timeout=30).status_code == 503:
                                break
                        except httpx.TransportError:
                            pass
                        assert time.monotonic() < deadline, served.log.read_text()
                        time.sleep(0.5)
                    served.proc.send_signal(signal.SIGTERM)
                    assert served.proc.wait(timeout=30) is not None  # TimeoutExpired: SIGTERM did not stop it
                finally:
                    served.kill()
            finally:
                for pid in frozen:
                    with _gone():
                        os.kill(pid, signal.SIGCONT)
            deadline = time.monotonic() + 60
            while c.get("/matrix.json").status_code != 200:  # thawed: answered again
                assert time.monotonic() < deadline, "the store's routes did not answer after SIGCONT"
                time.sleep(0.5)
            for path in store_routes:
                assert c.get(path).status_code == 200, path
            assert c.get("/healthz").json()["status"] == "ok"
    store.close()


def test_store_backup_and_replace_from_the_command_line(filled_store: Store, tmp_path: Path) -> None:
    url = filled_store.url
    copy = tmp_path / "copy.db"
    r = survey_cli("store", "backup", str(copy), "--db", url)
    assert r.returncode == 0 and "4 runs" in r.stderr, r
    assert survey_cli("store", "backup", str(copy), "--db", url).returncode == 65  # never over a file
    with filled_store.session() as s:
        ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate="later", scope="all")
    r = survey_cli("store", "replace", str(copy), "--db", url)
    assert r.returncode == 0, r
    with filled_store.session() as s:
        names = set(s.scalars(select(m.Candidate.name)))
    assert "later" not in names and len(names) == 4
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all" * 100)
    r = survey_cli("store", "replace", str(bad), "--db", url)
    assert r.returncode == 65 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r


def test_no_cache_answers_from_a_replaced_content(filled_store: Store, make_client: Any, tmp_path: Path) -> None:
    """The replacement's content at the same matrix version as the store's: the service's
    per-version caches (and its replayed answers) must not take it for the old content."""
    c = make_client(filled_store)
    before = c.get("/candidates.json?scope=all")
    assert before.status_code == 200 and c.get("/candidates.json?scope=all").text == before.text  # cached
    version = before.json().get("matrix_version") or c.get("/matrix.json").json()["matrix_version"]
    other = tmp_path / "other.db"
    copies.backup(filled_store, other)
    with contextlib.closing(sqlite3.connect(other)) as conn:  # another content, the same version
        conn.execute("UPDATE candidates SET label = 'relabelled' WHERE name = 'triton-3.9.0'")
        conn.commit()
        assert str(conn.execute("SELECT value FROM meta WHERE key = 'matrix_version'").fetchone()[0]) == version
    copies.replace(filled_store, other)
    after = c.get("/candidates.json?scope=all")
    assert after.status_code == 200 and "relabelled" in after.text, after.text
    assert c.get("/matrix.json").json()["matrix_version"] != version
