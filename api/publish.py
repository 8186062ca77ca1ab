"""``survey publish DIR``: the service's pages as static files.

Any static host or CDN can then serve the matrix at any scale, with no server of
ours. The files are what the service answers as a static site (``create_app(...,
site=SCOPE)``): the app is asked for each resource in-process (Starlette's
TestClient) and every same-site link of every HTML page is followed. A resource at
``/x`` is written as ``x/index.html`` (static servers answer ``/x`` with it),
``/x.json`` as ``x.json``. What a static site cannot answer - a query string
(filters, pagination, a cell's history), ``/check``, ``/diff``, ``/docs`` - its
pages do not link to; :func:`dead_links` checks every link of every written page
against the files written. Paginated lists (the matrix, the candidates) are
published as one page of the largest size (``api.pages.MAX_SIZE`` rows); a list
longer than that is noted as cut.

The scope is the catalog's candidates (what the docs publish), as ``survey table``
shows them; ``scope="all"`` adds ad-hoc evidence (targets checked by path, whose
names hold host paths).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from api import pages
from api.app import create_app
from db.store import Store

START = ("/matrix", "/matrix.json", "/matrix.csv", "/matrix.md", "/candidates", "/candidates.json",
         "/candidates.csv", "/candidates.md", "/schema.json", "/static/style.css")
PAGED = ("/matrix", "/matrix.json", "/matrix.csv", "/candidates", "/candidates.json", "/candidates.csv",
         "/candidates.md")
MAX_PAGES = 100_000
# Resources that answer a question asked in the query string: no static form.
INTERACTIVE = ("/check", "/diff", "/docs", "/openapi.json", "/healthz")
FILE_SUFFIXES = (".json", ".csv", ".md", ".css", ".svg", ".html", ".js", ".txt", ".png", ".ico")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)


@dataclass
class Published:
    pages: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)  # "page -> link" naming no written file (none, or a defect)


def _test_client() -> type:
    """Starlette's TestClient, imported without the warning its httpx dependency prints."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # only while importing it
        from starlette.testclient import TestClient
    return TestClient


def resolve(root: Path, page: Path, href: str) -> Path | None:
    """The file a static server answers ``href`` on ``page`` with (None: another site's
    link). Resolved as a browser does, relative to the page; ``/x/`` and a directory
    are answered with their index.html; the query is ignored, as static servers do."""
    u = urlsplit(href)
    if u.scheme or u.netloc:
        return None
    rel = page.relative_to(root).as_posix()
    base = "/" + (rel[: -len("index.html")] if rel.endswith("index.html") else rel)
    path = unquote(urlsplit(urljoin(base, href)).path)
    target = root / path.lstrip("/")
    return target / "index.html" if path.endswith("/") or target.is_dir() else target


def dead_links(root: Path) -> list[str]:
    """Every link of every HTML file under ``root`` that names no file there, or asks a
    question (a query string) a static file cannot answer: ``"page -> href"``."""
    dead = []
    for page in sorted(root.rglob("*.html")):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        for href in parser.links:
            target = resolve(root, page, href)
            if target is not None and (urlsplit(href).query or not target.is_file()):
                dead.append(f"{page.relative_to(root).as_posix()} -> {href}")
    return dead


def is_interactive(path: str) -> bool:
    return any(path == p or path.startswith(p + ".") or path.startswith(p + "/") for p in INTERACTIVE)


def target_path(root: Path, url_path: str) -> Path:
    """Where the answer for ``url_path`` goes under ``root``."""
    parts = [p for p in unquote(url_path).split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"refusing to publish {url_path!r}")
    if not parts:
        return root / "index.html"
    if parts[-1].endswith(FILE_SUFFIXES):
        return root.joinpath(*parts)
    return root.joinpath(*parts, "index.html")


def publish(store: Store, out: Path, scope: str = "catalog") -> Published:
    """Write the site of ``scope`` (catalog | all) into ``out`` (replaced whole,
    atomically, when done)."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    result = Published()
    try:
        client = _test_client()(create_app(store, token="", site=scope))
        seen: set[str] = set()
        queue = deque(START)
        while queue and result.pages < MAX_PAGES:
            path = queue.popleft()
            if path in seen:
                continue
            seen.add(path)
            r = client.get(f"{path}?_size={pages.MAX_SIZE}" if path in PAGED else path)
            if 'rel="next"' in r.headers.get("link", ""):
                result.skipped.append(f"{path} (the first {pages.MAX_SIZE} rows: the service pages the rest)")
            if r.status_code != 200:
                result.skipped.append(f"{path} ({r.status_code})")
                continue
            dest = target_path(tmp, path)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(r.content)
            result.pages += 1
            result.bytes += len(r.content)
            if r.headers.get("content-type", "").startswith("text/html"):
                parser = _Links()
                parser.feed(r.text)
                for link in parser.links:
                    u = urlsplit(link)
                    if u.scheme or u.netloc or u.query or not u.path.startswith("/"):
                        continue
                    if is_interactive(u.path):
                        continue
                    if u.path not in seen:
                        queue.append(u.path)
        (tmp / "index.html").write_text('<!doctype html><meta http-equiv="refresh" content="0; url=/matrix/">'
                                        '<a href="/matrix/">The Availability matrix</a>\n')
        result.dead = dead_links(tmp)
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return result
