"""Answers replayed: a read command asked again, with nothing it depends on changed,
prints what it printed the last time, without loading SQLAlchemy, pydantic or Typer.

Replayable: ``survey table`` (not ``--check`` / ``--write``), ``survey check TARGET
--platform P`` where TARGET names a catalog entry or a stored candidate (no probe, no
resolving: the answer comes from the store), ``survey --help`` and ``survey COMMAND
--help``.

An answer is kept under a key made of everything that could change it apart from
what it read: the arguments, the whole environment, the working directory, each
standard stream (a terminal? its size, its encoding), the interpreter, the installed
packages (the mtime of every ``sys.path`` directory) and proton-survey's own files
(size, mtime and inode of every file of ``survey/``, ``db/`` and ``probes/``, the
packaged catalog and documented claims included). With the answer it keeps what it
read: the SQLite store (the file's identity and its state: the ``matrix_version``
every ingest bumps, the schema revision, the runs' count, highest id, retries and last
try, the candidates' count and highest id), the files given on the command line (by
content), and the evidence ages the answer shows ("3 days old"). It is replayed only
when every one of these is the same now; otherwise the command runs as ever and keeps
its new answer. Nothing is kept for a PostgreSQL store, a store that cannot be read
as a plain SQLite file, a failed command, or a store that changed while the command
ran; a missing store is never created here.

Entries are files under ``<cache>/cli/`` (``SURVEY_CACHE``, else
``$XDG_CACHE_HOME/proton-survey``), the newest ``MAX_ENTRIES`` kept; one that cannot
be read is ignored. ``SURVEY_CLI_CACHE=0`` turns replaying and keeping off.

This module imports only the standard library (and ``survey.ages``, ``survey.cache``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FORMAT = 1
MAX_ENTRIES = 256
SWITCH = "SURVEY_CLI_CACHE"
PACKAGES = ("survey", "db", "probes")

# Everything a write to the store changes: ingest and a new failure bump the matrix
# version; a repeated failure only counts a retry (tries, last_tried_at).
STORE_STATE = (
    "SELECT (SELECT value FROM meta WHERE key = 'matrix_version'),"
    " (SELECT group_concat(version_num) FROM alembic_version),"
    " (SELECT count(*) FROM runs), (SELECT max(id) FROM runs), (SELECT total(tries) FROM runs),"
    " (SELECT max(last_tried_at) FROM runs), (SELECT count(*) FROM candidates), (SELECT max(id) FROM candidates)"
)


def enabled() -> bool:
    return os.environ.get(SWITCH, "").strip().lower() not in ("0", "off", "no", "false")


def may_replay(argv: list[str]) -> bool:
    """Could an answer to ``argv`` have been kept? (What is kept is decided by the command.)"""
    if argv[:1] in (["table"], ["check"]):
        return True
    return argv == ["--help"] or (len(argv) == 2 and argv[1] == "--help" and not argv[0].startswith("-"))


def directory() -> str:
    from survey.cache import location

    return os.path.join(location(), "cli")


# ------------------------------------------------------------------ the key
def _tree(path: str, rel: str, rows: list[Any]) -> None:
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        rows.append([rel, None])
        return
    for e in entries:
        if e.name == "__pycache__" or e.name.endswith(".pyc"):
            continue
        name = f"{rel}/{e.name}"
        try:
            if e.is_dir():
                _tree(e.path, name, rows)
                continue
            st = e.stat()
        except OSError:
            rows.append([name, None])
            continue
        rows.append([name, st.st_size, st.st_mtime_ns, st.st_ino])


def _code() -> list[Any]:
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows: list[Any] = []
    for pkg in PACKAGES:
        _tree(os.path.join(top, pkg), pkg, rows)
    return rows


def _streams() -> list[Any]:
    rows: list[Any] = []
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            tty: bool | None = bool(stream.isatty())
        except Exception:
            tty = None
        rows.append([type(stream).__name__, tty, getattr(stream, "encoding", None), getattr(stream, "errors", None)])
    for fd in (0, 1, 2):
        try:
            rows.append(list(os.get_terminal_size(fd)))
        except (OSError, ValueError):
            rows.append(None)
    return rows


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path or ".").st_mtime_ns
    except OSError:
        return None


def key(argv: list[str]) -> str:
    doc = {
        "format": FORMAT,
        "argv": argv,
        "env": sorted(os.environ.items()),
        "cwd": os.getcwd(),
        "streams": _streams(),
        "python": [sys.executable, sys.version, sys.prefix, sys.base_prefix],
        "sys_path": [[p, _mtime(p)] for p in sys.path],
        "code": _code(),
    }
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()


# ------------------------------------------------------------------ what an answer read
def store_state(path: str) -> list[Any]:
    """The identity and state of the SQLite store at ``path``, read-only (never created)."""
    import sqlite3
    from urllib.parse import quote

    path = os.path.abspath(path)
    before = os.stat(path)
    con = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=10)
    try:
        row = con.execute(STORE_STATE).fetchone()
    finally:
        con.close()
    after = os.stat(path)
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino):
        raise OSError(f"{path} was replaced while it was read")
    return [before.st_dev, before.st_ino, list(row)]


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def digest(path: str) -> str:
    """A file by its content; a directory by its names and its files' contents."""
    if os.path.isdir(path):
        h = hashlib.sha256()
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            h.update(os.fsencode(name) + b"\0")
            h.update((_file_digest(full) if os.path.isfile(full) else "-").encode() + b"\0")
        return "dir:" + h.hexdigest()
    if os.path.isfile(path):
        return "file:" + _file_digest(path)
    return "missing" if not os.path.lexists(path) else "other"


def age_holds(date: str, text: str, now: dt.datetime | None = None) -> bool:
    """Does evidence of ``date`` (seconds precision: the time lies within that second)
    still read ``text`` ("3 days old")? Both ends of the second must agree."""
    from survey.ages import age_text

    t = dt.datetime.fromisoformat(date)
    now = now or dt.datetime.now(dt.UTC)
    return age_text(t, now) == text == age_text(t + dt.timedelta(seconds=1), now)


# ------------------------------------------------------------------ replaying
_looked_up: tuple[list[str], str | None] | None = None


def _entry_path(k: str) -> str:
    return os.path.join(directory(), k + ".json")


def _load(k: str) -> dict[str, Any] | None:
    try:
        with open(_entry_path(k), encoding="utf-8") as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != k:
        return None
    return entry


def _still_valid(entry: dict[str, Any]) -> bool:
    store = entry["store"]
    if store is not None and store_state(store["path"]) != store["state"]:
        return False
    if any(digest(path) != d for path, d in entry["files"]):
        return False
    return all(age_holds(date, text) for date, text in entry["ages"])


def _chunks(entry: dict[str, Any]) -> list[tuple[int, str]]:
    chunks = entry["chunks"]
    if not isinstance(chunks, list) or not isinstance(entry["rc"], int):
        raise ValueError("not an entry")
    out = []
    for fd, text in chunks:
        if fd not in (1, 2) or not isinstance(text, str):
            raise ValueError("not an entry")
        out.append((fd, text))
    return out


def answer(argv: list[str]) -> str | None:
    """Replay the kept answer to ``argv`` and exit, when it is still the answer.
    Otherwise the key to keep the new answer under (None: not replayable)."""
    global _looked_up
    if _looked_up is not None and _looked_up[0] == argv:  # looked up already (survey.__main__)
        k = _looked_up[1]
        _looked_up = None
        return k
    if not enabled() or not may_replay(argv):
        return None
    try:
        k = key(argv)
    except Exception:  # no working directory, ...
        return None
    try:
        entry = _load(k)
        if entry is None or not _still_valid(entry):
            return k
        chunks, rc = _chunks(entry), entry["rc"]
    except Exception:  # a corrupt entry, a store that cannot be read: not an answer
        return k
    for fd, text in chunks:
        (sys.stdout if fd == 1 else sys.stderr).write(text)
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(rc)


def answer_first(argv: list[str]) -> None:
    """:func:`answer` before the CLI is imported; ``survey.cli.main`` then does not look again."""
    global _looked_up
    _looked_up = None
    _looked_up = (list(argv), answer(argv))


# ------------------------------------------------------------------ keeping
class _Tee:
    """A standard stream that also keeps what is written to it."""

    def __init__(self, stream: Any, fd: int, rec: Recording):
        self._stream, self._fd, self._rec = stream, fd, rec

    def write(self, text: Any) -> int:
        n = self._stream.write(text)
        if isinstance(text, str):
            self._rec.chunks.append((self._fd, text))
        else:
            self._rec.spoil()
        return int(n or 0)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._stream, name)
        return _Bytes(value, self._rec) if name == "buffer" else value


class _Bytes:
    """A standard stream's binary buffer: what is written past the text layer is not
    kept, so writing here means the answer cannot be replayed."""

    def __init__(self, buffer: Any, rec: Recording):
        self._buffer, self._rec = buffer, rec

    def write(self, data: Any) -> Any:
        self._rec.spoil()
        return self._buffer.write(data)

    def writelines(self, lines: Any) -> None:
        self._rec.spoil()
        self._buffer.writelines(lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._buffer, name)


class Recording:
    """What one command printed and read; kept by :meth:`finish` when the command
    said it is replayable and nothing it read changed meanwhile."""

    def __init__(self, k: str | None, argv: list[str]):
        self.key, self.argv = k, argv
        self.chunks: list[tuple[int, str]] = []
        self.store: dict[str, Any] | None = None
        self.files: dict[str, str] = {}
        self.ages: list[list[str]] = []
        self.ok = False
        self.spoiled = k is None

    def spoil(self) -> None:
        self.spoiled = True

    def read_store(self, path: str | os.PathLike[str] | None) -> None:
        """The command reads the SQLite store at ``path`` (None: not a plain SQLite file)."""
        if self.spoiled:
            return
        if path is None:
            self.spoil()
            return
        try:
            p = os.path.abspath(path)
            self.store = {"path": p, "state": store_state(p)}
        except Exception:
            self.spoil()

    def read_file(self, path: str | os.PathLike[str]) -> None:
        if self.spoiled:
            return
        try:
            p = os.path.abspath(path)
            self.files[p] = digest(p)
        except Exception:
            self.spoil()

    def shows_age(self, date: str, text: str) -> None:
        self.ages.append([date, text])

    def replayable(self) -> None:
        self.ok = True

    def finish(self, rc: int) -> None:
        if not self.ok or self.spoiled or self.key is None:
            return
        try:
            if self.store is not None and store_state(self.store["path"]) != self.store["state"]:
                return  # written to while we read it
            if any(digest(p) != d for p, d in self.files.items()):
                return
            entry = {"format": FORMAT, "key": self.key, "argv": self.argv,
                     "saved_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "store": self.store,
                     "files": sorted(self.files.items()), "ages": self.ages, "chunks": self.chunks, "rc": rc}
            d = directory()
            os.makedirs(d, exist_ok=True)
            path = _entry_path(self.key)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(entry, f)
            os.replace(tmp, path)
            _prune(d)
        except Exception:  # a cache that cannot be written is no cache
            return


def _prune(d: str) -> None:
    names = [n for n in os.listdir(d) if n.endswith(".json")]
    if len(names) <= MAX_ENTRIES:
        return
    aged = sorted(names, key=lambda n: _mtime(os.path.join(d, n)) or 0)
    for n in aged[: len(names) - MAX_ENTRIES]:
        try:
            os.remove(os.path.join(d, n))
        except OSError:
            pass


_current: Recording | None = None


@contextmanager
def recording(k: str | None, argv: list[str]) -> Iterator[Recording]:
    """Keep what the command prints while it runs (when ``k``: a replayable argv)."""
    global _current
    rec = Recording(k, argv)
    if k is None:
        yield rec
        return
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(streams[0], 1, rec), _Tee(streams[1], 2, rec)  # type: ignore[assignment]
    _current = rec
    try:
        yield rec
    finally:
        _current = None
        sys.stdout, sys.stderr = streams


# What commands call (no-ops outside a recording).
def read_store(path: str | os.PathLike[str] | None) -> None:
    if _current is not None:
        _current.read_store(path)


def read_file(path: str | os.PathLike[str]) -> None:
    if _current is not None:
        _current.read_file(path)


def shows_age(date: str, text: str) -> None:
    if _current is not None:
        _current.shows_age(date, text)


def replayable() -> None:
    if _current is not None:
        _current.replayable()


def spoil() -> None:
    """The command consulted something the answer's key does not hold (the container
    engine, ...): whatever it prints is not kept."""
    if _current is not None:
        _current.spoil()
