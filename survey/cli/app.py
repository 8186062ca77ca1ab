"""The ``survey`` Typer app and what its commands share: the consoles, the ``--db`` and
``--timeout`` options, the stores a command opened, and how an error becomes one line
and an exit code (survey/core/exitcodes.py).

Each command lives in a module of its own beside this one and imports what it uses
inside its body: ``survey --help`` loads Typer and Rich, not SQLAlchemy or pandas.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

try:  # Typer >= 0.20 vendors click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover
    from click.exceptions import UsageError  # type: ignore[assignment]

from survey.core import exitcodes
from survey.core.errors import StoreUnusable, SurveyError
from survey.render.escape import rich_markup, terminal

if TYPE_CHECKING:
    from db.store import Store

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Measure which Proton backends and modes work in which environment, and keep the evidence.",
)
out = Console(soft_wrap=True, emoji=False)  # evidence text such as ":x:" stays text
err = Console(stderr=True, soft_wrap=True, emoji=False)

DbOpt = Annotated[
    Optional[str],
    typer.Option("--db", envvar="SURVEY_DB",
                 help="the store: a SQLite file (survey.db) or a SQLAlchemy URL (postgresql://HOST/DB, with the "
                      "postgres extra); default: ~/.local/share/proton-survey/survey.db"),
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="seconds for each check inside the probe")]


_opened: list[Store] = []


def open_store(db: str | None, *, create: bool = True) -> Store:
    """The store at ``db``; commands that only read it pass ``create=False``, so a
    mistyped --db is an error instead of a new, empty store."""
    from db import store as store_mod

    try:
        store = store_mod.Store(db, create=create)
    except store_mod.StoreError as e:  # NewerDatabaseError, NoStoreError, ...
        raise StoreUnusable(str(e))
    _opened.append(store)
    return store


def close_stores() -> None:
    """Close every store this process opened (SQLite then checkpoints its WAL into the file)."""
    while _opened:
        _opened.pop().close()


def main() -> None:
    try:
        _main(sys.argv[1:])
    finally:
        close_stores()  # the command is over (SQLite checkpoints its WAL as each store closes)


def _flags_take_no_value(command: typer.core.TyperGroup | typer.core.TyperCommand) -> None:
    """Help shows a flag (``--json``, ``--help``, ``--force/--no-force``) as just its name:
    Typer writes its type (``<bool>``) beside it, as if it took a value."""
    import typer._click as click_mod

    commands = [command, *getattr(command, "commands", {}).values()]
    for cmd in commands:
        params = list(cmd.params)
        helper = cmd.get_help_option(click_mod.Context(cmd, info_name=cmd.name))
        if helper is not None:
            params.append(helper)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""


# `survey check ... -- COMMAND...`: the command after `--`, kept apart from the
# options and TARGET (None: no `--` was given).
TRAILING: dict[str, list[str] | None] = {"command": None}


def _split_trailing(argv: list[str]) -> list[str]:
    """``survey check``'s argv up to ``--``; what follows it goes to TRAILING."""
    TRAILING["command"] = None
    if argv and argv[0] == "check" and "--" in argv:
        at = argv.index("--")
        TRAILING["command"] = argv[at + 1:]
        return argv[:at]
    return argv


def _main(argv: list[str]) -> None:
    argv = _split_trailing(argv)
    command = typer.main.get_command(app)
    _flags_take_no_value(command)  # type: ignore[arg-type]
    try:
        rv = command.main(args=argv, prog_name="survey", standalone_mode=False)
    except UsageError as e:
        e.show()
        sys.exit(exitcodes.USAGE)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except SurveyError as e:
        err.print(f"[bold red]error:[/] {rich_markup(e.message)}", highlight=False)
        if e.hint:
            err.print(terminal(f"  {e.hint}"), markup=False, highlight=False)
        sys.exit(e.exit_code)
    except Exception as e:  # the store failed mid-command: full, read-only, unreachable (db.outage)
        from db.outage import classify

        problem = classify(e, _opened[-1].describe() if _opened else "the store")
        if problem is None:
            raise
        err.print(f"[bold red]error:[/] {rich_markup(problem.message)}", highlight=False)
        sys.exit(exitcodes.INPUT)
    sys.exit(rv if isinstance(rv, int) else 0)
