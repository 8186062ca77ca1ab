"""The service under hostile input, concurrency and bad configuration.

Names that carry control or bidi characters, duplicate uploads under another
name, unbounded reads (long lists, 8 MiB of evidence, reports nested deep),
filter values that name nothing, time-zone offsets, request bodies that never
arrive or stop half way (a real uvicorn on 127.0.0.1 and a raw socket), the API
docs without external scripts, CSV formula injection and HTML in Markdown,
OpenAPI that says what the API does, HEAD, ``survey serve`` with a bad or busy
port, and what is cached per matrix version.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import event

from api.app import create_app
from db import models as m
from db.store import Store
from probes import outcomes as O
from survey.evidence import queries
from survey.evidence.identity import PlatformId
from survey.evidence.ingest import ingest, record_failure
from survey.render import table as table_mod
from survey.verdicts import matrix as survey_matrix
from tests.conftest import Clock, no_traceback, report_bytes, survey_cli, wait_until_serving
from tests.helpers.api import TOKEN, Client, Server, Text, assert_error
from tests.helpers.serve import serving_children

# The API fixtures of test_api (an app over a store, called through httpx's ASGI transport).

REPORT = "cpu-triton-3.9.0.json"
MiB = 1024 * 1024


def report(**changes: Any) -> dict[str, Any]:
    data = json.loads(report_bytes(REPORT))
    for path, value in changes.items():
        node = data
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[int(keys[-1]) if isinstance(node, list) else keys[-1]] = value
    return data


def add_unobtainable(store: Store, name: str, error: str, *, label: str | None = None, position: int = 0) -> int:
    with store.session() as s:
        run_id, _new = record_failure(s, name, label=label or name, kind="pip", spec={"pip": name},
                                      position=position, error=error, scope="catalog",
                                      platform=PlatformId("none:x86_64", "none", None, "x86_64", {}))
    return run_id


# --------------------------------------------------------------------------- 1. names
BAD_NAMES = {
    "DEL": "triton\x7f3.9",
    "C1 NEL": "triton\x853.9",
    "C1 CSI": "triton\x9b31m",
    "bidi override U+202E": "triton-\u202e9.3",
    "bidi isolate U+2066": "triton-\u20669.3",
    "left-to-right mark U+200E": "triton\u200e-3.9",
    "zero-width space U+200B": "triton\u200b-3.9",
    "byte order mark U+FEFF": "\ufefftriton",
    "line separator U+2028": "triton\u2028x",
    "NUL": "triton\x00",
    "tab": "triton\t3.9",
    "newline": "triton\n3.9",
    "leading space": " triton",
    "trailing space": "triton ",
    "only spaces": "   ",
    "too long": "x" * 201,
}


@pytest.mark.parametrize("what", list(BAD_NAMES))
def test_upload_refuses_names_with_control_bidi_or_invisible_characters(store: Store, make_client: Any,
                                                                        what: str) -> None:
    c = make_client(store, token=TOKEN)
    raw = report_bytes(REPORT)
    err = assert_error(c.upload(raw, params={"candidate": BAD_NAMES[what]}), 422, "invalid_input", "candidate")
    assert err["message"].startswith("candidate: ")
    label = BAD_NAMES[what] if what != "too long" else "x" * 401
    err = assert_error(c.upload(raw, params={"label": label}), 422, "invalid_input", "label")
    assert err["message"].startswith("label: ")
    with store.session() as s:
        assert queries.candidates(s) == []


def test_the_refusal_names_the_character(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    err = assert_error(c.upload(report_bytes(REPORT), params={"candidate": "abc\u202edef"}), 422, "invalid_input",
                       "candidate")
    assert "U+202E" in err["message"] and "RIGHT-TO-LEFT OVERRIDE" in err["message"] and "position 4" in err["message"]
    assert "\u202e" not in err["message"]  # the message itself stays readable


@pytest.mark.both_stores
def test_ordinary_unicode_names_are_accepted(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    name = "gpu-höst/日本:triton 3.9.0 (ROCm)"
    r = c.upload(report_bytes(REPORT), params={"candidate": name, "label": "Triton 3.9.0 — « upload »"})
    assert r.status_code == 201 and r.json()["candidate"] == name


def test_a_duplicate_under_another_candidate_says_where_it_is(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    raw = report_bytes(REPORT)
    first = c.upload(raw, params={"candidate": "first-name"})
    assert first.status_code == 201 and first.json()["note"] is None
    again = c.upload(raw, params={"candidate": "second-name", "label": "ignored"})
    assert again.status_code == 200
    body = again.json()
    assert body["created"] is False and body["candidate"] == "first-name" and body["run_id"] == first.json()["run_id"]
    assert "already stored" in body["note"] and "'first-name'" in body["note"] and "'second-name'" in body["note"]
    same = c.upload(raw, params={"candidate": "first-name"}).json()
    assert same["candidate"] == "first-name" and "already stored" in same["note"] and "second" not in same["note"]
    with store.session() as s:
        assert [x.name for x in queries.candidates(s)] == ["first-name"]


# --------------------------------------------------------------------------- 2. unbounded reads
@pytest.fixture
def many_candidates(store: Store) -> Store:
    """7 candidates: 2 measured, 5 unobtainable (catalog positions in a shuffled order)."""
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="c-3.8.0", position=5)
    with store.session() as s:
        ingest(s, report_bytes(REPORT), candidate="c-3.9.0", position=1)
    for i, pos in enumerate((3, 0, 6, 2, 4)):
        add_unobtainable(store, f"u-{i}", f"no network ({i})", position=pos)
    return store


def names_in_order(store: Store) -> list[str]:
    with store.session() as s:
        return [c.name for c in queries.candidates(s)]


@pytest.mark.both_stores
def test_candidates_are_paginated(many_candidates: Store, make_client: Any) -> None:
    c = make_client(many_candidates)
    want = names_in_order(many_candidates)
    assert len(want) == 7
    seen: list[str] = []
    url: str | None = "/candidates.json?_size=3"
    pages = 0
    while url:
        r = c.get(url)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["total"] == 7 and len(body["candidates"]) <= 3
        seen += [x["name"] for x in body["candidates"]]
        url = body["next_url"]
        if url:
            assert r.headers["link"] == f'<{url}>; rel="next"'
            assert parse_qs(urlsplit(url).query)["_size"] == ["3"] and body["next"]
        else:
            assert body["next"] is None and "link" not in r.headers
        pages += 1
    assert pages == 3 and seen == want
    # Every format pages alike.
    rows = list(csv.DictReader(io.StringIO(c.get("/candidates.csv?_size=2").text)))
    assert [x["name"] for x in rows] == want[:2]
    md = c.get("/candidates.md?_size=2")
    assert md.headers["link"].startswith("</candidates.md?") and want[1] in md.text and want[2] not in md.text
    page = c.get("/candidates?_size=2")
    assert 'rel="next"' in page.text and Text(page.text).text.count("Next page") == 1
    assert len(c.get("/candidates.json").json()["candidates"]) == 7  # default page size: 100


def test_markdown_pages_are_never_cut_between_pages(store: Store, make_client: Any) -> None:
    for i in range(205):
        add_unobtainable(store, f"n{i:03d}", "x", position=i)
    c = make_client(store)
    r = c.get("/candidates.md?_size=1000")  # a Markdown table holds at most 200 rows: so does its page
    lines = [ln for ln in r.text.splitlines() if re.match(r"\| n\d", ln)]
    assert len(lines) == 200 and "truncated" not in r.text
    assert r.headers["link"] == '</candidates.md?_size=200&_next=200>; rel="next"'
    rest = c.get("/candidates.md?_size=200&_next=200").text
    assert [ln.split("|")[1].strip() for ln in rest.splitlines() if re.match(r"\| n\d", ln)] == \
        [f"n{i:03d}" for i in range(200, 205)]


@pytest.mark.both_stores
def test_the_matrix_is_paginated_by_grid_row(many_candidates: Store, make_client: Any) -> None:
    """A page holds at most ``_size`` (candidate, platform) rows of the grid, each whole
    (all its backend x mode rows): at 2,000 runs the unpaged matrix was 5 MB."""
    c = make_client(many_candidates)
    whole = c.get("/matrix.json?scope=all&_size=1000").json()
    slots = list(dict.fromkeys((r["candidate"], r["platform"]) for r in whole["rows"]))
    assert whole["total"] == len(slots) == 7 and whole["next"] is None and whole["next_url"] is None
    rows: list[dict[str, Any]] = []
    url: str | None = "/matrix.json?scope=all&_size=2"
    pages = 0
    while url:
        r = c.get(url)
        body = r.json()
        page_slots = list(dict.fromkeys((x["candidate"], x["platform"]) for x in body["rows"]))
        assert len(page_slots) == (2 if body["next_url"] else 1) and body["count"] == len(body["rows"])
        assert body["total"] == 7
        assert r.headers.get("link") == (f'<{body["next_url"]}>; rel="next"' if body["next_url"] else None)
        csv_rows = list(csv.DictReader(io.StringIO(c.get(url.replace(".json", ".csv")).text)))
        assert [x["candidate"] for x in csv_rows] == [x["candidate"] for x in body["rows"]]
        rows += body["rows"]
        url = body["next_url"]
        pages += 1
    assert pages == 4 and rows == whole["rows"]  # nothing skipped, nothing twice
    page = Text(c.get("/matrix?scope=all&_size=2").text).text
    assert "2 of 7 rows of the grid" in page and "Next page" in page
    kept = c.get("/matrix.json?scope=all&_size=1&backend=cupti").json()
    assert kept["next_url"] is not None and "backend=cupti" in kept["next_url"]
    assert_error(c.get("/matrix.md?_size=2"), 422, "invalid_input", "_size")
    assert_error(c.get("/matrix.json?_size=1001"), 422, "invalid_input", "_size")


@pytest.mark.parametrize("query,field", [
    ("_size=0", "_size"), ("_size=1001", "_size"), ("_size=many", "_size"), ("_next=-1", "_next"),
    ("_next=x", "_next"),
])
def test_page_parameters_are_checked(many_candidates: Store, make_client: Any, query: str, field: str) -> None:
    c = make_client(many_candidates)
    assert_error(c.get(f"/candidates.json?{query}"), 422, "invalid_input", field)
    assert_error(c.get(f"/candidates/c-3.9.0.json?{query}"), 422, "invalid_input", field)


@pytest.mark.both_stores
def test_run_ids_past_what_a_store_holds_are_answered_not_crashed(store: Store, make_client: Any) -> None:
    """Run ids are 32-bit INTEGER columns; PostgreSQL refuses a larger literal in
    a comparison (schemathesis found a 500 on ``_next=2411207559537``)."""
    add_unobtainable(store, "flaky", "attempt failed")
    c = make_client(store)
    huge = 2**31
    assert_error(c.get(f"/candidates/flaky.json?_next={huge}"), 422, "invalid_input", "_next")
    assert c.get(f"/candidates/flaky.json?_next={huge - 1}").status_code == 200
    for path in (f"/runs/{huge}.json", f"/runs/{huge}/report.json", f"/runs/{10**30}.json"):
        assert_error(c.get(path), 404, "not_found")
    assert_error(c.get(f"/diff.json?a={huge}&b=flaky"), 404, "not_found", "a")


@pytest.mark.both_stores
def test_a_name_holding_nul_is_looked_up_as_not_stored(store: Store, make_client: Any) -> None:
    """No name holds NUL (survey.core.names); PostgreSQL refuses NUL even in a comparison
    (schemathesis found a 500 on ``/diff.json?a=%00``)."""
    add_unobtainable(store, "flaky", "attempt failed")
    c = make_client(store)
    assert_error(c.get("/diff.json?a=fl%00aky&b=flaky"), 404, "not_found", "a")
    assert_error(c.get("/candidates/fl%00aky.json"), 404, "not_found")
    # a name that names nothing: refused as `survey check` refuses it (not a 500)
    err = assert_error(c.get("/check.json?target=fl%00aky&backend=cupti"), 404, "not_found", "target")
    assert "did you mean 'flaky'?" in err["message"]


@pytest.mark.both_stores
def test_the_runs_of_a_candidate_are_paginated(store: Store, make_client: Any) -> None:
    ids = [add_unobtainable(store, "flaky", f"attempt {i} failed") for i in range(5)]
    c = make_client(store)
    body = c.get("/candidates/flaky.json?_size=2").json()
    assert [r["id"] for r in body["runs"]] == ids[::-1][:2] and body["runs_total"] == 5
    seen = [r["id"] for r in body["runs"]]
    while body["next_url"]:
        body = c.get(body["next_url"]).json()
        seen += [r["id"] for r in body["runs"]]
    assert seen == ids[::-1]
    assert body["last_attempt"]["id"] == ids[-1]  # the newest, whatever page is shown
    rows = list(csv.DictReader(io.StringIO(c.get("/candidates/flaky.csv?_size=1").text)))
    assert [int(r["id"]) for r in rows] == [ids[-1]]
    assert c.get("/candidates/flaky.csv?_size=1").headers["link"].startswith("</candidates/flaky.csv?")
    page = Text(c.get("/candidates/flaky?_size=2").text).text
    assert "History (5 runs)" in page and "Next page" in page


def hostile(size: int = 8 * MiB - 64 * 1024) -> bytes:
    """A valid report padded to ``size`` bytes with evidence text that HTML must escape."""
    data = report()
    base = len(json.dumps(data).encode())
    n = (size - base) // 4
    data["modes"][0]["message"] = "<&>\"" * (n // 4)
    data["modes"][1]["stderr_tail"] = "<" * n
    data["modes"][2]["traceback_tail"] = ["<b>" * 10] * (n // 32)
    data["environment"]["python"]["junk"] = "&" * (n // 2)
    return json.dumps(data).encode()


def many_entries(size: int = 8 * MiB - 64 * 1024) -> bytes:
    """A valid report whose lists are long instead of its strings."""
    data = report()
    entry = data["modes"][0]
    one = len(json.dumps({**entry, "mode": "m1234567"}).encode()) + 2
    base = len(json.dumps(data).encode())
    k = (size - base) // 2 // one
    data["modes"] += [{**entry, "mode": f"m{i}"} for i in range(k)]
    dist = {"name": "pkg", "version": "1"}
    data["environment"]["distributions"] = [dist] * ((size - base) // 2 // (len(json.dumps(dist)) + 2))
    return json.dumps(data).encode()


def wide_rows(size: int = 8 * MiB - 64 * 1024) -> bytes:
    """Many mode entries whose every text field is long and all quotes and ampersands (escaping grows it)."""
    data = report()
    text = '"&' * 150
    # (backend, mode, rule, library, signal and exc_type have column limits the schema enforces)
    entry = {**data["modes"][0], "backend": "b" + '"&' * 19, "mode": "m" + '"&' * 39, "rule": '"&' * 40,
             "library": '"&' * 100, "signal": '"&' * 10, "exc_type": '"&' * 100, "message": text,
             "stderr_tail": text, "stdout_tail": text,
             "call": text, "argv": [text] * 4, "traceback_tail": [text] * 4, "overrides": {text: text}}
    one = len(json.dumps(entry).encode()) + 2
    data["modes"] = [entry] * ((size - len(json.dumps(data).encode())) // one)
    return json.dumps(data).encode()


def nested(depth: int = 60, copies: int = 4000) -> bytes:
    """Deep arrays where the schema allows anything (as deep as a report may nest: 64), 20 times
    as many as a page shows of a list and about ten times what a run page shows inline: every copy
    past those is parsing work for the test, not another limit."""
    data = report()
    data["environment"]["python"]["deep"] = [json.loads("[" * depth + "]" * depth)] * copies
    return json.dumps(data).encode()


# The documented ceilings (docs/service.md: response sizes).
MAX_HTML = 2 * MiB
MAX_MD = 2 * MiB


@pytest.mark.parametrize("build", [hostile, many_entries, wide_rows, nested],
                         ids=["long-text", "long-lists", "wide-rows", "deep"])
def test_one_big_upload_cannot_make_a_huge_page(store: Store, make_client: Any, build: Any) -> None:
    c = make_client(store, token=TOKEN)
    raw = build()
    assert len(raw) <= 8 * MiB
    r = c.upload(raw, params={"candidate": "big"})
    assert r.status_code == 201, r.text
    rid = r.json()["run_id"]
    link = f"/runs/{rid}/report.json"
    html = c.get(f"/runs/{rid}")
    assert html.status_code == 200 and len(html.content) < MAX_HTML, len(html.content)
    assert f'href="{link}"' in html.text and "truncated" in Text(html.text).text
    md = c.get(f"/runs/{rid}.md")
    assert md.status_code == 200 and len(md.content) < MAX_MD, len(md.content)
    if build is not nested:  # nested changes no mode row
        assert link in md.text and "truncated" in md.text
    cand = c.get("/candidates/big")
    assert cand.status_code == 200 and len(cand.content) < MAX_HTML, len(cand.content)
    js = c.get(f"/runs/{rid}.json")
    assert js.status_code == 200 and len(js.content) < 3 * len(raw), len(js.content)
    sent = json.loads(raw)
    assert js.json()["report"] == sent  # JSON is never truncated
    assert c.get(link).json() == sent  # the canonical JSON that was validated and hashed


def test_a_small_run_page_is_not_truncated(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    rid = c.upload(report_bytes(REPORT)).json()["run_id"]
    page = Text(c.get(f"/runs/{rid}").text).text
    assert "truncated" not in page
    assert "truncated" not in c.get(f"/runs/{rid}.md").text


def test_a_long_error_is_cut_on_pages(store: Store, make_client: Any) -> None:
    rid = add_unobtainable(store, "noisy", "pip failed:\n" + "<x>" * 300_000)
    c = make_client(store)
    for path in ("/candidates/noisy", f"/runs/{rid}", "/candidates", "/matrix"):
        r = c.get(path)
        assert r.status_code == 200 and len(r.content) < 256 * 1024, (path, len(r.content))
    assert len(c.get(f"/runs/{rid}.json").json()["run"]["error"]) == len("pip failed:\n") + 900_000


def test_a_report_nested_too_deep_is_refused_not_a_500(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    data = report_bytes(REPORT).decode()
    raw = data[:data.rindex("}")] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    err = assert_error(c.upload(raw.encode()), 422, "invalid_report", None)
    assert "deep" in err["message"]


@pytest.mark.parametrize("query,field,valid", [
    ("mode=fast", "mode", ["none", "pcsampling", "periodic_flushing", "default", "mma"]),
    ("candidate=nope", "candidate", ["triton-3.6.0", "triton-3.9.0"]),
    ("verdict=maybe", "verdict", ["accepted", "refused", "absent", "unknown"]),
    ("backend=nvtx", "backend", list(O.BACKENDS)),
    ("outcome=fine", "outcome", ["ok", "library_missing"]),
])
def test_filters_that_name_nothing_list_the_valid_values(client: Client, query: str, field: str,
                                                         valid: list[str]) -> None:
    for fmt in (".json", ".csv"):
        err = assert_error(client.get(f"/matrix{fmt}?{query}"), 422, "invalid_input", field)
        assert all(v in err["message"] for v in valid), err["message"]
    r = client.get(f"/matrix?{query}")
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")


def test_verdict_filter(client: Client, filled_store: Store) -> None:
    with filled_store.session() as s:
        want = [r for r in survey_matrix.matrix(s, scope="all") if r["verdict"] == "refused"]
    body = client.get("/matrix.json?verdict=refused").json()
    assert body["count"] == len(want) > 0 and {r["verdict"] for r in body["rows"]} == {"refused"}
    assert body["filters"]["verdict"] == "refused"


def test_random_filter_values_do_not_fill_the_cache(client: Client, make_client: Any) -> None:
    for i in range(300):
        assert client.get(f"/matrix.json?mode=m{i}").status_code == 422
    cache = client.http._transport.app.state.matrix_cache  # type: ignore[attr-defined]
    assert len(cache._entries) == 0


# --------------------------------------------------------------------------- 3. time zones
@pytest.mark.both_stores
def test_time_zone_offsets_are_kept(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    data = report(probe__started_at="2026-12-02T18:20:00+05:00", probe__finished_at="2026-12-02T18:21:29+05:00")
    rid = c.upload(json.dumps(data), params={"candidate": "east"}).json()["run_id"]
    run = c.get(f"/runs/{rid}.json").json()["run"]
    for key, want in (("started_at", "2026-12-02T13:20:00+00:00"), ("finished_at", "2026-12-02T13:21:29+00:00")):
        assert run[key] == want, run[key]  # the same instant, shown in UTC
    rows = c.get("/matrix.json?candidate=east&scope=all").json()["rows"]
    assert {r["date"] for r in rows} == {"2026-12-02T13:21:29+00:00"}
    assert c.get("/candidates.json").json()["candidates"][0]["latest_date"] == "2026-12-02T13:21:29+00:00"
    assert "2026-12-02T13:21:29+00:00" in Text(c.get(f"/runs/{rid}").text).text


# --------------------------------------------------------------------------- 4. request bodies
def read_response(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest


def post_head(length: int | None, token: str = TOKEN) -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return (f"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\n{size}\r\n").encode()


def test_a_body_that_never_arrives_gets_408(store: Store, logs: pytest.LogCaptureFixture) -> None:
    raw = report_bytes(REPORT)
    with Server(create_app(store, token=TOKEN, body_timeout=1.0)) as srv, srv.connect() as conn:
        conn.sendall(post_head(len(raw)) + raw[:1000])  # announces the whole report, sends 1000 bytes
        status, headers, body = read_response(conn)  # the rest never comes: only the body timeout answers
        assert status == 408 and json.loads(body)["error"]["code"] == "request_timeout"
        assert headers["connection"] == "close"
        assert conn.recv(1) == b""  # and the connection is closed
    with store.session() as s:
        assert queries.candidates(s) == []
    no_traceback(logs)


def test_a_slow_chunked_body_gets_408_too(store: Store, logs: pytest.LogCaptureFixture) -> None:
    stop = threading.Event()

    def trickle(conn: socket.socket) -> None:  # a byte every 0.1 s: each read is quick, the whole never ends
        while not stop.wait(0.1):
            try:
                conn.sendall(b"1\r\n{\r\n")
            except OSError:
                return

    with Server(create_app(store, token=TOKEN, body_timeout=1.0)) as srv, srv.connect() as conn:
        conn.sendall(post_head(None))
        sender = threading.Thread(target=trickle, args=(conn,), daemon=True)
        sender.start()
        try:
            # The body never ends and each read is quick: only a deadline on the whole body answers.
            status, _h, body = read_response(conn)
        finally:
            stop.set()
            sender.join(5)
        assert status == 408 and json.loads(body)["error"]["code"] == "request_timeout"
    no_traceback(logs)


def test_a_client_that_leaves_mid_upload_leaves_no_traceback(store: Store, logs: pytest.LogCaptureFixture) -> None:
    raw = report_bytes(REPORT)
    with Server(create_app(store, token=TOKEN, body_timeout=30.0)) as srv:
        with srv.connect() as conn:
            conn.sendall(post_head(len(raw)) + raw[: len(raw) // 2])
            time.sleep(0.3)
        time.sleep(0.5)  # the server notices the disconnect
        with srv.connect() as conn:  # and still serves
            conn.sendall(post_head(len(raw)) + raw)
            status, _h, body = read_response(conn)
            assert status == 201, body
    no_traceback(logs)
    with store.session() as s:
        assert len(queries.candidates(s)) == 1


# --------------------------------------------------------------------------- 5. docs and CSP
def test_api_docs_load_nothing_from_elsewhere(client: Client) -> None:
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "<script" not in r.text.lower() and "cdn" not in r.text.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", r.text)
    assert "default-src 'none'" in r.headers["content-security-policy"]
    text = Text(r.text).text
    spec = client.get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method in ops:
            assert f"{method.upper()} {path}" in text, (method, path)
    assert 'href="/openapi.json"' in r.text
    assert client.get("/redoc").status_code == 404
    assert client.get("/docs/oauth2-redirect").status_code == 404


def test_every_html_answer_has_a_csp(client: Client, filled_store: Store) -> None:
    with filled_store.session() as s:
        run_id = queries.latest_complete(s, queries.candidates(s)[0].id).id  # type: ignore[union-attr]
    paths = ["/matrix", "/candidates", "/candidates/triton-3.9.0", f"/runs/{run_id}", "/check", "/diff", "/docs",
             "/nope", "/candidates/nope", "/matrix?backend=nvtx", "/check?target=x&backend=cupti",
             "/diff?a=triton-3.8.0&b=triton-3.9.0"]
    for path in paths:
        r = client.get(path)
        assert r.headers["content-type"].startswith("text/html"), path
        csp = r.headers.get("content-security-policy", "")
        assert "default-src 'none'" in csp and "script-src" not in csp, path
        assert r.headers["x-content-type-options"] == "nosniff"


# --------------------------------------------------------------------------- 6. CSV and Markdown
FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


def csv_cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def test_csv_cells_cannot_be_formulas(store: Store, make_client: Any) -> None:
    for i, f in enumerate(FORMULAS):
        add_unobtainable(store, f"f{i}", f + " error", label="x" + f.strip())
    with store.session() as s:
        ingest(s, report_bytes(REPORT), candidate="=cmd|' /C calc'!A0", label="@label", scope="catalog")
    c = make_client(store)
    texts = [c.get(p).text for p in ("/candidates.csv", "/matrix.csv", "/candidates/f0.csv",
                                     "/candidates/=cmd|' %2FC calc'!A0.csv")]
    for text in texts:
        for cell in csv_cells(text):
            assert not cell or cell[0] not in "=+-@\t\r", repr(cell)
    for i, f in enumerate(FORMULAS):  # a run's error, whole (a bare CR shown, as a terminal must not act on it)
        shown = "\\x0d" + f[1:] if f.startswith("\r") else "'" + f
        assert shown + " error" in csv_cells(c.get(f"/candidates/f{i}.csv").text)
    assert "'=cmd|' /C calc'!A0" in csv_cells(texts[1]) and "'@label" in csv_cells(texts[1])
    # The CLI writes CSV through the same renderer.
    rows = [{"a": "=1+1", "b": -3, "c": "-3", "d": "plain"}]
    assert table_mod.render(rows, ["a", "b", "c", "d"], "csv") == "a,b,c,d\r\n'=1+1,-3,'-3,plain\r\n"


def test_markdown_never_carries_html(store: Store, make_client: Any, tmp_path: Path) -> None:
    evil = "<script>alert(1)</script> & <img src=x onerror=alert(2)>"
    add_unobtainable(store, "evil", evil, label="<b>bold</b> & co")
    with store.session() as s:
        ingest(s, json.dumps(report(modes__0__message=evil)), candidate="evil-run", label="<i>x</i>",
               scope="catalog")
    c = make_client(store)
    rid = c.get("/candidates/evil-run.json").json()["latest"]["id"]
    for path in ("/matrix.md", "/candidates.md", "/candidates/evil.md", f"/runs/{rid}.md"):
        text = c.get(path).text
        assert "<" not in text, (path, text[:300])
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img" in c.get("/candidates/evil.md").text
    # `survey table --write` renders the docs table with the same code.
    docs = tmp_path / "page.md"
    docs.write_text(f"# page\n\n{table_mod.START}\n{table_mod.END}\n")
    res = survey_cli("table", "--db", store.url, "--write", str(docs))
    assert res.returncode == 0, res
    table = docs.read_text()
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in table and "<b>" not in table and "<script" not in table
    md = table_mod.render([{"a": "x|y\nz", "b": "a<b>&c"}], ["a", "b"], "md")
    assert md.splitlines()[2] == "| x\\|y z | a&lt;b&gt;&amp;c |"


# --------------------------------------------------------------------------- 7. OpenAPI and HEAD
def test_openapi_marks_required_parameters_and_enums(client: Client) -> None:
    spec = client.get("/openapi.json").json()

    def params(path: str) -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in spec["paths"][path]["get"]["parameters"]}

    def enum(p: dict[str, Any]) -> list[Any]:
        schema = p["schema"]
        for alt in schema.get("anyOf", [schema]):
            if "enum" in alt:
                return list(alt["enum"])
        raise AssertionError(f"no enum on {p['name']}: {schema}")

    for fmt in ("json", "csv", "md"):
        page = params(f"/candidates.{fmt}")
        assert page["_size"]["schema"]["maximum"] == 1000 and page["_size"]["schema"]["minimum"] == 1
        chk = params(f"/check.{fmt}")
        assert chk["target"]["required"] and chk["backend"]["required"] and not chk["mode"].get("required")
        assert enum(chk["backend"]) == list(O.BACKENDS)
        assert set(enum(chk["mode"])) >= {"none", "pcsampling", "periodic_flushing", "default", "mma"}
        d = params(f"/diff.{fmt}")
        assert d["a"]["required"] and d["b"]["required"]
        if fmt == "md":  # the docs table takes no filters
            assert set(params("/matrix.md")) == {"if-none-match", "scope"}  # scope is not a filter
            continue
        mx = params(f"/matrix.{fmt}")
        assert set(enum(mx["backend"])) == {*O.BACKENDS, ""}
        assert set(enum(mx["outcome"])) == {*O.OUTCOMES, ""}
        assert set(enum(mx["verdict"])) == {"accepted", "refused", "absent", "unknown", ""}
        assert set(enum(mx["mode"])) >= {"none", "pcsampling", ""}
        assert set(enum(mx["candidate"])) == {"", "triton-3.6.0", "triton-3.7.1", "triton-3.8.0", "triton-3.9.0"}
    up = {p["name"]: p for p in spec["paths"]["/runs"]["post"]["parameters"]}
    assert up["candidate"]["schema"]["maxLength"] == 200 and "pattern" in up["candidate"]["schema"]
    assert re.search(up["candidate"]["schema"]["pattern"], "\u202e") is None


def get_routes(client: Client, filled_store: Store) -> list[str]:
    with filled_store.session() as s:
        rid = queries.latest_complete(s, queries.candidates(s)[0].id).id  # type: ignore[union-attr]
    def flat(routes: list[Any]) -> Iterator[Any]:
        for r in routes:
            inner = getattr(r, "original_router", None)  # FastAPI >= 0.16x keeps included routers whole
            yield from flat(inner.routes) if inner is not None else [r]

    out = []
    for route in flat(client.http._transport.app.routes):  # type: ignore[attr-defined]
        methods = getattr(route, "methods", None) or set()
        if "GET" not in methods:
            continue
        path = route.path.replace("{name:path}", "triton-3.9.0").replace("{run_id:int}", str(rid))
        path = path.replace("{run_id}", str(rid)).replace("{rest:path}", "triton-3.9.0/cupti/none.svg")
        if path.startswith(("/check", "/diff", "/history")) and "." in path:
            path += {"/check": "?target=triton-3.9.0&backend=cupti", "/diff": "?a=1&b=2",
                     "/history": "?candidate=triton-3.9.0&backend=cupti"}[path.split(".")[0]]
        out.append(path)
    return out + ["/static/style.css"]


def test_head_works_on_every_get_route(client: Client, filled_store: Store) -> None:
    paths = get_routes(client, filled_store)
    assert len(paths) >= 20
    for path in paths:
        g = client.get(path)
        h = client.request("HEAD", path)
        assert g.status_code in (200, 302) and h.status_code == g.status_code, (path, h.status_code, g.status_code)
        assert h.content == b"", path
        assert h.headers.get("content-type") == g.headers.get("content-type"), path
        if g.status_code == 200:
            assert int(h.headers["content-length"]) == len(g.content), path


# --------------------------------------------------------------------------- 8. survey serve
@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_serve_refuses_a_port_that_does_not_exist(port: str, tmp_path: Path) -> None:
    res = survey_cli("serve", "--db", f"sqlite:///{tmp_path / 's.db'}", "--port", port)
    assert res.returncode == 64, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and port in lines[0] and "port" in lines[0], res
    assert "Traceback" not in res.stderr + res.stdout


def test_serve_on_a_port_in_use_says_so(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = survey_cli("serve", "--db", f"sqlite:///{tmp_path / 's.db'}", "--host", "127.0.0.1", "--port",
                         str(port))
    assert res.returncode == 69, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0], res


def test_serve_says_where_it_listens(tmp_path: Path) -> None:
    """Once it listens, `survey serve` prints the URL to open (and which store it serves)."""
    port = _free_port()
    db = tmp_path / "s.db"
    Store(f"sqlite:///{db}").close()  # serve reads a store: it never makes one
    proc = subprocess.Popen([sys.executable, "-m", "survey", "serve", "--db", f"sqlite:///{db}", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        while not any(line.startswith("serving ") for line in seen):
            assert proc.poll() is None and time.monotonic() < deadline, seen
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready:
                seen.append(proc.stdout.readline().decode())
        said = next(line for line in seen if line.startswith("serving "))
        assert said.strip() == f"serving http://127.0.0.1:{port}/ (store: {db})", seen
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).status_code == 200  # it answers there
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert sum(line.startswith("serving ") for line in seen) == 1


def test_serve_binds_a_tcp_socket() -> None:
    # asyncio sets TCP_NODELAY on accepted connections only when the listening socket says IPPROTO_TCP;
    # without it each keep-alive answer of uvicorn waited for a delayed ACK (measured here: 44 ms a request
    # on a socket made with socket.socket(), 1 ms with the proto getaddrinfo gives).
    from api.serve import bind

    with socket.socket() as probe:  # a free port (0 is refused: usage)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sock = bind("127.0.0.1", port)
    try:
        assert sock.proto == socket.IPPROTO_TCP and sock.getsockname() == ("127.0.0.1", port)
    finally:
        sock.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.both_stores
def test_serve_with_workers_answers_what_the_store_holds_from_every_worker(filled_store: Store, store_url: str,
                                                                           tmp_path: Path) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "survey", "serve", "--db", store_url, "--port", str(port),
                                 "--workers", "2"], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "SURVEY_TOKEN": TOKEN}, start_new_session=True)
    try:
        wait_until_serving(proc, base, log)
        workers, writers = serving_children(proc.pid)
        assert (len(workers), len(writers)) == (2, 1), (workers, writers, log.read_text())

        def rows() -> set[str]:  # a new connection each time: any worker may answer
            r = httpx.get(f"{base}/matrix.json?scope=all&_size=1000", headers={"Connection": "close"}, timeout=30)
            assert r.status_code == 200, r.text
            return {row["candidate"] for row in r.json()["rows"]}

        assert all("h200" not in rows() for _ in range(6))
        up = httpx.post(f"{base}/runs", params={"candidate": "h200"}, content=report_bytes("h200-triton-3.6.0.json"),
                        headers={"Authorization": f"Bearer {TOKEN}", "Connection": "close"}, timeout=60)
        assert up.status_code == 201, up.text
        assert all("h200" in rows() for _ in range(12))  # no worker answers from what it had before
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert log.read_text().count("Started server process") == 2


@pytest.mark.parametrize("args, says", [
    (["--workers", "0"], "--workers 0: between 1 and 64"),
    (["--workers", "2", "--db", "sqlite://"], "an in-memory store cannot be shared"),
])
def test_serve_refuses_workers_it_cannot_have(args: list[str], says: str, tmp_path: Path) -> None:
    argv = ["serve", "--port", str(_free_port()), *args]
    if "--db" not in args:
        argv += ["--db", f"sqlite:///{tmp_path / 's.db'}"]
    res = survey_cli(*argv)
    assert res.returncode == 64, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0], res


# --------------------------------------------------------------------------- 10. caching
class Statements:
    """Counts the SQL statements the store's engine runs (the environment, not our code),
    except the one indexed read of the matrix version that every request makes (on
    SQLite it goes through its own connection; on PostgreSQL through the engine) and
    the pool's liveness ping."""

    def __init__(self, store: Store):
        self.n = 0
        event.listen(store.engine, "before_cursor_execute", self.count)
        self.store = store

    def count(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        text = " ".join(statement.split()).lower()
        if text in ("select 1", "select 1 as ping") or text.startswith("select meta.value from meta") or \
                (text.startswith("select value from meta") and "key" in text):
            return
        self.n += 1

    def close(self) -> None:
        event.remove(self.store.engine, "before_cursor_execute", self.count)


@pytest.mark.parametrize("path", ["/candidates.json", "/candidates", "/candidates.csv?_size=3&_next=1",
                                  "/check.json?target=triton-3.9.0&backend=rocprofiler&mode=pcsampling",
                                  "/check?target=triton-3.9.0&backend=cupti", "/matrix.json"])
def test_what_changes_only_on_ingest_is_cached(client: Client, filled_store: Store, path: str) -> None:
    first = client.get(path)
    assert first.status_code == 200
    tag = first.headers["etag"]
    sql = Statements(filled_store)
    try:
        again = client.get(path)
        assert again.content == first.content
        not_modified = client.get(path, headers={"If-None-Match": tag})
        assert sql.n == 0  # neither answer touched the store
    finally:
        sql.close()
    assert again.status_code == 200 and not_modified.status_code == 304 and not_modified.content == b""
    with filled_store.session() as s:  # new evidence: a new answer (triton-3.9.0 probed again, later)
        again_later = json.loads(report_bytes("cpu-triton-3.9.0.json"))
        again_later["probe"]["finished_at"] = "2026-12-03T06:00:00+00:00"
        ingest(s, json.dumps(again_later), candidate="triton-3.9.0")
    changed = client.get(path, headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["etag"] != tag


def test_a_cached_check_still_tells_the_age_of_its_evidence(client: Client, clock: Clock) -> None:
    url = "/check.json?target=triton-3.9.0&backend=rocprofiler&mode=pcsampling"
    a = client.get(url).json()
    b = client.get(url).json()
    clock.advance(days=3)  # no new evidence: the same answer, three days older
    c = client.get(url).json()
    assert a == b and a["evidence_age"] == "1 day old"
    assert c == {**a, "evidence_age": "4 days old"}


@pytest.mark.parametrize("path", ["/candidates.json", "/check.json?target=triton-3.9.0&backend=cupti", "/matrix.json"])
def test_concurrent_misses_compute_once(filled_store: Store, make_client: Any, portal: Any, path: str) -> None:
    """Requests that miss the cache together wait for one computation (no thundering herd)."""
    import anyio

    one = make_client(filled_store)
    sql = Statements(filled_store)
    try:
        assert one.get(path).status_code == 200
        alone = sql.n
        many = make_client(filled_store)  # a cold cache again
        sql.n = 0

        async def burst() -> list[int]:
            codes: list[int] = []

            async def get() -> None:
                codes.append((await many.http.get(path)).status_code)

            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(get)
            return codes

        codes = portal.call(burst)
    finally:
        sql.close()
    assert codes == [200] * 20 and alone > 0
    assert sql.n == alone, (sql.n, alone)


@pytest.mark.both_stores
def test_a_name_the_published_pattern_allows_is_stored(store: Store, make_client: Any) -> None:
    """One rule (survey.core.names.PATTERN) for the API's check, ingest and the OpenAPI
    document: an unassigned or private-use character is shown as itself and allowed
    by the published pattern, so the upload is stored (schemathesis found ingest
    refusing what the schema allowed)."""
    c = make_client(store, token=TOKEN)
    pattern = c.get("/openapi.json").json()["paths"]["/runs"]["post"]["parameters"]
    published = {p["name"]: p["schema"]["pattern"] for p in pattern}
    label = "lab\U000b3e24el \ue000 \u0600"
    assert re.match(published["label"], label) and re.match(published["candidate"], "cand\U000b3e24")
    r = c.upload(report_bytes(REPORT), params={"candidate": "cand\U000b3e24", "label": label})
    assert r.status_code == 201, r.text
    with store.session() as s:
        assert queries.get_candidate(s, "cand\U000b3e24").label == label


def test_a_page_offset_past_any_store_is_refused_not_a_500(store: Store, make_client: Any) -> None:
    # PostgreSQL's OFFSET is a bigint: 10**19 was "bigint out of range", a 500 (found by schemathesis)
    c = make_client(store)
    for url in ("/matrix.json?_next=10000000000000000000", "/matrix.json?backend=cupti&_next=10000000000000000000"):
        assert_error(c.get(url), 422, "invalid_input", "_next")
    assert c.get("/matrix.json?_next=1000000000000").json()["rows"] == []  # past the end: an empty page


def test_an_artifact_digest_of_any_length_is_stored_as_the_report_says(store: Store, make_client: Any) -> None:
    # the report schema allows any string there: a 64-character column refused a longer one on
    # PostgreSQL ("value too long", a 500; found by schemathesis)
    c = make_client(store, token=TOKEN)
    data = json.loads(report_bytes("h200-sm90-triton-3.6.0-schema3.json"))
    cap = next(i for i, x in enumerate(data["captures"]) if x.get("artifact"))
    data["captures"][cap]["artifact"]["sha256"] = "0" * 65
    up = c.upload(json.dumps(data).encode(), params={"candidate": "h"})
    assert up.status_code == 201, up.text
    with store.session() as s:
        run = s.get(m.Run, up.json()["run_id"])
        assert run is not None and "0" * 65 in [x.artifact_sha256 for x in run.captures]
