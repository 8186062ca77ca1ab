"""``survey serve`` under slow, bloated and numerous connections, and without its supervisor.

A real ``survey serve`` on 127.0.0.1 and raw sockets: a request head sent a byte at
a time is cut off (408), a head over the size or field-count limit is refused (431),
connections past ``--max-connections`` are answered 503 and closed, and killing the
``--workers`` supervisor takes its workers with it. Every loop is bounded.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from db.store import Store
from tests.helpers.serve import Served, answer, serving_children

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def served(filled_store: Store, tmp_path: Path) -> Iterator[Served]:
    srv = Served(filled_store.url, tmp_path / "serve.log")
    yield srv
    srv.stop()


def test_a_request_head_sent_a_byte_at_a_time_is_cut_off(served: Served) -> None:
    with served.connect() as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        conn.settimeout(1.0)
        closed, got = False, b""
        for _ in range(40):  # one header byte a second, for at most 40 s
            try:
                conn.sendall(b"X")
                got = conn.recv(65536)
                closed = True  # an answer or the end of the connection, before the head was done
                break
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
        assert closed, "the server kept a connection open whose head never ended"
        assert got == b"" or got.startswith(b"HTTP/1.1 408"), got
    assert httpx.get(f"http://127.0.0.1:{served.port}/healthz", timeout=10).status_code == 200


@pytest.mark.parametrize("head, says", [
    (b"X-Big: " + b"a" * (1024 * 1024) + b"\r\n", b"over 65536 bytes"),
    (b"".join(b"X-N%d: 1\r\n" % i for i in range(500)), b"more than 100 header fields"),
])
def test_a_request_head_over_the_limits_is_refused(served: Served, head: bytes, says: bytes) -> None:
    with served.connect() as conn:
        try:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + head + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while it was still sending
        got = answer(conn)
    assert got.startswith(b"HTTP/1.1 431 "), got[:200]
    assert says in got
    assert httpx.get(f"http://127.0.0.1:{served.port}/healthz", timeout=10).status_code == 200


def test_connections_past_the_limit_are_answered_503_and_closed(filled_store: Store, tmp_path: Path) -> None:
    srv = Served(filled_store.url, tmp_path / "serve.log", "--max-connections", "8", "--header-timeout", "300")
    held: list[socket.socket] = []
    try:
        for _ in range(8):  # half-sent heads holding every slot
            conn = srv.connect()
            conn.sendall(b"GET /healthz HTTP/1.1\r\n")
            held.append(conn)
        time.sleep(0.5)  # the server has accepted them all
        with srv.connect() as extra:
            got = answer(extra)
        assert got.startswith(b"HTTP/1.1 503 ") and b"too many connections" in got, got[:200]
        for conn in held:
            conn.close()
        deadline = time.monotonic() + 20
        while True:  # the slots are free again once the held connections are gone
            try:
                if httpx.get(f"http://127.0.0.1:{srv.port}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        for conn in held:
            conn.close()
        srv.stop()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_killing_the_supervisor_takes_its_workers_with_it(filled_store: Store, tmp_path: Path) -> None:
    srv = Served(filled_store.url, tmp_path / "serve.log", "--workers", "2")
    try:
        workers, writers = serving_children(srv.proc.pid)
        assert (len(workers), len(writers)) == (2, 1), (workers, writers)
        workers += writers  # the store's writer process goes with them
        srv.proc.kill()  # SIGKILL: the supervisor cannot pass anything on
        srv.proc.wait()
        deadline = time.monotonic() + 30
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [w for w in workers if _alive(w)], srv.log.read_text()[-2000:]
        with pytest.raises(httpx.ConnectError):  # and nothing holds the port
            httpx.get(f"http://127.0.0.1:{srv.port}/healthz", timeout=5)
    finally:
        srv.stop()


def test_an_in_memory_store_serves_what_is_uploaded_to_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The database is its one connection: before, each of the service's threads opened its own,
    # empty one, and every request was a 500 ("no such table").
    monkeypatch.setenv("SURVEY_TOKEN", "t0ken")
    srv = Served("sqlite://", tmp_path / "serve.log")
    try:
        base = f"http://127.0.0.1:{srv.port}"
        assert httpx.get(base + "/matrix.json", timeout=30).json()["count"] == 0
        report = (ROOT / "tests" / "fixtures" / "reports" / "cpu-triton-3.9.0.json").read_bytes()
        up = httpx.post(base + "/runs?candidate=mem", content=report, headers={"Authorization": "Bearer t0ken"},
                        timeout=60)
        assert up.status_code == 201 and up.json()["run_id"] == 1, up.text
        rows = httpx.get(base + "/matrix.json?scope=all", timeout=30).json()["rows"]
        assert {r["candidate"] for r in rows} == {"mem"} and len(rows) == 14
    finally:
        srv.stop()


def test_each_request_is_logged_with_its_status(served: Served) -> None:
    """survey serve says each request it answers on its standard error: the client, the
    method and path, and the status."""
    import httpx

    base = f"http://127.0.0.1:{served.port}"
    assert httpx.get(f"{base}/matrix.json?backend=cupti", timeout=30).status_code == 200
    assert httpx.get(f"{base}/no-such-page", timeout=30).status_code == 404
    log = served.log.read_text()
    assert re.search(r'127\.0\.0\.1:\d+ - "GET /matrix\.json\?backend=cupti HTTP/1\.1" 200', log), log
    assert re.search(r'127\.0\.0\.1:\d+ - "GET /no-such-page HTTP/1\.1" 404', log), log
    assert "Traceback" not in log


FROZEN = """
import gc, os, sys
from db.store import Store
from api import serve
if sys.argv[1] == "workers":
    os.environ[serve.WORKER_STORE_ENV] = sys.argv[2]
    serve.worker_app()
else:
    serve.serving_app(Store(sys.argv[2]))
print(gc.get_freeze_count(), len(gc.get_objects()))
"""


@pytest.mark.parametrize("how", ["one process", "workers"])
def test_a_server_process_freezes_what_its_start_made(how: str, tmp_path: Path) -> None:
    """A full collection walks every tracked object; the startup's (modules, the app, the
    store's metadata) live as long as the process, so they are frozen once the app is made
    and a collection walks only what serving made since (bench/README.md has the cost)."""
    db = f"sqlite:///{tmp_path / 's.db'}"
    Store(db).close()
    r = subprocess.run([sys.executable, "-c", FROZEN, "workers" if how == "workers" else "one", db], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    frozen, tracked = (int(x) for x in r.stdout.split())
    assert frozen > 10 * tracked, (frozen, tracked)
