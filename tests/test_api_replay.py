"""api.replay: answers repeated before the framework runs. A repeated answer is the
view's own answer byte for byte (GET, HEAD, 304), new evidence is never answered from
an old record (on SQLite and PostgreSQL, written by another connection), errors and
answers that move with the clock are never recorded, and the records are bounded."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

import api.replay
from api.app import create_app
from api.replay import Replay
from db.store import Store
from survey.evidence.ingest import ingest
from tests.conftest import report_bytes

READS = [
    "/matrix.json", "/matrix", "/matrix.csv", "/matrix.md", "/matrix.json?_size=1", "/matrix.json?backend=cupti",
    "/candidates.json", "/candidates", "/history.json?candidate=triton-3.8.0&backend=cupti&mode=none",
    "/badge/triton-3.8.0/cupti/none.svg",
]


def replay_of(client: TestClient) -> Replay:
    layer: Any = client.app.middleware_stack  # type: ignore[attr-defined]
    while not isinstance(layer, Replay):
        layer = layer.app
    return layer


@pytest.fixture
def client(filled_store: Store) -> Any:
    with TestClient(create_app(filled_store)) as c:
        yield c


def same(a: Any, b: Any) -> None:
    assert (a.status_code, a.headers.multi_items(), a.content) == (b.status_code, b.headers.multi_items(), b.content)


@pytest.mark.parametrize("url", READS)
def test_a_replayed_answer_is_the_views_answer_byte_for_byte(client: TestClient, url: str) -> None:
    first = client.get(url)
    assert first.status_code == 200, first.text
    replay = replay_of(client)
    before = replay.replayed
    same(client.get(url), first)
    assert replay.replayed == before + 1  # the second came from the record

    head = client.head(url)
    assert head.status_code == 200 and head.content == b""
    assert head.headers.multi_items() == first.headers.multi_items()
    same(client.head(url), head)
    assert replay.replayed == before + 2

    etag = {"If-None-Match": first.headers["etag"]}
    not_modified = client.get(url, headers=etag)
    assert not_modified.status_code == 304 and not_modified.content == b""
    same(client.get(url, headers=etag), not_modified)
    other = client.get(url, headers={"If-None-Match": '"not-this-one"'})
    same(other, first)
    assert replay.replayed == before + 4


def new_evidence(store_url: str) -> None:
    """A new run stored through another connection, as another process (a survey, an upload) would write it."""
    writer = Store(store_url)
    try:
        with writer.session() as s:
            ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate="h200", label="H200",
                   kind="python", spec={"python": "python3"}, position=9, source="ingest", scope="catalog")
    finally:
        writer.close()


@pytest.mark.both_stores
def test_new_evidence_is_never_answered_from_an_old_record(client: TestClient, store_url: str) -> None:
    old = client.get("/matrix.json")
    assert client.get("/matrix.json").content == old.content
    names = {r["candidate"] for r in old.json()["rows"]}
    assert "h200" not in names
    new_evidence(store_url)
    new = client.get("/matrix.json")
    assert "h200" in {r["candidate"] for r in new.json()["rows"]}
    assert new.json()["count"] > old.json()["count"]
    revalidated = client.get("/matrix.json", headers={"If-None-Match": old.headers["etag"]})
    assert revalidated.status_code == 200 and revalidated.content == new.content


@pytest.mark.parametrize("url", [
    "/matrix.json?mode=bogus", "/candidates/nope.json", "/nothing-here", "/matrix.md?backend=cupti",
    "/check.json?target=triton-3.8.0&backend=cupti",  # carries the evidence's age, which moves with the clock
    "/healthz",
])
def test_errors_and_answers_outside_the_version_are_not_recorded(client: TestClient, url: str) -> None:
    client.get(url)
    client.get(url)
    replay = replay_of(client)
    path = url.split("?")[0]
    assert not [k for k in replay.answers if k[2] == path]
    assert replay.replayed == 0


def test_records_are_bounded(filled_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api.replay, "MAX_ANSWERS", 5)
    with TestClient(create_app(filled_store)) as client:
        for i in range(40):  # query strings a client makes up: each is an answer of its own
            assert client.get(f"/candidates.json?x={i}").status_code == 200
        replay = replay_of(client)
        assert len(replay.answers) == 5
        assert [k[3] for k in replay.answers] == [f"x={i}".encode() for i in range(35, 40)]
        size = len(client.get("/matrix.json").content)
        replay.max_bytes = size + 10  # room for one matrix page and no more than a few candidate lists
        client.get("/matrix.json?y=1")
        assert replay.bytes <= replay.max_bytes and [k[3] for k in replay.answers][-1] == b"y=1"
        assert replay.bytes == sum(len(r.body) for r in replay.answers.values())


def test_records_of_an_earlier_version_go_when_the_version_moves(client: TestClient, store_url: str) -> None:
    # Each upload moves the version, and a record is replayed only at its own version: kept,
    # the old ones would hold memory (up to MAX_BYTES) that no request can use again.
    for url in READS:
        client.get(url)
    replay = replay_of(client)
    assert len(replay.answers) >= len(READS)
    new_evidence(store_url)
    new = client.get("/matrix.json")
    assert new.status_code == 200
    [only] = replay.answers.values()  # the new version's first answer, and nothing of the old
    assert only.body == new.content and replay.bytes == len(new.content)
