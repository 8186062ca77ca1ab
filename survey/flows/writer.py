"""One process that writes a served store's uploads: the group commit
(``survey.flows.group_commit``) in a process of its own.

A server process runs an upload's HTTP layers, reads and checks its report (``identify``)
and writes it, all under one interpreter lock, so the write (a third to a half of an
upload's CPU, bench/README.md) and the rest take turns on one core while the other waits.
``survey serve`` therefore starts one writer process per store (:class:`WriterProcess`):
each serving process (one, or each of ``--workers N``) still reads and checks its uploads,
and hands each identified report to the writer (:class:`RemoteWriter`, the same
``store_report`` as :class:`~survey.flows.group_commit.GroupCommit`). The writer is one
loop (:func:`_serve`): it reads every report that has arrived, stores them together in one
transaction (``GroupCommit.write``: when that fails, each alone), answers each caller, and
reads again; what arrives meanwhile goes in the next group. SQLite has one writer at a time
anyway; with one writing process the uploads of every serving process join the same
groups, instead of each process's groups queueing on the store's lock.

What crosses between them is small: an identified report (its rows packed, about 5 KB),
a filing, and back an :class:`~survey.evidence.ingest.IngestResult` or the exception the
write raised (the same one a write in process would raise, so the upload's answer is the
same). They talk over a Unix socket in a private temporary directory, with a random key
(``multiprocessing.connection``: each side proves it holds the key before anything is read).

- The writer dies with the process that started it (``PR_SET_PDEATHSIG`` and a watch of
  its parent, as ``--workers`` do), and is stopped when ``survey serve`` ends.
- A writer that dies on its own is started again (:class:`WriterProcess`); the uploads it
  was writing fail with :class:`WriterGone` (503: it may not have been stored; send it
  again), and the next go to the new one.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import secrets
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from db.store import Store
from survey.core import exitcodes
from survey.core.errors import SurveyError
from survey.evidence.ingest import Filing, Identified, IngestResult
from survey.flows.group_commit import MOST, GroupCommit, Waiting

ADDRESS_ENV = "SURVEY_SERVE_WRITER"  # "path-of-the-socket key-in-hex": handed to the serving processes
START_TIMEOUT_S = 120.0
PROCESS_NAME = "survey-writer"  # what ps shows (/proc/PID/comm)
log = logging.getLogger("survey.writer")


class WriterGone(SurveyError):
    """The writer process has stopped, or did not start: this report was not stored by this
    call (one that was being written when it stopped may or may not be in the store)."""

    exit_code = exitcodes.ENGINE_UNAVAILABLE


class StoreReplacedMeanwhile(Exception):
    """The writer stored the report into a file that is no longer the store's (a file
    renamed over the store while it was written): not acknowledged."""


@dataclass
class _Call:
    done: threading.Event = field(default_factory=threading.Event)
    result: IngestResult | None = None
    error: BaseException | None = None


@dataclass
class _Link:
    """One connection to a writer process and the calls that wait on its answers."""

    conn: Connection
    calls: dict[int, _Call] = field(default_factory=dict)
    gone: str | None = None


class RemoteWriter:
    """A serving process's side: ``store_report`` sends the report to the writer process and
    returns once it is committed there (or raises what the write raised). When the writer
    has stopped, the next report connects again (``survey serve`` starts another at the
    same address) and is refused only if none listens."""

    def __init__(self, store: Store, address: str, authkey: bytes):
        self.store = store
        self._address, self._authkey = address, authkey
        self._guard = threading.Lock()  # guards _link and its calls
        self._send = threading.Lock()
        self._ids = itertools.count()
        self._link = self._connect()

    def _connect(self) -> _Link:
        try:
            conn = Client(self._address, family="AF_UNIX", authkey=self._authkey)
        except (OSError, EOFError, multiprocessing.AuthenticationError) as e:
            raise WriterGone(f"the store's writer process cannot be reached ({type(e).__name__}): "
                             "the report was not stored")
        link = _Link(conn)
        threading.Thread(target=self._answers, args=(link,), name="writer-answers", daemon=True).start()
        return link

    def store_report(self, ident: Identified, filing: Filing) -> IngestResult:
        call = _Call()
        with self._guard:
            if self._link.gone is not None:
                self._link = self._connect()  # a writer started again listens where the last one did
            link = self._link
            n = next(self._ids)
            link.calls[n] = call
        message = pickle.dumps((n, ident, filing), pickle.HIGHEST_PROTOCOL)
        try:
            with self._send:
                link.conn.send_bytes(message)
        except OSError:
            self._lost(link)
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def _answers(self, link: _Link) -> None:
        try:
            while True:
                n, ok, value = pickle.loads(link.conn.recv_bytes())
                with self._guard:
                    call = link.calls.pop(n)
                if ok:
                    call.result = value
                else:
                    call.error = value
                call.done.set()
        except (EOFError, OSError):
            self._lost(link)

    def _lost(self, link: _Link) -> None:
        with self._guard:
            link.gone = "the store's writer process stopped"
            calls, link.calls = list(link.calls.values()), {}
        link.conn.close()
        for call in calls:
            call.error = WriterGone("the store's writer process stopped while the report was being written: "
                                    "it may not have been stored")
            call.done.set()


def _picklable(e: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(e, pickle.HIGHEST_PROTOCOL))
        return e
    except Exception:  # noqa: BLE001 - an exception that cannot cross is named instead
        return RuntimeError(f"{type(e).__name__}: {e}")


class _FileWatch:
    """The store file as the writer opened it, and a connection certain to be that file's
    (SQLite: a pooled one may already be the file now at the path). When another file is
    renamed over the store, the old file's WAL is checkpointed into it and emptied through
    this connection before the new file is opened, as api.storewatch does in the serving
    processes: SQLite finds a WAL by the file's name, so a WAL left beside the new file
    would be read as the new file's."""

    def __init__(self, store: Store):
        self.store = store
        self._raw: sqlite3.Connection | None = None
        self._hold()

    def _hold(self) -> None:
        path = self.store.sqlite_file()
        self._raw = sqlite3.connect(path, isolation_level=None) if path is not None else None

    def reopen_if_replaced(self) -> WriterGone | None:
        """The file now at the store's path opened in place of the old one, if it was
        replaced; what to answer when that file cannot be used."""
        if not self.store.replaced():
            return None
        if self._raw is not None:
            with contextlib.suppress(sqlite3.Error):
                self._raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            self._raw.close()
            self._raw = None
        try:
            self.store.reopen()
        except Exception as e:  # noqa: BLE001 - the writer goes on; each report is answered why
            said = str(e).splitlines()[0] if str(e) else type(e).__name__
            return WriterGone(f"the store's file was replaced by one that cannot be used ({said}): "
                              "the report was not stored")
        self._hold()
        return None


def _serve(listener: Listener, group: GroupCommit) -> None:
    """The writer's one loop: read every report the serving processes have sent, write them
    as one group (at most :data:`MOST` a transaction: ``GroupCommit.write``, which stores a
    group that fails one report at a time), answer each, and again. What arrives while a
    group is being written waits in its connection for the next: the group commit, without
    a thread per report."""
    conns: list[Connection] = []
    arrived: list[Connection] = []
    guard = threading.Lock()
    wake_r, wake_w = multiprocessing.Pipe(duplex=False)
    watch = _FileWatch(group.store)

    def accept() -> None:
        while True:
            try:
                conn = listener.accept()
            except (OSError, EOFError, multiprocessing.AuthenticationError):
                continue
            with guard:
                arrived.append(conn)
            wake_w.send_bytes(b"")

    threading.Thread(target=accept, name="writer-accept", daemon=True).start()
    while True:
        ready = multiprocessing.connection.wait([wake_r, *conns])
        reports: list[tuple[Connection, int, Waiting]] = []
        for conn in ready:
            if conn is wake_r:
                while wake_r.poll():
                    wake_r.recv_bytes()
                with guard:
                    conns += arrived
                    arrived.clear()
                continue
            assert isinstance(conn, Connection)
            try:
                while conn.poll():  # everything it has sent so far
                    n, ident, filing = pickle.loads(conn.recv_bytes())
                    reports.append((conn, n, Waiting(ident, filing)))
            except (EOFError, OSError):  # the serving process has gone
                conns.remove(conn)
                conn.close()
        for first in range(0, len(reports), MOST):
            part = reports[first:first + MOST]
            unusable = watch.reopen_if_replaced()
            if unusable is None:
                group.write([w for _, _, w in part])
            else:
                for _, _, w in part:
                    w.error = unusable
            replaced = group.store.replaced()  # written into a file that is no longer the store's
            for conn, n, w in part:
                if w.error is None and replaced:
                    w.error = StoreReplacedMeanwhile()
                answer = (n, True, w.result) if w.error is None else (n, False, _picklable(w.error))
                try:
                    conn.send_bytes(pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
                except OSError:
                    pass  # the serving process has gone: nobody to answer


def writer_main(url: str, address: str, authkey: bytes, ready: Connection, parent: int) -> None:
    """The writer process: open the store, listen, store what comes."""
    from survey.core import collector
    from survey.core.lifetime import die_with, name_process
    from survey.verdicts import summary  # noqa: F401 - it keeps the stored cells current on every commit

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops `survey serve`, which then stops this process

    def stop(_signal: int, _frame: Any) -> None:  # from survey serve, its process group, or die_with
        shutil.rmtree(os.path.dirname(address), ignore_errors=True)
        os._exit(0)  # a group being written is not committed: nothing of it is stored

    signal.signal(signal.SIGTERM, stop)
    name_process(PROCESS_NAME)
    die_with(parent)
    collector.tune()
    try:
        store = Store(url, create=False)
        with Listener(address, family="AF_UNIX", authkey=authkey) as listener:
            ready.send(True)
            ready.close()
            _serve(listener, GroupCommit(store, source="upload"))
    except Exception as e:  # noqa: BLE001 - one line, not a traceback: survey serve says what follows
        said = str(e).splitlines()[0] if str(e) else ""
        sys.stderr.write(f"{PROCESS_NAME}: stopped: {type(e).__name__}: {said}\n")
        sys.stderr.flush()
        os._exit(1)


class WriterProcess:
    """The writer of ``url``'s uploads, started in a process of its own (``spawn``: a fresh
    interpreter, nothing of this process's connections in it). It starts at once;
    :attr:`handle`, what a serving process connects with (:func:`connect`), waits until it
    listens, so the caller's own start-up overlaps the writer's. ``restart``: a writer that
    dies after it listened (killed, crashed) is started again at the same address, and the
    serving processes connect to it with their next upload; one that never listened is not
    (it would only fail again), nor one stopped by SIGTERM (a stop asked for: survey serve's
    process group stopping)."""

    def __init__(self, url: str, restart: bool = True):
        self._url = url
        self._dir = tempfile.mkdtemp(prefix="survey-writer-")  # 0700: only this user reaches the socket
        self.address = os.path.join(self._dir, "writer.sock")
        self.authkey = secrets.token_bytes(32)
        self._lock = threading.Lock()  # guards proc, _ready, _listening
        self._stopping = False
        self._start()
        if restart:
            threading.Thread(target=self._watch, name="writer-watch", daemon=True).start()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._ready, theirs = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=writer_main, args=(self._url, self.address, self.authkey, theirs, os.getpid()),
                                name=PROCESS_NAME, daemon=True)
        self.proc.start()
        theirs.close()
        self._listening = False

    def _wait_listening(self) -> None:
        with self._lock:
            if self._listening:
                return
            try:
                if not self._ready.poll(START_TIMEOUT_S):
                    raise WriterGone(f"the store's writer process did not start within {START_TIMEOUT_S:g} s")
                self._ready.recv()
            except (EOFError, OSError):
                self.proc.join(START_TIMEOUT_S)  # it closed its end: it is ending
                raise WriterGone(f"the store's writer process stopped as it started (exit {self.proc.exitcode})")
            self._listening = True

    @property
    def handle(self) -> str:
        self._wait_listening()
        return f"{self.address} {self.authkey.hex()}"

    def _watch(self) -> None:
        while True:
            proc = self.proc
            multiprocessing.connection.wait([proc.sentinel])
            try:
                self._wait_listening()  # it listened (else it did not start: not again)
            except WriterGone as e:
                if not self._stopping:
                    log.warning("%s; uploads are refused until survey serve is restarted", e)
                return
            proc.join()  # reaped: its exit status
            with self._lock:
                if self._stopping or proc.exitcode == 0:  # stopped on purpose (SIGTERM: its handler exits 0)
                    return
                log.warning("the store's writer process stopped (exit %s); starting another", proc.exitcode)
                os.makedirs(self._dir, mode=0o700, exist_ok=True)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.address)  # left by a writer that could not remove it
                self._start()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        proc = self.proc
        if proc.is_alive():
            proc.terminate()
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._ready.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def connect(store: Store, handle: str) -> RemoteWriter:
    address, key = handle.rsplit(" ", 1)
    return RemoteWriter(store, address, bytes.fromhex(key))
