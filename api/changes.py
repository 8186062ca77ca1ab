"""``/changes``: what changed, newest first (:mod:`survey.verdicts.changes`).

One entry per (candidate, platform, backend, mode) whose answer moved between
consecutive complete runs, or that a run answered first (a newly discovered release,
a moved image tag); ``?kind=changed|new|removed`` keeps one kind, ``?since=`` (ISO 8601
date or time, UTC unless it says) only runs stored from then on, ``?scope=all`` adds
ad-hoc candidates. Paginated like the other lists (:mod:`api.pages`) and cached per
matrix version. ``/changes.atom`` is the same list as an Atom feed (RFC 4287) of the
newest page (``_size`` entries, default 100): each entry's id is
``urn:proton-survey:change:<report sha256>:<backend>:<mode>``, stable across stores
and republishing, its link the cell's ``/history``; links are relative to the feed.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any
from urllib.parse import urlencode
from xml.etree import ElementTree as ET

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from api import cache as cache_mod
from api import formats, pages
from api.cache import Entry
from api.errors import ApiError
from api.formats import Resource
from api.schemas import ERRORS
from survey.verdicts import changes as changes_mod

ATOM = "application/atom+xml; charset=utf-8"
Since = Annotated[str, Query(description="only changes by runs stored at or after this RFC 3339 date (its midnight, "
                                         "UTC) or date-time (empty: any)",
                             json_schema_extra={"maxLength": 40, "anyOf": [{"maxLength": 0}, {"format": "date"},
                                                                           {"format": "date-time"}]})]
ATOM_NS = "http://www.w3.org/2005/Atom"
SCOPES = ("catalog", "all")
Kind = Annotated[str, Query(description="only this kind of change (empty: every kind)",
                            json_schema_extra={"enum": ["", *changes_mod.KINDS]})]
Scope = Annotated[str, Query(description="catalog: the published candidates; all: ad-hoc ones too",
                             json_schema_extra={"enum": list(SCOPES)})]


def _since(text: str) -> dt.datetime | None:
    if not text:
        return None
    try:
        return changes_mod.parse_since(text)
    except ValueError:
        raise ApiError(422, "invalid_input", f"since: {text[:60]!r} is not an RFC 3339 date or date-time "
                       "(2026-12-01, 2026-12-01T12:00:00Z)", field="since")


def _check(kind: str, scope: str) -> None:
    if kind and kind not in changes_mod.KINDS:
        raise ApiError(422, "invalid_input", f"kind: {kind[:40]!r} is not one of {', '.join(changes_mod.KINDS)}",
                       field="kind")
    if scope not in SCOPES:
        raise ApiError(422, "invalid_input", f"scope: {scope[:40]!r} is not one of {', '.join(SCOPES)}",
                       field="scope")


def _all(store: Any, scope: str) -> list[dict[str, Any]]:
    with store.session() as s:
        return changes_mod.changes(s, scope=scope)


def _select(found: list[dict[str, Any]], kind: str, since: dt.datetime | None) -> list[dict[str, Any]]:
    out = found
    if kind:
        out = [e for e in out if e["kind"] == kind]
    if since is not None:
        out = [e for e in out if e["date"] is not None and changes_mod.parse_since(e["date"]) >= since]
    return out


def _atom_time(text: str | None) -> str:
    value = changes_mod.parse_since(text) if text else dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def atom(entries: list[dict[str, Any]], *, self_url: str, version_date: str | None) -> bytes:
    """The entries as an Atom 1.0 feed."""
    ET.register_namespace("", ATOM_NS)

    def sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
        el = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", attrs)
        if text is not None:
            el.text = text
        return el

    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    sub(feed, "id", "urn:proton-survey:changes")
    sub(feed, "title", "proton-survey: what changed")
    sub(feed, "subtitle", "Each Proton backend and mode whose answer moved between consecutive runs of a "
                          "candidate, and each a run answered first")
    sub(feed, "updated", _atom_time(entries[0]["date"] if entries else version_date))
    sub(feed, "link", rel="self", href=self_url, type="application/atom+xml")
    sub(feed, "link", rel="alternate", href="/changes", type="text/html")
    author = sub(feed, "author")
    sub(author, "name", "proton-survey")
    sub(feed, "generator", "proton-survey")
    for e in entries:
        entry = sub(feed, "entry")
        digest = e.get("report_sha256") or f"run-{e['run_id']}"
        sub(entry, "id", f"urn:proton-survey:change:{digest}:{e['backend']}:{e['mode']}")
        sub(entry, "title", changes_mod.summary(e))
        sub(entry, "updated", _atom_time(e["date"]))
        sub(entry, "link", rel="alternate", href=e["history"], type="text/html")
        sub(entry, "link", rel="related", href=e["evidence"], type="text/html")
        sub(entry, "category", term=e["kind"])
        lines = [f"{e['label']} ({e['candidate']}) on {e['platform'] or 'platform not recorded'}: "
                 f"{e['backend']} {e['mode']}"]
        for side, run_key in (("before", "previous_run_id"), ("after", "run_id")):
            said = e[side]
            run = f"run #{e[run_key]}" if e[run_key] is not None else "no earlier run"
            lines.append(f"{side} ({run}): " + (f"{said['verdict']} ({said['outcome']}): {said['reason']}"
                                                 if said else "not checked"))
        sub(entry, "content", "\n".join(lines), type="text")
    return ('<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="unicode")).encode("utf-8")


def _entry(request: Request, fmt: str, rows: list[dict[str, Any]], kind: str, since: str, scope: str, size: int,
           start: int, version: str) -> Entry:
    page = pages.offset_page(request, rows, size, start)
    if fmt == "atom":
        stamp = None
        try:
            stamp = dt.datetime.fromtimestamp(float(version), dt.UTC).isoformat()
        except ValueError:
            pass
        return Entry.of(atom(page.rows, self_url=pages.url_with(request), version_date=stamp), ATOM,
                        page.headers())
    data = {"kind": kind or None, "since": since or None, "scope": scope, "total": page.total, "next": page.next,
            "next_url": page.next_url, "changes": page.rows}
    feed = urlencode([(k, v) for k, v in (("kind", kind), ("since", since)) if v]
                     + ([("scope", scope)] if scope != "catalog" else []))
    ctx = {"title": "What changed", "changes": data, "page": page, "kinds": changes_mod.KINDS,
           "atom": "/changes.atom" + (f"?{feed}" if feed else "")}
    flat = [changes_mod.row(e) for e in page.rows]
    res = Resource(data, "changes.html", ctx, rows=flat, columns=changes_mod.COLUMNS, headers=page.headers())
    return Entry.of(formats.body(res, fmt, request), formats.MEDIA_TYPES[fmt], page.headers())


async def changes_view(
    request: Request,
    fmt: str,
    kind: Kind = "",
    since: Since = "",
    scope: Scope = "catalog",
    size: pages.Size = pages.DEFAULT_SIZE,
    start: pages.Offset = 0,
    if_none_match: cache_mod.IfNoneMatch = None,
) -> Any:
    _check(kind, scope)
    when = _since(since)
    store = request.app.state.store
    version = await cache_mod.version(request)
    key = ("changes", fmt, kind, since, scope, size, start)
    entry = request.app.state.matrix_cache.get(version, key)
    if entry is None:
        found = await cache_mod.memo(request, version, ("changes rows", scope), lambda: _all(store, scope))
        rows = _select(found, kind, when)
        entry = await cache_mod.memo(request, version, key,
                                     lambda: _entry(request, fmt, rows, kind, since, scope, size, start, version))
    return cache_mod.answer(request, version, entry, if_none_match)


async def changes_atom(
    request: Request,
    kind: Kind = "",
    since: Since = "",
    scope: Scope = "catalog",
    size: pages.Size = pages.DEFAULT_SIZE,
    start: pages.Offset = 0,
    if_none_match: cache_mod.IfNoneMatch = None,
) -> Response:
    out: Response = await changes_view(request, "atom", kind, since, scope, size, start, if_none_match)
    return out


def routes(router: APIRouter) -> None:
    router.add_api_route(
        "/changes.atom", changes_atom, methods=["GET"], name="changes_atom", response_class=Response,
        summary="What changed, as an Atom feed (the newest page)",
        responses={200: {"description": "an Atom 1.0 feed", "content": {"application/atom+xml": {
            "schema": {"type": "string"}}}}, 422: ERRORS[422],
            304: {"description": "If-None-Match matched: unchanged"}},
    )
    formats.add_resource(
        router, "/changes", changes_view, name="changes",
        summary="What changed: each candidate x platform x backend x mode whose answer moved between consecutive "
                "runs, or that a run answered first; newest first (paginated)",
        errors={422: ERRORS[422], 304: {"description": "If-None-Match matched: unchanged"}},
        descriptions={"csv": "the changes as CSV", "md": "the changes as Markdown"},
    )
