"""``survey serve`` as a process of its own on 127.0.0.1 (:class:`Served`), and raw
sockets to it. The app in this process under uvicorn is :class:`tests.helpers.api.Server`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from survey.flows import writer
from tests.conftest import wait_until_serving

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    def __init__(self, db: str, log: Path, *args: str):
        self.port = free_port()
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "survey", "serve", "--db", db, "--port",
                                          str(self.port), *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        wait_until_serving(self.proc, f"http://127.0.0.1:{self.port}", log)

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the process group this test started
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def serving_children(pid: int) -> tuple[list[int], list[int]]:
    """The worker processes and the store's writer process (survey.flows.writer) of the
    ``survey serve`` process ``pid`` (multiprocessing's resource tracker left out)."""
    workers, writers = [], []
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():  # each thread's: a writer started again is its watcher's
        try:
            children += (task / "children").read_text().split()
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    for child in children:
        if b"resource_tracker" in Path(f"/proc/{child}/cmdline").read_bytes():
            continue
        is_writer = Path(f"/proc/{child}/comm").read_text().strip() == writer.PROCESS_NAME
        (writers if is_writer else workers).append(int(child))
    return workers, writers


def answer(conn: socket.socket, limit_s: float = 30) -> bytes:
    """Everything the server sends until it closes the connection (at most ``limit_s``)."""
    conn.settimeout(limit_s)
    data = b""
    while True:
        try:
            chunk = conn.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        data += chunk
    return data
