"""Pages of list resources, datasette style.

``?_size=N`` rows per page (default :data:`DEFAULT_SIZE`, at most
:data:`MAX_SIZE`); each page names the next one: ``next`` (the value of
``_next``) and ``next_url`` in JSON, a ``Link: <...>; rel="next"`` header in
every format, and a "Next page" link on HTML pages. What ``_next`` holds depends
on the list (an offset into the candidates, the run id to continue below); a
client follows ``next_url`` and need not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import Query, Request

DEFAULT_SIZE = 100
MAX_SIZE = 1000

Size = Annotated[int, Query(alias="_size", ge=1, le=MAX_SIZE,
                            description=f"rows per page (default {DEFAULT_SIZE}, at most {MAX_SIZE})")]
MAX_OFFSET = 10**12  # past any store's rows, within every store's integer (PostgreSQL's OFFSET is a bigint)
Offset = Annotated[int, Query(alias="_next", ge=0, le=MAX_OFFSET,
                              description="where the page starts (an offset): the `next` of the previous page")]


@dataclass
class Page:
    rows: list[Any]
    total: int
    next: int | None
    next_url: str | None

    def headers(self) -> dict[str, str]:
        return {"Link": f'<{self.next_url}>; rel="next"'} if self.next_url else {}


def url_with(request: Request, **params: Any) -> str:
    """This request's path and query with ``params`` set (the path as the client wrote it)."""
    path = quote(request.scope["path"], safe="/:@")
    pairs = [(k, v) for k, v in request.query_params.multi_items() if k not in params]
    pairs += [(k, str(v)) for k, v in params.items() if v is not None]
    return path + ("?" + urlencode(pairs) if pairs else "")


def offset_page(request: Request, rows: list[Any], size: int, start: int) -> Page:
    """``rows[start:start+size]``; ``_next`` is the offset of the next page."""
    chunk = rows[start:start + size]
    nxt = start + size if start + size < len(rows) else None
    return Page(chunk, len(rows), nxt, url_with(request, _size=size, _next=nxt) if nxt is not None else None)


def page_after(request: Request, rows: list[Any], size: int, total: int, key: str) -> Page:
    """``rows`` is up to ``size + 1`` rows in order; ``_next`` is the ``key`` of the last one shown."""
    chunk = rows[:size]
    nxt = chunk[-1][key] if len(rows) > size and chunk else None
    return Page(chunk, total, nxt, url_with(request, _size=size, _next=nxt) if nxt is not None else None)
