"""The service called as a client calls it: over HTTP (httpx through the ASGI
transport, or the real app under uvicorn on loopback: :class:`Server`), the shared
error format, the text a person sees in a page and its links. The fixtures
that make clients (``portal``, ``make_client``, ``client``) are in tests/conftest.py."""

from __future__ import annotations

import functools
import socket
import threading
import time
from html.parser import HTMLParser
from typing import Any

import httpx
import uvicorn

TOKEN = "s3cret-token"


class Client:
    """Sync calls into an async httpx client over the app (anyio portal), within the app's
    lifespan as a server runs it: :meth:`close` ends it (and the store pool's threads)."""

    def __init__(self, portal: Any, app: Any):
        self.portal = portal
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")
        self._lifespan = portal.wrap_async_context_manager(app.router.lifespan_context(app))
        self._lifespan.__enter__()

    def close(self) -> None:
        self.portal.call(self.http.aclose)
        self._lifespan.__exit__(None, None, None)

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return self.portal.call(functools.partial(self.http.request, method, url, **kw))

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def upload(self, body: Any, token: str | None = TOKEN, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return self.request("POST", "/runs", content=body, headers=headers, **kw)


def assert_error(r: httpx.Response, status: int, code: str, field: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"status", "code", "message", "field", "hint"}
    assert err["status"] == status and err["code"] == code and err["field"] == field, err
    assert err["message"]
    return err


class Text(HTMLParser):
    """The text a person sees (entities decoded), and the matrix cells."""

    def __init__(self, html: str):
        super().__init__()
        self.parts: list[str] = []
        self.cells: list[dict[str, Any]] = []
        self.scripts = 0
        self._cell: dict[str, Any] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "td" and "cell" in (a.get("class") or "").split():
            self._cell = {"class": (a.get("class") or "").split(), "href": None, "text": "",
                          "colspan": int(a.get("colspan") or 1), "hrefs": [], "title": a.get("title") or ""}
            self.cells.append(self._cell)
        if tag == "a" and self._cell is not None:
            self._cell["hrefs"].append(a.get("href"))
            if self._cell["href"] is None:
                self._cell["href"] = a.get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        if self._cell is not None:
            self._cell["text"] += data

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


class Links(HTMLParser):
    """Every link of a page: the targets of its ``href`` and ``src`` attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [v for k, v in attrs if k in ("href", "src") and v]


class Server:
    """The real app under uvicorn on 127.0.0.1 (an ephemeral port), in a thread."""

    def __init__(self, app: Any):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.sock = sock
        self.server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)
        self.sock.close()

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)
