"""What changed (survey.verdicts.changes): the store's changes, ``/changes`` in every
format and as Atom (read back with feedparser), ``survey changes``, and the published
site, on the real CPU and H200 reports of tests/fixtures/reports, on SQLite and
PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import feedparser
import httpx
import pytest

from api.app import create_app
from api.publish import publish
from db.store import Store
from survey.evidence.identity import PlatformId
from survey.evidence.ingest import ingest, record_failure
from survey.verdicts import changes as changes_mod
from tests.conftest import report_bytes, survey_cli

UNPINNED = {"pip": "triton"}  # a candidate whose environment moves (upstream main): its runs can differ
CHANGED_371_TO_380 = [
    ("cupti", "periodic_flushing", ("crash", "unknown"), ("no_gpu", "unknown")),
    ("rocprofiler", "none", ("unknown_backend", "absent"), ("library_missing", "accepted")),
    ("rocprofiler", "pcsampling", ("unknown_backend", "absent"), ("library_missing", "refused")),
    ("rocprofiler", "periodic_flushing", ("unknown_backend", "absent"), ("library_missing", "accepted")),
]


def put(store: Store, raw: bytes, name: str = "triton-main") -> int:
    with store.session() as s:
        res = ingest(s, raw, candidate=name, label="Upstream main", kind="pip", spec=UNPINNED, source="ingest",
                     scope="catalog")
    assert res.created
    return res.run_id


def only_cupti(raw: bytes) -> bytes:
    """The same probe asked for cupti only (``survey probe --only cupti``): fewer checks."""
    doc = json.loads(raw)
    doc["modes"] = [x for x in doc["modes"] if x["backend"] == "cupti"]
    doc["probe"]["argv"] = [*doc["probe"]["argv"], "--only", "cupti"]
    return json.dumps(doc).encode()


@pytest.fixture
def moving_store(store: Store) -> tuple[Store, list[int]]:
    """triton-main probed four times on the CPU (3.7.1, a failed attempt, 3.8.0, 3.8.0 checking
    cupti only) and once on an H200 (3.6.0)."""
    first = put(store, report_bytes("cpu-triton-3.7.1.json"))
    with store.session() as s:
        failed, _ = record_failure(s, "triton-main", label="Upstream main", kind="pip", spec=UNPINNED, position=None,
                                   error="pip install failed: no space left on device",
                                   platform=PlatformId("none:x86_64", "none", None, "x86_64", {}),
                                   scope="catalog")
    second = put(store, report_bytes("cpu-triton-3.8.0.json"))
    third = put(store, only_cupti(report_bytes("cpu-triton-3.8.0.json")))
    h200 = put(store, report_bytes("h200-sm90-triton-3.6.0.json"))
    return store, [first, failed, second, third, h200]


def test_changes_between_consecutive_complete_runs(moving_store: tuple[Store, list[int]]) -> None:
    store, (first, failed, second, third, h200) = moving_store
    with store.session() as s:
        found = changes_mod.changes(s)
    assert [e["run_id"] for e in found] == sorted((e["run_id"] for e in found), reverse=True)  # newest first
    assert failed not in {e["run_id"] for e in found} | {e["previous_run_id"] for e in found}
    by_run: dict[int, list[dict[str, Any]]] = {}
    for e in found:
        by_run.setdefault(e["run_id"], []).append(e)
    assert set(by_run) == {first, second, third, h200}
    # the first run on each platform: every cell is new, nothing before it
    for run in (first, h200):
        assert {e["kind"] for e in by_run[run]} == {"new"} and len(by_run[run]) == 14
        assert all(e["before"] is None and e["previous_run_id"] is None for e in by_run[run])
    assert {e["platform"] for e in by_run[h200]} == {"nvidia:sm_90:NVIDIA H200"}
    # 3.7.1 -> 3.8.0 (the failed attempt between them answers nothing)
    moved = [(e["backend"], e["mode"], (e["before"]["outcome"], e["before"]["verdict"]),
              (e["after"]["outcome"], e["after"]["verdict"])) for e in by_run[second]]
    assert moved == CHANGED_371_TO_380
    assert {(e["kind"], e["previous_run_id"], e["triton_version"], e["previous_triton_version"])
            for e in by_run[second]} == {("changed", first, "3.8.0", "3.7.1")}
    # 3.8.0 checking cupti only: every other cell is removed, cupti's answers stand
    assert {e["kind"] for e in by_run[third]} == {"removed"} and len(by_run[third]) == 11
    assert not any(e["backend"] == "cupti" for e in by_run[third])
    assert all(e["after"] is None and e["before"] is not None for e in by_run[third])
    # /history marks exactly these runs changed
    from survey.evidence import queries
    from survey.verdicts import history

    with store.session() as s:
        cand = queries.get_candidate(s, "triton-main")
        rows = history.cell_history(s, cand, "rocprofiler", "pcsampling", "none:x86_64")
    assert [(r["run_id"], r["changed"]) for r in rows if r["status"] == "complete"] == \
        [(third, True), (second, True), (first, False)]


def test_since_and_runs_select_changes(moving_store: tuple[Store, list[int]]) -> None:
    store, (first, _failed, second, third, h200) = moving_store
    with store.session() as s:
        everything = changes_mod.changes(s)
        of_second = changes_mod.changes(s, runs={second})
        late = changes_mod.changes(s, since=changes_mod.parse_since("2030-01-01"))
        early = changes_mod.changes(s, since=changes_mod.parse_since("2000-01-01T00:00:00Z"))
    assert [e["run_id"] for e in of_second] == [second] * 4
    assert late == [] and early == everything
    assert changes_mod.parse_since("2026-12-01") == dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    assert changes_mod.parse_since("2026-12-01T13:00:00.5+01:00") == dt.datetime(2026, 12, 1, 12, 0, 0, 500000,
                                                                                 tzinfo=dt.UTC)
    assert changes_mod.parse_since("2016-12-31T23:59:60Z") == dt.datetime(2016, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
    # exactly RFC 3339 (what /openapi.json declares): nothing looser that Python would also read
    for bad in ("yesterday", "2026-02-30", "2026-12-01 12:00:00Z", "2026-12-01T12:00Z", "20261201", "2026-W49",
                "2026-12-01T12:00:00+24:00", "0000-01-01"):
        with pytest.raises(ValueError):
            changes_mod.parse_since(bad)


def test_an_ad_hoc_candidate_is_left_out_unless_asked(store: Store) -> None:
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="python:/somewhere", source="probe")
    with store.session() as s:
        assert changes_mod.changes(s) == []
        assert len(changes_mod.changes(s, scope="all")) == 14


# --------------------------------------------------------------------------- /changes
def get(store: Store, url: str, **kw: Any) -> httpx.Response:
    from fastapi.testclient import TestClient

    return TestClient(create_app(store)).get(url, **kw)


def test_changes_resource_in_every_format(moving_store: tuple[Store, list[int]]) -> None:
    store, (first, _failed, second, third, h200) = moving_store
    j = get(store, "/changes.json").json()
    assert j["total"] == 14 + 4 + 11 + 14 and len(j["changes"]) == j["total"] and j["next_url"] is None
    assert j["changes"][0]["run_id"] == h200
    changed = get(store, "/changes.json?kind=changed").json()
    assert [(c["backend"], c["mode"]) for c in changed["changes"]] == [x[:2] for x in CHANGED_371_TO_380]
    assert changed["changes"][0]["history"] == ("/history?candidate=triton-main&backend=cupti&mode=periodic_flushing"
                                                "&platform=none%3Ax86_64")
    page = get(store, "/changes.json?_size=10")
    assert len(page.json()["changes"]) == 10 and page.json()["next"] == 10
    assert page.headers["link"] == '</changes.json?_size=10&_next=10>; rel="next"'
    rest = get(store, "/changes.json?_size=10&_next=40").json()
    assert len(rest["changes"]) == 3 and rest["next"] is None
    csv = get(store, "/changes.csv?kind=changed").text.splitlines()
    assert csv[0] == ",".join(changes_mod.COLUMNS) and len(csv) == 5
    assert csv[1].split(",")[2:10] == ["none:x86_64", "cupti", "periodic_flushing", "changed", "crash", "unknown",
                                       "no_gpu", "unknown"]
    md = get(store, "/changes.md?kind=removed").text
    assert md.count("| removed ") == 11
    html = get(store, "/changes?kind=changed")
    assert html.status_code == 200 and "text/html" in html.headers["content-type"]
    assert html.text.count('<span class="changed-mark">changed</span>') == 4
    assert 'href="/changes.atom?kind=changed"' in html.text and f'href="/runs/{second}"' in html.text
    assert get(store, "/changes.json?since=2030-01-01").json()["changes"] == []
    for bad, field in (("/changes.json?since=soon", "since"), ("/changes.json?kind=moved", "kind"),
                       ("/changes.atom?scope=everything", "scope"), ("/changes.csv?_size=0", None)):
        r = get(store, bad)
        assert r.status_code == 422 and r.headers["content-type"] == "application/json", bad
        if field:
            assert r.json()["error"]["field"] == field
    etag = get(store, "/changes.json").headers["etag"]
    assert get(store, "/changes.json", headers={"If-None-Match": etag}).status_code == 304


def test_changes_atom_is_a_valid_feed_of_the_newest_changes(moving_store: tuple[Store, list[int]]) -> None:
    store, (first, _failed, second, third, h200) = moving_store
    r = get(store, "/changes.atom")
    assert r.status_code == 200 and r.headers["content-type"] == "application/atom+xml; charset=utf-8"
    feed = feedparser.parse(r.content, response_headers={"content-type": r.headers["content-type"],
                                                         "content-location": "http://survey.example/changes.atom"})
    assert not feed.bozo, feed.bozo_exception
    assert feed.version == "atom10" and feed.feed.title == "proton-survey: what changed"
    assert feed.feed.id == "urn:proton-survey:changes"
    assert len(feed.entries) == 43 and len({e.id for e in feed.entries}) == 43
    newest = feed.entries[0]
    assert newest.title.startswith("triton-main · cupti none: ") and newest.title.endswith(" (new)")
    assert newest.link == "http://survey.example/history?candidate=triton-main&backend=cupti&mode=none&platform=" \
                          "nvidia%3Asm_90%3ANVIDIA+H200"
    assert feed.feed.updated == newest.updated
    moved = [e for e in feed.entries if e.tags[0].term == "changed"]
    assert [e.title for e in moved] == [
        "triton-main · cupti periodic_flushing: unknown (crash) -> unknown (no_gpu)",
        "triton-main · rocprofiler none: absent -> accepted",
        "triton-main · rocprofiler pcsampling: absent -> refused",
        "triton-main · rocprofiler periodic_flushing: absent -> accepted"]
    assert f"before (run #{first}): absent (unknown_backend)" in moved[2].summary
    assert f"after (run #{second}): refused (library_missing)" in moved[2].summary
    small = feedparser.parse(get(store, "/changes.atom?_size=5&kind=changed").content)
    assert [e.id for e in small.entries] == [e.id for e in moved]
    assert feedparser.parse(get(store, "/changes.atom?since=2030-01-01").content).entries == []


def test_an_empty_store_has_an_empty_valid_feed(store: Store) -> None:
    r = get(store, "/changes.atom")
    feed = feedparser.parse(r.content)
    assert r.status_code == 200 and not feed.bozo and feed.entries == [] and feed.feed.updated
    assert get(store, "/changes.json").json()["total"] == 0
    assert "No changes." in get(store, "/changes").text


def test_publish_writes_the_changes_and_their_feed(moving_store: tuple[Store, list[int]], tmp_path: Path) -> None:
    store, _ = moving_store
    publish(store, tmp_path / "site")
    site = tmp_path / "site"
    feed = feedparser.parse((site / "changes.atom").read_bytes())
    assert not feed.bozo and len(feed.entries) == 43
    assert json.loads((site / "changes.json").read_text())["total"] == 43
    assert (site / "changes" / "index.html").is_file() and (site / "changes.csv").is_file()
    assert 'href="../changes"' in (site / "matrix" / "index.html").read_text()  # every page links to it


# --------------------------------------------------------------------------- survey changes
def test_survey_changes_prints_the_same(moving_store: tuple[Store, list[int]]) -> None:
    store, (first, _failed, second, third, h200) = moving_store
    r = survey_cli("changes", "--db", store.url, "--json")
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    with store.session() as s:
        assert doc["changes"] == changes_mod.changes(s) and doc["total"] == 43 and doc["failed_deliveries"] == []
    r = survey_cli("changes", "--db", store.url, "--limit", "5")
    lines = r.stdout.splitlines()
    assert len(lines) == 6 and lines[-1] == "... 38 older (--limit, --since)"
    assert lines[0].endswith(f"triton-main · cupti none: accepted (new)  [run #{h200}, nvidia:sm_90:NVIDIA "
                             "H200]"), lines[0]
    text = survey_cli("changes", "--db", store.url, "--limit", "100").stdout
    assert f"triton-main · rocprofiler pcsampling: absent -> refused  [run #{second} vs #{first}, none:x86_64]" in text
    assert survey_cli("changes", "--db", store.url, "--since", "2030-01-01").stdout == "no changes since 2030-01-01\n"
    bad = survey_cli("changes", "--db", store.url, "--since", "soon")
    assert bad.returncode == 64 and "--since 'soon': not a date" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_survey_changes_needs_a_store(tmp_path: Path) -> None:
    r = survey_cli("changes", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert r.returncode == 65 and "no proton-survey store" in r.stderr and not (tmp_path / "none.db").exists()


def test_survey_changes_json_is_written_by_the_json_writer(store: Store) -> None:
    """Evidence text reaches a terminal through `changes --json` too: the characters a
    terminal acts on (C1, bidi) are escaped there as in every other JSON output."""
    from survey.render.escape import json_text

    put(store, report_bytes("cpu-triton-3.7.1.json"))
    doc = json.loads(report_bytes("cpu-triton-3.8.0.json"))
    for x in doc["modes"]:
        if x["backend"] == "rocprofiler":
            x["message"] = "[PROTON] Could not load `librocprofiler-sdk.so`\u202e\x9b31m"
    put(store, json.dumps(doc).encode())
    r = survey_cli("changes", "--db", store.url, "--json")
    assert "\u202e" not in r.stdout and "\x9b" not in r.stdout and "\\u202e" in r.stdout
    with store.session() as s:
        found = changes_mod.changes(s)
    assert r.stdout == json_text({"since": None, "total": len(found), "changes": found, "failed_deliveries": []},
                                 indent=1) + "\n"
