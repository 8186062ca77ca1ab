"""The store's writer process (survey.flows.writer): uploads handed over from the serving
processes are stored as a write in process stores them (the same results, the same
refusals, the stored cells kept current), a writer that stops refuses what comes instead
of hanging or losing it, and ``survey serve`` starts a stopped one again and leaves none
behind."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.app import create_app
from db import models as m
from db.store import Store
from survey.core.errors import InvalidReport
from survey.environments import catalog as catalog_mod
from survey.evidence.ingest import IngestResult, identify
from survey.flows import writer as writer_mod
from survey.flows.filing import new_filing
from survey.flows.writer import RemoteWriter, WriterGone, WriterProcess
from survey.verdicts import summary
from tests.conftest import report_bytes
from tests.conftest import report_variant as variant
from tests.helpers.serve import Served, serving_children
from tests.helpers.summary import NAMES, assert_kept

TOKEN = "writer-token"


def upload_to(writer: RemoteWriter, raw: bytes, candidate: str | None) -> Any:
    ident = identify(raw, exact=True)
    try:
        return writer.store_report(ident, new_filing(ident, candidate=candidate, label=None,
                                                     catalog=catalog_mod.load(None)))
    except Exception as e:  # noqa: BLE001 - the test looks at what it was
        return e


def at_once(send: Callable[[bytes, str], Any], uploads: list[tuple[bytes, str]]) -> list[Any]:
    """Every upload sent at the same time, a thread each; what each got, in their order."""
    with ThreadPoolExecutor(len(uploads)) as pool:
        return list(pool.map(lambda upload: send(*upload), uploads))


@pytest.fixture
def writer_process(store: Store) -> Any:
    proc = WriterProcess(store.url, restart=False)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.both_stores
def test_reports_stored_by_the_writer_process_are_answered_as_a_write_in_process_answers(
        store: Store, writer_process: WriterProcess) -> None:
    remote = writer_mod.connect(store, writer_process.handle)
    uploads = [(variant(NAMES[i % 4], f"/venvs/w{i}", f"2026-12-03T0{i}:00:00+00:00"), f"w{i}") for i in range(8)]
    answers = at_once(lambda raw, name: upload_to(remote, raw, name), uploads)
    assert all(isinstance(a, IngestResult) and a.created for a in answers), answers
    assert [a.candidate for a in answers] == [name for _, name in uploads]
    again = upload_to(remote, uploads[0][0], "elsewhere")  # the same report: stored once
    assert isinstance(again, IngestResult) and (again.run_id, again.created, again.candidate) == (
        answers[0].run_id, False, "w0")
    # a 3.7.1 report filed as the catalog's triton-3.8.0: refused by the write, and the refusal
    # comes back whole (its type, message and field), as GroupCommit raises it in process
    refused = upload_to(remote, report_bytes("cpu-triton-3.7.1.json"), "triton-3.8.0")
    assert isinstance(refused, InvalidReport) and "triton-3.8.0" in refused.message, refused
    with store.session() as s:
        assert {r.id: r.candidate.name for r in s.scalars(select(m.Run))} == {a.run_id: a.candidate for a in answers}
        assert summary.current(s)  # the writer process keeps the stored cells current
    assert_kept(store)


def test_a_stopped_writer_refuses_the_next_report_at_once(store: Store, writer_process: WriterProcess) -> None:
    remote = writer_mod.connect(store, writer_process.handle)
    first = upload_to(remote, report_bytes(NAMES[0]), "before")
    assert isinstance(first, IngestResult) and first.created
    os.kill(writer_process.proc.pid, signal.SIGKILL)
    writer_process.proc.join()
    gone = upload_to(remote, report_bytes(NAMES[1]), "after")  # none listens now: not started again
    assert isinstance(gone, WriterGone) and "the store's writer process" in gone.message, gone
    with store.session() as s:
        assert [r.candidate.name for r in s.scalars(select(m.Run))] == ["before"]


def test_an_upload_the_writer_cannot_take_is_answered_503_in_one_line(
        store: Store, writer_process: WriterProcess) -> None:
    app = create_app(store, token=TOKEN)
    app.state.writer = writer_mod.connect(store, writer_process.handle)
    os.kill(writer_process.proc.pid, signal.SIGKILL)
    writer_process.proc.join()
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.post("/runs", params={"candidate": "after"}, content=report_bytes(NAMES[0]),
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "store_unavailable" and "the store's writer process" in error["message"]
    assert "send it again" in error["hint"]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _upload(base: str, raw: bytes, candidate: str) -> httpx.Response:
    return httpx.post(f"{base}/runs", params={"candidate": candidate}, content=raw,
                      headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)


@pytest.mark.parametrize("workers", [1, 2])
def test_survey_serve_writes_through_one_writer_process_and_stops_it(
        filled_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    monkeypatch.setenv("SURVEY_TOKEN", TOKEN)
    srv = Served(filled_store.url, tmp_path / "serve.log", *(["--workers", str(workers)] if workers > 1 else []))
    try:
        base = f"http://127.0.0.1:{srv.port}"
        workers_, writers = serving_children(srv.proc.pid)
        assert (len(workers_), len(writers)) == ((workers if workers > 1 else 0), 1), (workers_, writers)
        uploads = [(variant(NAMES[i % 4], f"/venvs/s{i}", f"2026-12-04T0{i}:00:00+00:00"), f"s{i}") for i in range(8)]
        answers = at_once(lambda raw, name: _upload(base, raw, name), uploads)
        assert [a.status_code for a in answers] == [201] * len(uploads), [a.text for a in answers]
        acknowledged = {a.json()["run_id"] for a in answers}
        with filled_store.session() as s:
            assert acknowledged <= set(s.scalars(select(m.Run.id)))
        assert_kept(filled_store)
    finally:
        srv.stop()  # SIGTERM to its process group: uvicorn stops, then exits by the signal
    assert _gone(writers[0]), "the writer process outlived survey serve"
    assert "Traceback" not in srv.log.read_text()


def test_a_writer_that_stops_is_started_again_and_reads_go_on(
        filled_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURVEY_TOKEN", TOKEN)
    srv = Served(filled_store.url, tmp_path / "serve.log")
    try:
        base = f"http://127.0.0.1:{srv.port}"
        (writer,) = serving_children(srv.proc.pid)[1]
        os.kill(writer, signal.SIGKILL)
        refused = []
        deadline = time.monotonic() + 60
        while True:  # until the writer started again takes it: each answer before is a 503 in one line
            r = _upload(base, variant(NAMES[0], "/venvs/after", "2026-12-05T00:00:00+00:00"), "after")
            if r.status_code == 201:
                break
            assert r.status_code == 503 and r.json()["error"]["code"] == "store_unavailable", r.text
            refused.append(r)
            assert httpx.get(f"{base}/matrix.json", timeout=30).status_code == 200  # reads go on
            assert time.monotonic() < deadline, srv.log.read_text()[-2000:]
            time.sleep(0.1)
        (again,) = serving_children(srv.proc.pid)[1]
        assert again != writer, (refused, serving_children(srv.proc.pid), srv.log.read_text()[-1500:])
        with filled_store.session() as s:
            assert "after" in set(s.scalars(select(m.Candidate.name)))
        assert_kept(filled_store)
    finally:
        srv.stop()
    log = srv.log.read_text()
    assert "Traceback" not in log and "the store's writer process stopped (exit -9); starting another" in log


def test_the_writer_process_dies_with_a_killed_server(filled_store: Store, tmp_path: Path) -> None:
    srv = Served(filled_store.url, tmp_path / "serve.log")
    try:
        (writer,) = serving_children(srv.proc.pid)[1]
        srv.proc.kill()  # SIGKILL: survey serve cannot stop it
        srv.proc.wait()
        deadline = time.monotonic() + 30
        while not _gone(writer) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(writer)
    finally:
        srv.stop()


def test_a_file_renamed_over_the_store_is_written_to_once_it_can_be_used(tmp_path: Path) -> None:
    path = tmp_path / "survey.db"
    store = Store(f"sqlite:///{path}")
    proc = WriterProcess(store.url, restart=False)
    try:
        remote = writer_mod.connect(store, proc.handle)
        assert isinstance(upload_to(remote, report_bytes(NAMES[0]), "first"), IngestResult)
        store.engine.dispose()  # this process keeps nothing of the old file open
        garbage = tmp_path / "garbage.db"
        garbage.write_bytes(b"not a database" * 1000)
        os.replace(garbage, path)
        refused = upload_to(remote, report_bytes(NAMES[1]), "second")
        assert isinstance(refused, WriterGone) and "replaced by one that cannot be used" in refused.message, refused
        assert proc.proc.is_alive()  # the writer goes on
        fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
        fresh.close()
        os.replace(tmp_path / "fresh.db", path)
        stored = upload_to(remote, report_bytes(NAMES[1]), "second")
        assert isinstance(stored, IngestResult) and stored.created, stored
        reopened = Store(f"sqlite:///{path}", create=False)
        with reopened.session() as s:  # in the file now at the path, alone
            assert [r.candidate.name for r in s.scalars(select(m.Run))] == ["second"]
        reopened.close()
    finally:
        proc.stop()


def test_a_writer_that_cannot_open_its_store_says_so_in_one_line(tmp_path: Path,
                                                                capfd: pytest.CaptureFixture[str]) -> None:
    proc = WriterProcess(f"sqlite:///{tmp_path / 'no-such-store.db'}")  # create=False: refused
    try:
        with pytest.raises(WriterGone, match=r"stopped as it started \(exit 1\)"):
            _ = proc.handle
    finally:
        proc.stop()
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("survey-writer: stopped: ")], err
