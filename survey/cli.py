"""The ``survey`` command line (Typer + Rich)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

try:  # Typer >= 0.20 vendors click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover
    from click.exceptions import UsageError  # type: ignore[assignment]

from survey import exitcodes, replay
from survey.errors import InputError, StoreUnusable, SurveyError, UnknownTarget, UsageProblem, choose
from survey.lazy import lazy

if TYPE_CHECKING:
    from db.store import Store

# Loaded on first use: `survey --help` must not import pandas, SQLAlchemy or Alembic.
catalog_mod = lazy("survey.catalog")
docs_table = lazy("survey.docs_table")
probe_run = lazy("survey.probe_run")
queries = lazy("survey.queries")
table_mod = lazy("survey.table")
store_mod = lazy("db.store")

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Measure which Proton backends and modes work in which environment, and keep the evidence.",
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DbOpt = Annotated[
    Optional[str],
    typer.Option("--db", envvar="SURVEY_DB",
                 help="SQLAlchemy URL (default: SQLite under ~/.local/share/proton-survey)"),
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="seconds for each check inside the probe")]


_opened: list[Store] = []


def open_store(db: str | None, *, create: bool = True) -> Store:
    """The store at ``db``; commands that only read it pass ``create=False``, so a
    mistyped --db is an error instead of a new, empty store."""
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


# --------------------------------------------------------------------------- run
@app.command()
def run(
    catalog: Annotated[Optional[Path], typer.Option(help="candidate catalog (TOML); default: the built-in one")] = None,
    db: DbOpt = None,
    only: Annotated[Optional[list[str]], typer.Option("--only", help="survey only these candidates")] = None,
    jobs: Annotated[int, typer.Option(help="candidates obtained and probed at once")] = 2,
    force: Annotated[bool, typer.Option(help="probe again even when nothing changed")] = False,
    retry_unobtainable: Annotated[bool, typer.Option(
        help="try unobtainable candidates again now (default: after 6 hours)")] = False,
    timeout: TimeoutOpt = 60.0,
    engine: Annotated[Optional[str], typer.Option(help="container engine: podman or docker (default: detect)")] = None,
    pull: Annotated[str, typer.Option(help="image pull policy: never, missing, always")] = "missing",
    table: Annotated[bool, typer.Option(help="print the Availability table at the end")] = True,
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
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="print nothing (no progress, no table) unless the survey changed the store")] = False,
    exit_code: Annotated[bool, typer.Option(
        "--exit-code", help="exit 1 when the survey changed the store (new evidence, a new failure), 0 when "
                            "nothing changed")] = False,
) -> None:
    """Survey every candidate of the catalog (or aorta's environments) and store the evidence."""
    err = _console(quiet)  # --quiet: nothing on stderr unless the survey changed something
    secret = _notify().check_urls(notify) if notify else b""
    table = table and not quiet
    with_aorta = bool(aorta_environments) or aorta_registry
    if ray is not None and with_aorta:
        raise UsageProblem("--ray surveys the catalog's candidates; survey aorta's environments without it")
    cat = catalog_mod.load(catalog)
    entries = list(enumerate(cat.candidate)) if catalog is not None or not with_aorta else []
    aorta: list[Any] = []
    if with_aorta:
        from survey.aorta_envs import load_environments
        from survey.aorta_targets import AortaTarget

        aorta = [AortaTarget(env, engine=engine, pull=pull) for env in load_environments(aorta_environments or None)
                 .values()]
    store: Store | None = None
    before: str | None = None
    if any(e.family for _, e in entries):  # a family: one candidate per release or digest it holds now
        from survey.environments import discovery
        from survey.survey_run import RETRY_AFTER_S

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
            raise InputError(f"not {what}: {', '.join(unknown)}", hint=f"known: {', '.join(known)}")
        entries = [(i, e) for i, e in entries if e.name in only]
        aorta = [t for t in aorta if t.env.name in only]
    for t in [t for t in aorta if t.unusable is not None]:
        err.print(f"{t.name}: skipped ({t.unusable})", markup=False, highlight=False)
    aorta = [t for t in aorta if t.unusable is None]
    ahead: dict[str, Any] = {}
    if ray is None and all(e.platforms is None for _, e in entries):
        # The first interpreters the survey will ask are asked now, while the store and the rest load.
        from survey.launchers.python import PythonLauncher

        for _, e in entries[:max(1, jobs)]:
            if e.kind == "python" and e.python:
                ahead[e.name] = PythonLauncher(e.python)
                ahead[e.name].prefetch()
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from survey.survey_run import RETRY_AFTER_S, Outcome, ProbeSettings, run_survey

    if store is None:
        store = open_store(db)
        before = _notify().matrix_version(store)
    settings = ProbeSettings(timeout=timeout, force=force, retry_after_s=0.0 if retry_unobtainable else RETRY_AFTER_S)
    colors = {"probed": "green", "unchanged": "cyan", "unobtainable": "yellow", "failed": "red",
              "not run": "magenta"}
    if ray is not None:
        from survey import fleet

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
                  + f"  (store: {store.url})")
        pairs = sorted({(fo.platform, fo.measured or "") for fo in done if fo.mismatch})
        for advertised, measured in pairs:
            err.print(f"[yellow]note:[/] nodes offering {escape(advertised)} measured {escape(measured)}; reports "
                      "are filed under the platform they measured")
        if table:
            with store.session() as s:
                table_rows = docs_table.table_rows(s)
            out.print(table_mod.render(table_mod.frame(table_rows, docs_table.columns(table_rows)), "md"),
                      markup=False, highlight=False, soft_wrap=True, end="")
        _after_survey(store, before, [fo.run_id for fo in done if fo.status == "probed" and fo.run_id],
                      notify or [], secret, quiet, exit_code, tally)
        return
    if any(e.platforms is not None for _, e in entries):
        from survey.identity import local_platform

        here = local_platform().key
        for _, e in entries:
            if not e.runs_on(here):
                err.print(f"{escape(e.name)}: [magenta]not run[/]: its catalog entry names the platforms "
                          f"{escape(', '.join(e.platforms or []))}, and this host is {escape(here)} "
                          "(survey a fleet with --ray)")
        entries = [(i, e) for i, e in entries if e.runs_on(here)]
    with Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[name]:<28}"), BarColumn(bar_width=None),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                  transient=False) as progress:
        names = [e.name for _, e in entries] + [t.name for t in aorta]
        tasks = {n: progress.add_task("waiting", total=1, name=n) for n in names}

        def on_update(name: str, msg: str) -> None:
            progress.update(tasks[name], description=msg)

        def on_done(o: Outcome) -> None:
            c = colors.get(o.status, "white")
            first = o.message.strip().splitlines()[0] if o.message.strip() else ""
            run_ref = f" run #{o.run_id}" if o.run_id else ""
            progress.update(tasks[o.name], completed=1,
                            description=f"[{c}]{o.status}[/]{run_ref} {escape(first[:90])}")

        outcomes = run_survey(store, entries, jobs=jobs, settings=settings, engine=engine, pull=pull,
                              on_update=on_update, on_done=on_done, launchers=ahead) if entries else []
        if aorta:
            from survey.aorta_targets import survey_targets

            outcomes += survey_targets(store, aorta, jobs=jobs, settings=settings, on_update=on_update,
                                       on_done=on_done)
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    err.print("survey: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing to survey")
              + f"  (store: {store.url})")
    if table:
        with store.session() as s:
            rows = docs_table.table_rows(s, "all" if aorta else "catalog")
        out.print(table_mod.render(table_mod.frame(rows, docs_table.columns(rows)), "md"), markup=False,
                  highlight=False, soft_wrap=True, end="")
    _after_survey(store, before, [o.run_id for o in outcomes if o.status == "probed" and o.run_id], notify or [],
                  secret, quiet, exit_code, counts)


def _console(quiet: bool) -> Console:
    return Console(stderr=True, soft_wrap=True, quiet=True) if quiet else err


def _notify() -> Any:
    from survey.flows import notify

    return notify


def _after_survey(store: Store, before: str | None, run_ids: list[int], urls: list[str], secret: bytes, quiet: bool,
                  exit_code: bool, counts: dict[str, int]) -> None:
    """Webhooks for what the survey changed (survey.flows.notify.announce); --exit-code: 1 when it changed
    the store."""
    changed = _notify().announce(store, before, run_ids, urls, secret, counts, quiet=_console(quiet).print,
                                 loud=lambda m: err.print(m, markup=False, highlight=False), quiet_run=quiet)
    if exit_code and changed:
        raise typer.Exit(exitcodes.FAILURE)


# --------------------------------------------------------------------------- probe
@app.command()
def probe(
    python: Annotated[Optional[str], typer.Option("--python", help="the interpreter to probe")] = None,
    image: Annotated[Optional[str], typer.Option("--image", help="the container image to probe")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write the report here")] = None,
    timeout: TimeoutOpt = 60.0,
    capture: Annotated[Optional[list[str]], typer.Option("--capture", help="also capture BACKEND[:MODE]")] = None,
    auto_capture: Annotated[bool, typer.Option(help="capture every (backend, mode) found working")] = True,
    only: Annotated[Optional[list[str]], typer.Option("--only", help="check only BACKEND[:MODE]")] = None,
    engine: Annotated[Optional[str], typer.Option(help="container engine for --image")] = None,
    pull: Annotated[str, typer.Option(help="image pull policy: never, missing, always")] = "missing",
    interpreter: Annotated[Optional[str], typer.Option(help="the Python inside --image (default: python3, python)")]
    = None,
    store_it: Annotated[bool, typer.Option("--store", help="also ingest the report (kept as ad-hoc evidence)")]
    = False,
    repeats: Annotated[int, typer.Option(help="attempts for a check that crashes, hangs or raises an unrecognised "
                                              "error; disagreeing attempts make it `unstable`")] = 3,
    db: DbOpt = None,
) -> None:
    """Probe one interpreter or image and print (or write) its report."""
    from survey.launchers.python import PythonLauncher

    if (python is None) == (image is None):
        raise InputError("give exactly one of --python PATH or --image IMAGE")
    launcher: Any
    if python is not None:
        launcher = PythonLauncher(python)
    else:
        from survey.launchers.image import ImageLauncher

        assert image is not None
        launcher = ImageLauncher(image, engine=engine, pull=pull, python=interpreter)
    resolved = launcher.obtain()
    args = probe_run.probe_args(timeout, captures=capture or (), auto_capture=auto_capture, only=only or (),
                                repeats=repeats)
    raw, has_triton = launcher.probe(resolved, args, probe_run.overall_timeout(timeout))
    from survey.identity import attach_origin

    raw = attach_origin(raw, resolved.origin())
    if output:
        tmp = output.with_name(output.name + ".tmp")
        tmp.write_bytes(raw)
        tmp.replace(output)
        err.print(f"report written to {output}")
    else:
        sys.stdout.write(raw.decode())
        sys.stdout.flush()
    if store_it:
        from survey.ingest import ingest
        from survey.targets import Target

        t = Target(python or image or "", "interpreter" if python else "image", None)
        name = t.name_for(resolved)
        spec = {"python": python} if python else {"image": image}
        with open_store(db).session() as s:
            res = ingest(s, raw, candidate=name, label=name, kind=launcher.kind, spec=spec, resolved=resolved,
                         source="probe")
        err.print(f"stored as run #{res.run_id} (candidate {name})" if res.created
                  else f"already stored as run #{res.run_id}")
    if not has_triton:
        err.print(f"[yellow]no Triton in {launcher.describe()}[/] (the report says what was found)")
        raise typer.Exit(exitcodes.NO_TRITON)


# --------------------------------------------------------------------------- ingest
@app.command("ingest")
def ingest_cmd(
    reports: Annotated[list[Path], typer.Argument(help="probe report JSON files")],
    candidate: Annotated[Optional[str], typer.Option(
        help="file it under this candidate (a catalog name publishes it; default: a name from its origin)")] = None,
    label: Annotated[Optional[str], typer.Option(help="the candidate's docs label")] = None,
    db: DbOpt = None,
) -> None:
    """Store reports produced elsewhere (a GPU host, a CI job), each on the platform it ran on."""
    from survey.ingest import ingest, validate

    payloads = []
    for path in reports:
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise InputError(f"{path}: {e.strerror}")
        try:
            validate(raw)
        except InputError as e:
            raise type(e)(f"{path}: {e.message}", field=e.field, hint="nothing was stored")
        payloads.append((path, raw))
    store = open_store(db)
    for path, raw in payloads:
        with store.session() as s:
            res = ingest(s, raw, candidate=candidate, label=label, source="ingest")
        if res.created:
            out.print(f"{path}: stored as run #{res.run_id} (candidate {res.candidate})", markup=False)
        elif res.note:
            out.print(f"{path}: {res.note}", markup=False)
        else:
            out.print(f"{path}: already stored as run #{res.run_id} (candidate {res.candidate}); nothing added",
                      markup=False)


# --------------------------------------------------------------------------- table
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
                          "(source,triton,choices,rocprofiler) such as +capture,+platform. A column with nothing "
                          "to show is left out")] = None,
    width: Annotated[Optional[int], typer.Option(
        "--width", min=40, help="grid: fit it to this many columns (default: the terminal's width; output that "
                                "is not a terminal is as wide as the grid)")] = None,
    documented: Annotated[Optional[Path], typer.Option(
        "--documented", help="documented claims: a YAML file or a directory of them (default: the packaged "
                             "survey/documented/)")] = None,
    check: Annotated[Optional[Path], typer.Option(help="exit 1 with a diff if this docs file's table is stale")] = None,
    write: Annotated[Optional[Path], typer.Option(help="replace the table in this docs file (between markers)")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="also ad-hoc evidence (targets checked by path or image, "
                                                         "reports ingested under no catalog name)")] = False,
    db: DbOpt = None,
) -> None:
    """The Availability table (catalog candidates), generated from the evidence."""
    formats = ("md", "html", "grid", "csv", "json")
    if fmt is None:
        fmt = "md" if (check or write or columns) or not sys.stdout.isatty() else "grid"
    choose(fmt, formats, "format")
    if (check or write) and fmt != "md":
        raise UsageProblem("--check and --write work on the Markdown table (--format md)")
    if columns is not None and fmt not in ("md", "html"):
        raise UsageProblem("--columns chooses the docs table's columns (--format md or html)")
    if width is not None and fmt != "grid":
        raise UsageProblem("--width fits the terminal grid (--format grid)")
    keys = docs_table.parse_columns(columns)
    scope = "all" if show_all else "catalog"
    store = open_store(db, create=False)
    if not (check or write):  # the answer is a function of the store and the arguments: replayable
        replay.read_store(store.sqlite_file())
        if documented is not None:
            replay.read_file(documented)
        replay.replayable()
    with store.session() as s:
        if fmt in ("md", "html"):
            docs = docs_table.build(s, scope, keys, documented)
            text = docs.markdown() if fmt == "md" else docs.html()
        else:
            from survey import matrix as matrix_mod

            rows = matrix_mod.matrix(s, scope=scope)
    if fmt == "grid":
        import os

        from survey import grid

        tty = sys.stdout.isatty()
        color = tty and not os.environ.get("NO_COLOR")
        if width is None and tty:
            width = out.size.width
        sys.stdout.write(grid.render(rows, width, color))
        return
    if fmt in ("csv", "json"):
        from survey import matrix_schema

        tidy = matrix_schema.tidy(rows)
        sys.stdout.write(matrix_schema.to_json(tidy) if fmt == "json" else matrix_schema.to_csv(tidy))
        return
    if check:
        diff = table_mod.check(check, text)
        if diff:
            sys.stdout.write(diff)
            err.print(f"[red]{check}: the Availability table no longer matches the evidence[/]"
                      f" (update it with `survey table --write {check}`)")
            raise typer.Exit(exitcodes.FAILURE)
        err.print(f"{check}: the Availability table matches the evidence")
        return
    if write:
        changed = table_mod.write(write, text)
        err.print(f"{write}: {'table updated' if changed else 'already up to date'}")
        return
    sys.stdout.write(text)


# --------------------------------------------------------------------------- check
@app.command("check")
def check_cmd(
    target: Annotated[Optional[str], typer.Argument(
        help="a candidate name, an interpreter path or an image; with --recipe and no TARGET each cell is "
             "checked in the environment it names")] = None,
    backend: Annotated[Optional[str], typer.Option(help="the Proton backend the run will use")] = None,
    mode: Annotated[Optional[str], typer.Option(help="its mode (default: none)")] = None,
    recipe: Annotated[Optional[Path], typer.Option(
        help="an aorta recipe: every cell is answered, with its own proton configuration")] = None,
    aorta_environment: Annotated[Optional[str], typer.Option(
        "--aorta-environment", metavar="NAME",
        help="check in this environment of aorta's registry (instead of TARGET), with its env baseline")] = None,
    aorta_environments: Annotated[Optional[list[Path]], typer.Option(
        "--aorta-environments", metavar="FILE",
        help="an aorta sidecar file declaring environments (as `aorta ... --file`); repeatable")] = None,
    catalog: Annotated[Optional[Path], typer.Option(help="catalog used when TARGET must be probed first")] = None,
    timeout: TimeoutOpt = 60.0,
    output_json: Annotated[bool, typer.Option("--json", help="print the verdict as JSON (a list with --recipe)")]
    = False,
    engine: Annotated[Optional[str], typer.Option(help="container engine when TARGET is an image")] = None,
    pull: Annotated[str, typer.Option(help="image pull policy: never, missing, always")] = "missing",
    platform: Annotated[Optional[str], typer.Option(
        help="answer from the stored evidence of this platform (a key such as nvidia:sm_90:NVIDIA H200, or a "
             "part of one: sm_90, gfx942) instead of resolving TARGET here")] = None,
    db: DbOpt = None,
) -> None:
    """Will a run with this backend and mode (or every cell of an aorta recipe) work in TARGET?
    Exit 0 yes, 2 no (any cell), 3 not enough evidence."""
    from survey import check as check_mod

    if target is not None and aorta_environment is not None:
        raise InputError("give TARGET or --aorta-environment NAME, not both")
    if recipe is not None and (backend or mode):
        raise InputError("give --recipe or --backend/--mode, not both")
    if aorta_environments and target is not None:
        raise InputError("--aorta-environments names where cells run; with TARGET every cell is checked in TARGET")
    if recipe is not None:
        from survey import recipe_check

        store = open_store(db)
        read, cells = recipe_check.check_recipe(
            store, recipe, target=target, aorta_environment=aorta_environment,
            environment_files=aorta_environments, catalog=catalog, timeout=timeout, engine=engine, pull=pull,
            platform=platform, say=lambda m: err.print(m, markup=False))
        refused = read.aorta_030_refuses
        if refused:
            err.print(f"note: amd-aorta 0.3.0 would refuse this recipe: {refused}", markup=False)
        if output_json:
            sys.stdout.write(json.dumps([c.as_dict() for c in cells], indent=1) + "\n")
        else:
            for style, line in recipe_check.render(cells):
                out.print(f"[{style}]{escape(line)}[/]" if style else line, markup=bool(style), highlight=False)
        raise typer.Exit(recipe_check.overall_exit(cells))
    if not backend:
        raise InputError("--backend (or --recipe) is required")
    if target is None and aorta_environment is None:
        raise InputError("give TARGET (or --aorta-environment NAME)")
    from probes import outcomes as O

    choose(backend, O.BACKENDS, "backend")
    if mode is not None:
        modes = (queries.NO_MODE, *(x for x in O.COMMON_MODES if x), *O.INSTRUMENTATION_MODES)
        choose(mode.split(":", 1)[0], modes, "mode")
    store = open_store(db)
    from_store = platform is not None and aorta_environment is None  # answered from stored evidence only
    if from_store:
        replay.read_store(store.sqlite_file())
        if catalog is not None:
            replay.read_file(catalog)
    if aorta_environment is not None:
        from survey import recipe_check
        from survey.aorta_envs import load_environments

        at = recipe_check.aorta_target(load_environments(aorta_environments or None), aorta_environment,
                                       engine=engine, pull=pull)
        target = at.name
        result = recipe_check.check_aorta_environment(store, at, backend, queries.mode_from_label(mode),
                                                      timeout=timeout, platform=platform,
                                                      say=lambda m: err.print(m, markup=False))
    else:
        assert target is not None
        result = check_mod.check_target(store, target, backend, queries.mode_from_label(mode),
                                        catalog_path=catalog, timeout=timeout, engine=engine, pull=pull,
                                        platform=platform, say=lambda m: err.print(m, markup=False))
    if output_json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=1) + "\n")
    else:
        color = {0: "green", 2: "red", 3: "yellow"}.get(result.exit_code, "white")
        words = {0: "will run", 2: "cannot run it", 3: "not enough evidence"}.get(result.exit_code, "cannot tell here")
        out.print(f"[bold {color}]{words}[/]: {escape(target)} with backend={backend} "
                  f"mode={escape(queries.mode_label(mode))}" + (f" ({result.cause})" if result.cause else ""))
        out.print(f"  reason: {result.reason}", markup=False)
        if result.fix:
            out.print(f"  fix: {result.fix}", markup=False)
        for q, a in (("backend present", result.backend_present), ("mode accepted", result.mode_accepted),
                     ("library loads", result.library_loads)):
            src = f" [{a.source}]" if a.source else ""
            out.print(f"  {q}: {a.answer}{src} - {a.basis}", markup=False)
        for d in result.details:
            out.print(f"  note: {d}", markup=False)
        if result.run_id:
            out.print(f"  evidence: run #{result.run_id} ({result.candidate}, {result.platform}), "
                      f"{result.evidence_date} ({result.evidence_age})", markup=False)
    if from_store and result.candidate == target:  # TARGET named a catalog entry or a stored candidate
        if result.evidence_date is not None and result.evidence_age is not None:
            replay.shows_age(result.evidence_date, result.evidence_age)
        replay.replayable()
    raise typer.Exit(result.exit_code)


# --------------------------------------------------------------------------- diff
@app.command("diff")
def diff_cmd(
    a: Annotated[str, typer.Argument(help="candidate name or run id (run:12)")],
    b: Annotated[str, typer.Argument(help="candidate name or run id")],
    output_json: Annotated[bool, typer.Option("--json")] = False,
    db: DbOpt = None,
) -> None:
    """What changed between two candidates, or two runs of one. Exit 0 the same, 1 they differ (like diff)."""
    from survey.diff import diff_runs

    with open_store(db, create=False).session() as s:
        d = diff_runs(queries.resolve_ref(s, a), queries.resolve_ref(s, b))
    code = exitcodes.OK if d["same"] else exitcodes.FAILURE
    if output_json:
        sys.stdout.write(json.dumps(d, indent=1) + "\n")
        raise typer.Exit(code)
    from rich.table import Table

    out.print(f"a: run #{d['a']['run_id']} ({d['a']['candidate']}, {d['a']['date']})", markup=False)
    out.print(f"b: run #{d['b']['run_id']} ({d['b']['candidate']}, {d['b']['date']})", markup=False)
    if d["same"]:
        out.print("no differences in registry, modes, libraries or captures")
    for key, val in d["fields"].items():
        out.print(f"  {key}: {val['a']} -> {val['b']}", markup=False)
    for section in ("environment", "modes", "libraries", "captures"):
        if d[section]:
            t = Table(title=section, show_header=True)
            t.add_column("what")
            t.add_column("a")
            t.add_column("b")
            for c in d[section]:
                t.add_row(escape(str(c["key"])), escape(str(c["a"])), escape(str(c["b"])))
            out.print(t)
    raise typer.Exit(code)


# --------------------------------------------------------------------------- history
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
    from survey import history

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
        sys.stdout.write(json.dumps({"candidate": candidate, "backend": backend, "mode": mode, "platform": platform,
                                     "changes": sum(1 for r in rows if r["changed"]), "runs": rows},
                                    indent=1, ensure_ascii=False) + "\n")
        return
    if fmt in ("csv", "md"):
        sys.stdout.write(table_mod.render(table_mod.frame(rows, history.COLUMNS), fmt))
        return
    from rich.table import Table

    t = Table(title=f"{candidate} · {backend} {mode}", show_header=True)
    for col in ("run", "date", "platform", "Triton", "outcome", "verdict", "reason"):
        t.add_column(col)
    for r in rows:
        mark = " (changed)" if r["changed"] else ""
        t.add_row(f"#{r['run_id']}{mark}", (r["date"] or "")[:10], escape(r["platform"] or "—"),
                  escape(r["triton_version"] or "—"), escape(r["outcome"] or r["status"]),
                  escape(r["verdict"] or "—"), escape(r["reason"] or r["error"] or ""))
    # Fitted to a terminal; never cut when the output is not one (a file, a pipe).
    (out if sys.stdout.isatty() else Console(width=100_000, color_system=None)).print(t)


# --------------------------------------------------------------------------- changes
@app.command("changes")
def changes_cmd(
    since: Annotated[Optional[str], typer.Option(
        help="only changes made by runs stored at or after this date or time (ISO 8601, UTC unless it says)")]
    = None,
    limit: Annotated[int, typer.Option(min=1, help="at most this many, newest first")] = 100,
    show_all: Annotated[bool, typer.Option("--all", help="also ad-hoc candidates")] = False,
    output_json: Annotated[bool, typer.Option("--json", help="print them (and failed webhook deliveries) as JSON")]
    = False,
    db: DbOpt = None,
) -> None:
    """What changed: each (candidate, platform, backend, mode) whose answer moved between consecutive runs
    (and each cell a run answered first), newest first; then failed webhook deliveries."""
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
        sys.stdout.write(json.dumps({"since": since, "total": len(found), "changes": shown,
                                     "failed_deliveries": failed}, indent=1, ensure_ascii=False) + "\n")
        return
    for e in shown:
        runs = f"run #{e['run_id']}" + (f" vs #{e['previous_run_id']}" if e["previous_run_id"] is not None else "")
        where = f", {e['platform']}" if e["platform"] else ""
        out.print(f"{(e['date'] or '')[:16].replace('T', ' ')}  {changes_mod.summary(e)}  [{runs}{where}]",
                  markup=False, highlight=False)
    if len(found) > limit:
        out.print(f"... {len(found) - limit} older (--limit, --since)", markup=False, highlight=False)
    if not found:
        out.print("no changes" + (f" since {since}" if since else ""), markup=False, highlight=False)
    for d in failed:
        err.print(f"webhook delivery #{d['id']} to {d['url']} failed ({d['date']}, {d['attempts']} attempt(s)): "
                  f"{d['error']}", markup=False, highlight=False)


# --------------------------------------------------------------------------- platform
@app.command("platform")
def platform_cmd(
    address: Annotated[Optional[str], typer.Option(
        help="the head node's address (HOST:6379) for the `ray start` line; default: a placeholder")] = None,
    head: Annotated[bool, typer.Option("--head", help="print the line that starts the head node here")] = False,
    slots: Annotated[int, typer.Option(min=1, help="probes this node runs at once (each also takes a CPU)")] = 1,
    output_json: Annotated[bool, typer.Option("--json", help="print it as JSON")] = False,
) -> None:
    """This machine's platform key, and the `ray start` line that offers it to a fleet survey."""
    import shlex

    from survey import fleet
    from survey.identity import local_platform

    if head and address:
        raise InputError("give --head or --address, not both")
    p = local_platform()
    problem = fleet.key_problem(p.key)
    if problem:
        raise InputError(f"this machine's platform key {p.key[:80]!r} {problem}; it cannot be advertised")
    argv = fleet.ray_start_argv(p.key, address=address, head=head, slots=slots)
    if output_json:
        doc = {"key": p.key, "label": p.label, "vendor": p.vendor, "arch": p.arch, "model": p.model,
               **{k: p.detail.get(k) for k in ("driver", "runtime", "errors")},
               "resource": fleet.resource_name(p.key), "resources": {fleet.resource_name(p.key): slots},
               "ray_start": argv, "ray_start_line": shlex.join(argv)}
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        out.print(f"platform: {p.key}  ({p.label})", markup=False, highlight=False)
        out.print(shlex.join(argv), markup=False, highlight=False, soft_wrap=True)
    for e in p.detail.get("errors") or []:
        err.print(f"[yellow]note:[/] {escape(str(e))}")
    if not head and not address:
        err.print("replace HEAD_ADDRESS with the head node's address (or pass --address); run the line on this node",
                  highlight=False)


# --------------------------------------------------------------------------- serve / schema
@app.command()
def serve(
    db: DbOpt = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8000,
    workers: Annotated[int, typer.Option(help="processes serving the one port (a store file or PostgreSQL; each "
                                              "worker answers what the store holds now)")] = 1,
) -> None:
    """Serve the matrix and the evidence over HTTP (FastAPI, uvicorn)."""
    from api import serve as serving

    serving.check_port(port)  # exit 64; a port in use: exit 69 (api.serve); --workers outside 1-64: 64
    serving.serve(lambda: open_store(db), host, port, workers)


@app.command()
def publish(
    directory: Annotated[Path, typer.Argument(help="where to write the site (replaced whole)")],
    db: DbOpt = None,
) -> None:
    """Write the matrix, candidates and runs as static files any static host can serve."""
    from api.publish import publish as publish_site

    store = open_store(db, create=False)
    try:
        res = publish_site(store, directory)
    except OSError as e:
        raise InputError(f"{directory}: cannot write the site there: {e.strerror or e}")
    err.print(f"{directory}: {res.pages} files, {res.bytes / 1e6:.1f} MB"
              + (f"; not published: {', '.join(res.skipped[:5])}" if res.skipped else ""), markup=False)


@app.command()
def schema(
    write: Annotated[Optional[Path], typer.Option(help="write the schema here instead of stdout")] = None,
) -> None:
    """Print the probe report's JSON Schema."""
    from survey.report import json_schema

    text = json.dumps(json_schema(), indent=1, sort_keys=True) + "\n"
    if write:
        try:
            write.write_text(text)
        except OSError as e:
            raise InputError(f"{write}: cannot write it: {e.strerror}")
    else:
        sys.stdout.write(text)


def main() -> None:
    try:
        _main(sys.argv[1:])
    finally:
        close_stores()  # the command is over (SQLite checkpoints its WAL as each store closes)


def _main(argv: list[str]) -> None:
    # A read command asked again with nothing changed is answered from the cache (survey.replay).
    with replay.recording(replay.answer(argv), argv) as rec:
        command = typer.main.get_command(app)
        try:
            rv = command.main(args=argv, prog_name="survey", standalone_mode=False)
        except UsageError as e:
            e.show()
            sys.exit(exitcodes.USAGE)
        except typer.Abort:
            err.print("aborted")
            sys.exit(130)
        except SurveyError as e:
            err.print(f"[bold red]error:[/] {escape(e.message)}", highlight=False)
            if e.hint:
                err.print(f"  {e.hint}", markup=False, highlight=False)
            sys.exit(e.exit_code)
        code = rv if isinstance(rv, int) else 0
        if code == 0 and (argv == ["--help"] or (len(argv) == 2 and argv[1] == "--help"
                                                 and argv[0] in getattr(command, "commands", {}))):
            rec.replayable()  # the help text
        rec.finish(code)
    sys.exit(code)


__all__ = ["app", "main", "UnknownTarget"]
