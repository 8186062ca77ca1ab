"""What ``survey serve`` runs: check the address, bind it, serve with uvicorn.

The socket is bound here, before uvicorn starts, so that a port that cannot be
is a one-line error with an exit code instead of uvicorn's log and exit 3:

- a port outside 1-65535, or a host that does not resolve: usage (64);
- a port in use, or an address that cannot be bound here: unavailable
  (69, EX_UNAVAILABLE).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable

from db.store import Store
from survey import exitcodes
from survey.errors import SurveyError

UNAVAILABLE = exitcodes.ENGINE_UNAVAILABLE  # 69, EX_UNAVAILABLE: something this needs is not available here


class BadAddress(SurveyError):
    exit_code = exitcodes.USAGE


class AddressUnavailable(SurveyError):
    exit_code = UNAVAILABLE


def check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise BadAddress(f"--port {port}: not a TCP port (1-65535)")


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket on (host, port), or a one-line error."""
    check_port(port)
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise BadAddress(f"--host {host}: cannot be resolved ({getattr(e, 'strerror', None) or e})")
    family, kind, proto, _name, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(addr)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise AddressUnavailable(f"cannot listen on {shown}: the port is in use (another server is running "
                                     f"there; pick another with --port)")
        raise AddressUnavailable(f"cannot listen on {shown}: {e.strerror or e}")
    return sock


def serve(open_store: Callable[[], Store], host: str, port: int) -> None:
    """Bind (host, port) first - the cheap check - then open the store and serve."""
    import uvicorn

    from api.app import create_app

    sock = bind(host, port)
    try:
        config = uvicorn.Config(create_app(open_store()), host=host, port=port, log_level="info")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
