"""``survey table``, ``survey history``, ``survey diff``: the evidence as tables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from survey.cli.app import DbOpt, FormatOpt, JsonOpt, app, err, open_store, out, wants_json
from survey.core import exitcodes
from survey.core.errors import StoreUnusable, UnknownTarget, UsageProblem, choose
from survey.render.escape import json_text, rich_markup, rich_text, terminal


@app.command("table")
def table_cmd(
    fmt: Annotated[Optional[str], typer.Option(
        "--format", help="md: the docs table (the default when stdout is not a terminal); html: the same as HTML; "
                         "grid: environments x backend:mode, symbols and colours (the default on a terminal); "
                         "csv, json: the matrix rows, one per environment x platform x backend x mode "
                         "(schema/matrix-rows.v1.schema.json)")] = None,
    columns: Annotated[Optional[str], typer.Option(
        "--columns", help="the docs table's columns: a comma list of source, platform, triton, choices, rocprofiler, "
                          "cupti, roctracer, instrumentation, capture, evidence; or additions to the default "
                          "(source,triton,choices,rocprofiler) such as +capture,+platform. A default column with "
                          "nothing to show is left out; a column named here is always shown")] = None,
    width: Annotated[Optional[int], typer.Option(
        "--width", min=40, help="grid: fit it to this many columns (default: the terminal's width; output that "
                                "is not a terminal is as wide as the grid)")] = None,
    documented: Annotated[Optional[Path], typer.Option(
        "--documented", help="documented claims: a YAML file or a directory of them (default: the packaged "
                             "survey/data/documented/)")] = None,
    check: Annotated[Optional[Path], typer.Option(help="exit 1 with a diff if this docs file's table is stale")] = None,
    write: Annotated[Optional[Path], typer.Option(help="replace the table in this docs file (between markers)")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="also ad-hoc evidence (targets checked by path or image, "
                                                         "reports ingested under no catalog name)")] = False,
    db: DbOpt = None,
) -> None:
    """The Availability table (catalog candidates), generated from the evidence."""
    from survey.render import docs_table
    from survey.render import table as table_mod
    fmt = _table_format(fmt, columns, width, check, write)
    keys = docs_table.parse_columns(columns)
    scope = "all" if show_all else "catalog"
    store = open_store(db, create=False)
    with store.session() as s:
        if fmt in ("md", "html"):
            docs = docs_table.build(s, scope, keys, documented, keep=docs_table.named_columns(columns))
            text = docs.markdown() if fmt == "md" else docs.html()
            empty = not docs.rows
        else:
            from survey.verdicts import matrix as matrix_mod

            rows = matrix_mod.matrix(s, scope=scope)
            empty = not rows
    if empty:
        _nothing_stored(store.url, show_all, write)
    if fmt == "grid":
        import os

        from survey.render import grid

        tty = sys.stdout.isatty()
        color = tty and not os.environ.get("NO_COLOR")
        if width is None and tty:
            width = out.size.width
        sys.stdout.write(grid.render(rows, width, color))
        return
    if fmt in ("csv", "json"):
        from survey.verdicts import rows as matrix_schema

        for piece in table_mod.stream(rows, matrix_schema.FIELDS, fmt):  # every row holds FIELDS, in order
            sys.stdout.write(piece)
        return
    _show_docs_table(text, check, write)


def _table_format(fmt: str | None, columns: str | None, width: int | None, check: Path | None,
                  write: Path | None) -> str:
    """The format ``survey table`` writes (its default: md off a terminal, grid on one), and
    the options that do not go with it refused (exit 64)."""
    if fmt is None:
        fmt = "md" if (check or write or columns) or not sys.stdout.isatty() else "grid"
    choose(fmt, ("md", "html", "grid", "csv", "json"), "format")
    if (check or write) and fmt != "md":
        raise UsageProblem("--check and --write work on the Markdown table (--format md)")
    if columns is not None and fmt not in ("md", "html"):
        raise UsageProblem("--columns chooses the docs table's columns (--format md or html)")
    if width is not None and fmt != "grid":
        raise UsageProblem("--width fits the terminal grid (--format grid)")
    return fmt


def _nothing_stored(url: str, show_all: bool, write: Path | None) -> None:
    """A note that nothing is stored; with --write, a refusal (a page is never blanked)."""
    from db.store import mask_url

    why = (f"{mask_url(url)}: no evidence stored" + ("" if show_all else " for the catalog's candidates"))
    how = "get evidence with `survey run` (or `survey ingest REPORT --candidate NAME`)" + (
        "" if show_all else "; `--all` shows ad-hoc evidence too")
    if write:
        raise StoreUnusable(f"{why}: {write} was left as it was", hint=how)
    err.print(f"[yellow]note:[/] {rich_markup(why)}; {rich_markup(how)}", highlight=False)


def _show_docs_table(text: str, check: Path | None, write: Path | None) -> None:
    """The docs table: compared with a page's (--check), written into it (--write), or printed."""
    from survey.render import table as table_mod

    if check:
        diff = table_mod.check(check, text)
        if diff:
            sys.stdout.write(diff)
            err.print(f"[red]{rich_markup(str(check))}: the Availability table no longer matches the evidence[/]"
                      f" (update it with `survey table --write {rich_markup(str(check))}`)")
            raise typer.Exit(exitcodes.FAILURE)
        err.print(f"{check}: the Availability table matches the evidence", markup=False)
        return
    if write:
        changed = table_mod.write(write, text)
        err.print(f"{write}: {'table updated' if changed else 'already up to date'}", markup=False)
        return
    sys.stdout.write(text)


@app.command("history")
def history_cmd(
    candidate: Annotated[str, typer.Argument(help="a stored candidate's name")],
    backend: Annotated[str, typer.Option("--backend", "-b", help="the Proton backend")],
    mode: Annotated[str, typer.Option("--mode", "-m", help="its mode (`none`: no mode)")] = "none",
    platform: Annotated[Optional[str], typer.Option(help="only runs on this platform (a key)")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json, csv or md")] = "table",
    db: DbOpt = None,
) -> None:
    """One matrix cell over time: what every run of CANDIDATE said of a backend and mode, newest first."""
    from probes import outcomes as O
    from survey.evidence import queries
    from survey.render import table as table_mod
    from survey.verdicts import history

    choose(fmt, ("table", "json", "csv", "md"), "format")
    choose(backend, O.BACKENDS, "backend")
    choose(mode, queries.MODE_LABELS, "mode")
    the_mode = queries.mode_from_label(mode)
    with open_store(db, create=False).session() as s:
        cand = queries.get_candidate(s, candidate)
        keys = history.platforms(s, cand)
        if platform and platform not in keys:
            raise UnknownTarget(f"candidate {candidate!r} has no run on platform {platform!r}",
                                hint=f"it has runs on: {', '.join(keys) or '(none)'}")
        rows = history.cell_history(s, cand, backend, the_mode, platform)
    if fmt == "json":
        sys.stdout.write(json_text({"candidate": candidate, "backend": backend, "mode": mode, "platform": platform,
                                    "changes": sum(1 for r in rows if r["changed"]), "runs": rows}, indent=1) + "\n")
        return
    if fmt in ("csv", "md"):
        sys.stdout.write(table_mod.render(rows, history.COLUMNS, fmt))
        return
    from rich.table import Table

    from survey.render.grid import NATURAL_WIDTH

    t = Table(title=rich_text(f"{candidate} · {backend} {mode}"), show_header=True)
    for col in ("run", "date", "platform", "Triton", "outcome", "attempts", "published", "verdict", "reason"):
        t.add_column(col)
    for r in rows:
        mark = " (changed)" if r["changed"] else ""
        t.add_row(f"#{r['run_id']}{mark}", rich_text((r["date"] or "")[:10]), rich_text(r["platform"] or "—"),
                  rich_text(r["triton_version"] or "—"), rich_text(r["outcome"] or r["status"]),
                  rich_text(r["attempts"] or "—"), rich_text(r["published"] or "—"),
                  rich_text(r["verdict"] or "—"), rich_text(r["reason"] or r["error"] or ""))
    # Fitted to a terminal; never cut when the output is not one (a file, a pipe).
    (out if sys.stdout.isatty() else Console(width=NATURAL_WIDTH, color_system=None)).print(t)


@app.command("diff")
def diff_cmd(
    a: Annotated[str, typer.Argument(help="candidate name or run id (run:12)")],
    b: Annotated[str, typer.Argument(help="candidate name or run id")],
    fmt: FormatOpt = None,
    output_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """What changed between two candidates, or two runs of one. Exit 0 the same, 1 they differ (like diff)."""
    output_json = wants_json(fmt, output_json)
    from survey.evidence import queries
    from survey.verdicts import vocabulary
    from survey.verdicts.diff import diff_runs, text

    with open_store(db, create=False).session() as s:
        d = diff_runs(queries.resolve_ref(s, a), queries.resolve_ref(s, b))
    code = exitcodes.OK if d["same"] else exitcodes.FAILURE
    if output_json:
        sys.stdout.write(json_text(d, indent=1) + "\n")
        raise typer.Exit(code)
    from rich.table import Table

    out.print(terminal(f"a: run #{d['a']['run_id']} ({d['a']['candidate']}, {d['a']['date']})"), markup=False)
    out.print(terminal(f"b: run #{d['b']['run_id']} ({d['b']['candidate']}, {d['b']['date']})"), markup=False)
    if d["same"]:
        out.print("no differences in registry, modes, libraries or captures")
    for key, val in d["fields"].items():
        absent = FIELD_ABSENT.get(key, "unknown")
        out.print(terminal(f"  {FIELD_WORDS.get(key, key)}: {_words(val['a'], absent)} -> {_words(val['b'], absent)}"),
                  markup=False)
    for section in ("verdicts", "environment", "modes", "libraries", "captures"):
        if d[section]:
            t = Table(title=SECTION_TITLES.get(section, section), show_header=True)
            t.add_column("what")
            t.add_column("a")
            t.add_column("b")
            for c in d[section]:
                cells = [rich_text(_words(c[side], SECTION_ABSENT[section])) for side in ("a", "b")]
                if section == "verdicts":  # in the verdict's colour, as /matrix and survey check show it
                    for side, cell in zip(("a", "b"), cells, strict=True):
                        said = vocabulary.term(c[f"{side}_here"])
                        if said is not None:
                            cell.stylize(said.terminal)
                t.add_row(rich_text(text(c["key"])), *cells)
            out.print(t)
    raise typer.Exit(code)


# How `survey diff` says what one run has and the other has not (never Python's None or a list's repr).
SECTION_ABSENT = {"verdicts": "no such cell", "environment": "not installed", "modes": "not checked",
                  "libraries": "not looked up", "captures": "no capture"}
SECTION_TITLES = {"verdicts": "verdicts here"}
FIELD_ABSENT = {"profilers": "not read", "cli_backends": "not read", "image_digest": "no image"}
FIELD_WORDS = {"triton_version": "Triton", "profilers": "registry (get_available_profilers)",
               "cli_backends": "proton CLI -b choices", "image_digest": "image digest", "probe_version": "probe"}


def _words(value: object, absent: str) -> str:
    if value is None:
        return absent
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) if value else "none"
    return str(value)
