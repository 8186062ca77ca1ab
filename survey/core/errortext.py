"""Error text, told the same way every time.

Tools' errors carry what changes on every run: memory addresses (``object at
0x7f…``), temporary paths, PIDs, IP addresses and ports, timestamps. ``normalise``
replaces those with placeholders before a message is summarised, compared or shown;
the raw text stays in the store. ``cause`` turns a failed attempt to obtain a
candidate into one short line naming the cause.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import urlparse

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,16}\b"), "0x<addr>"),
    (re.compile(r"(?<![\w/])/(?:tmp|var/tmp|dev/shm)/[^\s'\"`:,;)]+"), "<tmp>"),
    (re.compile(r"\b(?:pid|PID|process)[ =:]+\d+"), "pid <n>"),
    (re.compile(r"\[(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}\](?::\d+)?"), "<ip>"),
    (re.compile(r"(?<![\w.:])(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}(?![\w:])"), "<ip>"),
    (re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?(?![\w.])"), "<ip>"),
    (re.compile(r"\b(?:localhost|127\.0\.0\.1):\d{1,5}\b"), "<host>:<port>"),
    (re.compile(r"\bport[= ]+\d{1,5}\b"), "port=<port>"),
    (re.compile(r"\bproton-survey-[0-9a-f]{6,}\b"), "proton-survey-<id>"),
)


MEMO_TEXTS, MEMO_CHARS = 256, 2048  # at most 256 texts of at most 2,048 characters (and their results) kept


def normalise(text: str | None) -> str:
    """The text with run-to-run variation replaced by placeholders. A text of up to
    :data:`MEMO_CHARS` characters is worked out once among the last :data:`MEMO_TEXTS`:
    the store's cells repeat a few reasons thousands of times (16 texts in 4,592 cells of
    the scale benchmark), and ten regular expressions over each were a tenth of a write."""
    if not text:
        return ""
    return _memo(text) if len(text) <= MEMO_CHARS else _normalise(text)


def _normalise(text: str) -> str:
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


_memo = functools.lru_cache(maxsize=MEMO_TEXTS)(_normalise)


NETWORK_MARKERS = ("Could not resolve host", "Name or service not known", "no such host", "Connection refused",
                   "Network is unreachable", "timed out", "Temporary failure in name resolution",
                   "Failed to establish a new connection", "No route to host", "Max retries exceeded")
KNOWN_HOSTS = {
    "download.pytorch.org": "the PyTorch package index",
    "github.com": "GitHub",
    "docker.io": "Docker Hub",
    "registry-1.docker.io": "Docker Hub",
    "index.docker.io": "Docker Hub",
}
_URL = re.compile(r"(?:https?|git\+https?|git)://[^\s'\"`<>)]+")


def _host_of(spec: dict[str, object] | None, text: str) -> tuple[str | None, str | None]:
    """(host, what is reached there) from the candidate's spec, else from the text."""
    spec = spec or {}
    for key, what in (("index_url", "index"), ("image", "registry"), ("pip", "repository")):
        value = spec.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value:
            if key == "image":
                first = value.split("/", 1)[0]
                host = first if ("." in first or ":" in first) and "/" in value else "docker.io"
                return host, what
            m = _URL.search(value)
            if m:
                url = m.group(0).split("+", 1)[-1] if m.group(0).startswith("git+") else m.group(0)
                return urlparse(url).hostname, what
    m = _URL.search(text)
    if m:
        return urlparse(m.group(0).split("+", 1)[-1]).hostname, "server"
    return None, None


def cause(error: str | None, spec: dict[str, object] | None = None, limit: int = 160) -> str:
    """One short line saying why a candidate could not be obtained or probed."""
    text = normalise(error)
    if any(marker in text for marker in NETWORK_MARKERS):
        host, what = _host_of(spec, text)
        if host:
            name = KNOWN_HOSTS.get(host)
            thing = {"index": "package index", "registry": "image registry", "repository": "git repository",
                     "server": "server"}.get(what or "", "server")
            if what == "index" and name:
                return f"{name} ({host}) cannot be reached from this host"
            label = f"{name} ({host})" if name else host
            return f"the {thing} {label} cannot be reached from this host"
        return "the network is not reachable from this host"
    return summarise(text, limit)


def summarise(text: str | None, limit: int = 160) -> str:
    """The most telling line of a tool's multi-line error output, normalised."""
    lines = [ln.strip(" │╰─>×").strip() for ln in normalise(text).splitlines()]
    lines = [ln for ln in lines if ln]
    for prefix in ("fatal:", "ERROR:", "Error:", "error:"):
        hits = [ln for ln in lines if ln.startswith(prefix) and "subprocess-exited-with-error" not in ln]
        if hits:
            return hits[-1][:limit]
    rest = [ln for ln in lines if not ln.startswith(("note:", "hint:", "╰", "See above"))]
    return (rest[0] if rest else "")[:limit]
