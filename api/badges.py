"""``/badge/{candidate}/{backend}/{mode}.svg`` and ``.json``: one matrix cell, embeddable.

The SVG is a flat two-part badge drawn here (no external service, no script); the
JSON is a shields.io *endpoint* document (``schemaVersion``, ``label``, ``message``,
``color``), so a docs page can show a live cell through shields.io. The message is
the cell in the words of every other surface (``survey.verdicts.vocabulary.say``:
"cannot run: runtime library missing here; supported by the build (stub-derived)"),
or "not measured"; where platforms disagree it says so, and ``?platform=KEY`` picks
one. Cached per matrix version.

Badges are images to embed, not API resources: they are left out of the OpenAPI
document (docs/service.md lists them).
"""

from __future__ import annotations

from html import escape
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from api import cache as cache_mod
from api.cache import Entry
from api.errors import ApiError
from api.shared import MODE_LABELS, one_of
from db import widths
from probes import outcomes as O
from survey.evidence import queries
from survey.verdicts import matrix as survey_matrix
from survey.verdicts import vocabulary

MIXED = ("#6a1b9a", "blueviolet")
NOT_MEASURED = ("#9e9e9e", "lightgrey")


def cell(store: Any, candidate: str, backend: str, mode: str, platform: str | None) -> dict[str, Any]:
    with store.session() as s:
        if candidate not in [c.name for c in queries.candidates(s)]:
            raise ApiError(404, "not_found", f"no candidate named {candidate!r} in the store", field="candidate")
        rows = [r for r in survey_matrix.matrix(s, backend=backend, mode=mode, candidate=candidate, scope="all")
                if platform is None or r.get("platform") == platform]
    said = {(r["here"], vocabulary.say(r)) for r in rows if vocabulary.term(r.get("here")) is not None}
    if not said:
        message, (hexc, shields) = "not measured", NOT_MEASURED
    elif len(said) == 1:
        here, message = next(iter(said))
        t = vocabulary.HERE[here]
        hexc, shields = t.hex, t.shields
    else:
        message, (hexc, shields) = "differs by platform", MIXED
    return {"schemaVersion": 1, "label": f"{backend} {mode}", "message": message, "color": shields,
            "hex": hexc, "platforms": sorted({r["platform"] for r in rows if r.get("platform")})}


def svg(label: str, message: str, color: str) -> bytes:
    lw, mw = 7 * len(label) + 12, 7 * len(message) + 12
    w = lw + mw
    text = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="20" role="img" '
            f'aria-label="{escape(label)}: {escape(message)}"><title>{escape(label)}: {escape(message)}</title>'
            f'<rect width="{lw}" height="20" fill="#555"/><rect x="{lw}" width="{mw}" height="20" fill="{color}"/>'
            f'<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11" text-anchor="middle">'
            f'<text x="{lw / 2}" y="14">{escape(label)}</text><text x="{lw + mw / 2}" y="14">{escape(message)}</text>'
            "</g></svg>")
    return text.encode("utf-8")


async def badge(
    request: Request,
    rest: str,
    platform: Annotated[str, Query(description="only this platform's evidence (a key)",
                                   json_schema_extra={"maxLength": widths.PLATFORM_KEY})] = "",
    if_none_match: cache_mod.IfNoneMatch = None,
) -> Response:
    path, dot, fmt = rest.rpartition(".")
    parts = path.split("/")
    if not dot or fmt not in ("svg", "json") or len(parts) < 3:
        raise ApiError(404, "not_found", "a badge is /badge/{candidate}/{backend}/{mode}.svg (or .json)")
    candidate, backend, mode = "/".join(parts[:-2]), parts[-2], parts[-1]
    if backend not in O.BACKENDS:
        raise one_of("backend", backend, O.BACKENDS)
    if mode not in MODE_LABELS:
        raise one_of("mode", mode, MODE_LABELS)
    store = request.app.state.store
    version = await cache_mod.version(request)

    def build() -> Entry:
        c = cell(store, candidate, backend, mode, platform or None)
        if fmt == "json":
            body = {k: c[k] for k in ("schemaVersion", "label", "message", "color")}
            import json

            return Entry.of(json.dumps(body).encode(), "application/json")
        return Entry.of(svg(c["label"], c["message"], c["hex"]), "image/svg+xml")

    entry = await cache_mod.memo(request, version, ("badge", candidate, backend, mode, platform, fmt), build)
    return cache_mod.answer(request, version, entry, if_none_match)


def routes(router: APIRouter) -> None:
    router.add_api_route(
        "/badge/{rest:path}", badge, methods=["GET"], include_in_schema=False,
        summary="One matrix cell as a badge: /badge/{candidate}/{backend}/{mode}.svg, or .json (a shields.io "
                "endpoint document)",
        response_class=Response,
        responses={200: {"content": {"image/svg+xml": {}, "application/json": {}}, "description": "the badge"},
                   404: {"description": "no such candidate, or not a badge path"},
                   422: {"description": "no such backend or mode"}},
    )
