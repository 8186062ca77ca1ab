"""``survey publish DIR``: the matrix as static files, served by a plain static server."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from api.publish import is_interactive
from db.store import Store
from tests.conftest import survey_cli
from tests.helpers.api import Links


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
        # every same-site link of every published page answers 200 (none needs the service)
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
                    u = urlsplit(urljoin(str(resp.url), link))
                    assert not u.query and not is_interactive(u.path), (path, link)
                    if u.netloc == urlsplit(base).netloc:
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


def resolve_published(site: Path, page: Path, href: str) -> Path | None:
    """The file a static server answers a link of ``page`` with (None: another site).
    Resolved relative to the page, as a browser does; ``/x`` is served from x/index.html."""
    from urllib.parse import unquote, urljoin

    u = urlsplit(href)
    if u.scheme or u.netloc:
        return None
    rel = page.relative_to(site).as_posix()
    base = "/" + (rel[: -len("index.html")] if rel.endswith("index.html") else rel)
    path = unquote(urlsplit(urljoin(base, href)).path)
    target = site / path.lstrip("/")
    return target / "index.html" if path.endswith("/") or target.is_dir() else target


def test_every_link_of_every_published_file_resolves(filled_store: Store, tmp_path: Path) -> None:
    """Every href and src of every published HTML file names a published file: no history
    link, no query, no page the static site cannot answer (/check, /diff, /docs)."""
    from survey.evidence.ingest import ingest
    from tests.conftest import report_bytes

    with filled_store.session() as s:  # a GPU run: captures, and cells that collapse
        ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate="triton-3.6.0", label="Triton 3.6.0",
               kind="pip", spec={"pip": "triton==3.6.0"}, position=0, scope="catalog")
    site = tmp_path / "site"
    r = survey_cli("publish", str(site), "--db", filled_store.url)
    assert r.returncode == 0, r
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10
    dead, checked = [], 0
    for page in pages:
        parser = Links()
        parser.feed(page.read_text())
        for href in parser.links:
            target = resolve_published(site, page, href)
            if target is None:
                continue
            checked += 1
            if not target.is_file() or urlsplit(href).query:
                dead.append(f"{page.relative_to(site)} -> {href}")
    assert checked > 200 and dead == [], dead[:20]
    nav = (site / "matrix" / "index.html").read_text()
    assert 'href="/check"' not in nav and 'href="/diff"' not in nav and 'href="/docs"' not in nav
    assert "/history?" not in nav and 'form class="filters"' not in nav


def test_publish_is_the_catalog_unless_asked_for_all(filled_store: Store, tmp_path: Path) -> None:
    """Ad-hoc evidence (a target checked by its path: a host path in its name) is not
    published unless asked for (--all), as `survey table` shows the catalog unless --all."""
    from survey.evidence.ingest import ingest
    from tests.conftest import report_bytes

    with filled_store.session() as s:
        ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate="python:/home/someone/venvs/t36",
               label="/home/someone/venvs/t36/bin/python", kind="python", source="probe")
    site = tmp_path / "site"
    r = survey_cli("publish", str(site), "--db", filled_store.url)
    assert r.returncode == 0, r
    everything = "".join(p.read_text() for p in site.rglob("*") if p.is_file() and p.suffix != ".png")
    assert "/home/someone" not in everything
    assert json.loads((site / "candidates.json").read_text())["total"] == 4
    wide = tmp_path / "all"
    assert survey_cli("publish", str(wide), "--all", "--db", filled_store.url).returncode == 0
    assert "/home/someone/venvs/t36" in (wide / "candidates" / "index.html").read_text()
    assert "/home/someone/venvs/t36" in (wide / "matrix" / "index.html").read_text()


def test_publish_prints_one_line(filled_store: Store, tmp_path: Path) -> None:
    """What it wrote, and nothing from the libraries it uses (no deprecation warning)."""
    r = subprocess.run([sys.executable, "-W", "default", "-m", "survey", "publish", str(tmp_path / "site"),
                        "--db", filled_store.url], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{tmp_path / 'site'}: ") and "files" in lines[0], r.stderr


class _UnderSubpath(http.server.SimpleHTTPRequestHandler):
    """A static server that serves its directory under /sub/path/ only, as a docs host
    (GitHub Pages: https://host/project/) serves a site: anything else is 404."""

    PREFIX = "/sub/path"

    def translate_path(self, path: str) -> str:
        if not (path == self.PREFIX or path.startswith(self.PREFIX + "/")):
            return str(Path(self.directory) / "__outside_the_site__")
        return super().translate_path(path[len(self.PREFIX):] or "/")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the stdlib's name)
        pass


def test_the_published_site_works_under_a_subpath(filled_store: Store, tmp_path: Path) -> None:
    """Published, then served under /sub/path/ by a static server on 127.0.0.1: every
    link and asset of every page reached from the site's root answers 200 under the
    subpath, the stylesheet included. (Failed first: the pages linked /matrix,
    /static/style.css, ... at the host's root: dead links and no styles.)"""
    import functools
    import threading

    site = tmp_path / "site"
    assert survey_cli("publish", str(site), "--db", filled_store.url).returncode == 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_UnderSubpath, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    root = f"http://127.0.0.1:{server.server_address[1]}/sub/path/"
    try:
        with httpx.Client(follow_redirects=True, timeout=10) as c:
            todo, seen, dead, assets = [root, root + "matrix/"], set(), [], 0
            while todo:
                url = todo.pop()
                if url in seen:
                    continue
                seen.add(url)
                resp = c.get(url)
                if resp.status_code != 200:
                    dead.append(url)
                    continue
                if "text/html" not in resp.headers.get("content-type", ""):
                    continue
                parser = Links()
                parser.feed(resp.text)
                for link in parser.links:
                    target = urljoin(str(resp.url), link)
                    u = urlsplit(target)
                    if u.netloc != urlsplit(root).netloc:
                        continue
                    assets += link.endswith(".css")
                    todo.append(target.split("#")[0])
            css = c.get(root + "matrix/").text
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert dead == [], dead[:20]
    assert len(seen) > 20 and assets > 10
    assert any("/sub/path/runs/" in u for u in seen) and any("/sub/path/candidates/" in u for u in seen)
    assert 'href="../static/style.css"' in css


@pytest.mark.parametrize("name", ["-dash", "new\nline", "sp ace", "$(id)`id`", "ünï😀", "esc\x1b[31mred\x07"])
def test_publish_into_a_directory_with_a_hostile_name(filled_store: Store, tmp_path: Path, name: str) -> None:
    """A directory name with a leading dash, a line break, shell syntax, emoji or a terminal
    escape is written into as named, the site whole, nothing beside it; the summary is one
    line with the name's control characters shown, never sent to the terminal. (Failed first:
    the line break and the escape sequence reached the terminal raw.)"""
    where = tmp_path / "out"
    where.mkdir()
    r = survey_cli("publish", "--db", filled_store.url, "--", str(where / name))
    assert r.returncode == 0, r
    assert [p.name for p in where.iterdir()] == [name]
    assert (where / name / "index.html").is_file() and (where / name / "matrix" / "index.html").is_file()
    assert len(r.stderr.splitlines()) == 1 and "\x1b" not in r.stderr and "\x07" not in r.stderr, r
    assert "files," in r.stderr


def test_an_error_naming_a_hostile_path_is_one_line(filled_store: Store, tmp_path: Path) -> None:
    """A refusal that names the directory (here: it is a file) stays one line whatever the
    name holds. (Failed first: the name's line break split the error in two.)"""
    blocker = tmp_path / "two\nlines"
    blocker.write_text("x")
    r = survey_cli("publish", "--db", filled_store.url, "--", str(blocker))
    assert r.returncode == 65, r
    assert len(r.stderr.splitlines()) == 1 and "two\\x0alines" in r.stderr, r
