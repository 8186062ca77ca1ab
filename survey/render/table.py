"""Render tables (pandas) and keep a docs file's Availability table in step.

A docs file carries the table between two marker comments; ``--write`` replaces
exactly that span (atomically) and ``--check`` reports a diff when it differs.

Cells hold evidence text written by the environments that were probed, so:
Markdown cells escape ``&``, ``<`` and ``>`` (no HTML reaches a docs page) and
``|``; CSV text cells that a spreadsheet would read as a formula (starting with
``=``, ``+``, ``-``, ``@``, a tab or a carriage return) get a leading ``'``
(OWASP's CSV injection advice). Numbers are left as they are. Lines end in CRLF
(RFC 4180), so a cell holding a bare CR is quoted too.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from survey.core.errors import InputError

START = "<!-- proton-survey:availability:start -->"
END = "<!-- proton-survey:availability:end -->"
FORMATS = ("md", "csv", "json", "html")


def frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    """Rows as a DataFrame. Rows from ``survey.render.docs_table.table_rows`` carry their
    whole docs table (footnotes, sections), which ``render`` prints in md and html."""
    df = pd.DataFrame(rows, columns=columns, dtype=object)  # None stays None (never NaN: "nan" in a table)
    docs = getattr(rows, "docs", None)
    if docs is not None and list(columns) == list(docs.columns):
        df.attrs["docs"] = docs
    return df


def _md_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def render(df: pd.DataFrame, fmt: str) -> str:
    docs = df.attrs.get("docs")
    if docs is not None and fmt in ("md", "html"):
        return str(docs.markdown() if fmt == "md" else docs.html())
    if fmt == "md":
        safe = df.map(_md_cell)
        safe.columns = [_md_cell(c) for c in df.columns]
        return safe.to_markdown(index=False, tablefmt="pipe") + "\n"
    if fmt == "csv":
        safe = df.map(_csv_cell)
        safe.columns = [_csv_cell(c) for c in df.columns]
        return safe.to_csv(index=False, lineterminator="\r\n")  # RFC 4180; and a cell holding CR is quoted
    if fmt == "json":
        return json.dumps(df.to_dict(orient="records"), indent=1) + "\n"
    if fmt == "html":
        return df.to_html(index=False, escape=True, border=0, classes="availability") + "\n"
    raise InputError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


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
    """Replace the table between the markers, touching nothing else. Returns changed?"""
    p = Path(path)
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
