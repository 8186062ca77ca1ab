"""Test environments for discovery and webhooks: a package index and a webhook receiver,
both real HTTP servers on 127.0.0.1, each in a thread of the test process.

``LocalIndex`` serves a directory of distribution files as a simple repository
(PEP 503 HTML, or PEP 691 JSON when asked for it), its pages made from the directory
on every request, so a wheel copied in is a release published. ``build_wheel`` makes a
real wheel (METADATA, WHEEL, RECORD with each file's sha256) that pip installs;
``fake_triton_wheel`` packs the fake ``triton`` of tests/envs.py into one.
``Receiver`` records every POST and answers each with the next status of its script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.envs import fake_triton


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(dest: Path, name: str, version: str, files: dict[str, bytes], *,
                tag: str = "py3-none-any", requires_python: str | None = None) -> Path:
    """A real wheel of ``files`` (archive path -> content) in ``dest``."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        meta += f"Requires-Python: {requires_python}\n"
    entries = dict(files)
    entries[f"{info}/METADATA"] = meta.encode()
    entries[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: proton-survey-tests\nRoot-Is-Purelib: true\n" \
                               f"Tag: {tag}\n".encode()
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in entries.items()) + f"{info}/RECORD,,\n"
    entries[f"{info}/RECORD"] = record.encode()
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in entries.items():
            z.writestr(p, d)
    return path


def fake_triton_wheel(dest: Path, version: str, behaviour: dict[str, str], work: Path, **kw: Any) -> Path:
    """A wheel of the fake ``triton`` (tests/envs.py) that says it is ``version``."""
    root = fake_triton(work / f"src-{version}", behaviour, version=version, **kw)
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    return build_wheel(dest, "triton", version, files)


def requires_python(path: Path) -> str | None:
    """The wheel's Requires-Python (from its METADATA), as an index publishes it."""
    if not path.name.endswith(".whl"):
        return None
    with zipfile.ZipFile(path) as z:
        meta = next((n for n in z.namelist() if n.endswith(".dist-info/METADATA")), None)
        text = z.read(meta).decode() if meta else ""
    for line in text.splitlines():
        if line.startswith("Requires-Python:"):
            return line.split(":", 1)[1].strip()
    return None


@dataclass
class _IndexState:
    root: Path
    json: bool = False
    yanked: set[str] = field(default_factory=set)
    requests: list[str] = field(default_factory=list)


def _attrs(p: Path, st: _IndexState) -> str:
    out = ' data-yanked=""' if p.name in st.yanked else ""
    rp = requires_python(p)
    return out + (f' data-requires-python="{html.escape(rp)}"' if rp else "")


class _IndexHandler(BaseHTTPRequestHandler):
    state: _IndexState

    def log_message(self, *_args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        st = self.state
        st.requests.append(self.path)
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if len(parts) == 2 and parts[0] == "files":
            f = st.root / parts[1]
            if f.is_file():
                self._send(200, f.read_bytes(), "application/octet-stream")
                return
        if len(parts) == 2 and parts[0] == "simple":
            project = parts[1]
            files = sorted(p for p in st.root.iterdir()
                           if p.is_file() and p.name.split("-", 1)[0].lower().replace("_", "-") == project)
            if files:
                if st.json and "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
                    doc = {"meta": {"api-version": "1.0"}, "name": project, "files": [
                        {"filename": p.name, "url": f"../../files/{p.name}",
                         "hashes": {"sha256": hashlib.sha256(p.read_bytes()).hexdigest()},
                         "requires-python": requires_python(p), "yanked": p.name in st.yanked} for p in files]}
                    self._send(200, json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json")
                    return
                links = "".join(
                    f'<a href="../../files/{p.name}#sha256={hashlib.sha256(p.read_bytes()).hexdigest()}"'
                    f'{_attrs(p, st)}>{p.name}</a>\n' for p in files)
                self._send(200, f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode(), "text/html")
                return
        self._send(404, b"not found\n", "text/plain")


class LocalIndex:
    """``with LocalIndex(dir) as index:`` ... ``index.url`` is ``http://127.0.0.1:PORT/simple``."""

    def __init__(self, root: Path, *, json: bool = False):
        self.state = _IndexState(root, json=json)
        handler = type("Handler", (_IndexHandler,), {"state": self.state})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    @property
    def root(self) -> Path:
        return self.state.root

    def __enter__(self) -> LocalIndex:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A webhook receiver: records each POST, answers with ``script`` in turn (the last
    status repeats)."""

    def __init__(self, script: list[int] | None = None):
        self.script = list(script or [204])
        self.got: list[Delivery] = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    outer.got.append(Delivery(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    code = outer.script[min(len(outer.got) - 1, len(outer.script) - 1)]
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def iter_json(deliveries: list[Delivery]) -> Iterator[dict[str, Any]]:
    for d in deliveries:
        yield json.loads(d.body)
