"""``survey store backup`` and ``survey store replace``: copies of a SQLite store, made
and put in place while a survey or the service is using it (survey.evidence.copies)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from survey.cli.app import DbOpt, app, err, open_store

store_app = typer.Typer(no_args_is_help=True, help="Back up the store, or replace its content, while it is in use.")
app.add_typer(store_app, name="store")


@store_app.command()
def backup(
    dest: Annotated[Path, typer.Argument(help="the copy: a new file")],
    db: DbOpt = None,
) -> None:
    """Copy the SQLite store, as one consistent snapshot (SQLite's backup API), into a new file.

    Surveys and the service may go on writing meanwhile: every write committed before the
    copy began is in it. Restore it with `survey store replace`."""
    from survey.evidence.copies import backup as do_backup

    done = do_backup(open_store(db, create=False), dest)
    err.print(f"backed up {done.runs} runs (matrix version {done.matrix_version}) to {done.path}",
              markup=False, highlight=False)


@store_app.command()
def replace(
    new: Annotated[Path, typer.Argument(help="a SQLite store file (e.g. made by `survey store backup`)")],
    db: DbOpt = None,
) -> None:
    """Replace the whole content of the SQLite store with NEW's, in one transaction.

    Safe while `survey serve` and surveys use the store: it waits for the store's write
    lock, and every reader sees the old content or the new, never a mix; the service
    answers from the new content from its next request on. NEW is only read (a store of
    an older proton-survey is upgraded on a copy). Never rename a file over a store in use."""
    from survey.evidence.copies import replace as do_replace
    from survey.verdicts import summary

    store = open_store(db, create=False)
    done = do_replace(store, new)
    summary.bring_current(store)  # the new content's cells, stored once
    err.print(f"the store now holds {done.runs} runs from {new} (matrix version {done.matrix_version})",
              markup=False, highlight=False)
