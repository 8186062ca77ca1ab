"""``survey probe``, ``survey ingest``, ``survey schema``: reports made and stored."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from survey.cli.app import DbOpt, TimeoutOpt, app, err, open_store, out, split_commas
from survey.core import exitcodes
from survey.core.errors import InputError, StoreUnusable, UsageProblem, choose
from survey.render.escape import rich_markup, terminal


def check_backend_modes(items: list[str], option: str) -> None:
    """``BACKEND[:MODE]`` values of --only and --capture: known backends and modes only
    (the probe would check a backend nobody has), with a suggestion for a misspelling."""
    from probes import outcomes as O
    from survey.evidence import queries

    modes = [m for m in (*O.COMMON_MODES, *O.INSTRUMENTATION_MODES) if m]
    for item in items:
        backend, _, mode = item.partition(":")
        choose(backend, O.BACKENDS, "backend", f"{option} {item}")
        if mode and mode != queries.NO_MODE:
            choose(mode.split(":", 1)[0], modes, "mode", f"{option} {item}")


@app.command()
def probe(
    python: Annotated[Optional[str], typer.Option("--python", help="the interpreter to probe")] = None,
    image: Annotated[Optional[str], typer.Option("--image", help="the container image to probe")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write the report here")] = None,
    timeout: TimeoutOpt = 60.0,
    capture: Annotated[Optional[list[str]], typer.Option("--capture", help="also capture BACKEND[:MODE]")] = None,
    auto_capture: Annotated[bool, typer.Option(help="capture every (backend, mode) found working")] = True,
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", help="check only BACKEND[:MODE] (repeatable, or a comma list: --only cupti,roctracer:pcsampling)")]
    = None,
    engine: Annotated[Optional[str], typer.Option(help="container engine for --image")] = None,
    pull: Annotated[str, typer.Option(help="image pull policy: never, missing, always")] = "missing",
    interpreter: Annotated[Optional[str], typer.Option(help="the Python inside --image (default: python3, python)")]
    = None,
    store_it: Annotated[bool, typer.Option("--store", help="also ingest the report (kept as ad-hoc evidence)")]
    = False,
    repeats: Annotated[int, typer.Option(help="at most this many attempts of each proton.start check (at least two "
                                              "are made; more while one crashes, hangs or raises an unrecognised "
                                              "error, or they disagree); disagreeing attempts make it `unstable`")]
    = 6,
    db: DbOpt = None,
) -> None:
    """Probe one interpreter or image and print (or write) its report."""
    from survey.environments import probe as probe_run
    from survey.environments.launchers.python import PythonLauncher, interpreter_path

    if (python is None) == (image is None):
        raise UsageProblem("give exactly one of --python PATH or --image IMAGE")
    only = split_commas(only)
    check_backend_modes(only or [], "--only")
    check_backend_modes(capture or [], "--capture")
    if python is not None:
        python = interpreter_path(python)  # absolute: the stored spec names it from anywhere
    launcher: Any
    if python is not None:
        launcher = PythonLauncher(python)
    else:
        from survey.environments.launchers.image import ImageLauncher

        assert image is not None
        launcher = ImageLauncher(image, engine=engine, pull=pull, python=interpreter)
    resolved = launcher.obtain()
    args = probe_run.probe_args(timeout, captures=capture or (), auto_capture=auto_capture, only=only or (),
                                repeats=repeats)
    raw, has_triton = launcher.probe(resolved, args, probe_run.overall_timeout(timeout))
    from survey.evidence.identity import attach_origin

    raw = attach_origin(raw, resolved.origin())
    if output:
        tmp = output.with_name(output.name + ".tmp")
        tmp.write_bytes(raw)
        tmp.replace(output)
        err.print(terminal(f"report written to {output}"), markup=False)
    else:
        sys.stdout.write(raw.decode())
        sys.stdout.flush()
    if store_it:
        from survey.environments.targets import Target
        from survey.evidence.ingest import ingest

        t = Target(python or image or "", "interpreter" if python else "image", None)
        name = t.name_for(resolved)
        spec = {"python": python} if python else {"image": image}
        with open_store(db).session() as s:
            res = ingest(s, raw, candidate=name, label=name, kind=launcher.kind, spec=spec, resolved=resolved,
                         source="probe")
        err.print(terminal(f"stored as run #{res.run_id} (candidate {name})" if res.created
                           else f"already stored as run #{res.run_id}"), markup=False)
    if not has_triton:
        err.print(f"[yellow]no Triton in {rich_markup(launcher.describe())}[/] (the report says what was found)")
        raise typer.Exit(exitcodes.NO_TRITON)


@app.command("ingest")
def ingest_cmd(
    reports: Annotated[list[Path], typer.Argument(
        help="probe report JSON files, or directories of them (their *.json files)")],
    candidate: Annotated[Optional[str], typer.Option(
        help="file it under this candidate: a catalog name publishes it (the report must have measured what the "
             "entry pins), a stored name adds to it, a new name needs --new; default: a name from its origin")] = None,
    label: Annotated[Optional[str], typer.Option(
        help="the docs label of a candidate of your own (a catalog candidate's comes from the catalog)")] = None,
    new: Annotated[bool, typer.Option(
        "--new", help="create --candidate when it is neither in the catalog nor stored")] = False,
    catalog: Annotated[Optional[Path], typer.Option(help="the catalog whose names publish (default: built-in)")]
    = None,
    db: DbOpt = None,
) -> None:
    """Store reports produced elsewhere (a GPU host, a CI job), each on the platform it ran on. Every report is
    read and checked before anything is stored (400 or more by a process per core), and held meanwhile in about
    a sixth of its size; many are stored in batches of 500, one transaction each."""
    from survey.core import names
    from survey.environments import catalog as catalog_mod
    from survey.evidence.ingest import IngestResult
    from survey.evidence.report import max_report_bytes
    from survey.flows.filing import file_reports, read_reports
    from survey.verdicts import summary

    # the limits of an upload (api.upload): names, size, JSON types
    for value, what, limit in ((candidate, "candidate", names.MAX_NAME), (label, "label", names.MAX_LABEL)):
        why = names.problem(value, what, limit) if value is not None else None
        if why:
            raise UsageProblem(f"--{what}: {why}", field=what)
    try:
        limit = max_report_bytes()
    except ValueError as e:
        raise UsageProblem(str(e))
    cat = catalog_mod.load(catalog)

    paths, idents = read_reports(reports, limit)
    try:
        store, fresh = open_store(db, create=False), None
    except StoreUnusable:  # no store yet: made here, and removed again if nothing could be filed in it
        store = open_store(db)
        fresh = store.sqlite_file()
    shown = iter(paths)
    filed = [0]

    def said(results: list[IngestResult]) -> None:
        for res in results:
            filed[0] += 1
            path = next(shown)
            if res.created:
                out.print(terminal(f"{path}: stored as run #{res.run_id} (candidate {res.candidate})"), markup=False)
            elif res.note:
                out.print(terminal(f"{path}: {res.note}"), markup=False)
            else:
                out.print(terminal(f"{path}: already stored as run #{res.run_id} (candidate {res.candidate}); "
                                   "nothing added"), markup=False)

    try:
        with store.session() as s:
            file_reports(s, idents, candidate=candidate, label=label, new=new, catalog=cat, source="ingest",
                         on_batch=said)
        summary.bring_current(store)  # a store of an older proton-survey: its cells stored once, now
    except BaseException:
        if fresh is not None and filed[0] == 0:
            store.close()
            for leftover in (fresh, fresh.with_name(fresh.name + "-wal"), fresh.with_name(fresh.name + "-shm")):
                leftover.unlink(missing_ok=True)
        raise


@app.command()
def schema(
    write: Annotated[Optional[Path], typer.Option(help="write the schema here instead of stdout")] = None,
) -> None:
    """Print the probe report's JSON Schema."""
    from survey.evidence.report import json_schema

    text = json.dumps(json_schema(), indent=1, sort_keys=True) + "\n"
    if write:
        try:
            write.write_text(text)
        except OSError as e:
            raise InputError(f"{write}: cannot write it: {e.strerror}")
    else:
        sys.stdout.write(text)
