"""The service and the CLI when the store is replaced, unreachable, full or read-only.

- A store file replaced under a running service (``cp s.db new.db; survey ingest ...
  --db new.db; mv new.db s.db``) is reopened: reads show the new file, and an upload
  is acknowledged only once it is in the file on disk.
- PostgreSQL stopped: every route that needs the store answers 503 with one line,
  ``/healthz`` answers 200 naming the part that is down, nothing logs a traceback,
  and the first request after a restart is answered.
- A full disk: an upload is 507, ``survey ingest`` exits 65 with one line.
- A read-only store is served read-only: reads answer, uploads are 403; ``survey
  check --platform`` answers from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import select

from api.app import create_app
from db import models as m
from db.store import Store
from survey.evidence.ingest import ingest
from tests.conftest import no_traceback, report_bytes, survey_cli
from tests.envs import wrapper
from tests.helpers.api import TOKEN
from tests.helpers.store import filled_sqlite, unprivileged
from tests.pgserver import PgServer


def one_line_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text[:500])
    err = r.json()["error"]
    assert err["status"] == status and "\n" not in err["message"] and "Traceback" not in r.text, err
    return err


def h200(name: str = "h200") -> bytes:
    return report_bytes("h200-triton-3.6.0.json")


# --------------------------------------------------------------------------- 1. a replaced file
def test_a_store_file_replaced_under_the_service_is_reopened(filled_store: Store, make_client: Any,
                                                              tmp_path: Path, store_url: str) -> None:
    if not store_url.startswith("sqlite"):
        pytest.skip("a PostgreSQL database is not a file that can be replaced")
    path = Path(store_url.removeprefix("sqlite:///"))
    c = make_client(filled_store, token=TOKEN)
    before = {row["name"] for row in c.get("/candidates.json?scope=all").json()["candidates"]}
    assert "fresh" not in before
    # the operator's replacement, with the service running
    new = tmp_path / "new.db"
    with contextlib.closing(sqlite3.connect(path)) as live, contextlib.closing(sqlite3.connect(new)) as copy:
        live.backup(copy)  # `cp` of a live WAL store, done whole
    r = survey_cli("ingest", str(_report_file(tmp_path)), "--candidate", "fresh", "--new", "--db", f"sqlite:///{new}")
    assert r.returncode == 0, r
    os.replace(new, path)
    listed = c.get("/candidates.json?scope=all")
    assert listed.status_code == 200, listed.text
    after = {row["name"] for row in listed.json()["candidates"]}
    assert after == before | {"fresh"}
    up = c.upload(report_bytes("h200-sm90-triton-3.6.0.json"), params={"candidate": "uploaded"})
    assert up.status_code == 201, up.text
    on_disk = Store(f"sqlite:///{path}", create=False)
    try:
        with on_disk.session() as s:
            assert s.get(m.Run, up.json()["run_id"]) is not None
            assert {c.name for c in s.scalars(select(m.Candidate))} >= {"fresh", "uploaded"}
    finally:
        on_disk.close()


def _report_file(tmp_path: Path) -> Path:
    f = tmp_path / "h200.json"
    f.write_bytes(h200())
    return f


# --------------------------------------------------------------------------- 12. PostgreSQL stopped
def test_postgresql_stopped_is_503_with_one_line_and_a_restart_is_answered(own_pg: PgServer, make_client: Any,
                                                                         logs: pytest.LogCaptureFixture) -> None:
    name = own_pg.new_database()
    store = Store(own_pg.url(name))
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="triton-3.9.0", scope="catalog")
    c = make_client(store, token=TOKEN)
    paths = ("/matrix.json", "/matrix", "/candidates.json", "/candidates/triton-3.9.0.json",
             "/runs/1.json", "/check.json?target=triton-3.9.0&backend=cupti")
    for path in paths:
        assert c.get(path).status_code == 200, path
    own_pg.halt()
    try:
        for path in paths:
            r = c.get(path)
            assert r.status_code == 503, (path, r.status_code, r.text[:300])
            if path.endswith(".json"):
                err = one_line_error(r, 503)
                assert "store" in err["message"], err
        health = c.get("/healthz")  # it asks nothing of the store: what the last call to it found
        assert health.status_code == 200 and health.json()["status"] == "degraded", health.text
        assert "PostgreSQL" in health.json()["store"] and "127.0.0.1" in health.json()["store"], health.text
        assert one_line_error(c.upload(report_bytes("cpu-triton-3.8.0.json")), 503)
    finally:
        own_pg.resume()
    for path in paths:  # the first request after the restart is answered
        assert c.get(path).status_code == 200, path
    no_traceback(logs)
    store.close()


# --------------------------------------------------------------------------- 12. a full disk
@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs (mounting needs root: tests/run.sh and CI run as root)."""
    where = tmp_path / "small"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path) -> None:
    """Fill the file system: only a few bytes stay free."""
    with contextlib.suppress(OSError), (where / "filler").open("wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()


def test_a_full_disk_is_507_to_an_upload_and_exit_65_to_the_cli(small_fs: Path, make_client: Any, tmp_path: Path,
                                                               logs: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{small_fs / 's.db'}"
    store = Store(url)
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="triton-3.9.0", scope="catalog")
    fill(small_fs)
    c = make_client(store, token=TOKEN)
    err = one_line_error(c.upload(report_bytes("cpu-triton-3.8.0.json")), 507)
    assert "full" in err["message"], err
    assert c.get("/matrix.json").status_code == 200  # reads still answer
    no_traceback(logs)
    store.close()
    r = survey_cli("ingest", str(_report_file(tmp_path)), "--db", url)
    assert r.returncode == 65, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in r.stderr + r.stdout and 1 <= len(lines) <= 2 and "full" in lines[0], r


def test_a_full_disk_during_survey_run_is_one_line_and_nothing_half_written(small_fs: Path, tmp_path: Path) -> None:
    """`survey run` probes an interpreter (a fake triton: an environment double) into a
    store on a file system that fills up: one line, exit 65, and the store still whole,
    holding what it held before."""
    url = f"sqlite:///{small_fs / 's.db'}"
    store = Store(url)
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="triton-3.9.0", scope="catalog")
    store.close()
    exe = wrapper(tmp_path, "quick", {})
    cat = tmp_path / "c.toml"
    cat.write_text(f'[[candidate]]\nname = "quick"\npython = "{exe}"\n')
    fill(small_fs)
    r = survey_cli("run", "--catalog", str(cat), "--no-table", "--db", url)
    assert r.returncode == 65, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("quick: ")]
    assert "Traceback" not in r.stderr + r.stdout and 1 <= len(lines) <= 2 and "full" in lines[0], r
    (small_fs / "filler").unlink()
    with sqlite3.connect(small_fs / "s.db") as c:
        assert c.execute("pragma integrity_check").fetchone() == ("ok",)
        names = c.execute("select c.name from runs r join candidates c on c.id = r.candidate_id").fetchall()
    assert names == [("triton-3.9.0",)]


# --------------------------------------------------------------------------- 14. a read-only store
def test_a_read_only_sqlite_store_is_served_and_checked_read_only(shared_dir: Path) -> None:
    d = shared_dir / "ro"
    d.mkdir()
    filled_sqlite(d / "s.db")
    os.chmod(d / "s.db", 0o444)
    os.chmod(d, 0o555)
    url = f"sqlite:///{d / 's.db'}"
    check = unprivileged(lambda: vars(survey_cli("check", "triton-3.9.0", "--backend", "cupti", "--platform",
                                                 "none:x86_64", "--db", url)))
    assert check["returncode"] in (0, 2, 3) and "unable to open" not in check["stderr"], check
    assert "triton-3.9.0" in check["stdout"], check

    def serve_it() -> dict[str, Any]:
        store = Store(url)  # as `survey serve` opens it

        async def ask() -> dict[str, Any]:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(store, token=TOKEN)),
                                         base_url="http://t") as c:
                matrix = await c.get("/matrix.json")
                up = await c.post("/runs", content=report_bytes("cpu-triton-3.6.0.json"),
                                  headers={"Authorization": f"Bearer {TOKEN}"})
                return {"read_only": store.read_only, "matrix": matrix.status_code, "upload": up.status_code,
                        "error": up.json()}

        return anyio.run(ask)

    got = unprivileged(serve_it)
    assert got["read_only"] and got["matrix"] == 200, got
    assert got["upload"] == 403 and got["error"]["error"]["code"] == "read_only_store", got
    assert "\n" not in got["error"]["error"]["message"]


def test_a_read_only_postgresql_database_refuses_uploads_with_403(pg_server: PgServer, make_client: Any,
                                                                 logs: pytest.LogCaptureFixture) -> None:
    name = pg_server.new_database()
    url = pg_server.url(name)
    seed = Store(url)
    with seed.session() as s:
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="triton-3.9.0", scope="catalog")
    seed.close()
    pg_server.admin(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    store = Store(url)
    try:
        c = make_client(store, token=TOKEN)
        assert c.get("/matrix.json").status_code == 200
        err = one_line_error(c.upload(report_bytes("cpu-triton-3.6.0.json")), 403)
        assert err["code"] == "read_only_store", err
        no_traceback(logs)
    finally:
        store.close()
        pg_server.drop_database(name)


def test_the_cli_says_a_read_only_store_cannot_be_written_in_one_line(shared_dir: Path) -> None:
    d = shared_dir / "ro"
    d.mkdir()
    filled_sqlite(d / "s.db")
    os.chmod(d / "s.db", 0o444)
    os.chmod(d, 0o555)
    report = shared_dir / "r.json"
    report.write_bytes(json.dumps(json.loads(h200())).encode())
    os.chmod(report, 0o444)
    got = unprivileged(lambda: vars(survey_cli("ingest", str(report), "--db", f"sqlite:///{d / 's.db'}")))
    assert got["returncode"] == 65 and "Traceback" not in got["stderr"], got
    assert "read-only" in got["stderr"], got
