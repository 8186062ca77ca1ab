"""``survey serve`` and ``survey publish``: the only commands that load the service (api/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from survey.cli.app import DbOpt, app, err, open_store
from survey.core.errors import InputError, StoreUnusable
from survey.render.escape import visible


@app.command()
def serve(
    db: DbOpt = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8000,
    workers: Annotated[int, typer.Option(help="processes serving the one port (a store file or PostgreSQL; each "
                                              "worker answers what the store holds now)")] = 1,
    max_connections: Annotated[int, typer.Option(
        help="connections open at once, per process; one more is answered 503 and closed")] = 1000,
    max_per_address: Annotated[int, typer.Option(
        help="connections open at once from one client address, per process; one more is answered 503 and closed "
             "(behind a reverse proxy, every connection is the proxy's: raise it to --max-connections)")] = 100,
    header_timeout: Annotated[float, typer.Option(
        help="seconds a request's head (its line and header fields) may take to arrive; then 408")] = 10.0,
) -> None:
    """Serve the matrix and the evidence over HTTP (FastAPI, uvicorn)."""
    from sqlalchemy.engine import make_url

    from api import serve as serving
    from api.httpguard import Limits
    from db.store import Store
    from survey.verdicts import summary

    serving.check_port(port)  # exit 64; a port in use: exit 69 (api.serve); --workers outside 1-64: 64

    def existing() -> Store:
        """The store to serve. A missing file is an error (a mistyped --db is not a new store);
        an in-memory database is new by nature (api.serve refuses it to several workers)."""
        try:
            store = open_store(db, create=False)
        except StoreUnusable:
            if db is None or not db.startswith("sqlite") or make_url(db).database not in (None, "", ":memory:"):
                raise
            return open_store(db)
        store.read_each_table()  # a damaged store: one line and exit 65 now, not a 503 on every request
        summary.bring_current(store)  # a store of an older proton-survey: its cells stored once, now
        return store

    serving.serve(existing, host, port, workers,
                  Limits(header_timeout_s=header_timeout, max_connections=max_connections,
                         max_per_address=max_per_address),
                  say=lambda m: err.print(m, markup=False, highlight=False))


@app.command()
def publish(
    directory: Annotated[Path, typer.Argument(help="where to write the site: a new or empty directory")],
    force: Annotated[bool, typer.Option("--force", help="replace DIRECTORY whole even if it holds files")] = False,
    show_all: Annotated[bool, typer.Option("--all", help="also ad-hoc evidence (targets checked by path or image, "
                                                         "whose names hold this host's paths)")] = False,
    db: DbOpt = None,
) -> None:
    """Write the matrix, candidates and runs (the catalog's) as static files any static host can serve."""
    from api.publish import publish as publish_site

    store = open_store(db, create=False)
    try:
        res = publish_site(store, directory, "all" if show_all else "catalog", force=force)
    except OSError as e:
        raise InputError(f"{visible(str(directory))}: cannot write the site there: {e.strerror or e}")
    err.print(f"{visible(str(directory))}: {res.pages} files, {res.bytes / 1e6:.1f} MB"
              + (f"; not published: {', '.join(res.skipped[:5])}" if res.skipped else ""), markup=False)
    if res.dead:  # a page links to what the site does not hold: a defect of the pages, said plainly
        err.print(f"warning: {len(res.dead)} links name no published file: {', '.join(res.dead[:5])}",
                  markup=False)
