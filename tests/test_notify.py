"""Webhooks (survey.flows.notify): signed POSTs of what a survey changed, retried with
backoff, recorded in the store, never failing the survey. The receivers are real HTTP
servers on 127.0.0.1 (tests/pyindex.py) that answer as told."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from db import models as m
from db.store import Store
from survey.flows import notify
from tests.conftest import survey_cli
from tests.envs import fake_triton
from tests.pyindex import Receiver, closed_port

SECRET = "s3cret for the receiver"
BODY = b'{"event":"survey.changes","changes":[]}'


def signature(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_a_delivery_is_signed_over_the_exact_body() -> None:
    with Receiver([204]) as hook:
        r = notify.deliver(hook.url, BODY, SECRET.encode(), sleep=lambda _s: None)
    assert (r.status, r.attempts, r.http_status, r.error) == ("delivered", 1, 204, None)
    (got,) = hook.got
    assert got.body == BODY and got.path == "/hook"
    assert got.headers["x-survey-signature"] == signature(BODY)
    assert got.headers["x-survey-signature"] != signature(BODY, "another secret")
    assert got.headers["content-type"] == "application/json"
    assert got.headers["x-survey-delivery"] == hashlib.sha256(BODY).hexdigest()


def test_a_failing_receiver_is_retried_with_doubling_waits_then_given_up() -> None:
    waits: list[float] = []
    with Receiver([500]) as hook:
        r = notify.deliver(hook.url, BODY, SECRET.encode(), first_wait=0.5, sleep=waits.append)
    assert (r.status, r.attempts, r.http_status) == ("failed", notify.ATTEMPTS, 500)
    assert r.error == "the receiver answered 500 Internal Server Error"
    assert waits == [0.5, 1.0, 2.0]  # bounded: ATTEMPTS - 1 waits
    assert len(hook.got) == notify.ATTEMPTS and {d.body for d in hook.got} == {BODY}
    assert {d.headers["x-survey-signature"] for d in hook.got} == {signature(BODY)}


def test_a_receiver_that_recovers_gets_it_and_one_that_refuses_is_not_asked_again() -> None:
    with Receiver([503, 429, 200]) as hook:
        r = notify.deliver(hook.url, BODY, SECRET.encode(), sleep=lambda _s: None)
    assert (r.status, r.attempts, r.http_status, len(hook.got)) == ("delivered", 3, 200, 3)
    with Receiver([400]) as hook:
        r = notify.deliver(hook.url, BODY, SECRET.encode(), sleep=lambda _s: None)
    assert (r.status, r.attempts, r.http_status, len(hook.got)) == ("failed", 1, 400, 1)
    with Receiver([302]) as hook:  # a redirect is not followed: the body is signed for this URL
        r = notify.deliver(hook.url, BODY, SECRET.encode(), sleep=lambda _s: None)
    assert (r.status, r.attempts, r.http_status) == ("failed", 1, 302)


def test_a_receiver_that_is_not_there_is_retried_and_its_error_kept() -> None:
    waits: list[float] = []
    url = f"http://hook:pa55word@127.0.0.1:{closed_port()}/hook"
    r = notify.deliver(url, BODY, SECRET.encode(), first_wait=1.0, sleep=waits.append)
    assert (r.status, r.attempts, r.http_status) == ("failed", notify.ATTEMPTS, None)
    assert r.error is not None and r.error.startswith("ConnectError: ") and waits == [1.0, 2.0, 4.0]
    assert "pa55word" not in r.url and r.url.startswith("http://hook:***@127.0.0.1:")


def test_deliveries_are_recorded(store: Store) -> None:
    ok = notify.Result("http://127.0.0.1:1/a", "delivered", 1, 204)
    bad = notify.Result("http://127.0.0.1:1/b", "failed", 4, 500, "the receiver answered 500 Internal Server Error")
    notify.record(store, ok, BODY, 3, [7, 5])
    notify.record(store, bad, BODY, 3, [7, 5])
    with store.session() as s:
        rows = list(s.scalars(select(m.Delivery).order_by(m.Delivery.id)))
    assert [(d.url, d.status, d.attempts, d.http_status, d.changes, d.run_ids) for d in rows] == [
        ("http://127.0.0.1:1/a", "delivered", 1, 204, 3, [5, 7]), ("http://127.0.0.1:1/b", "failed", 4, 500, 3, [5, 7])]
    assert rows[0].payload_sha256 == hashlib.sha256(BODY).hexdigest()
    (failed,) = notify.failed_deliveries(store)
    assert (failed["url"], failed["attempts"], failed["runs"]) == ("http://127.0.0.1:1/b", 4, [5, 7])


# --------------------------------------------------------------------------- through survey run
@pytest.fixture
def triton_python(tmp_path: Path) -> str:
    """A venv whose ``triton`` is the fake one of tests/envs.py (on its path through a .pth file)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    (site / "fake-triton.pth").write_text(str(fake_triton(tmp_path / "fake", {"cupti": "ok"}, version="3.10.0")) + "\n")
    return str(venv / "bin" / "python")


def test_a_receiver_that_fails_does_not_fail_the_survey(tmp_path: Path, triton_python: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURVEY_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("SURVEY_WEBHOOK_BACKOFF", "0.01")
    cat = tmp_path / "c.toml"
    cat.write_text(f'[[candidate]]\nname = "fake"\npython = "{triton_python}"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    with Receiver([500]) as down, Receiver([204]) as up:
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--no-table", "--notify", down.url,
                       "--notify", up.url, "--notify-private")
        assert r.returncode == 0 and "1 probed" in r.stderr, r
        assert f"webhook {down.url}: failed after {notify.ATTEMPTS} attempt(s): the receiver answered 500" in r.stderr
        assert f"webhook {up.url}: delivered (HTTP 204)" in r.stderr
        assert len(down.got) == notify.ATTEMPTS and len(up.got) == 1
        assert {d.body for d in down.got} == {up.got[0].body}
        doc = json.loads(up.got[0].body)
        assert up.got[0].headers["x-survey-signature"] == signature(up.got[0].body)
        assert doc["event"] == "survey.changes" and doc["count"] == 14 and len(doc["runs"]) == 1
        with Store(db).session() as s:
            rows = [(d.url, d.status, d.attempts, d.http_status) for d in s.scalars(select(m.Delivery)
                                                                                      .order_by(m.Delivery.url))]
        assert sorted(rows) == sorted([(down.url, "failed", notify.ATTEMPTS, 500), (up.url, "delivered", 1, 204)])
        shown = survey_cli("changes", "--db", db)
        assert shown.returncode == 0
        assert f"to {down.url} failed (" in shown.stderr and "the receiver answered 500" in shown.stderr
        assert up.url not in shown.stderr
        assert json.loads(survey_cli("changes", "--db", db, "--json").stdout)["failed_deliveries"][0]["url"] == \
            down.url
        # the same survey again changes nothing: nothing is sent
        again = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--no-table", "--notify",
                           down.url, "--notify", up.url, "--notify-private")
        assert again.returncode == 0 and "1 unchanged" in again.stderr and "webhook" not in again.stderr, again
        assert len(down.got) == notify.ATTEMPTS and len(up.got) == 1


def test_with_quiet_a_failed_delivery_is_still_said(tmp_path: Path, triton_python: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURVEY_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("SURVEY_WEBHOOK_BACKOFF", "0")
    cat = tmp_path / "c.toml"
    cat.write_text(f'[[candidate]]\nname = "fake"\npython = "{triton_python}"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    url = f"http://127.0.0.1:{closed_port()}/hook"
    r = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--quiet", "--notify", url,
                   "--notify-private")
    assert r.returncode == 0 and r.stdout == "", r
    lines = r.stderr.strip().splitlines()
    assert lines[0] == f"survey: 1 probed  (store: {db})"
    assert lines[1].startswith(f"webhook {url}: failed after {notify.ATTEMPTS} attempt(s): ConnectError") and \
        len(lines) == 2
