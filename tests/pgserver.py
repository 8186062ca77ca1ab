"""A real PostgreSQL server for the tests (Debian's ``postgresql`` package).

One server per test run: ``initdb`` into a temporary directory, started with
``pg_ctl`` listening on 127.0.0.1 only, on a free port, with its unix socket in
that directory, and stopped (and the directory removed) when the run ends. Under
pytest-xdist the first worker that needs it starts it and the others attach to it
(:meth:`PgServer.state`, :meth:`PgServer.attach`; tests/conftest.py).
PostgreSQL refuses to run as root, so as root the cluster belongs to the
``postgres`` user and every server program runs as that user.

Each test gets a database of its own, made with ``CREATE DATABASE ... TEMPLATE``
from one that already ran every migration, which costs a file copy instead of a
migration run.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

TEMPLATE = "survey_template"


def find_bindir() -> Path | None:
    """The newest installed ``/usr/lib/postgresql/N/bin`` holding initdb and pg_ctl,
    else the directory on PATH holding all three (PostgreSQL installed by hand).

    (``/usr/local/bin/pg_ctl`` and Debian's ``/usr/bin`` wrappers choose a cluster
    through pg_wrapper; the real binaries live in /usr/lib/postgresql.)"""
    def complete(bindir: Path) -> bool:
        return all(os.access(bindir / p, os.X_OK) for p in ("initdb", "pg_ctl", "postgres"))

    found = []
    for bindir in glob.glob("/usr/lib/postgresql/*/bin"):
        version = Path(bindir).parent.name
        if version.isdigit() and complete(Path(bindir)):
            found.append((int(version), Path(bindir)))
    if found:
        return max(found)[1]
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path and complete(Path(on_path).parent) else None


def not_installed_reason() -> str:
    return ("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/pg_ctl, no initdb on PATH); "
            "tests/run.sh installs Debian's postgresql")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """A running PostgreSQL server and the databases the tests made in it."""

    user = "postgres"

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="proton-survey-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "run"
        self.log = self.root / "server.log"
        self.port = 0
        self._names = itertools.count(1)  # with the pid: workers sharing the server never collide
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse root
            owner = pwd.getpwnam(self.user)
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", self.user, "--"]
        else:
            self.user = pwd.getpwuid(os.geteuid()).pw_name
        self.socket_dir.mkdir()
        if self._as:
            os.chown(self.socket_dir, pwd.getpwnam(self.user).pw_uid, pwd.getpwnam(self.user).pw_gid)

    def _run(self, *argv: str) -> None:
        proc = subprocess.run([*self._as, *argv], capture_output=True, text=True, timeout=120, cwd=self.root)
        if proc.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}\n{log}")

    def start(self) -> PgServer:
        # C collation: ORDER BY on text compares code points, as SQLite does.
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust",
                  "--encoding=UTF8", "--no-locale", "--no-sync")
        options = " ".join([
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={self.socket_dir}",
            "-c max_connections=200",
            # a throwaway cluster: durability buys nothing here
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
        ])
        for _attempt in range(5):  # the free port may be taken before the server binds it
            self.port = _free_port()
            try:
                self._run(str(self.bindir / "pg_ctl"), "start", "-D", str(self.data), "-l", str(self.log),
                          "-w", "-t", "60", "-o", f"{options} -c port={self.port}")
                break
            except RuntimeError:
                if "could not bind" not in self.log.read_text(errors="replace"):
                    raise
        else:
            raise RuntimeError(f"PostgreSQL found no free port:\n{self.log.read_text(errors='replace')[-3000:]}")
        self.admin(f'CREATE DATABASE "{TEMPLATE}"')
        from db.store import Store

        Store(self.url(TEMPLATE)).close()  # every migration, once
        return self

    def state(self) -> dict[str, str | int]:
        """What another process needs to use (and stop) this running server."""
        return {"bindir": str(self.bindir), "root": str(self.root), "port": self.port, "user": self.user}

    @classmethod
    def attach(cls, state: dict[str, str | int]) -> PgServer:
        """The server another process started (from its :meth:`state`)."""
        server = cls.__new__(cls)
        server.bindir, server.root = Path(str(state["bindir"])), Path(str(state["root"]))
        server.data, server.socket_dir = server.root / "data", server.root / "run"
        server.log = server.root / "server.log"
        server.port, server.user = int(state["port"]), str(state["user"])
        server._names = itertools.count(1)
        server._as = ["runuser", "-u", server.user, "--"] if os.geteuid() == 0 else []
        return server

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str, driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://{self.user}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        """Run one statement outside a transaction (CREATE/DROP DATABASE)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=self.user, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(sql.encode())

    def new_database(self, *, migrated: bool = True) -> str:
        """A fresh database (with the current schema, or empty); returns its name."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.admin(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE if migrated else "template0"}"')
        return name

    def drop_database(self, name: str) -> None:
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def halt(self) -> None:
        """Stop the server (as an outage would), keeping its data and port."""
        self._run(str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", "-w")

    def resume(self) -> None:
        """Start it again after :meth:`halt`, on the same port."""
        options = (f"-c listen_addresses=127.0.0.1 -c unix_socket_directories={self.socket_dir} "
                   f"-c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   f"-c port={self.port}")
        self._run(str(self.bindir / "pg_ctl"), "start", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", options)
