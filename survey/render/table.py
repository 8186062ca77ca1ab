"""Tables in every format, one renderer per format, and a docs file's Availability
table kept in step.

:data:`RENDERERS` maps a format (``md``, ``csv``, ``json``) to the one function
that writes rows in it, and its media type (datasette's registry of output
renderers): ``survey table``/``survey history`` and the service's ``.md``/``.csv``
resources call the same ones. Cells hold evidence text written by the
environments that were probed; each renderer shows it through its medium's rule
(``survey.render.escape``): Markdown cells carry no HTML, link or image and keep
their row; CSV cells a spreadsheet would read as a formula get a leading ``'``
(lines end in CRLF, RFC 4180); JSON keeps the text exactly. Numbers are left as
they are.

A docs file carries the table between two marker comments; ``--write`` replaces
exactly that span (atomically) and ``--check`` reports a diff when it differs.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from survey.core.errors import InputError
from survey.render import escape

START = "<!-- proton-survey:availability:start -->"
END = "<!-- proton-survey:availability:end -->"

Rows = Sequence[Mapping[str, Any]]
CHUNK_ROWS = 5000  # rows a piece of a streamed table


def flat(value: Any) -> Any:
    """A cell of a flat table: a list joined, a mapping as JSON."""
    if isinstance(value, (list, tuple)):
        return "; ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return value


def pipe_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, code: bool = False) -> str:
    """A GitHub pipe table, cells unpadded so a row is as long as what it says.
    ``code``: the cells are our own text, whose `code` spans stay code spans."""
    shown: dict[str, str] = {}  # a table repeats its cells ("same three", "backend absent"): each escaped once

    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        out = shown.get(text)
        if out is None:
            out = shown[text] = escape.markdown(text, cell=True, code=code)
        return out

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join(":---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def markdown_rows(rows: Rows, columns: Sequence[str]) -> Iterator[str]:
    yield pipe_table(columns, [[flat(r.get(c)) for c in columns] for r in rows])


def csv_rows(rows: Rows, columns: Sequence[str]) -> Iterator[str]:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")  # RFC 4180; and a cell holding a line break is quoted
    shown: dict[str, str] = {}  # a table repeats its texts: each escaped once

    def cell(value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, str):
            out = shown.get(value)
            if out is None:
                out = shown[value] = escape.csv_cell(value)
            return out
        return escape.csv_cell(flat(value))

    w.writerow([escape.csv_cell(c) for c in columns])
    for n, r in enumerate(rows, 1):
        w.writerow([cell(r.get(c)) for c in columns])
        if n % CHUNK_ROWS == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def json_rows(rows: Rows, columns: Sequence[str]) -> Iterator[str]:
    """A JSON array, one row (a compact object) a line."""
    sep, batch = "[\n", []
    keys = tuple(columns)
    for r in rows:
        batch.append(escape.json_text(r if tuple(r) == keys else {c: r.get(c) for c in columns}))
        if len(batch) == CHUNK_ROWS:
            yield sep + ",\n".join(batch)
            sep, batch = ",\n", []
    if batch:
        yield sep + ",\n".join(batch)
        sep = ",\n"
    yield "[]\n" if sep == "[\n" else "\n]\n"


@dataclass(frozen=True)
class Renderer:
    media_type: str
    stream: Callable[[Rows, Sequence[str]], Iterator[str]]  # the text in pieces, a few thousand rows each


RENDERERS = {
    "md": Renderer("text/markdown; charset=utf-8", markdown_rows),
    "csv": Renderer("text/csv; charset=utf-8", csv_rows),
    "json": Renderer("application/json", json_rows),
}


def stream(rows: Rows, columns: Sequence[str], fmt: str) -> Iterator[str]:
    """``rows`` (the keys ``columns``, in that order) in format ``fmt``, in pieces: a
    writer need not hold the whole text (a table of 380,000 rows is 300 MB of JSON)."""
    renderer = RENDERERS.get(fmt)
    if renderer is None:
        raise InputError(f"unknown format {fmt!r}; one of {', '.join(RENDERERS)}")
    return renderer.stream(rows, columns)


def render(rows: Rows, columns: Sequence[str], fmt: str) -> str:
    """``rows`` (the keys ``columns``, in that order) in format ``fmt``."""
    return "".join(stream(rows, columns, fmt))


_START_LINE = re.compile(r"^" + re.escape(START) + r"[ \t]*$", re.MULTILINE)
_END_LINE = re.compile(r"^" + re.escape(END) + r"[ \t]*$", re.MULTILINE)


def _split(text: str, path: Path) -> tuple[str, str, str]:
    """(before the start marker, the table, from the end marker on). Markers count
    only as lines of their own, so prose may mention them."""
    starts = list(_START_LINE.finditer(text))
    ends = list(_END_LINE.finditer(text))
    if len(starts) != 1 or len(ends) != 1 or ends[0].start() < starts[0].end():
        raise InputError(
            f"{path}: needs exactly one pair of marker lines {START} ... {END} around the table",
            hint="add the two marker lines where the table should go, then run `survey table --write`",
        )
    s, e = starts[0], ends[0]
    return text[: s.start()], text[s.end() : e.start()], text[e.end() :]


def read_docs(path: str | Path) -> str:
    p = Path(path)
    try:
        return p.read_text()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file")
    except UnicodeDecodeError:
        raise InputError(f"{p}: not UTF-8 text")


def check(path: str | Path, table: str) -> str | None:
    """A unified diff (docs -> evidence) when the docs table differs, else None."""
    p = Path(path)
    _, body, _ = _split(read_docs(p), p)
    want = "\n" + table.strip("\n") + "\n"
    if body == want:
        return None
    have = [ln + "\n" for ln in body.strip("\n").splitlines()]
    new = [ln + "\n" for ln in table.strip("\n").splitlines()]
    return "".join(difflib.unified_diff(have, new, fromfile=f"{p} (docs)", tofile="evidence"))


def write(path: str | Path, table: str) -> bool:
    """Replace the table between the markers, touching nothing else. Returns changed?

    A page that is a symbolic link is written through it: its target is replaced
    (atomically, beside itself) and the link stays."""
    p = Path(os.path.realpath(path))
    text = read_docs(p)
    head, body, tail = _split(text, p)
    new = head + START + "\n" + table.strip("\n") + "\n" + END + tail
    if new == text:
        return False
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new)
        os.chmod(tmp, p.stat().st_mode & 0o7777)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True
