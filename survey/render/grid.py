"""The terminal grid: environments x backend:mode, one symbol per check.

``survey table --format grid`` (the default when stdout is a terminal) prints
it with Rich, coloured, with a legend, fitted to the terminal's width. Output
that is not a terminal gets the grid's own width, never a default 80 columns,
so nothing is cut; ``--width`` fits it to a given width instead.
"""

from __future__ import annotations

import io
import re
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from probes import outcomes as O
from survey.verdicts.modes import BACKEND_ORDER, MODE_ORDER

MODE_ABBR = {None: "·", "pcsampling": "pc", "periodic_flushing": "pf", "default": "df", "mma": "mm"}
SYMBOLS = {
    "works": ("✓", "green"),
    "partly": ("~", "yellow"),
    "refused": ("✗", "red"),
    "unknown": ("?", "blue"),
}
LEGEND = [
    ("works", "accepted (and its GELU capture worked, where one ran)"),
    ("partly", "accepted, but its GELU capture failed or recorded nothing"),
    ("refused", "refused, or the backend is absent"),
    ("unknown", "no answer here (no GPU, crashed, hung, library missing with no stub)"),
]
_CAPTURE_NO_ANSWER = (O.NO_GPU, O.DISABLED, O.DEVICES_ENV_REJECTED, O.UNSTABLE)
_CODE = re.compile(r"`([^`]*)`")


def symbol(row: dict[str, Any]) -> tuple[str, str]:
    """(symbol, colour) of one measured matrix row; "*" marks stub-derived."""
    verdict = row.get("verdict")
    if verdict == "accepted":
        cap = row.get("capture_outcome")
        kind = "partly" if cap is not None and cap != O.OK and cap not in _CAPTURE_NO_ANSWER else "works"
    elif verdict in ("refused", "absent"):
        kind = "refused"
    else:
        kind = "unknown"
    sym, colour = SYMBOLS[kind]
    return sym + ("*" if row.get("verdict_source") == "stub" else ""), colour


def _styled(text: str, color: bool) -> Text:
    """A label with `code` spans shown without backticks (cyan when coloured)."""
    out = Text()
    pos = 0
    for mt in _CODE.finditer(text):
        out.append(text[pos:mt.start()])
        out.append(mt.group(1), style="cyan" if color else "")
        pos = mt.end()
    out.append(text[pos:])
    return out


def build(rows: list[dict[str, Any]], color: bool = True) -> tuple[Table, Text]:
    """The grid of ``survey.verdicts.matrix.matrix`` rows, and its legend: one row per
    environment (candidate, platform), one column per backend holding a
    two-character slot per mode (symbol, then "*" when stub-derived)."""
    checks = sorted({(r["backend"], r["mode_arg"]) for r in rows if r["status"] == "measured"},
                    key=lambda c: (BACKEND_ORDER.get(c[0], 99), MODE_ORDER.get(c[1], 9)))
    modes: dict[str, list[str | None]] = {}
    for backend, mode in checks:
        modes.setdefault(backend, []).append(mode)
    platforms = {r["platform"] for r in rows if r["status"] == "measured"}
    envs: dict[tuple[str, str | None], dict[str, Any]] = {}
    for r in rows:
        e = envs.setdefault((r["candidate"], r["platform"]), {"row": r, "cells": {}})
        if r["status"] == "measured":
            e["cells"][(r["backend"], r["mode_arg"])] = r
    table = Table(show_edge=False, box=None, padding=(0, 1), header_style="bold" if color else "",
                  pad_edge=False)
    table.add_column("environment", overflow="fold", ratio=1, min_width=12)
    table.add_column("triton", no_wrap=True)
    for backend, ms in modes.items():
        slots = " ".join(MODE_ABBR.get(md, (md or "?")[:2]).ljust(2) for md in ms)
        table.add_column(f"{backend}\n{slots}", no_wrap=True)
    for e in envs.values():
        r = e["row"]
        label = r["label"]
        if len(platforms) > 1 and r.get("platform_label") and r["status"] == "measured":
            label += f" · {r['platform_label']}"
        name = _styled(label, color)
        if r["status"] != "measured":
            why = {"unobtainable": "unobtainable here", "failed": "the probe failed"}.get(r["status"], "not probed")
            name.append(f" — no evidence: {why}", style="dim" if color else "")
        cells: list[Text | str] = [name, r.get("triton_version") or "—"]
        for backend, ms in modes.items():
            cell = Text()
            for i, md in enumerate(ms):
                if i:
                    cell.append(" ")
                row = e["cells"].get((backend, md))
                if row is None:
                    cell.append("  ")
                    continue
                sym, colour = symbol(row)
                cell.append(sym.ljust(2), style=colour if color else "")
            cells.append(cell if e["cells"] else "")
        table.add_row(*cells)
    legend = Text()
    for kind, words in LEGEND:
        sym, colour = SYMBOLS[kind]
        legend.append(sym, style=colour if color else "")
        legend.append(f" {words}\n")
    legend.append("* stub-derived: answered through a stub library, not a live result\n")
    legend.append("Each backend's column has one slot per mode: · no mode, pc pcsampling, pf periodic_flushing, "
                  "df default, mm mma")
    return table, legend


def render(rows: list[dict[str, Any]], width: int | None = None, color: bool = False) -> str:
    """The grid as text: ``width`` columns wide at most, or (None) its natural width."""
    table, legend = build(rows, color)
    if width is None:
        wide = Console(file=io.StringIO(), width=100_000, color_system=None)
        width = max(wide.measure(table).maximum, 80)  # the legend reads on 80 columns
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color, color_system="standard" if color else None,
                      highlight=False, emoji=False, soft_wrap=False, legacy_windows=False)
    console.print(table)
    console.print()
    console.print(legend)
    text = buf.getvalue()
    return text if color else "".join(ln.rstrip(" ") + "\n" for ln in text.splitlines())
