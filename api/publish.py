"""``survey publish DIR``: the service's pages as static files.

Any static host or CDN can then serve the matrix at any scale, with no server of
ours. The files are exactly what the service answers: the app is asked for each
resource in-process, as a static site (``create_app(..., site=SCOPE)``), and every
same-site link of every HTML page is followed. What a static site cannot answer - a
query string (filters, pagination, a cell's history), ``/check``, ``/diff``, ``/docs``
- its pages do not link to; :func:`dead_links` checks every link of every written
page against the files written. A resource at ``/x`` is
written as ``x/index.html`` (static servers answer ``/x`` with it), ``/x.json`` as
``x.json``. Every link is relative to its page, so the site works at a host's root
or under any path (``https://host/project/``). Links with a query string (filters, pagination) have no static form
and are not followed; the unfiltered resources are all there. Paginated lists
(the matrix, the candidates) are published as one page of the largest size
(``api.pages.MAX_SIZE`` rows); a list longer than that is noted as cut.

A site goes into a new or empty directory; one that holds anything is replaced
whole only with ``force`` (``survey publish --force``). Every name maps to a file
name any file system takes: a name made only of letters, digits and ``._+@-``
(at most 100 of them, not ``index.html``) is its own file name; any other (``..``,
``/`` or ``%`` inside it, emoji, 200 characters) becomes ``_SLUG-HASH``, short and
unique, and the links of every HTML page are rewritten to those files. The site is
world-readable (directories 0755, files 0644) whatever the umask.

The scope is the catalog's candidates (what the docs publish), as ``survey table``
shows them; ``scope="all"`` adds ad-hoc evidence (targets checked by path, whose
names hold host paths).
"""

from __future__ import annotations

import hashlib
import html
import os
import posixpath
import re
import shutil
import tempfile
from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import anyio.from_thread
import httpx

from api import pages
from api.app import create_app
from db.store import Store
from survey.core.errors import InputError, StoreUnusable

START = ("/matrix", "/matrix.json", "/matrix.csv", "/matrix.md", "/candidates", "/candidates.json",
         "/candidates.csv", "/candidates.md", "/changes", "/changes.json", "/changes.csv", "/changes.md",
         "/changes.atom", "/schema.json", "/static/style.css", "/static/favicon.svg")
PAGED = ("/matrix", "/matrix.json", "/matrix.csv", "/candidates", "/candidates.json", "/candidates.csv",
         "/candidates.md", "/changes", "/changes.json", "/changes.csv", "/changes.md")
MAX_PAGES = 100_000
# Resources that answer a question asked in the query string: no static form.
INTERACTIVE = ("/check", "/diff", "/docs", "/openapi.json", "/healthz")
FILE_SUFFIXES = (".json", ".csv", ".md", ".css", ".svg", ".html", ".js", ".txt", ".png", ".ico", ".atom")


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


class NotEmpty(InputError):
    """The directory holds files this site would delete."""


# A path segment written as it is: what every file system and static server takes
# unchanged (no encoding, no dot segment, no hidden file, a length any file system
# allows). Every other segment - '..', '/' inside a name, '%', emoji, 200 characters,
# 'index.html' (the file a directory's page is written to) - is mapped.
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@-]{0,99}")
_RESERVED = {"index.html"}


def _segment(raw: str, last: bool) -> str:
    """The file name for one raw (percent-encoded) URL path segment."""
    name = unquote(raw)
    if _SAFE.fullmatch(name) and name.lower() not in _RESERVED:
        return name
    suffix = next((x for x in FILE_SUFFIXES if name.endswith(x)), "") if last else ""
    stem = name[: len(name) - len(suffix)]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip(".-")[:40]
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    # '_' never starts a segment kept as it is, so a mapped name meets no kept one
    return f"_{slug}-{digest}{suffix}" if slug else f"_{digest}{suffix}"


def file_segments(url_path: str) -> list[str]:
    """The path (segments under the site's root) of the file that answers ``url_path``
    (raw, as the service links it): short, unique, safe file names."""
    raw = [p for p in url_path.split("/") if p]
    return [_segment(p, i == len(raw) - 1) for i, p in enumerate(raw)]


def _is_file(url_path: str) -> bool:
    return unquote(url_path.rstrip("/").rsplit("/", 1)[-1]).endswith(FILE_SUFFIXES)


def target_path(root: Path, url_path: str) -> Path:
    """Where the answer for ``url_path`` goes under ``root``: ``/x.json`` as ``x.json``,
    ``/x`` as ``x/index.html``."""
    segments = file_segments(url_path)
    if not segments:
        return root / "index.html"
    if _is_file(url_path):
        return root.joinpath(*segments)
    return root.joinpath(*segments, "index.html")


def site_link(url_path: str) -> str:
    """The link to ``url_path``'s file in the published site (its segments need no encoding)."""
    return "/" + "/".join(file_segments(url_path)) + ("/" if url_path.endswith("/") and url_path != "/" else "")


def _request_path(url_path: str) -> str:
    """``url_path`` as it must be asked of the service: a name that is a dot segment
    ('.', '..') percent-encoded, so no client folds it into its parent."""
    return "/".join(p.replace(".", "%2E") if p in (".", "..") and i else p for i, p in enumerate(url_path.split("/")))


_ATTR = re.compile(r'(\s(?:href|src)=")([^"]*)(")')


def _same_site(link: str) -> str | None:
    """The path of a same-site link that a static site can answer, else None."""
    u = urlsplit(link)
    if u.scheme or u.netloc or u.query or not u.path.startswith("/") or is_interactive(u.path):
        return None
    return u.path


def relative_link(link: str, page: str) -> str:
    """``link`` (a site path, ``/x/`` or ``/x.json``) relative to the file ``page`` (its
    path under the site's root, ``matrix/index.html``): the site works wherever it is
    hosted, at a host's root or under any path (``https://host/project/``)."""
    rel = posixpath.relpath(link.lstrip("/") or ".", posixpath.dirname(page) or ".")
    if link.endswith("/"):
        rel = "./" if rel == "." else rel.rstrip("/") + "/"
    return rel


def _rewrite_links(text: str, page: str) -> str:
    """Every same-site link of an HTML page (``page``: its file under the site's root)
    pointed at its file in the site, relative to the page."""

    def one(m: re.Match[str]) -> str:
        link = html.unescape(m.group(2))
        path = _same_site(link)
        if path is None:
            return m.group(0)
        fragment = urlsplit(link).fragment
        new = relative_link(site_link(path), page) + (f"#{fragment}" if fragment else "")
        return m.group(0) if new == link else f"{m.group(1)}{html.escape(new, quote=True)}{m.group(3)}"

    return _ATTR.sub(one, text)


def _check_destination(out: Path, force: bool) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise NotEmpty(f"{out}: not a directory; publish into a new or empty directory")
    entries = sorted(p.name for p in out.iterdir())
    if entries and not force:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise NotEmpty(f"{out} is not empty ({len(entries)} entries: {shown}); publish into a new or empty "
                       "directory, or pass --force to replace it whole")


def _world_readable(root: Path) -> None:
    """Directories 0755, files 0644: a site is for every reader, whatever the umask."""
    os.chmod(root, 0o755)
    for here, dirs, files in os.walk(root):
        for d in dirs:
            os.chmod(os.path.join(here, d), 0o755)
        for f in files:
            os.chmod(os.path.join(here, f), 0o644)


def _crawl(store: Store, tmp: Path, result: Published, scope: str) -> None:
    """Ask the app for every resource reachable from :data:`START`; write each under ``tmp``."""
    written: dict[Path, str] = {}
    seen: set[str] = set()
    queue = deque(START)
    # httpx's ASGI transport hands the app the path decoded once, as a server does
    # (Starlette's TestClient decodes it twice: a name holding '%2F' would not be found).
    app = create_app(store, token="", site=scope)
    # within the app's lifespan, as a server runs it: its end lets the store pool's threads go
    with anyio.from_thread.start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(app.router.lifespan_context(app)):
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://publish")
        try:
            while queue and result.pages < MAX_PAGES:
                path = queue.popleft()
                if path in seen:
                    continue
                seen.add(path)
                asked = _request_path(path)
                r = portal.call(http.get, f"{asked}?_size={pages.MAX_SIZE}" if path in PAGED else asked)
                if 'rel="next"' in r.headers.get("link", ""):
                    result.skipped.append(f"{path} (the first {pages.MAX_SIZE} rows: the service pages the rest)")
                if r.status_code in (503, 507):  # the store failed (api.errors.outage_error): no site from it
                    reply = portal.call(http.get, f"{asked}.json" if not asked.endswith(".json") else asked)
                    said = reply.json().get("error", {}).get("message") if reply.headers.get(
                        "content-type", "").startswith("application/json") else None
                    raise StoreUnusable(said or f"the store could not be read ({path}: {r.status_code})")
                if r.status_code != 200:
                    result.skipped.append(f"{path} ({r.status_code})")
                    continue
                dest = target_path(tmp, path)
                if dest in written:  # two resources, one file: keep the first, say so
                    result.skipped.append(f"{path} (its file is {written[dest]}'s)")
                    continue
                written[dest] = path
                dest.parent.mkdir(parents=True, exist_ok=True)
                body = r.content
                if r.headers.get("content-type", "").startswith("text/html"):
                    parser = _Links()
                    parser.feed(r.text)
                    for link in parser.links:
                        target = _same_site(link)
                        if target is not None and target not in seen:
                            queue.append(target)
                    body = _rewrite_links(r.text, dest.relative_to(tmp).as_posix()).encode("utf-8")
                dest.write_bytes(body)
                result.pages += 1
                result.bytes += len(body)
        finally:
            portal.call(http.aclose)


def publish(store: Store, out: Path, scope: str = "catalog", *, force: bool = False) -> Published:
    """Write the site of ``scope`` (catalog | all) into ``out``: a new or empty directory,
    or (``force``) one that is replaced whole, atomically, when the site is done."""
    out = out.resolve()
    _check_destination(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    result = Published()
    try:
        _crawl(store, tmp, result, scope)
        (tmp / "index.html").write_text('<!doctype html><meta http-equiv="refresh" content="0; url=matrix/">'
                                        '<a href="matrix/">The Availability matrix</a>\n')
        result.dead = dead_links(tmp)
        _world_readable(tmp)
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
