"""``survey serve`` under many connections from one address: the per-address limit.

Connections from one client address past ``--max-per-address`` are answered 503 and
closed at once, while another address (127.0.0.2: Linux routes all of 127/8 to
loopback) is still served. Every wait is bounded.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.store import Store
from tests.helpers.serve import Served, answer


@pytest.fixture
def limited(filled_store: Store, tmp_path: Path) -> Iterator[Served]:
    srv = Served(filled_store.url, tmp_path / "serve.log", "--max-per-address", "4",
                 "--max-connections", "50", "--header-timeout", "300")
    yield srv
    srv.stop()


def connect_from(port: int, source: str) -> socket.socket:
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    conn.settimeout(30)
    conn.bind((source, 0))
    conn.connect(("127.0.0.1", port))
    return conn


def test_one_address_cannot_take_every_connection(limited: Served) -> None:
    held = [connect_from(limited.port, "127.0.0.1") for _ in range(4)]
    try:
        for conn in held:  # each half-sent: it holds its place
            conn.sendall(b"GET /healthz HTTP/1.1\r\n")
        extra = connect_from(limited.port, "127.0.0.1")
        refused = answer(extra)
        assert refused.startswith(b"HTTP/1.1 503") and b"from your address" in refused, refused
        other = connect_from(limited.port, "127.0.0.2")
        other.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert answer(other).startswith(b"HTTP/1.1 200"), "another address was not served"
    finally:
        for conn in held:
            conn.close()
    deadline = time.monotonic() + 30
    while True:  # the places are given back as the server sees the connections close: served again
        again = connect_from(limited.port, "127.0.0.1")
        again.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        if answer(again).startswith(b"HTTP/1.1 200"):
            break
        assert time.monotonic() < deadline, "127.0.0.1 was not served again after its connections closed"
        time.sleep(0.2)
