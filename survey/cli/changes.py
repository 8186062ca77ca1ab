"""``survey changes``: what moved between consecutive runs, newest first (the terminal face of /changes)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from survey.cli.app import DbOpt, FormatOpt, JsonOpt, app, err, open_store, out, wants_json
from survey.core.errors import UsageProblem
from survey.render.escape import json_text, terminal


@app.command("changes")
def changes_cmd(
    since: Annotated[Optional[str], typer.Option(
        help="only changes made by runs stored at or after this date or time (ISO 8601, UTC unless it says)")]
    = None,
    limit: Annotated[int, typer.Option(min=1, help="at most this many, newest first")] = 100,
    show_all: Annotated[bool, typer.Option("--all", help="also ad-hoc candidates")] = False,
    fmt: FormatOpt = None,
    output_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """What changed: each (candidate, platform, backend, mode) whose answer moved between consecutive runs
    (and each cell a run answered first), newest first; then failed webhook deliveries."""
    output_json = wants_json(fmt, output_json)
    from survey.flows.notify import failed_deliveries
    from survey.verdicts import changes as changes_mod

    when = None
    if since is not None:
        try:
            when = changes_mod.parse_since(since)
        except ValueError:
            raise UsageProblem(f"--since {since!r}: not a date or time (2026-12-01, 2026-12-01T12:00:00Z)")
    store = open_store(db, create=False)
    with store.session() as s:
        found = changes_mod.changes(s, scope="all" if show_all else "catalog", since=when)
    failed = failed_deliveries(store)
    shown = found[:limit]
    if output_json:
        sys.stdout.write(json_text({"since": since, "total": len(found), "changes": shown,
                                    "failed_deliveries": failed}, indent=1) + "\n")
        return
    for e in shown:
        runs = f"run #{e['run_id']}" + (f" vs #{e['previous_run_id']}" if e["previous_run_id"] is not None else "")
        where = f", {e['platform']}" if e["platform"] else ""
        out.print(terminal(f"{(e['date'] or '')[:16].replace('T', ' ')}  {changes_mod.summary(e)}  [{runs}{where}]"),
                  markup=False, highlight=False)
    if len(found) > limit:
        out.print(f"... {len(found) - limit} older (--limit, --since)", markup=False, highlight=False)
    if not found:
        out.print("no changes" + (f" since {since}" if since else ""), markup=False, highlight=False)
    for d in failed:
        err.print(terminal(f"webhook delivery #{d['id']} to {d['url']} failed ({d['date']}, {d['attempts']} "
                           f"attempt(s)): {d['error']}"), markup=False, highlight=False)
