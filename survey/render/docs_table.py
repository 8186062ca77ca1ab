"""The docs Availability table, in the reference page's layout and words.

By default four columns, as on the amd-rocprofiler page: Source | Triton |
Proton `-b` choices | `rocprofiler` modes, each cell a short phrase
("`periodic_flushing` only — `pcsampling` raises `unsupported mode`").
Provenance (run, date, platform, digest), stub caveats and why a row has no
evidence are numbered footnotes under the table, so the cells stay short. Under
the footnotes: since when each backend and mode is present / accepted / works
(``survey.verdicts.since``), and the documented claims (``survey.verdicts.documented``), marked
"documented, not measured" and never merged with the measurements.

Rows are (candidate, platform) slots (``survey.evidence.queries.slots``); the slots of one
candidate share one row when every chosen cell reads the same on each platform,
and are shown per platform where the evidence differs. A chosen column no row
has anything to say in is left out.

The table of an unchanged environment is the same every time it is surveyed
(``survey run --force`` included), so that ``survey table --check`` fails only
when the evidence says something new:

- a cell reads the checks as published (``survey.verdicts.stability``): a check whose
  attempts disagreed in any run of the environment (same environment identity,
  platform and probe version), or that two of its runs answered differently,
  is "unstable across attempts", from then on; no counts in the table (they
  change with every run: ``survey check``, ``survey history`` and ``/history``
  show them);
- a row's provenance footnote names the environment's first run, not its latest
  (every later run of it is pooled into the same answers).

``build`` returns a ``DocsTable``; ``markdown()`` and ``html()`` render it
(HTML never carries Markdown syntax: backticks become ``<code>``). Cells and
sentences are our words with `code` spans around evidence text; evidence is shown
through each medium's rule (``survey.render.escape``), never as markup.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from db import models as m
from probes import outcomes as O
from survey.core import errortext
from survey.core.errors import UsageProblem, did_you_mean
from survey.evidence import queries
from survey.evidence.queries import iso
from survey.render import escape
from survey.render.table import pipe_table
from survey.verdicts import cells as cells_mod
from survey.verdicts import documented as documented_mod
from survey.verdicts import since, summary, vocabulary
from survey.verdicts.facts import Check, Facts
from survey.verdicts.modes import BACKEND_ORDER, MODE_ORDER, Acceptance

# column key -> header, in the order `--columns` lists them
HEADERS = {
    "source": "Source",
    "platform": "Platform",
    "triton": "Triton",
    "choices": "Proton `-b` choices",
    **{b: f"`{b}` modes" for b in O.BACKENDS},
    "capture": "GELU capture",
    "evidence": "Evidence",
}
ALIASES = {"-b": "choices", "b": "choices", "backends": "choices", "modes": "rocprofiler", "gelu": "capture",
           "captures": "capture", "provenance": "evidence"}
DEFAULT_KEYS = ["source", "triton", "choices", "rocprofiler"]
NONE = "—"
_CODE = re.compile(r"`([^`]+)`")  # a `code` span, as survey.render.escape reads them
LINE_LIMIT = 200  # no line of the Markdown output is longer (footnotes and sections are wrapped)

_NAMED_MODES = {"instrumentation": ("default", "mma")}
_SHORT_REFUSALS = {"unsupported-mode": "unsupported mode", "unknown-mode": "unknown mode"}
_UNKNOWN_WORDS = {O.NO_GPU: "no GPU here", O.CRASH: "crashed", O.TIMEOUT: "hung", O.ERROR: "unrecognised error",
                  O.DISABLED: "Proton disabled", O.DEVICES_ENV_REJECTED: "device variable rejected",
                  O.UNSTABLE: "unstable across attempts"}
_NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
_SUP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
DOCUMENTED_NOTE = "documented, not measured: from the sources listed under “Documented, not measured” below"


def parse_columns(spec: str | None) -> list[str]:
    """Column keys from ``--columns``: a comma list replaces the default columns,
    a list of ``+key`` adds to them. Source always comes first."""
    if spec is None or not spec.strip():
        return list(DEFAULT_KEYS)
    items = [x.strip() for x in spec.split(",") if x.strip()]
    adding = all(x.startswith("+") for x in items)
    if not adding and any(x.startswith("+") for x in items):
        raise UsageProblem("--columns: give either a list of columns or a list of +additions, not both")
    keys: list[str] = list(DEFAULT_KEYS) if adding else []
    for x in items:
        k = x.lstrip("+").lower().strip("`")
        k = ALIASES.get(k, k)
        if k not in HEADERS:
            raise UsageProblem(f"--columns: unknown column {x.lstrip('+')!r}; "
                               f"{did_you_mean(x.lstrip('+'), list(HEADERS))}one of {', '.join(HEADERS)}")
        if k not in keys:
            keys.append(k)
    return ["source", *[k for k in keys if k != "source"]]


# ---------------------------------------------------------------------------- cells
def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _tick(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _mode_name(mode: str | None) -> str:
    return "no mode" if mode is None else f"`{mode}`"


def _refusal(vs: list[Check]) -> list[str]:
    """"`pcsampling` raises `unsupported mode`", grouped by reason."""
    groups: dict[str, list[str]] = {}
    for v in vs:
        groups.setdefault((v.stub_rule if v.source == "stub" else v.rule) or "", []).append(_mode_name(v.mode))
    out = []
    for rule, names in groups.items():
        short = _SHORT_REFUSALS.get(rule)
        if short:
            out.append(f"{_and(names)} {'raise' if len(names) > 1 else 'raises'} `{short}`")
        elif rule == "pcsampling-not-built":
            out.append(f"{_and(names)} refused: built without PC sampling support")
        else:
            out.append(f"{_and(names)} refused")
    return out


def modes_cell(facts: Facts, backend: str) -> tuple[str, str | None]:
    """The "`<backend>` modes" cell and its caveat (stub-derived), if any."""
    vs = {c.mode: c for c in facts.checks(backend)}
    if not vs:
        return "not measured", None
    if all(v.verdict == Acceptance.ABSENT for v in vs.values()):
        return "backend absent", None
    named = [vs[md] for md in _NAMED_MODES.get(backend, ("pcsampling", "periodic_flushing")) if md in vs]
    acc = [v for v in named if v.verdict == Acceptance.ACCEPTED]
    ref = [v for v in named if v.verdict == Acceptance.REFUSED]
    unk = [v for v in named if v.verdict == Acceptance.UNKNOWN]
    used = acc + ref
    if acc:
        head = _and([_mode_name(v.mode) for v in acc]) + ("" if len(acc) == len(named) else " only")
    elif None in vs and vs[None].verdict == Acceptance.ACCEPTED:
        head = "no mode only"
        used.append(vs[None])
    else:
        head = ""
    rest = _refusal(ref)
    words: dict[str, list[str]] = {}
    for v in unk:
        word = _UNKNOWN_WORDS.get(v.outcome, v.outcome.replace("_", " "))
        if v.outcome == O.LIBRARY_MISSING:
            word = f"`{v.library}` did not load" if v.library else "a library did not load"
        words.setdefault(word, []).append(_mode_name(v.mode))
    rest += [f"{_and(names)}: {word}" for word, names in words.items()]
    text = (head + (" — " if head and rest else "") + "; ".join(rest)) if (head or rest) else "no answer"
    stubbed = [v for v in used if v.source == "stub"]
    note = None
    if stubbed:
        # both facts of each such mode, in the words /matrix and survey check use
        said = [f"{_mode_name(v.mode)}: " + vocabulary.say({"here": v.here, "cause": v.cause, "verdict": v.verdict,
                                                            "verdict_source": v.source}) for v in stubbed]
        libs = sorted({v.library for v in stubbed if v.library})
        note = (". ".join(said) + f". Stub-derived, not a live result: {_tick(libs) or 'its library'} did not load "
                "here before the mode was looked at, so the mode was asked of a stub library (`probes/stubs/`)")
    return text, note


def capture_cell(facts: Facts) -> str:
    """The GELU captures, grouped: "`cupti` (no mode, `pcsampling`): ok, 50 launches"."""
    captures = facts.captures()
    if not captures:
        return NONE
    groups: dict[tuple[str, str], list[str | None]] = {}
    for c in sorted(captures, key=lambda c: (BACKEND_ORDER.get(c.backend or "", 99), MODE_ORDER.get(c.mode, 9))):
        what = c.outcome.replace("_", " ")
        if c.kernel_count is not None and c.outcome in (O.OK, O.HANG_AFTER_CAPTURE):
            what += f", {c.kernel_count} launches"
        groups.setdefault((c.backend or "?", what), []).append(c.mode)
    parts = []
    for (backend, what), modes in groups.items():
        ms = "" if modes == [None] else " (" + ", ".join(_mode_name(x) for x in modes) + ")"
        parts.append(f"`{backend}`{ms}: {what}")
    return "; ".join(parts)


def triton_cell(facts: Facts) -> str:
    if not facts.triton_version:
        return NONE
    dist = facts.triton_distribution
    return facts.triton_version if dist in (None, "triton") else f"`{dist}` {facts.triton_version}"


def provenance_text(facts: Facts, platform: str | None = None) -> str:
    """The environment's first run, as a row's footnote cites it."""
    parts = [f"run #{facts.first_run}", (facts.first_date or "")[:10]]
    if platform:
        parts.append(platform)
    if facts.first_what:
        parts.append(facts.first_what)
    return ", ".join(x for x in parts if x)


def no_evidence_text(last: m.Run | None, spec: dict[str, Any] | None) -> str:
    """Why a slot has no complete run: its latest run (None: never probed) and its
    candidate's spec."""
    if last is None:
        return "no evidence: not yet probed"
    what = "unobtainable here" if last.status == "unobtainable" else "the probe failed"
    seen = (iso(last.finished_at) or "?")[:10]
    return f"no evidence: {what} ({errortext.cause(last.error, spec)}), since {seen}"


LONG_CODE = 40  # a `code` span of a label longer than this is shortened in the table, in full in its footnote


def short_label(label: str) -> tuple[str, str | None]:
    """The label with over-long `code` spans shortened as the reference page does
    (`rocm/pytorch:rocm7.14_...pytorch_release_2.12.0`), and the full label when
    anything was shortened: an unbreakable 66-character image tag would widen
    the table past a 1000 px page."""
    changed = False

    def shorten(mt: re.Match[str]) -> str:
        nonlocal changed
        code = mt.group(1)
        if len(code) <= LONG_CODE:
            return mt.group(0)
        parts = code.split("_")
        short = parts[0] + "_..." + "_".join(parts[-3:]) if len(parts) >= 5 else code[:18] + "..." + code[-18:]
        if len(short) >= len(code):
            return mt.group(0)
        changed = True
        return f"`{short}`"

    new = _CODE.sub(shorten, label)
    return new, (label if changed else None)


# ---------------------------------------------------------------------------- the table
@dataclass
class Cell:
    text: str
    note: str | None = None  # footnote text (joined when a cell has several)


@dataclass(frozen=True)
class Line:
    """One slot as the table reads it: its candidate, its platform, and its facts (None:
    no complete run, and ``missing`` says why)."""

    name: str
    label: str
    platform_key: str | None  # None: a candidate without a run, or a slot without a platform
    platform_label: str
    facts: Facts | None
    missing: str | None = None


@dataclass
class _SlotCells:
    line: Line
    cells: dict[str, Cell]
    choices: list[str] | None
    provenance: str


@dataclass
class DocsTable:
    """The table, its footnotes and the two sections under it."""

    keys: list[str]
    rows: list[dict[str, Cell]]
    notes: list[str] = field(default_factory=list)
    since: list[dict[str, Any]] = field(default_factory=list)
    documented: list[dict[str, Any]] = field(default_factory=list)
    measured_on: str | None = None  # said under the table: every measurement is from one platform without a GPU
    # note -> its number: looked up for every cell, so a dict, not a search of the list
    # (10,000 rows, each with a note of its own: `survey table` 9.4 -> 8.1 s)
    _numbers: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def columns(self) -> list[str]:
        return [HEADERS[k] for k in self.keys]

    def add_note(self, note: str) -> None:
        """A footnote, once: numbered in the order first met."""
        if note not in self._numbers:
            self.notes.append(note)
            self._numbers[note] = len(self.notes)

    def note_number(self, cell: Cell) -> int | None:
        return self._numbers[cell.note] if cell.note else None

    def cell_md(self, cell: Cell) -> str:
        n = self.note_number(cell)
        return cell.text + (f" {str(n).translate(_SUP)}" if n else "")

    def text_rows(self) -> list[dict[str, str]]:
        """The rows as Markdown cell text (footnote markers included)."""
        return [{HEADERS[k]: self.cell_md(r[k]) for k in self.keys} for r in self.rows]

    def markdown(self) -> str:
        return to_markdown(self)

    def html(self) -> str:
        return to_html(self)


def _slot_cells(line: Line, keys: list[str], platforms_shown: bool,
               said: dict[Any, Any]) -> _SlotCells:
    """``said``: the cells worked out so far in this table, by what they are a function of
    (a backend's modes cell: the backend and its checks' stored text; the choices cell:
    the choices), which slots repeat by the thousand."""
    f = line.facts
    cells: dict[str, Cell] = {}
    if f is None:
        for k in keys:
            cells[k] = Cell(NONE)
        return _SlotCells(line, cells, None, line.missing or "")
    for k in keys:
        if k == "triton":
            cells[k] = Cell(triton_cell(f))
        elif k == "choices":
            cells[k] = Cell(_choices(f.cli_backends, said))
        elif k in O.BACKENDS:
            key = (k, f.check_rows.get(k))
            found = said.get(key)
            if found is None:
                found = said[key] = modes_cell(f, k)
            cells[k] = Cell(*found)
        elif k == "capture":
            cells[k] = Cell(capture_cell(f))
        else:
            cells[k] = Cell(NONE)
    # The environment's first run: its later runs are pooled into the same answers (survey.verdicts.stability).
    plabel = line.platform_label if line.platform_key is not None else None
    return _SlotCells(line, cells, f.cli_backends, provenance_text(f, plabel if platforms_shown else None))


def _choices(names: list[str] | None, said: dict[Any, Any]) -> str:
    """The `-b` choices cell, worked out once per table for each list of choices."""
    key = ("choices", tuple(names) if names else None)
    found = said.get(key)
    if found is None:
        found = said[key] = _tick(names) if names else NONE
    return str(found)


def _documented_cells(row: dict[str, Cell], keys: list[str], claims: list[dict[str, Any]]) -> None:
    """Fill the cells of a row that has no measurement from documented claims,
    marked as such."""
    for k in keys:
        if row[k].text != NONE:
            continue
        if k in O.BACKENDS:
            acc = [c["mode_arg"] for c in claims if c["backend"] == k and c["claim"] == "accepted" and c["mode_arg"]]
            ref = [c["mode_arg"] for c in claims if c["backend"] == k and c["claim"] == "refused" and c["mode_arg"]]
            absent = any(c["backend"] == k and c["claim"] == "absent" for c in claims)
            acc.sort(key=lambda x: MODE_ORDER.get(x, 9))
            parts = []
            if absent:
                parts.append("backend absent")
            if acc:
                parts.append(_and([f"`{x}`" for x in acc]))
            if ref:
                parts.append(_and([f"`{x}`" for x in ref]) + " refused")
            if parts:
                row[k] = Cell("; ".join(parts) + " (documented, not measured)", DOCUMENTED_NOTE)
        elif k == "choices":
            present = [c["backend"] for c in claims if c["claim"] == "present"]
            if present:
                row[k] = Cell(f"includes {_tick(sorted(set(present), key=lambda b: BACKEND_ORDER.get(b, 99)))}"
                              " (documented, not measured)", DOCUMENTED_NOTE)


def named_columns(spec: str | None) -> set[str]:
    """The columns ``--columns`` names (``capture`` in ``capture`` or ``+capture``): shown even
    with nothing in them, which is then the answer; the default columns are left out when empty."""
    if spec is None or not spec.strip():
        return set()
    return set(parse_columns(spec)) - ({"source"} | (set(DEFAULT_KEYS) if spec.strip().startswith("+") else set()))


def lines(s: Session, scope: str = "catalog") -> list[Line]:
    """The table's slots, in matrix order, with their facts: while the stored cells are
    current, one small row per slot (``survey.verdicts.summary``); otherwise worked out from
    the runs, by the same function."""
    if summary.current(s):
        found = queries.slot_lines(s, scope)
        facts = summary.stored_facts(s, [x.slot_id for x in found if x.slot_id is not None])
        bare = [x for x in found if x.complete_run_id is None]  # no evidence: why, from the latest run
        lasts = {r.id: r for r in queries.runs_by_id(s, [x.last_run_id for x in bare if x.last_run_id is not None])}
        specs = queries.specs_of(s, [x.name for x in bare])
        return [Line(x.name, x.label, x.platform_key, x.platform_label,
                     facts.get(x.slot_id) if x.slot_id is not None and x.complete_run_id is not None else None,
                     None if x.complete_run_id is not None else no_evidence_text(
                         lasts.get(x.last_run_id) if x.last_run_id is not None else None, specs.get(x.name)))
                for x in found]
    slots = queries.slots(s, scope)
    runs = [sl.complete for sl in slots if sl.complete is not None]
    worked = cells_mod.run_cells(s, runs)
    by_run = summary.run_facts(s, {r.id: r for r in runs}, worked)
    return [Line(sl.candidate.name, sl.candidate.label, sl.platform_key, sl.platform_label,
                 by_run[sl.complete.id] if sl.complete is not None else None,
                 None if sl.complete is not None else no_evidence_text(sl.last, sl.candidate.spec))
            for sl in slots]


def build(s: Session, scope: str = "catalog", columns: list[str] | None = None,
          documented_path: str | Path | None = None, with_sections: bool = True,
          keep: set[str] | frozenset[str] = frozenset()) -> DocsTable:
    """The docs table of the store's ``scope`` candidates, with the chosen column
    keys (default: the reference page's four); a column with nothing to show is left
    out, unless it is in ``keep`` (asked for by name)."""
    keys = list(columns or DEFAULT_KEYS)
    slots = lines(s, scope)
    platforms = {x.platform_key for x in slots if x.platform_key is not None and x.facts is not None}
    many_platforms = len(platforms) > 1
    claims = documented_mod.assess(s, documented_mod.load(documented_path)) if with_sections else []
    by_candidate: dict[str, list[Line]] = {}
    for x in slots:
        by_candidate.setdefault(x.name, []).append(x)
    cell_keys = [k for k in keys if k not in ("source", "platform", "evidence")]
    conflicting = {c["candidate"] for c in claims if c["status"] == "conflicts"}
    rows: list[dict[str, Cell]] = []
    choices_of: list[list[str] | None] = []
    worked: dict[Any, Any] = {}  # cells by what they are a function of (_slot_cells)
    for name, group in by_candidate.items():
        per = [_slot_cells(x, cell_keys, many_platforms, worked) for x in group]
        same = all(p.cells == per[0].cells for p in per[1:])
        parts = [per] if same else [[p] for p in per]
        conflict = name in conflicting
        for part in parts:
            first = part[0]
            label, full = short_label(group[0].label)
            # provenance goes to the footnote unless the Evidence column shows it
            said = [] if "evidence" in keys else ["; ".join(p.provenance for p in part)]
            if conflict:
                said.append("a measurement here disagrees with a documented claim (see “Documented, not measured”)")
            said_text = "; ".join(said)
            source_note = f"{full}: {said_text}" if full and said_text else (full or said_text or None)
            plats = [p.line.platform_label for p in part if p.line.platform_key is not None]
            if not same and "platform" not in keys and plats:
                label += f" on {plats[0]}"
            row: dict[str, Cell] = {}
            for k in keys:
                if k == "source":
                    row[k] = Cell(label, source_note)
                elif k == "platform":
                    row[k] = Cell(", ".join(plats) if plats else NONE)
                elif k == "evidence":
                    row[k] = Cell("; ".join(p.provenance for p in part))
                else:
                    row[k] = first.cells[k]
            if first.line.facts is None:
                _documented_cells(row, keys, [c for c in claims if c["candidate"] == name])
            rows.append(row)
            choices_of.append(first.choices)
    _same_choices(rows, choices_of, keys)
    keys = [k for k in keys if k == "source" or k in keep or _has_information(k, rows, many_platforms)]
    table = DocsTable(keys, rows)
    if len(platforms) == 1 and (next(iter(platforms)) or "").startswith("none:"):
        label = next(x.platform_label for x in slots if x.platform_key in platforms)
        table.measured_on = (f"Measured without a GPU ({label}): a mode a GPU backend would run is not answered here; "
                             "evidence from a GPU host (`survey ingest`) answers it.")
    for row in rows:
        for k in keys:
            note = row[k].note
            if note:
                table.add_note(note)
    if with_sections:
        table.since = since.rows_of([
            since.Said(x.facts.triton_version, x.platform_key or "unrecorded", x.platform_label, x.facts.run_id,
                       x.facts.answers) for x in slots if x.facts is not None and x.facts.triton_version])
        table.documented = claims
    return table


def _same_choices(rows: list[dict[str, Cell]], choices: list[list[str] | None], keys: list[str]) -> None:
    """The reference page's "same three": a row whose -b choices are the row
    above's says so."""
    if "choices" not in keys:
        return
    for i in range(1, len(rows)):
        prev, cur = choices[i - 1], choices[i]
        if cur and prev == cur and rows[i]["choices"].note is None:
            rows[i]["choices"] = Cell(f"same {_NUMBERS.get(len(cur), str(len(cur)))}")


def _has_information(key: str, rows: list[dict[str, Cell]], many_platforms: bool) -> bool:
    if key == "platform":
        return many_platforms
    return any(r[key].text not in (NONE, "", "not measured") for r in rows)


# ---------------------------------------------------------------------------- rows
def table_rows(s: Session, scope: str = "catalog", columns: list[str] | None = None,
               documented_path: str | Path | None = None) -> list[dict[str, str]]:
    """The table's rows as cell text (`code` spans and footnote markers), by header."""
    return build(s, scope, columns, documented_path).text_rows()


def markdown(s: Session, scope: str = "catalog", columns: list[str] | None = None,
             documented_path: str | Path | None = None) -> str:
    """The Markdown docs table: what ``survey table`` prints and ``/matrix.md`` serves."""
    return build(s, scope, columns, documented_path).markdown()


# ---------------------------------------------------------------------------- Markdown
def md(text: str) -> str:
    """Our words with `code` spans, as Markdown: the evidence in them shown, never markup."""
    return escape.markdown(text, code=True)


_RESHAPED = re.compile(r"[\t\n\x0b\x0c\r]|^$")  # whitespace textwrap replaces; empty text


def _wrap(text: str, first: str, rest: str) -> list[str]:
    """Lines of at most LINE_LIMIT characters and LINE_LIMIT bytes of UTF-8 (quotes such
    as “” are three bytes each): the limit holds however a tool counts."""
    if (len(first) + len(text) <= LINE_LIMIT and text == text.strip() and not _RESHAPED.search(text)
            and len(first.encode()) + len(text.encode()) <= LINE_LIMIT):
        return [first + text]  # what _wrapped gives a text that fits one line, without its work
    return _wrapped(text, first, rest)


def _wrapped(text: str, first: str, rest: str) -> list[str]:
    width = LINE_LIMIT
    while True:
        lines = textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest,
                              break_long_words=False, break_on_hyphens=False) or [first.rstrip()]
        if width <= LINE_LIMIT // 2 or all(len(line.encode()) <= LINE_LIMIT for line in lines):
            return lines
        width -= 2


def _doc_refs(table: DocsTable) -> dict[str, str]:
    """url -> reference label ([doc-1]) for the documented section's links."""
    refs: dict[str, str] = {}
    for c in table.documented:
        for src in c["sources"]:
            refs.setdefault(src["url"], f"doc-{len(refs) + 1}")
    return refs


def _source_short(src: dict[str, Any]) -> str:
    pin = src.get("commit", "")[:7] or src.get("date", "")
    return f"{src['title']}, {pin}" if pin else src["title"]


def documented_status(c: dict[str, Any]) -> str:
    if c["status"] == "not_measured":
        return "not measured here"
    seen = []
    for x in c["measured"]:
        where = f"run #{x['run_id']} on {x['platform_label']}"
        what = "agrees" if x["holds"] else f"measured {x['seen']}"
        seen.append(f"{what} ({where}{', stub-derived' if x['stub_derived'] else ''})")
    word = "CONFLICT" if c["status"] == "conflicts" else "agrees with the measurement"
    return f"{word}: " + "; ".join(seen)


NO_EVIDENCE = ("No evidence stored for these candidates yet: `survey run` surveys the catalog's, and `survey ingest "
               "REPORT --candidate NAME` files a report from elsewhere.")


def to_markdown(table: DocsTable) -> str:
    if table.rows:
        out = [pipe_table(table.columns, [[table.cell_md(r[k]) for k in table.keys] for r in table.rows], code=True)]
    else:  # a table of no row would be a bare header
        out = ["\n".join(_wrap(NO_EVIDENCE, "", "")) + "\n"]
    if table.notes:
        lines = []
        for i, note in enumerate(table.notes, 1):
            lines += _wrap(md(note), f"{i}. ", " " * len(f"{i}. "))
        out.append("\n".join(lines) + "\n")
    if table.measured_on:
        out.append("\n".join(_wrap(md(table.measured_on), "", "")) + "\n")
    if table.since:
        lines = ["**Since**, from the evidence across releases (ordered by version; catalog candidates only):", ""]
        for phrase in since.since_lines(table.since):
            lines += _wrap(md(phrase), "- ", "  ")
        out.append("\n".join(lines) + "\n")
    if table.documented:
        refs = _doc_refs(table)
        lines = ["**Documented, not measured**: claims kept as data in `survey/data/documented/`, each with its source;"
                 " shown apart from the measurements above.", ""]
        for c in table.documented:
            srcs = "; ".join(f"[{md(_source_short(src))}][{refs[src['url']]}]: “{md(src['quote'])}”"
                             for src in c["sources"])
            text = f"{md(c['label'])}: {md(c['subject'])} — {md(documented_status(c))}. Source: {srcs}"
            if c.get("note"):
                text += f". Note: {md(c['note'])}"
            text += f" (added by {md(c['added_by'])}, {md(c['added'])})"
            lines += _wrap(text, "- ", "  ")
        lines.append("")
        lines += [f"[{label}]: {escape.link_target(url)}" for url, label in refs.items()]
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


# ---------------------------------------------------------------------------- HTML


inline_html = escape.inline_html  # the service's templates use it for evidence text


def to_html(table: DocsTable) -> str:
    """The docs table as HTML, every element through ``survey.render.escape.element``."""
    el, text = escape.element, escape.inline_html
    head = "".join(el("th", text(h)) for h in table.columns)
    body = []
    for r in table.rows:
        tds = []
        for k in table.keys:
            cell = r[k]
            n = table.note_number(cell)
            mark = el("sup", el("a", str(n), href=f"#availability-note-{n}")) if n else ""
            tds.append(el("td", text(cell.text) + mark))
        body.append(el("tr", "".join(tds)))
    parts = [el("table", "\n" + el("thead", el("tr", head)) + "\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n",
                class_="availability")]
    if table.measured_on:
        parts.append(el("p", text(table.measured_on), class_="availability-platform"))
    if table.notes:
        items = "".join(el("li", text(n), id=f"availability-note-{i}") for i, n in enumerate(table.notes, 1))
        parts.append(el("ol", items, class_="availability-notes"))
    if table.since:
        items = "".join(el("li", text(p)) for p in since.since_lines(table.since))
        parts.append(el("p", el("strong", "Since") + ", from the evidence across releases (ordered by version; "
                              "catalog candidates only):") + el("ul", items, class_="availability-since"))
    if table.documented:
        claims = []
        for c in table.documented:
            srcs = "; ".join(el("a", text(_source_short(src)), href=src["url"]) + f": “{text(src['quote'])}”"
                             for src in c["sources"])
            cls = "conflict" if c["status"] == "conflicts" else c["status"]
            said = (f"{text(c['label'])}: {text(c['subject'])} — " + el("span", text(documented_status(c)), class_=cls)
                    + f". Source: {srcs}")
            if c.get("note"):
                said += f". Note: {text(c['note'])}"
            said += f" (added by {text(c['added_by'])}, {text(c['added'])})"
            claims.append(el("li", said))
        parts.append(el("p", el("strong", "Documented, not measured") + ": claims kept as data in "
                        + el("code", "survey/data/documented/") + ", each with its source; shown apart from the "
                        "measurements above.") + el("ul", "".join(claims), class_="availability-documented"))
    return "\n".join(parts) + "\n"
