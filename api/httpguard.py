"""Limits on what a connection may hold before it is a request (``survey serve``).

uvicorn's h11 protocol with four additions, so that slow or bloated request heads
cannot hold the server's descriptors or memory:

- **header time**: a request's head (request line and header fields) must arrive
  within :attr:`Limits.header_timeout_s` of the connection opening, or of the
  previous response on a kept-alive connection; otherwise 408 and the connection is
  closed (a client sending one header byte every few seconds is cut off);
- **header size**: at most :attr:`Limits.max_header_bytes` for the whole head
  (h11's ``max_incomplete_event_size``): over it, 431 and closed;
- **header count**: at most :attr:`Limits.max_headers` fields: over it, 431 and closed;
- **connections**: at most :attr:`Limits.max_connections` open at once per process
  (partial ones included); one over it is answered 503 and closed at once, so
  idle or half-sent connections cannot take every descriptor;
- **connections per address**: at most :attr:`Limits.max_per_address` of them from
  one client address (default a tenth of the whole); one over it is answered 503 and
  closed at once, so one client cannot take every place (behind a reverse proxy every
  connection comes from the proxy: raise it to ``max_connections`` there).

Request bodies have their own deadline (``SURVEY_BODY_TIMEOUT``, :mod:`api.upload`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class Limits:
    header_timeout_s: float = 10.0
    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    max_connections: int = 1000
    max_per_address: int = 100


DEFAULT = Limits()
LIMITS_ATTR = "survey_limits"  # set on the uvicorn Config (it travels to --workers processes with it)

_PHRASES = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


def _plain(status: int, text: str) -> bytes:
    body = text.encode("ascii") + b"\n"
    return (b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n" % (status, _PHRASES[status], len(body))) + body


class _CountingConnection(h11.Connection):
    """h11's connection that also refuses a head with too many fields (431) and keeps
    the last error it raised, so the answer can carry its status."""

    max_headers = DEFAULT.max_headers
    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
            if isinstance(event, h11.Request) and len(event.headers) > self.max_headers:
                self._process_error(self.their_role)
                raise h11.RemoteProtocolError(f"more than {self.max_headers} header fields", error_status_hint=431)
        except h11.RemoteProtocolError as e:
            self.last_error = e
            raise
        return event


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the limits of :class:`Limits` (from the config)."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.limits: Limits = getattr(config, LIMITS_ATTR, None) or DEFAULT
        self.counting = _CountingConnection(h11.SERVER, self.limits.max_header_bytes)
        self.counting.max_headers = self.limits.max_headers
        self.conn = self.counting
        self._header_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ connections
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self.logger.warning("refused a connection: %d open (the limit is %d)", len(self.connections) - 1,
                                self.limits.max_connections)
            transport.write(_plain(503, f"too many connections (at most {self.limits.max_connections}); "
                                        "try again later"))
            transport.close()
            return
        host = self.client[0] if self.client else None
        if host is not None:
            same = sum(1 for c in self.connections if (getattr(c, "client", None) or ("",))[0] == host)
            if same > self.limits.max_per_address:
                self.logger.warning("refused a connection from %s: %d open from there (the limit is %d)", host,
                                    same - 1, self.limits.max_per_address)
                transport.write(_plain(503, f"too many connections from your address (at most "
                                            f"{self.limits.max_per_address}); try again later"))
                transport.close()
                return
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    # ------------------------------------------------------------ header time
    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._header_timeout)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return  # the head arrived (a body has its own deadline) or the connection is going anyway
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is being sent; its completion re-arms the timer
        self.logger.info("closed a connection whose request head did not arrive within %g s",
                         self.limits.header_timeout_s)
        self.transport.write(_plain(408, f"the request head did not arrive within {self.limits.header_timeout_s:g} s"))
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_header_timer()  # the head is in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_timer()  # the next request's head gets the same time

    # ------------------------------------------------------------ size and count
    def send_400_response(self, msg: str) -> None:
        error = self.counting.last_error
        if error is None or error.error_status_hint != 431:
            super().send_400_response(msg)
            return
        self.logger.warning("refused a request head: %s", error)
        text = (f"the request head is over {self.limits.max_header_bytes} bytes" if "buffer" in str(error)
                else f"the request head has more than {self.limits.max_headers} header fields")
        self.transport.write(_plain(431, text))
        self.transport.close()


__all__ = ["DEFAULT", "GuardedH11Protocol", "LIMITS_ATTR", "Limits"]
