"""``survey run``: survey the catalog (or aorta's environments, or a Ray fleet) and store the evidence."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from survey.cli.app import DbOpt, TimeoutOpt, app, open_store, out, split_commas
from survey.cli.app import err as app_err
from survey.core import exitcodes
from survey.core.errors import choose

if TYPE_CHECKING:
    from db.store import Store


@app.command()
def run(
    catalog: Annotated[Optional[Path], typer.Option(help="candidate catalog (TOML); default: the built-in one")] = None,
    db: DbOpt = None,
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", help="survey only these candidates (repeatable, or a comma list: --only a,b)")] = None,
    jobs: Annotated[int, typer.Option(help="candidates obtained and probed at once")] = 2,
    force: Annotated[bool, typer.Option(help="probe again even when nothing changed")] = False,
    retry_unobtainable: Annotated[bool, typer.Option(
        help="try unobtainable candidates again now (default: after 6 hours)")] = False,
    timeout: TimeoutOpt = 60.0,
    engine: Annotated[Optional[str], typer.Option(help="container engine: podman or docker (default: detect)")] = None,
    pull: Annotated[str, typer.Option(help="image pull policy: never, missing, always")] = "missing",
    table: Annotated[bool, typer.Option(help="print the Availability table at the end")] = True,
    fmt: Annotated[Optional[str], typer.Option(
        "--format", help="the table at the end: grid (the default on a terminal) or md, the docs table (the "
                         "default when stdout is not a terminal)")] = None,
    aorta_environments: Annotated[Optional[list[Path]], typer.Option(
        "--aorta-environments", metavar="FILE",
        help="survey aorta's environments (venvs, images) with this sidecar file's added, as candidates "
             "aorta:NAME (repeatable; the catalog only with --catalog)")] = None,
    aorta_registry: Annotated[bool, typer.Option(
        "--aorta-registry", help="survey aorta's environments (built-ins and entry points) without a sidecar "
                                 "file")] = False,
    ray: Annotated[Optional[str], typer.Option(
        "--ray", metavar="ADDRESS",
        help="survey a Ray cluster (auto: the one this machine belongs to, HOST:6379, ray://HOST:10001): each "
             "candidate is probed on the nodes that offer the platforms its catalog entry names (`survey platform` "
             "on a node prints how it offers its own); this machine stores the reports")] = None,
    notify: Annotated[Optional[list[str]], typer.Option(
        "--notify", metavar="URL",
        help="POST what the survey changed as JSON to URL, signed (X-Survey-Signature: sha256=HMAC-SHA256 of the "
             "body under $SURVEY_WEBHOOK_SECRET); retried, recorded in the store, never failing the survey "
             "(repeatable)")] = None,
    notify_private: Annotated[bool, typer.Option(
        "--notify-private", help="allow --notify URLs on loopback, link-local and private addresses (a receiver on "
                                 "this machine or its own network); refused by default")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="print nothing (no progress, no table) unless the survey changed the store")] = False,
    exit_code: Annotated[bool, typer.Option(
        "--exit-code", help="exit 1 when the survey changed the store (new evidence, a new failure), 0 when "
                            "nothing changed")] = False,
    json_lines: Annotated[bool, typer.Option(
        "--json-lines", help="print what happens as JSON, one object per line on stdout (the plan, each step, each "
                             "candidate's end, the summary), and no table")] = False,
) -> None:
    """Survey every candidate of the catalog (or aorta's environments) and store the evidence."""
    from survey.flows import reporters
    from survey.flows.survey import Launch, survey

    err = _console(quiet)  # --quiet: nothing on stderr unless the survey changed something
    secret = _notify().check_urls(notify, allow_private=notify_private) if notify else b""
    if fmt is not None:
        choose(fmt, ("grid", "md"), "format")
    launch = Launch(catalog=catalog, only=tuple(split_commas(only) or ()), jobs=jobs, timeout=timeout, force=force,
                    retry_unobtainable=retry_unobtainable, engine=engine, pull=pull, ray=ray,
                    aorta_environments=tuple(aorta_environments or ()), aorta_registry=aorta_registry)
    report = reporters.JsonLines(sys.stdout) if json_lines else reporters.Terminal(err)
    try:
        store, result = survey(launch, lambda: open_store(db), report, _aorta(launch))
    except KeyboardInterrupt:
        raise typer.Exit(130)
    from survey.verdicts import summary

    summary.bring_current(store)  # a store of an older proton-survey: its cells stored once, now
    if table and not quiet and not json_lines:
        _print_table(store, result.scope, fmt)
    _after_survey(store, result.before, result.probed_runs, notify or [], secret, quiet, exit_code, result.counts)


def _aorta(launch: Any) -> Any:
    """aorta's environments as targets beyond the catalog (--aorta-environments, --aorta-registry)."""
    if not launch.with_aorta:
        return None
    from survey.aorta.environments import load_environments
    from survey.aorta.targets import AortaTarget, survey_targets
    from survey.flows.survey import Others

    def targets() -> list[Any]:
        envs = load_environments(list(launch.aorta_environments) or None)
        return [AortaTarget(env, engine=launch.engine, pull=launch.pull) for env in envs.values()]

    return Others(targets, survey_targets)


def _table_format(fmt: str | None) -> str:
    """The end table's format: asked for, else the grid on a terminal and the docs table otherwise."""
    if fmt is None:
        return "grid" if sys.stdout.isatty() else "md"
    choose(fmt, ("grid", "md"), "format")
    return fmt


def _print_table(store: Store, scope: str, fmt: str | None) -> None:
    """The survey's table, as ``survey table`` prints it (``--format grid`` or ``md``)."""
    from survey.render import docs_table

    with store.session() as s:
        if _table_format(fmt) == "md":
            out.print(docs_table.markdown(s, scope), markup=False, highlight=False, soft_wrap=True, end="")
            return
        from survey.verdicts import matrix as matrix_mod

        rows = matrix_mod.matrix(s, scope=scope)
    import os

    from survey.render import grid

    tty = sys.stdout.isatty()
    sys.stdout.write(grid.render(rows, out.size.width if tty else None, tty and not os.environ.get("NO_COLOR")))


def _console(quiet: bool) -> Console:
    return Console(stderr=True, soft_wrap=True, quiet=True) if quiet else app_err


def _notify() -> Any:
    from survey.flows import notify

    return notify


def _after_survey(store: Store, before: str | None, run_ids: list[int], urls: list[str], secret: bytes, quiet: bool,
                  exit_code: bool, counts: dict[str, int]) -> None:
    """Webhooks for what the survey changed (survey.flows.notify.announce); --exit-code: 1 when it changed
    the store."""
    changed = _notify().announce(store, before, run_ids, urls, secret, counts, quiet=_console(quiet).print,
                                 loud=lambda m: app_err.print(m, markup=False, highlight=False), quiet_run=quiet)
    if exit_code and changed:
        raise typer.Exit(exitcodes.FAILURE)
