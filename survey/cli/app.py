"""The ``survey`` Typer app and what its commands share: the consoles, the ``--db`` and
``--timeout`` options, the stores a command opened, and how an error becomes one line
and an exit code (survey/core/exitcodes.py).

Each command lives in a module of its own beside this one and imports what it uses
inside its body: ``survey --help`` loads Typer and Rich, not SQLAlchemy or pandas.
"""

from __future__ import annotations

import functools
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
from survey.render.escape import rich_markup, terminal, visible

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

def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        from probes import PROBE_VERSION, SCHEMA_VERSION

        try:
            mine = version("proton-survey")
        except PackageNotFoundError:  # run from a checkout that was never installed
            mine = "(not installed)"
        out.print(f"proton-survey {mine} (probe {PROBE_VERSION}, report schema v{SCHEMA_VERSION})", markup=False,
                  highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                               help="print the version and exit")] = False,
) -> None:
    """Measure which Proton backends and modes work in which environment, and keep the evidence."""


DbOpt = Annotated[
    Optional[str],
    typer.Option("--db", envvar="SURVEY_DB",
                 help="the store: a SQLite file (survey.db) or a SQLAlchemy URL (postgresql://HOST/DB, with the "
                      "postgres extra); default: ~/.local/share/proton-survey/survey.db"),
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="seconds for each check inside the probe")]
# One spelling of the output format across commands: --format; --json stays, hidden, as an alias.
FormatOpt = Annotated[Optional[str], typer.Option("--format", help="text (the default) or json")]
JsonOpt = Annotated[bool, typer.Option("--json", hidden=True, help="the same as --format json")]


def wants_json(fmt: str | None, output_json: bool) -> bool:
    """``--format json`` (or its old spelling ``--json``) asked for?"""
    from survey.core.errors import choose

    if fmt is not None:
        choose(fmt, ("text", "json"), "format")
    return output_json or fmt == "json"


def split_commas(values: list[str] | None) -> list[str] | None:
    """A repeatable option's values with ``a,b`` read as ``a`` and ``b``."""
    if values is None:
        return None
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


_opened: list[Store] = []


def open_store(db: str | None, *, create: bool = True) -> Store:
    """The store at ``db``; commands that only read it pass ``create=False``, so a
    mistyped --db is an error instead of a new, empty store."""
    from db import store as store_mod

    try:
        store = store_mod.Store(db, create=create)
    except store_mod.StoreError as e:  # NewerDatabaseError, NoStoreError, ...
        raise StoreUnusable(str(e).strip().splitlines()[0]) from e
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
    Typer writes its type (``<bool>``) beside it, as if it took a value; and an option
    with a value as ``--engine ENGINE``, never ``--engine <str>``."""
    import typer._click as click_mod

    commands = [command, *getattr(command, "commands", {}).values()]
    commands += [sub for c in commands[1:] for sub in getattr(c, "commands", {}).values()]  # `survey store backup`
    for cmd in commands:
        params = list(cmd.params)
        helper = cmd.get_help_option(click_mod.Context(cmd, info_name=cmd.name))
        if helper is not None:
            params.append(helper)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
            elif param.param_type_name == "option" and param.metavar is None and param.name:
                param.metavar = param.name.upper()  # `--engine ENGINE`, never `--engine <str>`


@functools.cache
def command() -> typer.core.TyperGroup:
    """The click command of the app, its options shown as they are typed. Made once in a
    process (about 19 ms: Typer reads every command's signature); each run of it makes a
    context of its own, so a process that runs several (the tests) takes the same."""
    group = typer.main.get_command(app)
    _flags_take_no_value(group)  # type: ignore[arg-type]
    return group  # type: ignore[return-value]


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
    command_ = command()
    try:
        rv = command_.main(args=argv, prog_name="survey", standalone_mode=False)
    except UsageError as e:
        e.show()
        sys.exit(exitcodes.USAGE)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except SurveyError as e:
        from db.outage import IO, classify

        problem = classify(e.__cause__) if isinstance(e, StoreUnusable) and e.__cause__ is not None else None
        err.print(f"[bold red]error:[/] {rich_markup(visible(e.message))}", highlight=False)
        if e.hint:
            err.print(terminal(f"  {e.hint}"), markup=False, highlight=False)
        sys.exit(exitcodes.IO_ERROR if problem is not None and problem.kind == IO else e.exit_code)
    except Exception as e:  # the store failed mid-command: full, read-only, damaged, unreachable (db.outage)
        from db.outage import IO, classify

        problem = classify(e, _opened[-1].describe() if _opened else "the store",
                           _opened[-1].sqlite_file() if _opened else None)
        if problem is None:
            raise
        err.print(f"[bold red]error:[/] {rich_markup(problem.message)}", highlight=False)
        sys.exit(exitcodes.IO_ERROR if problem.kind == IO else exitcodes.INPUT)
    sys.exit(rv if isinstance(rv, int) else 0)
