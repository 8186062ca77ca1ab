"""``survey publish DIR``: the matrix as static files, served by a plain static server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from api.publish import is_interactive
from db.store import Store
from tests.conftest import survey_cli


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [v for k, v in attrs if k in ("href", "src") and v]


@pytest.fixture
def static_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    site = tmp_path / "site"
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    procs = []

    def start() -> str:
        p = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                              "--directory", str(site)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield site, start
    for p in procs:
        p.kill()
        p.wait()


def test_published_site_serves_every_page_and_link(filled_store: Store, static_server) -> None:  # type: ignore[no-untyped-def]
    site, start = static_server
    r = survey_cli("publish", str(site), "--db", filled_store.url)
    assert r.returncode == 0, r
    base = start()
    with httpx.Client(base_url=base, follow_redirects=True, timeout=10) as c:
        matrix = c.get("/matrix.json").json()
        assert matrix["count"] == 4 * 14
        assert c.get("/matrix.md").text == survey_cli("table", "--db", filled_store.url).stdout
        assert "text/html" in c.get("/matrix").headers["content-type"]
        # every same-site link of every published page answers 200
        todo, seen = ["/matrix", "/candidates"], set()
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            resp = c.get(path)
            assert resp.status_code == 200, path
            if "text/html" in resp.headers.get("content-type", ""):
                parser = Links()
                parser.feed(resp.text)
                for link in parser.links:
                    u = urlsplit(link)
                    if not (u.scheme or u.netloc or u.query) and u.path.startswith("/") \
                            and not is_interactive(u.path):  # /check, /diff: answers to a query
                        todo.append(u.path)
        assert any(p.startswith("/runs/") for p in seen) and any(p.startswith("/candidates/") for p in seen)
        rid = matrix["rows"][0]["run_id"]
        assert c.get(f"/runs/{rid}/report.json").json()["schema_version"] == 1


def test_publish_needs_an_existing_store_and_a_writable_place(tmp_path: Path, filled_store: Store) -> None:
    r = survey_cli("publish", str(tmp_path / "site"), "--db", f"sqlite:///{tmp_path / 'typo.db'}")
    assert r.returncode == 65 and not (tmp_path / "typo.db").exists() and not (tmp_path / "site").exists()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = survey_cli("publish", str(blocker / "site"), "--db", filled_store.url)
    assert r.returncode == 65 and "cannot write the site" in r.stderr
    # publishing again (--force: the directory is not empty) replaces the site whole
    site = tmp_path / "site2"
    assert survey_cli("publish", str(site), "--db", filled_store.url).returncode == 0
    (site / "stale.txt").write_text("old")
    assert survey_cli("publish", str(site), "--db", filled_store.url, "--force").returncode == 0
    assert not (site / "stale.txt").exists() and json.loads((site / "matrix.json").read_text())["count"] == 56
