"""The grid: environments x (backend, mode), one cell per check.

:func:`grid_of` lays the matrix rows out once (:class:`Grid`: its rows, one per
environment, i.e. (candidate, platform), and its columns in table order); the
terminal grid here and the service's HTML matrix (``api.matrix``) both draw it.

``survey table --format grid`` (the default when stdout is a terminal) prints
it with Rich, coloured, with a legend, fitted to the terminal's width. Output
that is not a terminal gets the grid's own width, never a default 80 columns,
so nothing is cut; ``--width`` fits it to a given width instead. Evidence text
is shown as written (``survey.render.escape``), never read as markup.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from survey.render import escape
from survey.verdicts import vocabulary
from survey.verdicts.modes import BACKEND_ORDER, MODE_ORDER, Acceptance

SLOT = 2  # characters of one mode's slot in a backend's column: a symbol and its stub mark
NATURAL_WIDTH = 100_000  # a console this wide never wraps: output that is not a terminal is never cut
LEGEND_WIDTH = 80  # the legend reads on this many columns

MODE_ABBR = {None: "·", "pcsampling": "pc", "periodic_flushing": "pf", "default": "df", "mma": "mm"}
LEGEND_MARKS = [
    ("+", "the build supports it all the same (live, or through a stub library)"),
    ("*", "stub-derived: the build's refusal came through a stub library, not a live result"),
]


Column = tuple[str, str | None]  # (backend, mode)


def column_key(col: Column) -> tuple[int, int]:
    return BACKEND_ORDER.get(col[0], 99), MODE_ORDER.get(col[1], 9)


@dataclass
class GridRow:
    """One environment: a candidate on one platform."""

    row: dict[str, Any]  # its first matrix row: what the environment is, and its status
    cells: dict[Column, dict[str, Any]] = field(default_factory=dict)  # measured rows by (backend, mode)
    several_platforms: bool = False  # its candidate has evidence on other platforms too

    @property
    def key(self) -> str:
        return f"{self.row['candidate']}\x00{self.row.get('platform') or ''}"


@dataclass
class Grid:
    rows: list[GridRow]
    columns: list[Column]  # the (backend, mode) pairs measured anywhere, in table order
    platforms: set[str | None]  # the platforms anything was measured on

    def modes(self) -> dict[str, list[str | None]]:
        """Each backend's modes, in table order."""
        out: dict[str, list[str | None]] = {}
        for backend, mode in self.columns:
            out.setdefault(backend, []).append(mode)
        return out

    def spans(self, row: GridRow) -> list[dict[str, Any]]:
        """A row as cells to draw: neighbouring modes of one backend that say the
        same thing (one run; same outcome, verdict and reason) are one cell spanning
        them, which names the modes it covers; an empty column is its own cell."""
        out: list[dict[str, Any]] = []
        for b, m in self.columns:
            cell = row.cells.get((b, m))
            last = out[-1] if out else None
            if cell is not None and last is not None and last["cell"] is not None and last["backend"] == b \
                    and _same(last["cell"]) == _same(cell):
                last["modes"].append(m)
                last["colspan"] += 1
                continue
            out.append({"backend": b, "modes": [m], "colspan": 1, "cell": cell})
        return out


def _same(cell: dict[str, Any]) -> tuple[Any, ...]:
    """What a cell shows (and its title says): cells equal in this are one answer."""
    return (cell.get("here"), cell.get("cause"), cell["outcome"], cell["verdict"], cell.get("verdict_source"),
            cell.get("stub_outcome"),
            cell.get("reason"), cell.get("capture_outcome"), cell.get("capture_kernel_count"), cell["run_id"])


def grid_of(rows: list[dict[str, Any]]) -> Grid:
    """``survey.verdicts.matrix.matrix`` rows as a grid: one row per (candidate,
    platform) in matrix order, one column per (backend, mode) measured anywhere."""
    envs: dict[tuple[str, str | None], GridRow] = {}
    platforms: dict[str, set[str | None]] = {}
    for r in rows:
        platforms.setdefault(r["candidate"], set()).add(r.get("platform"))
        e = envs.setdefault((r["candidate"], r.get("platform")), GridRow(r))
        if r["status"] == "measured":
            e.cells[(r["backend"], r["mode_arg"])] = r
    for (name, _p), e in envs.items():
        e.several_platforms = len(platforms[name]) > 1
    columns = sorted({c for e in envs.values() for c in e.cells}, key=column_key)
    measured = {r.get("platform") for r in rows if r["status"] == "measured"}
    return Grid(list(envs.values()), columns, measured)


# ---------------------------------------------------------------------------- the terminal grid
def symbol(row: dict[str, Any]) -> tuple[str, str]:
    """(symbol, colour) of one measured matrix row: its verdict here
    (``survey.verdicts.vocabulary``), then "+" where the build supports it though
    it does not run here, "*" where the build's other answer is stub-derived."""
    t = vocabulary.term(row.get("here"))
    if t is None:
        return "·", ""
    mark = ""
    if vocabulary.differs(row):
        mark = "+" if row.get("verdict") == Acceptance.ACCEPTED else "*"
    return t.mark + mark, t.terminal


def _styled(text: str, color: bool) -> Text:
    """A label with `code` spans shown without backticks (cyan when coloured)."""
    out = Text()
    for part, code in escape.code_spans(text):
        out.append(escape.terminal(part), style="cyan" if code and color else "")
    return out


def build(rows: list[dict[str, Any]], color: bool = True) -> tuple[Table, Text]:
    """The grid of ``survey.verdicts.matrix.matrix`` rows, and its legend: one row per
    environment (candidate, platform), one column per backend holding a
    two-character slot per mode (symbol, then "*" when stub-derived)."""
    g = grid_of(rows)
    modes = g.modes()
    table = Table(show_edge=False, box=None, padding=(0, 1), header_style="bold" if color else "",
                  pad_edge=False)
    table.add_column("environment", overflow="fold", ratio=1, min_width=12)
    table.add_column("triton", no_wrap=True)
    for backend, ms in modes.items():
        slots = " ".join(MODE_ABBR.get(md, (md or "?")[:SLOT]).ljust(SLOT) for md in ms)
        table.add_column(escape.rich_text(f"{backend}\n{slots}"), no_wrap=True)
    for e in g.rows:
        r = e.row
        name = _styled(r["label"], color)
        if len(g.platforms) > 1 and r.get("platform_label") and r["status"] == "measured":
            name.append(escape.terminal(f" · {r['platform_label']}"))
        if r["status"] != "measured":
            why = {"unobtainable": "unobtainable here", "failed": "the probe failed"}.get(r["status"], "not probed")
            name.append(f" — no evidence: {why}", style="dim" if color else "")
        cells: list[Text] = [name, escape.rich_text(r.get("triton_version") or "—")]
        for backend, ms in modes.items():
            cell = Text()
            for i, md in enumerate(ms):
                if i:
                    cell.append(" ")
                row = e.cells.get((backend, md))
                if row is None:
                    cell.append(" " * SLOT)
                    continue
                sym, colour = symbol(row)
                cell.append(sym.ljust(SLOT), style=colour if color else "")
            cells.append(cell if e.cells else Text())
        table.add_row(*cells)
    legend = Text()
    for t, words in vocabulary.legend():
        legend.append(t.mark, style=t.terminal if color else "")
        legend.append(f" {t.words}: {words}\n")
    for mark, words in LEGEND_MARKS:
        legend.append(f"{mark} {words}\n")
    legend.append("Each backend's column has one slot per mode: · no mode, pc pcsampling, pf periodic_flushing, "
                  "df default, mm mma")
    return table, legend


def render(rows: list[dict[str, Any]], width: int | None = None, color: bool = False) -> str:
    """The grid as text: ``width`` columns wide at most, or (None) its natural width."""
    table, legend = build(rows, color)
    if width is None:
        wide = Console(file=io.StringIO(), width=NATURAL_WIDTH, color_system=None)
        width = max(wide.measure(table).maximum, LEGEND_WIDTH)
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color, color_system="standard" if color else None,
                      highlight=False, emoji=False, soft_wrap=False, legacy_windows=False)
    console.print(table)
    console.print()
    console.print(legend)
    text = buf.getvalue()
    return text if color else "".join(ln.rstrip(" ") + "\n" for ln in text.splitlines())
