"""Evidence cut to a size a page can show.

A report may be as large as the upload limit (8 MiB) and everything in it is
text the environment wrote, so a page showing all of it could be ten times that
once escaped. HTML and Markdown pages show a bounded part; the JSON resources
and ``/runs/{id}/report.json`` always hold everything, and a page that cut
something says so and links there.

:class:`Clipper` copies a value (a report section, a list of rows) keeping at
most :data:`TEXT` characters of any one string, :data:`ITEMS` entries of any one
list or mapping, :data:`DEPTH` levels of nesting and :data:`BUDGET` characters in
all; a cut string ends in a marker saying how much was left out.
"""

from __future__ import annotations

from typing import Any

TEXT = 4000  # the probe keeps 4000-character tails, so nothing it writes itself is cut
ITEMS = 200
DEPTH = 8
BUDGET = 48_000  # characters of evidence per section of a page
COST = 16  # what each list entry or mapping key counts against the budget, besides its text
CELL = 200  # characters of one Markdown table cell
ROWS = 200  # rows of one Markdown table (cells escape to at most 5x: &amp; for &)


class Clipper:
    def __init__(self, budget: int = BUDGET, text: int = TEXT):
        self.left = budget
        self.limit = text
        self.cut: list[str] = []

    def note(self, what: str) -> None:
        if len(self.cut) < 20:
            self.cut.append(what[:200])

    def text(self, s: str, where: str = "") -> str:
        keep = max(0, min(len(s), self.limit, self.left))
        self.left -= keep
        if keep == len(s):
            return s
        self.note(where or "text")
        return s[:keep] + f"… [truncated: {len(s) - keep:,} more characters]"

    def value(self, v: Any, where: str = "", depth: int = 0) -> Any:
        if isinstance(v, str):
            return self.text(v, where)
        if isinstance(v, (list, tuple, dict)):
            if depth >= DEPTH:
                self.note(where)
                return f"… [truncated: nested deeper than {DEPTH} levels]"
            if isinstance(v, dict):
                out: dict[str, Any] = {}
                for i, (k, x) in enumerate(v.items()):
                    if i >= ITEMS or self.left <= 0:
                        self.note(f"{where} ({len(v) - i:,} more entries)")
                        break
                    self.left -= COST
                    out[self.text(str(k), where)] = self.value(x, f"{where}.{str(k)[:40]}", depth + 1)
                return out
            items: list[Any] = []
            for i, x in enumerate(v):
                if i >= ITEMS or self.left <= 0:
                    self.note(f"{where} ({len(v) - i:,} more entries)")
                    break
                self.left -= COST
                items.append(self.value(x, f"{where}.{i}", depth + 1))
            return items
        return v


def clip(v: Any, where: str = "", budget: int = BUDGET) -> tuple[Any, list[str]]:
    c = Clipper(budget)
    return c.value(v, where), c.cut


def cell(value: Any) -> Any:
    """A Markdown cell of at most :data:`CELL` characters."""
    if isinstance(value, str) and len(value) > CELL:
        return value[:CELL] + f"… [truncated: {len(value) - CELL:,} more characters]"
    return value
