"""One URL per resource, many formats (datasette's convention).

The bare path is the HTML page; the same path with ``.json``, ``.csv`` or ``.md``
is that format. A view computes a :class:`Resource` once; :func:`respond` turns
it into the format asked for. CSV and Markdown go through the renderers of
``survey.render.table.RENDERERS``, the ones the CLI prints with: CSV cells that a
spreadsheet would read as a formula are neutralised and Markdown cells carry no
HTML or link; JSON is ``survey.render.escape.json_text``. Markdown tables are cut
to :data:`api.clip.ROWS` rows of :data:`api.clip.CELL`-character cells, with a
line saying where the whole is; JSON and CSV are never cut.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import Response

from api import clip, render
from api.middleware import HTML_HEADERS
from survey.render import escape
from survey.render import table as table_mod

HTML = "html"
SUFFIXES = ("json", "csv", "md")
MEDIA_TYPES = {"html": "text/html; charset=utf-8", **{k: r.media_type for k, r in table_mod.RENDERERS.items()}}
# Paths that only ever answer JSON (errors there are JSON too).
JSON_ONLY = ("/healthz", "/schema.json", "/openapi.json", "/runs", "/changes.atom")
# No script runs on our pages, from anywhere (api.middleware adds these to every HTML answer).
HTML_SECURITY = HTML_HEADERS


def wants_html(request: Request) -> bool:
    """Is this request for an HTML page (a bare path read by a person)?"""
    path = request.url.path
    if request.method not in ("GET", "HEAD") or path in JSON_ONLY:
        return False
    last = path.rsplit("/", 1)[-1]
    return not any(last.endswith("." + s) for s in SUFFIXES)


def json_bytes(data: Any) -> bytes:
    """Compact JSON: never larger than a constant times the data (indenting deep nesting is quadratic)."""
    return escape.json_text(data).encode("utf-8") + b"\n"


def html_response(text: str, *, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(text.encode("utf-8"), status_code=status, media_type=MEDIA_TYPES["html"],
                    headers={**HTML_SECURITY, **(headers or {})})


@dataclass
class Resource:
    """What one view found: the JSON body, the table that .csv/.md render, and
    the template (with its context) of the HTML page."""

    data: Any
    template: str
    context: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] | None = None
    columns: list[str] | None = None
    text: dict[str, str] = field(default_factory=dict)  # a format's body given verbatim (e.g. matrix.md)
    status: int = 200
    whole: str | None = None  # where a cut Markdown table is whole (default: the same path as .json)
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Link: <...>; rel="next"
    cut_cells: bool = True  # False: a Markdown cell is never cut (a one-row answer, bounded by its own size)


def body(res: Resource, fmt: str, request: Request | None = None) -> bytes:
    if fmt in res.text:
        return res.text[fmt].encode("utf-8")
    if fmt == "json":
        return json_bytes(res.data)
    if fmt == "csv":
        rows = res.rows or []
        columns = res.columns or (list(rows[0]) if rows else [])
        return table_mod.render(rows, columns, fmt).encode("utf-8")
    if fmt == "md":
        rows = res.rows or []
        columns = res.columns or (list(rows[0]) if rows else [])
        cut = len(rows) > clip.ROWS
        flat = []
        for r in rows[:clip.ROWS]:
            cells = {c: table_mod.flat(r.get(c)) for c in columns}
            if res.cut_cells:
                cut = cut or any(isinstance(v, str) and len(v) > clip.CELL for v in cells.values())
                cells = {c: clip.cell(v) for c, v in cells.items()}
            flat.append(cells)
        text = table_mod.render(flat, columns, fmt)
        if cut:
            whole = res.whole or (_json_path(request) if request is not None else "the .json of this resource")
            text += (f"\nThis table was truncated (at most {clip.ROWS} rows of {clip.CELL}-character cells); "
                     f"the whole evidence: {whole}\n")
        return text.encode("utf-8")
    ctx = dict(res.context)
    if request is not None:
        ctx.setdefault("formats", format_links(request))
        ctx.setdefault("site", site_of(request))
    return render.page(res.template, ctx).encode("utf-8")


def site_of(request: Request) -> str | None:
    """The scope of the static site being published (api.publish), or None: the service."""
    return getattr(request.app.state, "site", None)


def _json_path(request: Request) -> str:
    """The .json of the resource asked for, with the same query (it answers the same question)."""
    path = quote(request.scope["path"], safe="/:@")
    path = path[: -len(".md")] + ".json" if path.endswith(".md") else path + ".json"
    return path + (f"?{request.url.query}" if request.url.query else "")


def respond(request: Request, res: Resource, fmt: str) -> Response:
    headers = {**(HTML_SECURITY if fmt == HTML else {}), **res.headers}
    return Response(body(res, fmt, request), status_code=res.status, media_type=MEDIA_TYPES[fmt], headers=headers)


def format_links(request: Request) -> dict[str, str]:
    """The other formats of the page being rendered (same query string)."""
    path = quote(request.scope["path"], safe="/:@")  # the decoded path (a candidate name may hold '?' or '%')
    query = "" if site_of(request) else request.url.query  # a static site answers no query
    out = {}
    for s in SUFFIXES:
        out[s] = f"{path}.{s}" + (f"?{query}" if query else "")
    return out


# ------------------------------------------------------------------ routing
FORMAT_DOC = {
    "json": ("application/json", "the resource as JSON"),
    "csv": ("text/csv", "the resource's table as CSV"),
    "md": ("text/markdown", "the resource's table as Markdown"),
}


def add_resource(
    router: APIRouter,
    path: str,
    view: Callable[..., Any],
    *,
    name: str,
    summary: str,
    formats: tuple[str, ...] = SUFFIXES,
    json_model: Any = None,
    errors: dict[int | str, dict[str, Any]] | None = None,
    descriptions: dict[str, str] | None = None,
    required: tuple[str, ...] = (),
    drop: dict[str, tuple[str, ...]] | None = None,
) -> None:
    """Route ``path`` (HTML) and ``path.<fmt>`` for each format to ``view``.

    ``view(request, fmt, **params)`` returns a :class:`Resource` (or a Response);
    its other parameters (query and path) are declared on the view and appear in
    OpenAPI for the non-HTML routes. The suffixed routes are added first, so a
    path parameter never swallows the suffix. ``required``: parameters that the
    non-HTML formats require (the HTML page shows an empty form without them).
    ``drop``: per format, parameters it does not take (the view gets their default).
    """
    sig = inspect.signature(view, eval_str=True)
    is_async = inspect.iscoroutinefunction(view)

    for fmt in (*formats, HTML):
        params = []
        for n, p in sig.parameters.items():
            if n == "fmt" or n in (drop or {}).get(fmt, ()):
                continue
            if fmt != HTML and n in required:
                p = p.replace(default=inspect.Parameter.empty)
            params.append(p)
        params.sort(key=lambda p: p.default is not inspect.Parameter.empty)  # required ones first
        endpoint = _endpoint(view, fmt, is_async)
        endpoint.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        endpoint.__name__ = f"{name}_{fmt}"
        route = path if fmt == HTML else f"{path}.{fmt}"
        responses: dict[int | str, dict[str, Any]] = dict(errors or {})
        if fmt == "json":
            ok: dict[str, Any] = {"description": (descriptions or {}).get(fmt, FORMAT_DOC[fmt][1])}
            if json_model is not None:
                ok["model"] = json_model
            responses[200] = ok
        elif fmt != HTML:
            responses[200] = {"description": (descriptions or {}).get(fmt, FORMAT_DOC[fmt][1]),
                              "content": {FORMAT_DOC[fmt][0]: {"schema": {"type": "string"}}}}
        router.add_api_route(
            route, endpoint, methods=["GET"], name=f"{name}_{fmt}", include_in_schema=fmt != HTML,
            summary=f"{summary} ({fmt})", response_model=None, responses=responses,
            response_class=Response,
        )


def _endpoint(view: Callable[..., Any], fmt: str, is_async: bool) -> Callable[..., Any]:
    if is_async:
        async def endpoint_async(request: Request, **kwargs: Any) -> Response:
            out = await view(request=request, fmt=fmt, **kwargs)
            return out if isinstance(out, Response) else respond(request, out, fmt)

        return endpoint_async

    async def endpoint(request: Request, **kwargs: Any) -> Response:
        def answer() -> Response:
            out = view(request=request, fmt=fmt, **kwargs)
            return out if isinstance(out, Response) else respond(request, out, fmt)

        # a view that is not async reads the store itself: it runs in the store pool (api.pool)
        return await request.app.state.pool.run(answer)  # type: ignore[no-any-return]

    return endpoint
