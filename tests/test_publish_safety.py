"""``survey publish`` with names the name rule allows but a file system does not, into
directories that already hold something, and for readers other than its writer."""

from __future__ import annotations

import json
import os
import stat
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import httpx
import pytest

from api.publish import is_interactive
from db.store import Store
from survey.evidence.ingest import ingest
from tests.conftest import report_bytes, survey_cli
from tests.helpers.api import Links

AWKWARD = ["..", "\U0001f642" * 70, "index.html", "..%2F..%2Fpwn2", "a/b", ".", "static", "x" * 200]


@pytest.fixture
def awkward_store(store: Store) -> Store:
    for i, name in enumerate(AWKWARD):
        # a report of its own each: the same report under another name would only point at the first
        data = json.loads(report_bytes("cpu-triton-3.9.0.json"))
        data["environment"]["platform"]["hostname"] = f"host{i}"
        with store.session() as s:
            assert ingest(s, json.dumps(data), candidate=name, kind="pip").created, name
    return store


class Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def crawl(c: httpx.Client, start: list[str]) -> dict[str, httpx.Response]:
    seen: dict[str, httpx.Response] = {}
    todo = list(start)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        resp = c.get(path)
        seen[path] = resp
        assert resp.status_code == 200, (path, resp.status_code)
        if "text/html" in resp.headers.get("content-type", ""):
            parser = Links()
            parser.feed(resp.text)
            for link in parser.links:  # relative to the page, as a browser reads them
                if urlsplit(link).scheme or urlsplit(link).netloc:
                    continue
                u = urlsplit(urljoin(str(resp.url), link))
                if not u.query and not is_interactive(u.path):
                    todo.append(u.path)
    return seen


def test_every_name_gets_a_safe_file_and_every_link_resolves(awkward_store: Store, static_server: Any) -> None:
    site, start = static_server
    r = survey_cli("publish", str(site), "--all", "--db", awkward_store.url)  # ad-hoc names
    assert r.returncode == 0, r
    assert "Traceback" not in r.stderr and "not published" not in r.stderr, r
    for p in site.rglob("*"):
        assert len(p.name.encode()) <= 255 and p.resolve().is_relative_to(site.resolve()), p
    assert not (site.parent / "pwn2").exists() and not (site.parent.parent / "pwn2").exists()
    base = start()
    with httpx.Client(base_url=base, follow_redirects=True, timeout=10) as c:
        pages = crawl(c, ["/matrix", "/candidates"])
        listing = c.get("/candidates/")
        assert "text/html" in listing.headers["content-type"]
        shown = Text()
        shown.feed(listing.text)
        for name in AWKWARD:  # the list is still the list, and names every candidate
            assert name in "".join(shown.parts), name
        candidate_pages = {p: resp for p, resp in pages.items() if p.startswith("/candidates/") and p != "/candidates/"
                           and "text/html" in resp.headers.get("content-type", "")}
        titles = set()
        for resp in candidate_pages.values():
            t = Text()
            t.feed(resp.text)
            titles.add("".join(t.parts))
        for name in AWKWARD:  # each candidate has its own page, reached from the list
            assert any(f"Candidate {name}" in t for t in titles), name


def test_publish_refuses_a_directory_that_holds_other_files(filled_store: Store, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    monkeypatch.chdir(work)
    r = survey_cli("publish", ".", "--db", filled_store.url)
    assert r.returncode == 65, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "not empty" in lines[0] and "--force" in r.stderr and len(lines) <= 2, r
    assert (work / "notes.txt").read_text() == "mine" and sorted(os.listdir(work)) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert survey_cli("publish", str(empty), "--db", filled_store.url).returncode == 0
    assert (empty / "matrix.json").is_file()
    # publishing again over a site needs --force too: it replaces the directory whole
    assert survey_cli("publish", str(empty), "--db", filled_store.url).returncode == 65
    (empty / "stale.txt").write_text("old")
    assert survey_cli("publish", str(empty), "--db", filled_store.url, "--force").returncode == 0
    assert not (empty / "stale.txt").exists() and (empty / "matrix.json").is_file()


def test_the_site_is_world_readable(filled_store: Store, tmp_path: Path) -> None:
    old = os.umask(0o077)  # a cautious user's umask: the site is for every reader all the same
    try:
        r = survey_cli("publish", str(tmp_path / "site"), "--db", filled_store.url)
    finally:
        os.umask(old)
    assert r.returncode == 0, r
    site = tmp_path / "site"
    for p in [site, *site.rglob("*")]:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))


def test_names_map_to_short_unique_files() -> None:
    from api.publish import file_segments

    seen = {}
    for name in [*AWKWARD, "Index.html", "\U0001f642" * 71, "a%2Fb", "a-b"]:
        from urllib.parse import quote

        segs = file_segments("/candidates/" + quote(name, safe=""))
        assert segs[0] == "candidates" and len(segs) == 2, segs
        assert all(s not in (".", "..", "", "index.html") and "/" not in s and len(s.encode()) <= 120 for s in segs)
        assert segs[1] not in seen, (name, seen.get(segs[1]))
        seen[segs[1]] = name
    assert file_segments("/candidates/triton-3.9.0") == ["candidates", "triton-3.9.0"]  # plain names stay
    assert unquote("/matrix.json") == "/" + "/".join(file_segments("/matrix.json"))
