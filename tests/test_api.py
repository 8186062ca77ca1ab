"""The HTTP service, called over HTTP (httpx through the ASGI transport) on real
evidence: the probe reports of tests/fixtures/reports. Every endpoint and format,
the shared error format, uploads (auth, limits, invalid reports, duplicates),
filters, ETag/304, and reads while a writer holds the database."""

from __future__ import annotations

import copy
import csv
import html
import io
import json
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.routing import APIRoute
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from api.matrix import COLUMNS
from db import models as m
from db.store import Store
from probes import outcomes as O
from survey.cli import app as cli_app
from survey.core import exitcodes
from survey.environments.launchers.python import PythonLauncher
from survey.evidence import queries
from survey.evidence.ingest import NO_VERSION, ingest, matrix_version
from survey.evidence.report import canonical_json, json_schema
from survey.flows.check import check_target
from survey.flows.run import ProbeSettings, survey_one
from survey.verdicts import diff as survey_diff
from survey.verdicts import matrix as survey_matrix
from survey.verdicts import modes as survey_verdicts
from survey.verdicts import vocabulary
from survey.verdicts.verdict import runs_here
from tests.conftest import H200, Clock, report_bytes, survey_cli
from tests.helpers.api import TOKEN, Client, Text, assert_error

VERSIONS = ("3.6.0", "3.7.1", "3.8.0", "3.9.0")


def run_ids(store: Store) -> dict[str, int]:
    with store.session() as s:
        return {c.name: queries.latest_complete(s, c.id).id for c in queries.candidates(s)}  # type: ignore[union-attr]


def run_count(store: Store) -> int:
    with store.session() as s:
        return len(s.query(m.Run).all())


def squash(text: str) -> str:
    return " ".join(text.split())


def bare(text: str) -> str:
    """Text as compared across HTML elements: no whitespace, no Markdown backticks (a page
    shows `code` spans as <code>)."""
    return "".join(text.split()).replace("`", "")


# --------------------------------------------------------------------------- basics
def store_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("store-")}


def ended(threads: set[threading.Thread], within_s: float = 60) -> bool:
    """Waits for ``threads`` to end; whether they did (the deadline only ends a wait that
    would never end)."""
    deadline = time.monotonic() + within_s
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)


def test_an_app_s_store_threads_end_with_its_lifespan(filled_store: Store, tmp_path: Any) -> None:
    """The store pool's threads (api.pool) end when the app's lifespan ends, as a server's
    does, and when `survey publish` has crawled its app: a process that makes app after app
    (the tests: one per client) would otherwise keep 16 threads of each, until it can start
    no more."""
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.pool import DEFAULT_SIZE

    before = store_threads()
    with TestClient(create_app(filled_store)) as c:
        assert c.get("/matrix.json").status_code == 200
        started = store_threads() - before
        assert len(started) == DEFAULT_SIZE
    assert ended(started)
    assert survey_cli("publish", str(tmp_path / "site"), "--db", filled_store.url).returncode == 0
    assert ended(store_threads() - before)


def test_apps_of_one_process_share_their_routes_and_answer_from_their_own_store(
        filled_store: Store, new_sqlite_store: Any, make_client: Any, tmp_path: Any) -> None:
    """api.app makes the routes once per process; each app still reads its own store."""
    other = new_sqlite_store(tmp_path / "other.db")
    try:
        full, empty = make_client(filled_store), make_client(other)
        routes = [[r for r in c.http._transport.app.routes if isinstance(r, APIRoute)] for c in (full, empty)]
        assert len(routes[0]) > 40 and list(map(id, routes[0])) == list(map(id, routes[1]))
        assert len(full.get("/candidates.json").json()["candidates"]) == 4
        assert empty.get("/candidates.json").json()["candidates"] == []
        assert full.get("/candidates/triton-3.8.0.json").status_code == 200
        assert empty.get("/candidates/triton-3.8.0.json").status_code == 404
    finally:
        other.close()


def test_root_redirects_to_the_matrix(client: Client) -> None:
    r = client.get("/")
    assert r.status_code == 302 and r.headers["location"] == "/matrix"


def test_healthz_and_schema(client: Client, filled_store: Store) -> None:
    r = client.get("/healthz")  # it asks nothing of the store: no version read yet
    assert r.status_code == 200 and r.json()["matrix_version"] is None and r.json()["store"] == "ok"
    assert client.get("/matrix.json").status_code == 200
    r = client.get("/healthz")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["schema_revision"] == filled_store.revision
    with filled_store.session() as s:
        assert body["matrix_version"] == matrix_version(s) != NO_VERSION
    r = client.get("/schema.json")
    assert r.status_code == 200 and r.json() == json_schema()


def test_openapi_documents_the_json_side(client: Client) -> None:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    paths = spec["paths"]
    for p in ("/matrix.json", "/matrix.csv", "/matrix.md", "/candidates.json", "/candidates/{name}.json",
              "/runs/{run_id}.json", "/runs/{run_id}/report.json", "/diff.json", "/check.json", "/runs",
              "/schema.json", "/healthz"):
        assert p in paths, p
    assert "/matrix" not in paths and "/runs/{run_id}" not in paths  # HTML pages are not API
    params = {p["name"] for p in paths["/matrix.json"]["get"]["parameters"]}
    assert {"backend", "mode", "candidate", "outcome", "if-none-match"} <= params
    post = paths["/runs"]["post"]
    assert {"200", "201", "401", "403", "413", "422"} <= set(post["responses"])
    assert post["security"] and "HTTPBearer" in spec["components"]["securitySchemes"]
    assert "ErrorResponse" in spec["components"]["schemas"]
    assert client.get("/docs").status_code == 200


def test_the_api_reference_names_the_report_schema_it_takes(client: Client) -> None:
    """The reference pages name the schema version the probe writes, not an older one."""
    from probes import SCHEMA_VERSION

    spec = client.get("/openapi.json").json()
    assert f"(v{SCHEMA_VERSION})" in spec["paths"]["/schema.json"]["get"]["summary"]
    upload = spec["paths"]["/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert f"schema version {SCHEMA_VERSION}" in upload["description"]
    versions = set(re.findall(r"schema version (\d+)|\(v(\d+)\)", Text(client.get("/docs").text).text))
    assert {a or b for a, b in versions} == {str(SCHEMA_VERSION)}, versions


# --------------------------------------------------------------------------- matrix
def test_matrix_json_is_the_evidence_matrix(client: Client, filled_store: Store) -> None:
    r = client.get("/matrix.json")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    with filled_store.session() as s:
        want = survey_matrix.matrix(s)
    assert body["count"] == len(want) == 4 * 14
    assert body["rows"] == json.loads(json.dumps(want))
    for row in body["rows"]:
        assert row["evidence"] == f"/runs/{row['run_id']}" and row["date"].startswith("2026-12-02")
    # The stub/live distinction is carried: 3.9.0's rocprofiler pcsampling is a stub-derived refusal.
    ids = run_ids(filled_store)
    row = next(x for x in body["rows"] if x["candidate"] == "triton-3.9.0" and x["backend"] == "rocprofiler"
               and x["mode"] == "pcsampling")
    assert (row["outcome"], row["verdict"], row["verdict_source"], row["run_id"]) == \
        ("library_missing", "refused", "stub", ids["triton-3.9.0"])


def test_matrix_tells_no_mode_from_the_instrumentation_default_mode(client: Client) -> None:
    rows = client.get("/matrix.json?candidate=triton-3.9.0&backend=instrumentation").json()["rows"]
    report = json.loads(report_bytes("cpu-triton-3.9.0.json"))
    measured = [e["mode"] for e in report["modes"]
                if e["backend"] == "instrumentation" and e["env"] == "clean" and not e["stub"]]
    assert [r["mode"] for r in rows] == ["none", "pcsampling", "periodic_flushing", "default", "mma"]
    assert [r["mode_arg"] for r in rows] == measured == [None, "pcsampling", "periodic_flushing", "default", "mma"]


@pytest.mark.parametrize("filters", [
    {"backend": "rocprofiler"},
    {"mode": "none"},
    {"mode": "default"},
    {"mode": "pcsampling"},
    {"outcome": "library_missing"},
    {"candidate": "triton-3.8.0"},
    {"backend": "rocprofiler", "mode": "pcsampling", "outcome": "library_missing"},
    {"backend": "cupti", "outcome": "crash"},
])
def test_matrix_filters(client: Client, filled_store: Store, filters: dict[str, str]) -> None:
    query = "&".join(f"{k}={v}" for k, v in filters.items())
    body = client.get(f"/matrix.json?{query}").json()
    with filled_store.session() as s:
        want = survey_matrix.matrix(s, **filters)  # type: ignore[arg-type]
    assert 0 < body["count"] < 56 and body["count"] == len(want)
    assert body["rows"] == json.loads(json.dumps(want))
    for row in body["rows"]:
        for k, v in filters.items():
            assert row[k] == v
        if filters.get("mode") == "none":
            assert row["mode_arg"] is None
        if filters.get("mode") == "default":
            assert row["mode_arg"] == "default"
    csv_rows = list(csv.DictReader(io.StringIO(client.get(f"/matrix.csv?{query}").text)))
    assert len(csv_rows) == body["count"]


def test_matrix_filter_errors(client: Client) -> None:
    assert_error(client.get("/matrix.json?backend=nvtx"), 422, "invalid_input", "backend")
    assert_error(client.get("/matrix.csv?outcome=fine"), 422, "invalid_input", "outcome")
    assert_error(client.get("/matrix.md?backend=cupti"), 422, "invalid_input", "backend")
    r = client.get("/matrix?backend=nvtx")
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    assert "unknown backend" in Text(r.text).text
    assert client.get("/matrix.json?backend=&mode=&outcome=").json()["count"] == 56  # empty means any


def test_matrix_csv(client: Client) -> None:
    r = client.get("/matrix.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    reader = csv.DictReader(io.StringIO(r.text))
    assert reader.fieldnames == COLUMNS
    rows = list(reader)
    js = client.get("/matrix.json").json()["rows"]
    assert len(rows) == len(js) == 56
    for a, b in zip(rows, js, strict=True):
        assert (a["candidate"], a["backend"], a["mode"], a["outcome"], a["verdict"], a["run_id"], a["date"]) == \
            (b["candidate"], b["backend"], b["mode"], b["outcome"], b["verdict"], str(b["run_id"]), b["date"])


def test_matrix_md_is_what_survey_table_prints(client: Client, filled_store: Store) -> None:
    r = client.get("/matrix.md")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    cli = CliRunner().invoke(cli_app, ["table", "--db", filled_store.url])
    assert cli.exit_code == 0, cli.output
    assert r.content == cli.stdout_bytes
    assert "| Triton 3.9.0 " in r.text


def test_matrix_html_cells(client: Client, filled_store: Store) -> None:
    r = client.get("/matrix")
    assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
    page = Text(r.text)
    rows = client.get("/matrix.json").json()["rows"]
    cells = [c for c in page.cells if "empty" not in c["class"] and "doc" not in c["class"]]  # measured cells
    assert len(rows) == 56 and sum(c["colspan"] for c in cells) == len(rows)
    assert any(c["colspan"] > 1 for c in cells)  # repeated cells are collapsed ...
    anchors = {None: "", "pcsampling": "-pcsampling", "periodic_flushing": "-periodic_flushing",
               "default": "-default", "mma": "-mma"}
    by_history = {h: c for c in cells for h in c["hrefs"] if h.startswith("/history?")}
    for row in rows:  # ... and every row is in exactly one cell, with its own history link
        history = (f"/history?candidate={row['candidate']}&backend={row['backend']}&mode={row['mode']}"
                   f"&platform={row['platform'].replace(':', '%3A')}")
        cell = by_history[history]
        assert f"o-{row['outcome']}" in cell["class"]
        assert [c for c in cell["class"] if c.startswith("c-")] == [f"c-{row['here']}"]  # coloured as check says
        text = squash(cell["text"])
        assert f"Outcome {row['outcome']}" in cell["title"] and vocabulary.HERE[row["here"]].words in text
        assert vocabulary.CAUSES.get(row["cause"] or "", "") in text
        assert bare(f"run #{row['run_id']}, {row['date'][:10]}") in bare(page.text)  # the row: its run and date
        assert ("stub-derived" in text) == (row["verdict_source"] == "stub")
        assert ("is-stub" in cell["class"]) == (row["verdict_source"] == "stub")
        first = cell["href"]
        assert first.startswith(f"/runs/{row['run_id']}#check-{row['backend']}")
        if cell["colspan"] == 1:
            assert first == f"/runs/{row['run_id']}#check-{row['backend']}{anchors[row['mode_arg']]}"
        else:
            assert f"same for {cell['colspan']} modes" in text and "collapsed" in cell["class"]
    for cell in cells:  # a collapsed cell covers cells that say one thing
        covered = [row for row in rows if any(h == f"/history?candidate={row['candidate']}&backend="
                                               f"{row['backend']}&mode={row['mode']}&platform="
                                               f"{row['platform'].replace(':', '%3A')}" for h in cell["hrefs"])]
        assert len(covered) == cell["colspan"]
        assert len({(x["outcome"], x["verdict"], x["verdict_source"], x["reason"], x["run_id"])
                    for x in covered}) == 1
    assert page.scripts == 0
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"


def test_a_cell_says_whether_it_runs_here_and_what_the_build_says(client: Client) -> None:
    """3.8.0's rocprofiler periodic_flushing and pcsampling share their outcome
    (library_missing, both answered through the stub library): neither runs here, as
    `survey check` says, so both are "cannot run", red; periodic_flushing also says that
    the build supports it, pcsampling that the build refuses it. A stub-derived cell is
    never "runs". (Failed first: periodic_flushing was painted green "accepted".)"""
    page = Text(client.get("/matrix?candidate=triton-3.8.0&backend=rocprofiler").text)
    by_mode = {c["href"].rsplit("#", 1)[1]: c for c in page.cells if c["href"]}
    refused, accepted = by_mode["check-rocprofiler-pcsampling"], by_mode["check-rocprofiler-periodic_flushing"]
    assert "o-library_missing" in refused["class"] and "o-library_missing" in accepted["class"]
    assert "c-cannot_run" in refused["class"] and "c-cannot_run" in accepted["class"]
    said = squash(accepted["text"])
    assert "cannot run" in said and "runtime library missing here" in said and "supported by the build" in said
    assert "accepted" not in said.replace("supported", "") and "runs" not in said.replace("cannot run", "")
    assert "mode refused by the build" in squash(refused["text"]) and "stub-derived" in squash(refused["text"])
    for r in client.get("/matrix.json").json()["rows"]:
        assert not (r["verdict_source"] == "stub" and r["here"] == "runs"), r
    css = client.get("/static/style.css").text
    colour = {v: re.search(rf"table\.matrix td\.cell\.c-{v} \{{ background-color: (#[0-9a-f]{{6}}); }}", css)
              for v in vocabulary.HERE}
    assert all(colour.values()), colour
    assert len({m.group(1) for m in colour.values() if m}) == 3


def test_labels_show_their_code_spans_as_code(store: Store, make_client: Any) -> None:
    """A catalog label is Markdown (``PyPI `triton` 3.8.0``): pages show its code span as
    <code>, never the backticks, and anything else in it as text."""
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="triton-3.8.0", label="PyPI `triton` 3.8.0 <b>",
               kind="pip", spec={"pip": "triton==3.8.0"}, position=0, source="ingest", scope="catalog")
    c = make_client(store)
    run_id = c.get("/matrix.json").json()["rows"][0]["run_id"]
    shown = "PyPI <code>triton</code> 3.8.0 &lt;b&gt;"
    for path in ("/matrix", "/candidates", "/candidates/triton-3.8.0", f"/runs/{run_id}",
                 "/history?candidate=triton-3.8.0&backend=rocprofiler&mode=pcsampling"):
        html = c.get(path).text
        assert shown in html, path
        assert "`triton`" not in html, path
    docs = c.get("/docs").text  # the API's own descriptions are Markdown too
    assert "<code>.json</code>" in docs and "`.json`" not in docs


def test_documented_claims_are_on_the_matrix_marked_documented(client: Client) -> None:
    """The docs table's documented claims for `main` are on the page too: a row of their
    own, outlined and marked documented, with their sources; never a measured cell."""
    html = client.get("/matrix").text
    page = Text(html)
    docs = [c for c in page.cells if "doc" in c["class"]]
    assert docs and all(not any(k.startswith("c-") for k in c["class"]) for c in docs)  # no verdict colour
    texts = [squash(c["text"]) for c in docs]
    assert any(t.startswith("accepted documented") for t in texts) and any("present documented" in t for t in texts)
    assert any("https://github.com/triton-lang/triton/pull/11040" in c["hrefs"] for c in docs)
    assert 'data-candidate="triton-main" data-documented="true"' in html
    assert "Upstream <code>main</code>" in html  # the catalog's label
    measured = {r["candidate"] for r in client.get("/matrix.json").json()["rows"]}
    assert "triton-main" not in measured  # shown apart from the rows, never as one of them
    # a filter that claims do not answer (an outcome) leaves them out
    assert "data-documented" not in client.get("/matrix?outcome=no_gpu").text


def test_every_outcome_has_its_colour(client: Client) -> None:
    css = client.get("/static/style.css").text
    for outcome in O.OUTCOMES:
        assert re.search(rf"^\.o-{outcome} {{ background-color: #[0-9a-f]{{6}}; }}$", css, re.M), outcome


def test_matrix_etag_and_304_until_evidence_arrives(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    r0 = c.get("/matrix.json")
    assert r0.status_code == 200 and r0.json()["count"] == 0
    e0 = r0.headers["etag"]
    assert r0.headers["cache-control"] == "no-cache"
    r = c.get("/matrix.json", headers={"If-None-Match": e0})
    assert r.status_code == 304 and r.content == b"" and r.headers["etag"] == e0
    assert c.get("/matrix.json", headers={"If-None-Match": f'"other", W/{e0}'}).status_code == 304
    h0 = c.get("/matrix").headers["etag"]
    assert h0 != e0

    assert c.upload(report_bytes("cpu-triton-3.6.0.json")).status_code == 201

    # an upload under no catalog name is ad-hoc evidence: in the store, not in the published matrix
    r1 = c.get("/matrix.json?scope=all", headers={"If-None-Match": e0})
    assert r1.status_code == 200 and r1.json()["count"] == 14
    assert c.get("/matrix.json").json()["count"] == 0
    r1 = c.get("/matrix.json", headers={"If-None-Match": e0})
    e1 = r1.headers["etag"]
    assert e1 != e0
    assert c.get("/matrix.json", headers={"If-None-Match": e1}).status_code == 304
    assert c.get("/matrix", headers={"If-None-Match": h0}).status_code == 200
    # A duplicate adds no evidence: the version, and so the ETag, stay.
    assert c.upload(report_bytes("cpu-triton-3.6.0.json")).status_code == 200
    assert c.get("/matrix.json", headers={"If-None-Match": e1}).status_code == 304


def assert_write_locked(store: Store) -> None:
    """A second writer cannot take the lock now (proof that the writer holds it)."""
    if store.engine.dialect.name == "sqlite":
        other = sqlite3.connect(store.engine.url.database, isolation_level=None, timeout=0)
        try:
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()
    else:
        with store.engine.connect() as other:
            other.execute(text("SET lock_timeout = '200ms'"))
            with pytest.raises(OperationalError, match="lock timeout"):
                other.execute(text("UPDATE meta SET value = 'x' WHERE key = 'matrix_version'"))
            other.rollback()


@pytest.mark.both_stores
def test_reads_do_not_wait_for_a_writer(client: Client, filled_store: Store) -> None:
    before = client.get("/matrix.json").json()
    with filled_store.engine.connect() as writer:  # its own connection, in a transaction until rolled back
        writer.execute(text("UPDATE meta SET value = 'uncommitted' WHERE key = 'matrix_version'"))
        writer.execute(text("INSERT INTO candidates (name, label, kind, spec, position, created_at, updated_at) "
                            "VALUES ('being-written', 'x', 'pip', '{}', 9, '2026-12-02', '2026-12-02')"))
        assert_write_locked(filled_store)
        # The write lock is held; every read still answers, from the last commit.
        during = client.get("/matrix.json").json()
        assert during["matrix_version"] == before["matrix_version"] and during["count"] == 56
        names = [x["name"] for x in client.get("/candidates.json").json()["candidates"]]
        assert "being-written" not in names
        assert client.get("/runs/1.json").status_code == 200
        assert client.get("/matrix.md").status_code == 200
        writer.rollback()


# --------------------------------------------------------------------------- candidates
def test_candidates(client: Client, filled_store: Store) -> None:
    ids = run_ids(filled_store)
    body = client.get("/candidates.json").json()
    names = [c["name"] for c in body["candidates"]]
    assert names == [f"triton-{v}" for v in VERSIONS]
    for c in body["candidates"]:
        assert c["status"] == "measured" and c["latest_run"] == ids[c["name"]] and c["runs"] == 1
        assert c["url"] == f"/candidates/{c['name']}"
    md = client.get("/candidates.md").text
    assert md.splitlines()[0].startswith("| name ") and all(n in md for n in names)
    rows = list(csv.DictReader(io.StringIO(client.get("/candidates.csv").text)))
    assert [r["name"] for r in rows] == names
    page = Text(client.get("/candidates").text).text
    assert all(n in page for n in names) and "Triton 3.7.1" in page


def test_candidate_page(client: Client, filled_store: Store) -> None:
    rid = run_ids(filled_store)["triton-3.8.0"]
    body = client.get("/candidates/triton-3.8.0.json").json()
    assert body["candidate"]["name"] == "triton-3.8.0" and body["candidate"]["spec"] == {"pip": "triton==3.8.0"}
    assert body["latest"]["id"] == rid and body["latest"]["triton_version"] == "3.8.0"
    assert [r["id"] for r in body["runs"]] == [rid]
    with filled_store.session() as s:
        run = queries.get_run(s, rid)
        want = [{**v.__dict__, **dict(zip(("here", "cause"), runs_here(run, v.backend, v.mode, v), strict=True))}
                for v in survey_verdicts.run_verdicts(run)]
    assert body["latest"]["verdicts"] == json.loads(json.dumps(want))
    page = Text(client.get("/candidates/triton-3.8.0").text).text
    assert f"run #{rid}" in page and "stub-derived" in page and "2026-12-02" in page
    assert client.get("/candidates/triton-3.8.0.csv").text.startswith("id,status,source")
    assert client.get("/candidates/triton-3.8.0.md").status_code == 200


def test_unobtainable_candidate_history_shows_its_error(filled_store: Store, make_client: Any) -> None:
    name = "python:/nonexistent/bin/python3"
    out = survey_one(filled_store, name, "/nonexistent/bin/python3", "python", None, 4,
                     PythonLauncher("/nonexistent/bin/python3"), ProbeSettings())
    assert out.status == "unobtainable"
    c = make_client(filled_store)
    for path in (f"/candidates/{quote(name, safe='')}", f"/candidates/{name}"):
        r = c.get(path)
        assert r.status_code == 200, path
        page = Text(r.text).text
        assert "unobtainable" in page and "/nonexistent/bin/python3: no such file" in page
        assert "No complete run yet" in page
    body = c.get(f"/candidates/{quote(name, safe='')}.json").json()
    assert body["latest"] is None and body["runs"][0]["status"] == "unobtainable"
    assert body["runs"][0]["error"].startswith("/nonexistent/bin/python3: no such file")
    assert not [r for r in c.get("/matrix.json").json()["rows"] if r["candidate"] == name]  # ad hoc: unpublished
    row = [r for r in c.get("/matrix.json?scope=all").json()["rows"] if r["candidate"] == name]
    assert len(row) == 1 and row[0]["status"] == "unobtainable" and row[0]["run_id"] == out.run_id
    run = c.get(f"/runs/{out.run_id}.json").json()
    assert run["report"] is None and run["run"]["error"].startswith("/nonexistent/bin/python3")
    assert "no such file" in Text(c.get(f"/runs/{out.run_id}").text).text
    assert_error(c.get(f"/runs/{out.run_id}/report.json"), 404, "not_found")
    assert "/nonexistent/bin/python3" not in c.get("/matrix.md").text  # ad hoc: not in the docs table
    md = c.get("/matrix.md?scope=all").text
    assert "no evidence: unobtainable here (/nonexistent/bin/python3: no such file)" in md


def test_candidate_named_with_a_suffix(store: Store, make_client: Any) -> None:
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.6.0.json"), candidate="odd.md", label="Odd")
    c = make_client(store)
    r = c.get("/candidates/odd.md")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert c.get("/candidates/odd.md.json").json()["candidate"]["name"] == "odd.md"


def test_candidate_names_with_url_characters_are_linked(store: Store, make_client: Any) -> None:
    name = "image:we?ird #tag%20/x:latest"
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.7.1.json"), candidate=name, label="weird")
    c = make_client(store)
    page = c.get("/candidates").text
    href = f"/candidates/{quote(name, safe='')}"
    assert f'href="{href}"' in page
    r = c.get(href)
    assert r.status_code == 200 and f"Candidate {name}" in Text(r.text).text
    link = f"/candidates/{quote(name, safe='/:@')}.json"
    assert f'href="{link}"' in r.text  # the page's own .json link
    assert c.get(link).json()["candidate"]["name"] == name


def test_unknown_candidate(client: Client) -> None:
    assert_error(client.get("/candidates/nope.json"), 404, "not_found")
    r = client.get("/candidates/<script>alert(1)</script>")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "<script>" not in r.text and "&lt;script&gt;" in r.text
    assert "no candidate named '<script>alert(1)</script>'" in Text(r.text).text


# --------------------------------------------------------------------------- runs
def test_run_json_holds_everything_and_the_parsed_report(client: Client, filled_store: Store) -> None:
    rid = run_ids(filled_store)["triton-3.9.0"]
    body = client.get(f"/runs/{rid}.json").json()
    assert body["report"] == json.loads(report_bytes("cpu-triton-3.9.0.json"))
    assert body["run"]["id"] == rid and body["run"]["candidate"] == "triton-3.9.0"
    assert body["run"]["status"] == "complete" and body["run"]["triton_version"] == "3.9.0"
    assert body["provenance"]["run_id"] == rid and body["environment"]["kind"] == "reported"
    with filled_store.session() as s:
        want = [v.__dict__ for v in survey_verdicts.run_verdicts(queries.get_run(s, rid))]
    assert body["verdicts"] == json.loads(json.dumps(want))
    raw = client.get(f"/runs/{rid}/report.json")
    # the canonical JSON that was validated and hashed: the same document as the file
    assert raw.status_code == 200 and raw.json() == json.loads(report_bytes("cpu-triton-3.9.0.json"))
    assert raw.content == canonical_json(json.loads(report_bytes("cpu-triton-3.9.0.json")))
    rows = list(csv.DictReader(io.StringIO(client.get(f"/runs/{rid}.csv").text)))
    assert len(rows) == len(body["report"]["modes"])
    assert client.get(f"/runs/{rid}.md").text.startswith("| backend ")


def test_run_page_shows_what_the_probe_recorded(client: Client, filled_store: Store) -> None:
    rid = run_ids(filled_store)["triton-3.8.0"]
    r = client.get(f"/runs/{rid}")
    assert r.status_code == 200
    page = Text(r.text)
    text = page.text
    report = json.loads(report_bytes("cpu-triton-3.8.0.json"))
    for e in report["modes"]:
        assert e["call"] in text
        assert all(squash(a) in text for a in e["argv"])
        if e["stderr_tail"].strip():
            assert squash(e["stderr_tail"]) in text
        if e["message"]:
            assert squash(e["message"]) in text
    stubs = [e for e in report["modes"] if e["stub"]]
    assert stubs and text.count("stub-derived: stub for") == len(stubs)
    assert text.count("live clean environment") + text.count("live inherited environment") == \
        len(report["modes"]) - len(stubs)
    for lib in report["libraries"]:
        assert lib["name"] in text
        for cand in lib["candidates"]:
            assert cand["path"] in text
        if lib["fix"]:
            assert squash(lib["fix"]) in text
    assert "2026-12-02T18:21:29+00:00" in text  # the date of the evidence
    assert 'id="check-rocprofiler-pcsampling"' in r.text and 'id="mode-rocprofiler-pcsampling-clean-stub"' in r.text
    assert page.scripts == 0


def test_unknown_run(client: Client) -> None:
    assert_error(client.get("/runs/999.json"), 404, "not_found")
    assert_error(client.get(f"/runs/{2**70}.json"), 404, "not_found")
    r = client.get("/runs/999")
    assert r.status_code == 404 and "no run #999" in Text(r.text).text
    assert_error(client.get("/runs/abc.json"), 404, "not_found")


# --------------------------------------------------------------------------- diff
def test_diff(client: Client, filled_store: Store) -> None:
    r = client.get("/diff.json?a=triton-3.8.0&b=triton-3.9.0")
    assert r.status_code == 200
    with filled_store.session() as s:
        want = survey_diff.diff_runs(queries.resolve_ref(s, "triton-3.8.0"), queries.resolve_ref(s, "triton-3.9.0"))
    assert r.json() == json.loads(json.dumps(want))
    assert want["fields"]["triton_version"] == {"a": "3.8.0", "b": "3.9.0"} and not want["same"]
    ids = run_ids(filled_store)
    assert client.get(f"/diff.json?a=run:{ids['triton-3.8.0']}&b=%23{ids['triton-3.9.0']}").json() == r.json()
    rows = list(csv.DictReader(io.StringIO(client.get("/diff.csv?a=triton-3.8.0&b=triton-3.9.0").text)))
    changes = sum(len(want[k]) for k in ("environment", "modes", "libraries", "captures")) + len(want["fields"])
    assert len(rows) == changes and rows[0]["section"] == "fields"
    assert client.get("/diff.md?a=triton-3.8.0&b=triton-3.9.0").status_code == 200
    page = Text(client.get("/diff?a=triton-3.8.0&b=triton-3.9.0").text).text
    assert "3.8.0" in page and "3.9.0" in page and f"run #{ids['triton-3.9.0']}" in page
    same = client.get("/diff.json?a=triton-3.8.0&b=triton-3.8.0").json()
    assert same["same"] is True
    assert client.get("/diff").status_code == 200  # the empty form


def test_diff_errors(client: Client) -> None:
    assert_error(client.get("/diff.json?a=triton-3.8.0"), 422, "invalid_input", "b")
    assert_error(client.get("/diff.json?b=triton-3.8.0"), 422, "invalid_input", "a")
    assert_error(client.get("/diff.json?a=nope&b=triton-3.8.0"), 404, "not_found", "a")
    assert_error(client.get("/diff.json?a=triton-3.8.0&b=run:999"), 404, "not_found", "b")
    assert_error(client.get(f"/diff.json?a=triton-3.8.0&b={2**70}"), 404, "not_found", "b")


# --------------------------------------------------------------------------- check
@pytest.mark.parametrize("target,backend,mode,exit_code", [
    ("triton-3.9.0", "rocprofiler", "pcsampling", exitcodes.CANNOT_RUN),  # stub-derived refusal
    ("triton-3.6.0", "rocprofiler", None, exitcodes.CANNOT_RUN),  # backend absent
    ("triton-3.8.0", "cupti", None, exitcodes.NOT_ENOUGH_EVIDENCE),  # probed without a GPU
    ("triton-3.7.1", "cupti", "periodic_flushing", exitcodes.CANNOT_RUN),  # crashed
    ("triton-3.9.0", "roctracer", "pcsampling", exitcodes.CANNOT_RUN),  # refused live
])
def test_check_answers_as_survey_check(client: Client, filled_store: Store, target: str, backend: str,
                                       mode: str | None, exit_code: int, clock: Clock) -> None:
    query = f"target={target}&backend={backend}" + (f"&mode={mode}" if mode else "")
    body = client.get(f"/check.json?{query}").json()
    # the CLI's answer from the same stored evidence (--platform: no re-resolving of the candidate here)
    want = check_target(filled_store, target, backend, mode, platform="none:x86_64").as_dict()
    assert body["exit_code"] == want["exit_code"] == exit_code
    assert body == want  # the evidence's age too: by the one clock, fixed
    assert body["candidate"] == target and body["run_id"] == run_ids(filled_store)[target]
    page = bare(Text(client.get(f"/check?{query}").text).text)
    assert bare(want["reason"]) in page and f"exitcode{exit_code}" in page and want["evidence_date"] in page
    if want["fix"]:
        assert bare(want["fix"]) in page
    row = list(csv.DictReader(io.StringIO(client.get(f"/check.csv?{query}").text)))
    assert len(row) == 1 and row[0]["verdict"] == want["verdict"]
    assert client.get(f"/check.md?{query}").status_code == 200


def test_the_check_page_says_what_survey_check_says(client: Client, filled_store: Store) -> None:
    """Verdict, cause, fix and the three answers (backend present, mode accepted, library
    loads), each with how it is known: what `survey check` prints, not only a verdict."""
    query = "target=triton-3.8.0&backend=rocprofiler&mode=pcsampling"
    cli = survey_cli("check", "triton-3.8.0", "--backend", "rocprofiler", "--mode", "pcsampling",
                     "--platform", "none:x86_64", "--db", filled_store.url)
    html = client.get(f"/check?{query}").text
    page = bare(Text(html).text)
    assert bare("✗ cannot run: triton-3.8.0 with backend rocprofiler, mode pcsampling (mode refused by the build)") \
        in page
    assert cli.stdout.startswith("✗ cannot run: triton-3.8.0 with backend=rocprofiler mode=pcsampling "
                                 "(mode refused by the build)")
    said = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in cli.stdout.splitlines()[1:]}
    for question in ("backend present", "mode accepted", "library loads"):
        answer, basis = said[question].split(" - ", 1)  # "no [stub] - how it is known"
        assert bare(f"{question} {answer} {basis}") in page, (question, page)
    assert bare(f"fix {said['fix']}") in page and bare(f"reason {said['reason']}") in page
    # the verdict alone carries its colour (the matrix cell's class, c-*); the answer around it is text to read
    assert '<strong class="verdict-word c-cannot_run">' in html and 'class="verdict-box vb-cannot_run"' in html
    assert html.count('class="v-') == 0 and html.count("c-cannot_run") == 1
    assert "<code>librocprofiler-sdk.so</code>" in html  # code spans as code


def test_check_md_is_the_whole_answer(client: Client) -> None:
    query = "target=triton-3.8.0&backend=rocprofiler&mode=pcsampling"
    md = client.get(f"/check.md?{query}").text
    whole = client.get(f"/check.json?{query}").json()
    from survey.render import escape

    cell = lambda text: escape.markdown(text, cell=True)  # noqa: E731  (a cell's text, Markdown-escaped)
    assert "truncated" not in md and cell(whole["reason"]) in md and cell(whole["details"][0]) in md
    # a table that is cut names where it is whole: the same question, as JSON
    cut = client.get("/history.md?candidate=triton-3.9.0&backend=rocprofiler&mode=pcsampling").text
    link = cut.rsplit("the whole evidence: ", 1)[1].strip()
    assert link == "/history.json?candidate=triton-3.9.0&backend=rocprofiler&mode=pcsampling"
    assert client.get(link).status_code == 200


def test_check_without_evidence(client: Client, filled_store: Store) -> None:
    body = client.get("/check.json?target=/opt/venv/bin/python&backend=rocprofiler&mode=pcsampling").json()
    assert body["exit_code"] == exitcodes.NOT_ENOUGH_EVIDENCE and body["verdict"] == "not_enough_evidence"
    assert body["run_id"] is None and body["candidate"] is None
    assert "survey check /opt/venv/bin/python --backend rocprofiler --mode pcsampling" in body["fix"]
    survey_one(filled_store, "python:/gone/python", "/gone/python", "python", None, 5,
               PythonLauncher("/gone/python"), ProbeSettings())
    body = client.get("/check.json?target=/gone/python&backend=cupti").json()
    assert body["exit_code"] == exitcodes.NOT_ENOUGH_EVIDENCE and body["candidate"] == "python:/gone/python"
    assert "unobtainable" in body["reason"] and "/gone/python: no such file" in body["reason"]
    page = Text(client.get("/check?target=/gone/python&backend=cupti").text).text
    assert "not enough evidence" in page and "exit code 3" in page


def test_check_finds_ad_hoc_targets(store: Store, make_client: Any) -> None:
    with store.session() as s:  # as `survey probe --python /opt/t39/bin/python --store` names it
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="python:/opt/t39/bin/python",
               label="/opt/t39/bin/python", kind="python", source="probe")
    c = make_client(store)
    body = c.get("/check.json?target=/opt/t39/bin/python&backend=rocprofiler&mode=pcsampling").json()
    assert body["candidate"] == "python:/opt/t39/bin/python" and body["exit_code"] == exitcodes.CANNOT_RUN
    assert "built without rocprofiler-sdk PC sampling support" in body["reason"]


def test_check_errors(client: Client) -> None:
    assert_error(client.get("/check.json?backend=cupti"), 422, "invalid_input", "target")
    assert_error(client.get("/check.json?target=triton-3.9.0"), 422, "invalid_input", "backend")
    assert_error(client.get("/check.json?target=triton-3.9.0&backend=nvtx"), 422, "invalid_input", "backend")
    assert client.get("/check").status_code == 200  # the empty form


def test_the_check_form_offers_choices(client: Client) -> None:
    form = client.get("/check").text
    assert "<input" not in form  # choices, not free text
    assert "<option>triton-3.9.0</option>" in form and "<option>rocprofiler</option>" in form
    assert '<option value="pcsampling">pcsampling</option>' in form
    answered = client.get("/check?target=triton-3.8.0&backend=rocprofiler&mode=pcsampling").text
    assert "<option selected>triton-3.8.0</option>" in answered
    assert '<option value="pcsampling" selected>pcsampling</option>' in answered


# --------------------------------------------------------------------------- GPU evidence
@pytest.mark.parametrize("backend,mode,exit_code,words", [
    ("cupti", None, exitcodes.OK, "a GELU capture recorded 50 kernel launches"),
    ("cupti", "pcsampling", exitcodes.OK, "a GELU capture recorded 50 kernel launches"),
    ("cupti", "periodic_flushing", exitcodes.CANNOT_RUN, "refuses `cupti` with mode `periodic_flushing`"),
    ("instrumentation", "mma", exitcodes.NOT_ENOUGH_EVIDENCE, "the GELU capture recorded no kernel"),
])
def test_gpu_check(h200_store: Store, make_client: Any, backend: str, mode: str | None, exit_code: int,
                   words: str, clock: Clock) -> None:
    c = make_client(h200_store)
    body = c.get(f"/check.json?target={H200}&backend={backend}" + (f"&mode={mode}" if mode else "")).json()
    want = check_target(h200_store, H200, backend, mode).as_dict()
    assert body["exit_code"] == want["exit_code"] == exit_code and words in body["reason"]
    # the CLI adds one note: it could not obtain the ingested environment here
    assert want["details"][-1].startswith(f"{H200} cannot be obtained here")
    assert {k: v for k, v in body.items() if k != "details"} == {k: v for k, v in want.items() if k != "details"}


def test_gpu_matrix_and_run_page_show_the_captures(h200_store: Store, make_client: Any) -> None:
    c = make_client(h200_store)
    rows = c.get("/matrix.json?backend=cupti").json()["rows"]
    ok = rows[0]
    assert (ok["mode"], ok["outcome"], ok["verdict"], ok["verdict_source"]) == ("none", "ok", "accepted", "live")
    assert (ok["capture_outcome"], ok["capture_kernel_count"]) == ("ok", 50)
    cells = {cell["href"]: cell for cell in Text(c.get("/matrix").text).cells}
    cell = cells[f"/runs/{ok['run_id']}#check-cupti"]
    assert "o-ok" in cell["class"] and "capture: ok, 50 kernels" in squash(cell["text"])

    report = json.loads(report_bytes("h200-triton-3.6.0.json"))
    r = c.get(f"/runs/{ok['run_id']}")
    text = Text(r.text).text
    assert 'href="#capture-cupti"' in r.text and 'id="capture-cupti"' in r.text
    assert "GELU capture: ok, 50 kernel launches recorded" in text
    for cap in report["captures"]:
        assert " ".join(cap["argv"]) in text
        assert f"{cap['duration_s']} s total" in text
        if cap["message"]:
            assert squash(cap["message"]) in text
    assert "50 launches, 351199.0 ns; top gelu_kernel 351199.0 ns" in text
    assert "NVIDIA H200" in text and "4.76837158203125e-07" in text
    assert text.count("empty_capture") >= 3


# --------------------------------------------------------------------------- upload
@pytest.mark.both_stores
def test_upload_new_then_duplicate(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    raw = report_bytes("cpu-triton-3.9.0.json")
    r = c.upload(raw, params={"candidate": "gpu-host.triton-3.9.0", "label": "Triton 3.9.0 (upload)"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["created"] is True and body["candidate"] == "gpu-host.triton-3.9.0"
    assert r.headers["location"] == body["url"] == f"/runs/{body['run_id']}"
    run = c.get(f"{body['url']}.json").json()
    assert run["report"] == json.loads(raw) and run["run"]["source"] == "upload"
    assert c.get(f"{body['url']}/report.json").content == canonical_json(json.loads(raw))
    cand = c.get("/candidates/gpu-host.triton-3.9.0.json").json()["candidate"]
    assert cand["label"] == "Triton 3.9.0 (upload)"

    again = c.upload(raw)
    note = "this report is already stored as run #1 under candidate 'gpu-host.triton-3.9.0'; nothing was added"
    assert again.status_code == 200 and again.json() == {**body, "created": False, "note": note}
    assert "location" not in again.headers
    assert run_count(store) == 1
    # Without a candidate name the report's own host and Triton name it.
    r2 = c.upload(report_bytes("cpu-triton-3.8.0.json"))
    assert r2.status_code == 201 and r2.json()["candidate"] == "vm:python:/tmp/venvs/t3.8.0"


def test_upload_needs_the_token(store: Store, make_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = report_bytes("cpu-triton-3.9.0.json")
    c = make_client(store, token=TOKEN)
    err = assert_error(c.upload(raw, token=None), 401, "unauthorized")
    assert "Bearer" in err["message"]
    r = c.upload(raw, token="not-" + TOKEN)
    assert_error(r, 401, "unauthorized")
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert_error(c.upload(raw, token=None, headers={"Authorization": f"Basic {TOKEN}"}), 401, "unauthorized")
    assert_error(c.upload(raw, token=TOKEN[:-1]), 401, "unauthorized")
    assert run_count(store) == 0

    monkeypatch.delenv("SURVEY_TOKEN", raising=False)
    closed = make_client(store)
    err = assert_error(closed.upload(raw, token=TOKEN), 403, "uploads_disabled")
    assert "SURVEY_TOKEN" in (err["hint"] or "")
    assert_error(closed.upload(raw, token=""), 403, "uploads_disabled")
    assert run_count(store) == 0

    monkeypatch.setenv("SURVEY_TOKEN", "from-the-environment")
    from_env = make_client(store)
    assert from_env.upload(raw, token=TOKEN).status_code == 401
    assert from_env.upload(raw, token="from-the-environment").status_code == 201


def test_upload_size_limit(store: Store, make_client: Any) -> None:
    raw = report_bytes("cpu-triton-3.9.0.json")
    c = make_client(store, token=TOKEN, max_upload_bytes=len(raw) - 1)
    err = assert_error(c.upload(raw), 413, "payload_too_large", "body")
    assert str(len(raw) - 1) in err["message"]

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
        for i in range(0, len(raw), 4096):
            yield raw[i:i + 4096]

    r = c.upload(chunked())
    assert "content-length" not in r.request.headers
    assert_error(r, 413, "payload_too_large", "body")
    assert run_count(store) == 0
    fits = make_client(store, token=TOKEN, max_upload_bytes=len(raw))
    assert fits.upload(raw).status_code == 201


def test_upload_invalid_reports_name_the_field(store: Store, make_client: Any) -> None:
    c = make_client(store, token=TOKEN)
    good = json.loads(report_bytes("cpu-triton-3.9.0.json"))

    err = assert_error(c.upload(b"this is not json"), 422, "invalid_report", None)
    assert err["message"].startswith("not JSON")
    assert_error(c.upload("{}".encode("utf-16")), 422, "invalid_report", None)
    assert_error(c.upload(b"[1, 2]"), 422, "invalid_report", "(root)")

    no_probe = copy.deepcopy(good)
    del no_probe["probe"]
    err = assert_error(c.upload(json.dumps(no_probe)), 422, "invalid_report", "probe")
    assert "probe" in err["message"]

    no_outcome = copy.deepcopy(good)
    del no_outcome["modes"][3]["outcome"]
    assert_error(c.upload(json.dumps(no_outcome)), 422, "invalid_report", "modes.3.outcome")

    bad_outcome = copy.deepcopy(good)
    bad_outcome["modes"][0]["outcome"] = "fine"
    assert_error(c.upload(json.dumps(bad_outcome)), 422, "invalid_report", "modes.0.outcome")

    future = copy.deepcopy(good)
    future["schema_version"] = 4
    assert_error(c.upload(json.dumps(future)), 422, "invalid_report", "schema_version")

    # integers are held to the bounds the published schema gives them, in typed
    # maps too (schemathesis: outcome_counts {"x": 2**53} was stored) ...
    wide = copy.deepcopy(good)
    wide["modes"][0]["outcome_counts"] = {"crash": 2**53}
    assert_error(c.upload(json.dumps(wide)), 422, "invalid_report", "modes.0.outcome_counts.crash")
    wide = copy.deepcopy(good)
    wide["modes"][1]["exit_code"] = 2**31
    assert_error(c.upload(json.dumps(wide)), 422, "invalid_report", "modes.1.exit_code")

    assert_error(c.upload(json.dumps(good), params={"candidate": "x" * 201}), 422, "invalid_input", "candidate")
    assert run_count(store) == 0  # nothing partial, ever
    with store.session() as s:
        assert s.query(m.Candidate).count() == 0 and s.query(m.ModeRow).count() == 0
    # ... but not inside free-form evidence, which the schema leaves open
    free = copy.deepcopy(good)
    free["sections"] = {"extra": {"big": 2**70}}
    assert c.upload(json.dumps(free)).status_code == 201


# --------------------------------------------------------------------------- errors
def test_one_error_format_everywhere(client: Client) -> None:
    assert_error(client.get("/nope.json"), 404, "not_found")
    assert client.get("/matrix.xml").status_code == 404  # no such format (answered as a page: not a known suffix)
    assert_error(client.request("DELETE", "/matrix.json"), 405, "method_not_allowed")
    assert_error(client.request("PUT", "/runs"), 405, "method_not_allowed")
    r = client.get("/nope")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    text = Text(r.text).text
    assert "nothing at /nope" in text and "not_found" in text and "404" in text
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert client.get("/static/style.css").headers["content-type"].startswith("text/css")


def test_an_upload_under_a_catalog_name_is_the_catalog_s(store: Store, make_client: Any) -> None:
    """The rules of `survey ingest` (survey.flows.filing): a catalog name publishes the
    report under the catalog entry; a label for it, or a report of another build, is 422."""
    c = make_client(store, token=TOKEN)
    r = c.upload(report_bytes("cpu-triton-3.8.0.json"), params={"candidate": "triton-3.8.0", "label": "my GPU box"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "label", r.text
    r = c.upload(report_bytes("cpu-triton-3.7.1.json"), params={"candidate": "triton-3.8.0"})
    assert r.status_code == 422 and "3.7.1" in r.json()["error"]["message"], r.text
    assert run_count(store) == 0
    r = c.upload(report_bytes("cpu-triton-3.8.0.json"), params={"candidate": "triton-3.8.0"})
    assert r.status_code == 201, r.text
    cand = c.get("/candidates/triton-3.8.0.json").json()["candidate"]
    assert cand["label"] == "PyPI `triton` 3.8.0 (released 2026-08-28)" and cand["scope"] == "catalog"


# --------------------------------------------------------------------------- pages a reader opens first
def test_every_link_of_the_empty_check_and_diff_forms_answers(client: Client) -> None:
    """The empty /check and /diff forms link only what answers: their "Also as" links asked
    for a target (422). (Failed first: /check.json, /diff.json, ... answered 422.)"""
    import html as html_mod

    for path in ("/check", "/diff"):
        page = client.get(path).text
        for href in re.findall(r'href="(/[^"]*)"', page):
            if href.startswith("/docs"):
                continue
            assert client.get(html_mod.unescape(href)).status_code == 200, (path, href)


def test_favicon(client: Client) -> None:
    """(Failed first: /favicon.ico was 404 on every page load.)"""
    r = client.get("/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    assert r.content.startswith(b"<svg") and b"<script" not in r.content
    assert '<link rel="icon" href="/static/favicon.svg"' in client.get("/matrix").text
    assert client.get("/static/favicon.svg").content == r.content


def test_diff_page_prints_no_python_reprs(client: Client, filled_store: Store) -> None:
    """A field that is missing or a list reads as words (`(none)`, `a, b`), never `None` or
    `['a', 'b']`. (Failed first: the 3.7.1 -> 3.8.0 page printed None and ['cupti', ...].)"""
    ids = run_ids(filled_store)
    page = client.get(f"/diff?a={ids['triton-3.7.1']}&b={ids['triton-3.8.0']}").text
    text = Text(page).text
    assert "profilers" in text and "(none)" in text
    assert "None" not in text and "['" not in text and "[]" not in text


def test_changes_page_renders_its_markdown(client: Client) -> None:
    """Reasons on /changes hold `code` spans: shown as code, never as backticks.
    (Failed first: the page showed raw Markdown.)"""
    page = client.get("/changes").text
    assert "<code>" in page
    body = Text(page).text
    assert "`" not in body


def test_one_candidate_is_one_candidate(store: Store, make_client: Any) -> None:
    """(Failed first: "1 of 1 candidates".)"""
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="triton-3.8.0", label="Triton 3.8.0",
               kind="pip", position=0, scope="catalog")
    text = Text(make_client(store).get("/candidates").text).text
    assert "1 of 1 candidate" in text and "1 of 1 candidates" not in text


def test_diff_says_each_verdict_as_the_matrix_does(client: Client, filled_store: Store) -> None:
    """/diff says what changed in a cell's verdict here in /matrix's words and colours (the
    vocabulary's), and colours nothing by a check's raw outcome. (Failed first: /diff had no
    verdicts and painted its modes by outcome, `o-accepted` green where /matrix said `cannot run`.)"""
    matrix = client.get("/matrix.json?_size=500").json()["rows"]
    said = {(r["candidate"], f"{r['backend']}:{r['mode']}"): (vocabulary.say(r), r["here"]) for r in matrix}
    want = []
    for key in sorted({k for _, k in said}):
        a, b = said.get(("triton-3.7.1", key)), said.get(("triton-3.8.0", key))
        if a != b:
            want.append({"key": key, "a": a[0] if a else None, "b": b[0] if b else None,
                         "a_here": a[1] if a else None, "b_here": b[1] if b else None})
    d = client.get("/diff.json?a=triton-3.7.1&b=triton-3.8.0").json()
    assert d["verdicts"] == want and want  # rocprofiler: absent in 3.7.1, present in 3.8.0
    page = client.get("/diff?a=triton-3.7.1&b=triton-3.8.0").text
    assert 'class="o-' not in page
    for change in want:
        for side in ("a", "b"):
            if change[side] is not None:
                cls = f"c-{change[side + '_here']}"
                assert f'<td class="{cls}">{html.escape(change[side], quote=False)}</td>' in page
    csv_rows = list(csv.DictReader(io.StringIO(client.get("/diff.csv?a=triton-3.7.1&b=triton-3.8.0").text)))
    assert [(r["key"], r["a"], r["b"]) for r in csv_rows if r["section"] == "verdicts"] == \
        [(c["key"], c["a"] or "", c["b"] or "") for c in want]


@pytest.mark.parametrize("label,shown", [
    ("python:/opt/venv/bin/python3", "python:/<wbr>opt/<wbr>venv/<wbr>bin/<wbr>python3"),
    ("h200.triton-3.6.0", "h200.<wbr>triton-3.6.0"),  # a version stays whole
    ("PyPI `triton` 3.8.0", "PyPI <code>triton</code> 3.8.0"),
    ("<b>/x</b>&amp;", "&lt;b&gt;/<wbr>x&lt;/<wbr>b&gt;&amp;amp;"),  # evidence stays text around the breaks
])
def test_a_label_may_wrap_only_between_its_tokens(label: str, shown: str) -> None:
    from survey.render.escape import inline_html

    assert inline_html(label, breaks=True) == shown
    assert inline_html(label).replace("<wbr>", "") == inline_html(label)
