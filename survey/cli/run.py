"""``survey run``: survey the catalog (or aorta's environments, or a Ray fleet) and store the evidence."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from survey.cli.app import DbOpt, TimeoutOpt, app, open_store, out, split_commas
from survey.cli.app import err as app_err
from survey.core import exitcodes
from survey.core.errors import InputError, UsageProblem, choose, did_you_mean
from survey.render.escape import rich_markup as escape
from survey.render.escape import terminal

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
) -> None:
    """Survey every candidate of the catalog (or aorta's environments) and store the evidence."""
    err = _console(quiet)  # --quiet: nothing on stderr unless the survey changed something
    secret = _notify().check_urls(notify, allow_private=notify_private) if notify else b""
    table = table and not quiet
    only = split_commas(only)
    if fmt is not None:
        choose(fmt, ("grid", "md"), "format")
    from survey.environments import catalog as catalog_mod
    with_aorta = bool(aorta_environments) or aorta_registry
    if ray is not None and with_aorta:
        raise UsageProblem("--ray surveys the catalog's candidates; survey aorta's environments without it")
    cat = catalog_mod.load(catalog)
    entries = list(enumerate(cat.candidate)) if catalog is not None or not with_aorta else []
    aorta: list[Any] = []
    if with_aorta:
        from survey.aorta.environments import load_environments
        from survey.aorta.targets import AortaTarget

        aorta = [AortaTarget(env, engine=engine, pull=pull) for env in load_environments(aorta_environments or None)
                 .values()]
    store: Store | None = None
    before: str | None = None
    if any(e.family for _, e in entries):  # a family: one candidate per release or digest it holds now
        from survey.environments import discovery
        from survey.flows.run import RETRY_AFTER_S

        store = open_store(db)
        before = _notify().matrix_version(store)
        families = [e.name for _, e in entries if e.family]
        entries, _found = discovery.expand(store, entries, only=only, engine=engine, pull=pull, force=force,
                                           retry_after_s=0.0 if retry_unobtainable else RETRY_AFTER_S,
                                           say=lambda m: err.print(escape(m), highlight=False))
        if only:  # --only FAMILY selects its members (none, where none was found)
            only = [o for o in only if o not in families] + [e.name for _, e in entries if e.discovered_from in only]
            if not only:
                entries, aorta = [], []
    if only:
        only = [o.removeprefix("aorta:") for o in only] if aorta else only  # catalog names hold no ':'
        known = [e.name for _, e in entries] + [t.env.name for t in aorta]
        unknown = sorted(set(only) - set(known))
        if unknown:
            what = "in the catalog" if not aorta else "among the catalog's or aorta's environments" if entries \
                else "among aorta's environments"
            near = "".join(f"; {n}: {did_you_mean(n, known).strip()}" for n in unknown if did_you_mean(n, known))
            raise InputError(f"not {what}: {', '.join(unknown)}{near}", hint=f"known: {', '.join(known)}")
        entries = [(i, e) for i, e in entries if e.name in only]
        aorta = [t for t in aorta if t.env.name in only]
    for t in [t for t in aorta if t.unusable is not None]:
        err.print(terminal(f"{t.name}: skipped ({t.unusable})"), markup=False, highlight=False)
    aorta = [t for t in aorta if t.unusable is None]
    ahead: dict[str, Any] = {}
    if ray is None and all(e.platforms is None for _, e in entries):
        # The first interpreters the survey will ask are asked now, while the store and the rest load.
        from survey.environments.launchers.python import PythonLauncher

        for _, e in entries[:max(1, jobs)]:
            if e.kind == "python" and e.python:
                ahead[e.name] = PythonLauncher(e.python)
                ahead[e.name].prefetch()
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from db.store import shown
    from survey.flows.run import RETRY_AFTER_S, Outcome, ProbeSettings, run_survey

    if store is None:
        store = open_store(db)
        before = _notify().matrix_version(store)
    settings = ProbeSettings(timeout=timeout, force=force, retry_after_s=0.0 if retry_unobtainable else RETRY_AFTER_S)
    colors = {"probed": "green", "unchanged": "cyan", "unobtainable": "yellow", "failed": "red",
              "not run": "magenta"}
    if ray is not None:
        from survey.flows import fleet

        with fleet.connected(ray), Progress(
                SpinnerColumn(), TextColumn("[bold]{task.fields[name]}"), BarColumn(bar_width=20),
                TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=False) as progress:
            bars: dict[str, Any] = {}

            def on_plan(names: list[str]) -> None:
                width = max((len(n) for n in names), default=0)
                for n in names:
                    bars[n] = progress.add_task("waiting", total=1, name=escape(n.ljust(width)))

            def on_row(row: str, msg: str) -> None:
                progress.update(bars[row], description=escape(msg[:100]))

            def on_fleet_done(o: fleet.FleetOutcome) -> None:
                first = o.message.strip().splitlines()[0] if o.message.strip() else ""
                run_ref = f" run #{o.run_id}" if o.run_id else ""
                progress.update(bars[o.row], completed=1, description=f"[{colors.get(o.status, 'white')}]{o.status}"
                                f"[/]{run_ref} {escape(first[:140])}")

            done = fleet.run_fleet(store, entries, settings=settings, jobs=jobs, engine=engine, pull=pull,
                                   on_plan=on_plan, on_update=on_row, on_done=on_fleet_done,
                                   warn=lambda m: err.print(f"[yellow]warning:[/] {escape(m)}"))
        tally: dict[str, int] = {}
        for fo in done:
            tally[fo.status] = tally.get(fo.status, 0) + 1
        err.print("survey: " + (", ".join(f"{n} {k}" for k, n in sorted(tally.items())) or "nothing to survey")
                  + f"  (store: {shown(store.url)})", markup=False, highlight=False)
        pairs = sorted({(fo.platform, fo.measured or "") for fo in done if fo.mismatch})
        for advertised, measured in pairs:
            err.print(f"[yellow]note:[/] nodes offering {escape(advertised)} measured {escape(measured)}; reports "
                      "are filed under the platform they measured")
        if table:
            _print_table(store, "catalog", fmt)
        _after_survey(store, before, [fo.run_id for fo in done if fo.status == "probed" and fo.run_id],
                      notify or [], secret, quiet, exit_code, tally)
        return
    if any(e.platforms is not None for _, e in entries):
        from survey.evidence.identity import local_platform

        here = local_platform().key
        for _, e in entries:
            if not e.runs_on(here):
                err.print(f"{escape(e.name)}: [magenta]not run[/]: its catalog entry names the platforms "
                          f"{escape(', '.join(e.platforms or []))}, and this host is {escape(here)} "
                          "(survey a fleet with --ray)")
        entries = [(i, e) for i, e in entries if e.runs_on(here)]
    names = [e.name for _, e in entries] + [t.name for t in aorta]
    finished: list[Outcome] = []
    # On a terminal, a live display; in a log (not a terminal), one whole line per step, never cut.
    live = Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[name]:<28}"), BarColumn(bar_width=None),
                    TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                    transient=False) if err.is_terminal else None
    try:
        with live if live is not None else contextlib.nullcontext():
            tasks = {n: live.add_task("waiting", total=1, name=escape(n)) for n in names} if live else {}

            def on_update(name: str, msg: str) -> None:
                if live is not None:
                    live.update(tasks[name], description=escape(msg))
                else:
                    err.print(terminal(f"{name}: {msg}"), markup=False, highlight=False)

            def on_done(o: Outcome) -> None:
                finished.append(o)
                c = colors.get(o.status, "white")
                first = o.message.strip().splitlines()[0] if o.message.strip() else ""
                run_ref = f" run #{o.run_id}" if o.run_id else ""
                if live is not None:
                    live.update(tasks[o.name], completed=1,
                                description=f"[{c}]{o.status}[/]{run_ref} {escape(first[:90])}")
                else:
                    err.print(f"{escape(o.name)}: [{c}]{o.status}[/]{run_ref} {escape(first)}", highlight=False)

            outcomes = run_survey(store, entries, jobs=jobs, settings=settings, engine=engine, pull=pull,
                                  on_update=on_update, on_done=on_done, launchers=ahead) if entries else []
            if aorta:
                from survey.aorta.targets import survey_targets

                outcomes += survey_targets(store, aorta, jobs=jobs, settings=settings, on_update=on_update,
                                           on_done=on_done)
    except KeyboardInterrupt:  # Ctrl-C: the display is stopped (above); what finished is stored
        kept = sum(1 for o in finished if o.run_id is not None)
        err.print(f"interrupted: {kept} stored; run again to resume", markup=False, highlight=False)
        raise typer.Exit(130)
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    err.print("survey: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing to survey")
              + f"  (store: {shown(store.url)})", markup=False, highlight=False)
    if table:
        _print_table(store, "all" if aorta else "catalog", fmt)
    _after_survey(store, before, [o.run_id for o in outcomes if o.status == "probed" and o.run_id], notify or [],
                  secret, quiet, exit_code, counts)


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
