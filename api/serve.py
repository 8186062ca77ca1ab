"""What ``survey serve`` runs: check the address, bind it, serve with uvicorn.

The socket is bound here, before uvicorn starts, so that a port that cannot be
is a one-line error with an exit code instead of uvicorn's log and exit 3:

- a port outside 1-65535, or a host that does not resolve: usage (64);
- a port in use, or an address that cannot be bound here: unavailable
  (69, EX_UNAVAILABLE).

``--workers N`` (N > 1) serves from N processes on the one socket (uvicorn's
supervisor; each worker restarted if it dies). A worker dies with its supervisor:
it asks the kernel for SIGTERM when its parent goes (``PR_SET_PDEATHSIG``) and
also watches its parent's pid, so no worker goes on serving, unsupervised, on the
port after the supervisor was killed.

Every process holds connections to :mod:`api.httpguard`'s limits: a request head
must arrive within ``--header-timeout`` seconds and hold at most 64 KiB and 100
fields; at most ``--max-connections`` connections are open at once (per process). Every worker opens the store the
parent opened and keeps its own per-version cache: the matrix version is read from
the store on every request, so evidence stored through one worker is what all of
them answer with next. A store in this process's memory cannot be shared: usage (64).
"""

from __future__ import annotations

import asyncio
import errno
import gc
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from api.httpguard import DEFAULT, LIMITS_ATTR, GuardedH11Protocol, Limits
from db.store import Store, StoreError
from survey.core import collector, exitcodes
from survey.core.errors import SurveyError, UsageProblem
from survey.core.lifetime import GRACEFUL_S, die_with
from survey.flows import writer

UNAVAILABLE = exitcodes.ENGINE_UNAVAILABLE  # 69, EX_UNAVAILABLE: something this needs is not available here


class BadAddress(SurveyError):
    exit_code = exitcodes.USAGE


class AddressUnavailable(SurveyError):
    exit_code = UNAVAILABLE


WORKER_STORE_ENV = "SURVEY_SERVE_WORKER_STORE"  # the store's URL, handed from the parent to its workers
SUPERVISOR_ENV = "SURVEY_SERVE_SUPERVISOR"  # the supervisor's pid: a worker dies with it
MAX_WORKERS = 64


def check_workers(workers: int) -> None:
    if not 1 <= workers <= MAX_WORKERS:
        raise UsageProblem(f"--workers {workers}: between 1 and {MAX_WORKERS}")


def in_memory(store: Store) -> bool:
    url = store.engine.url
    database = url.database or ""
    return url.get_backend_name() == "sqlite" and (database in ("", ":memory:") or "mode=memory" in database
                                                   or "mode=memory" in str(url.query))


def worker_app() -> Any:
    """One worker's service (``--workers N``): its own connections to the parent's store."""
    if os.environ.get(SUPERVISOR_ENV):
        die_with(int(os.environ[SUPERVISOR_ENV]))
    return serving_app(Store(os.environ[WORKER_STORE_ENV], create=False), os.environ.get(writer.ADDRESS_ENV))


def serving_app(store: Store, own_writer: writer.WriterProcess | str | None = None) -> Any:
    """The app a server process serves, the matrix's statements compiled
    (:func:`api.matrix.warm`), one request routed (:func:`_route_once`) and its startup's
    objects then frozen (``gc.freeze``):
    the modules, the app and the store's metadata live as long as the process, and a full
    collection that walks them all (about 130,000 objects) took 80-100 ms of whichever request
    it fell in, once in every nine or so uploads; frozen, 3 ms (bench/README.md)."""
    from sqlalchemy.exc import SQLAlchemyError

    from api import matrix
    from api.app import create_app

    app = create_app(store)
    try:
        matrix.warm(store)  # the first page's statements compiled before anyone asks for it
    except (SQLAlchemyError, OSError, StoreError):  # the store cannot answer now: the first request says why
        pass
    if own_writer is not None:  # uploads go to the store's writer process (survey.flows.writer)
        handle = own_writer if isinstance(own_writer, str) else own_writer.handle
        app.state.writer = writer.connect(store, handle)
    # in a thread of its own: a worker's app is made inside uvicorn's running event loop
    routed = threading.Thread(target=_route_once, args=(app,), name="route-once")
    routed.start()
    routed.join()
    collector.tune()  # a worker process starts without the CLI's main()
    gc.freeze()
    return app


def _route_once(app: Any) -> None:
    """``GET /healthz`` through the whole app, in process: FastAPI makes every route's
    parameter models on the first request it routes (220 pydantic type adapters), and anyio
    loads its asyncio backend when first used (about 80 ms together, that the first page a
    server gave paid and the next did not). ``/healthz`` asks nothing of the store and leaves
    nothing behind."""
    import anyio

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": "/healthz", "raw_path": b"/healthz", "query_string": b"",
             "root_path": "", "headers": [(b"host", b"localhost")], "client": ("127.0.0.1", 0),
             "server": ("127.0.0.1", 0), "state": {}}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:  # asked again: the request was read whole, so the client has gone (never a wait)
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    async def once() -> None:
        anyio.CapacityLimiter(1)  # anyio loads its asyncio backend when first used: the store pool's first call
        await app(scope, receive, send)

    try:
        asyncio.run(once())
    except Exception:  # noqa: BLE001 - a warm-up is no gate: the requests that come will say what is wrong
        pass


def uvicorn_config(app: Any, host: str, port: int, limits: Limits = DEFAULT, **kw: Any) -> Any:
    """uvicorn's configuration as ``survey serve`` runs it: h11 with :mod:`api.httpguard`'s limits."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="info", http=GuardedH11Protocol,
                            h11_max_incomplete_event_size=limits.max_header_bytes,
                            timeout_graceful_shutdown=GRACEFUL_S, **kw)
    setattr(config, LIMITS_ATTR, limits)
    return config


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


def check_limits(limits: Limits) -> None:
    if limits.max_connections < 1:
        raise UsageProblem(f"--max-connections {limits.max_connections}: at least 1")
    if limits.max_per_address < 1:
        raise UsageProblem(f"--max-per-address {limits.max_per_address}: at least 1")
    if not limits.header_timeout_s > 0:
        raise UsageProblem(f"--header-timeout {limits.header_timeout_s:g}: more than 0 seconds")


def url(host: str, port: int) -> str:
    """The address to open: ``http://127.0.0.1:8000/``, ``http://[::1]:8000/``."""
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(open_store: Callable[[], Store], host: str, port: int, workers: int = 1,
          limits: Limits = DEFAULT, say: Callable[[str], None] = lambda _m: None) -> None:
    """Bind (host, port) first - the cheap check - then open the store, listen, say
    where (``serving URL (store: ...)``) and serve. Connections that arrive before the
    app is up wait in the socket's backlog."""
    import uvicorn

    from db.store import shown

    check_workers(workers)
    check_limits(limits)
    sock = bind(host, port)
    try:
        store = open_store()  # created or migrated here, once, before any worker starts
        if workers > 1 and in_memory(store):
            raise UsageProblem(f"--workers {workers}: an in-memory store cannot be shared between processes; "
                               "give --db a file or a PostgreSQL URL")
        own_writer = None if store.read_only or in_memory(store) else writer.WriterProcess(store.url)
        sock.listen(2048)
        say(f"serving {url(host, port)} (store: {shown(store.url)})")
        try:
            if workers == 1:
                config = uvicorn_config(serving_app(store, own_writer), host, port, limits)
                uvicorn.Server(config).run(sockets=[sock])
                return
            os.environ[WORKER_STORE_ENV] = store.url
            os.environ[SUPERVISOR_ENV] = str(os.getpid())
            if own_writer is not None:
                os.environ[writer.ADDRESS_ENV] = own_writer.handle
            from uvicorn.supervisors import Multiprocess

            config = uvicorn_config("api.serve:worker_app", host, port, limits, factory=True, workers=workers)
            Multiprocess(config, sockets=[sock]).run()
        finally:
            if own_writer is not None:
                own_writer.stop()
    finally:
        sock.close()
