"""Filing a report made elsewhere (``survey ingest``, ``POST /runs``) under a candidate.

The rules that keep a published row the catalog's:

- A catalog name files the report under that catalog entry: label, kind, spec and
  position come from the catalog, never from the caller, also into a store that has
  never seen the entry (it is published at once). The report must have measured what
  the entry pins (``evidence.ingest.check_matches_candidate``): a 3.7.1 report is not
  filed as ``triton-3.8.0``.
- An ingest never gives a catalog candidate a label.
- A name that is neither in the catalog nor stored is created only when asked
  (``new``), so a typo is not a new candidate; the nearest known name is suggested.
- No name: the report's own origin names an ad-hoc candidate, as before.
"""

from __future__ import annotations

import difflib
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from survey.core import collector
from survey.core.errors import InputError, InvalidReport, UsageProblem
from survey.environments.catalog import Catalog
from survey.evidence import queries
from survey.evidence.ingest import Filing, Identified, IngestResult, filing_of, identify, ingest_many
from survey.evidence.report import MAX_REPORT_BYTES_ENV


def _filing_args(s: Session | None, candidate: str | None, label: str | None, new: bool,
                 catalog: Catalog) -> dict[str, Any]:
    """The candidate arguments of ``ingest`` for a report filed under ``candidate`` (the rules above);
    ``s`` (None only with ``new``) is read to look a name up when it may not be new."""
    if candidate is not None:
        entry = catalog.get(candidate)
        if entry is not None:
            if label is not None:
                raise UsageProblem(f"label: {candidate!r} is a catalog candidate, whose label comes from the catalog "
                                   f"({entry.display_label!r})", field="label",
                                   hint="leave the label out, or file the report under a candidate of your own")
            return {"candidate": entry.name, "label": entry.display_label, "kind": entry.kind, "spec": entry.spec(),
                    "position": catalog.names().index(entry.name), "scope": "catalog"}
        if not new:
            assert s is not None, "a name that may not be new is looked up in the store"
            if queries.find_candidate(s, candidate) is None:
                known = catalog.names() + [c.name for c in queries.candidates(s)]
                near = difflib.get_close_matches(candidate, known, n=1)
                guess = f"; did you mean {near[0]!r}?" if near else ""
                raise UsageProblem(f"no candidate {candidate!r} in the catalog or the store{guess}",
                                   field="candidate", hint="to file it under a new candidate of that name, add --new")
    return {"candidate": candidate, "label": label}


def new_filing(ident: Identified, *, candidate: str | None, label: str | None, catalog: Catalog) -> Filing:
    """Where an upload files a report (the rules above; a name given over HTTP is asked for, so
    it may be new), worked out before the store is touched."""
    return filing_of(ident, **_filing_args(None, candidate, label, True, catalog))


def file_reports(s: Session, idents: list[Identified], *, candidate: str | None, label: str | None, new: bool,
                 catalog: Catalog, source: str,
                 on_batch: Callable[[list[IngestResult]], None] | None = None) -> list[IngestResult]:
    """Many reports, read and identified already, filed by the rules above, in batched
    transactions (``survey.evidence.ingest.ingest_many``)."""
    args = _filing_args(s, candidate, label, new, catalog)
    items = [(ident, filing_of(ident, **args)) for ident in idents]
    return ingest_many(s, items, source=source, on_batch=on_batch)


# reports: fewer are identified in this process; more in processes of their own, one per core,
# forked from a server process started for them (never from this one, which may hold threads)
POOL_FROM = 400


def read_reports(reports: list[Path], limit: int, processes: int | None = None,
                 pool_from: int = POOL_FROM) -> tuple[list[Path], list[Identified]]:
    """Every report named (a directory: its ``*.json`` files), each read (at most ``limit``
    bytes), checked and identified before anything is stored: the files, and what each is.
    ``pool_from`` reports or more are identified by ``processes`` processes (default:
    one per core); the first file in order that is not a report is named, as when one
    process reads them all."""
    paths: list[Path] = []
    for path in reports:
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json") if p.is_file())
            if not found:
                raise InputError(f"{path}: a directory with no *.json report in it", hint="nothing was stored")
            paths += found
        else:
            paths.append(path)
    processes = processes or os.cpu_count() or 1
    if processes >= 2 and len(paths) >= pool_from:
        try:
            return paths, _pooled(paths, limit, processes)
        except (OSError, BrokenProcessPool):  # no pool here (no /dev/shm, a process killed): read them here
            pass
    return paths, [_raise(read_one(str(p), limit)) for p in paths]


def _pooled(paths: list[Path], limit: int, processes: int) -> list[Identified]:
    with pool_of(processes) as pool:
        try:
            return [_raise(res) for res in pool.map(read_one, map(str, paths), [limit] * len(paths), chunksize=16)]
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def pool_of(processes: int) -> ProcessPoolExecutor:
    """The processes that identify reports: forked from a server process that imported this
    module, each set up by :func:`_worker_start`."""
    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                          else "spawn")
    if context.get_start_method() == "forkserver":
        context.set_forkserver_preload([__name__])  # what a pool process runs, imported once
    return ProcessPoolExecutor(processes, mp_context=context, initializer=_worker_start)


@dataclass(frozen=True)
class Unread:
    """Why a file is not a report: what :func:`read_reports` raises, as plain values a
    process of the pool can send back (an exception's own fields would not survive it)."""

    kind: str  # "input" (InputError) | "invalid" (InvalidReport)
    message: str
    field: str | None = None
    hint: str | None = None


def read_one(path: str, limit: int) -> Identified | Unread:
    """One file read (at most ``limit`` bytes) and identified, or why it is not a report."""
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as e:
        return Unread("input", f"{path}: {e.strerror}")
    if len(raw) > limit:
        return Unread("invalid", f"{path}: a report may be at most {limit} bytes", "body",
                      f"nothing was stored; the limit is {MAX_REPORT_BYTES_ENV}, as for uploads")
    try:
        return identify(raw, exact=True)
    except InputError as e:
        return Unread("invalid" if isinstance(e, InvalidReport) else "input", f"{path}: {e.message}", e.field,
                      "nothing was stored")


def _raise(res: Identified | Unread) -> Identified:
    if isinstance(res, Unread):
        raise (InvalidReport if res.kind == "invalid" else InputError)(res.message, field=res.field, hint=res.hint)
    return res


def _worker_start() -> None:
    """A pool process leaves Ctrl-C to the command, which stops the pool, and collects its
    garbage as the command does (``survey.core.collector``: with the default thresholds a
    report took 1.9 ms of a pool process's time, where the command takes 1.5)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    collector.tune()
