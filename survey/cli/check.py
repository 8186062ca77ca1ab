"""``survey check``: will a run (or every cell of an aorta recipe) work in TARGET?"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from survey.cli.app import TRAILING, DbOpt, JsonOpt, TimeoutOpt, app, err, open_store, out, wants_json
from survey.core.errors import UsageProblem, choose
from survey.render.escape import json_text, rich_markup, terminal

if TYPE_CHECKING:
    from survey.aorta.check import CellCheck
    from survey.verdicts.verdict import CheckResult


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
        help="an aorta sidecar file declaring environments and mitigations (aorta's --mitigations-file); "
             "repeatable")] = None,
    catalog: Annotated[Optional[Path], typer.Option(help="catalog used when TARGET must be probed first")] = None,
    timeout: TimeoutOpt = 60.0,
    fmt: Annotated[Optional[str], typer.Option(
        "--format", help="text (the default) or json: the verdict as JSON (a list with --recipe)")] = None,
    output_json: JsonOpt = False,
    engine: Annotated[Optional[str], typer.Option(help="container engine when TARGET is an image")] = None,
    pull: Annotated[str, typer.Option(help="image pull policy: never, missing, always")] = "missing",
    platform: Annotated[Optional[str], typer.Option(
        help="answer from the stored evidence of this platform (a key such as nvidia:sm_90:NVIDIA H200, or a "
             "part of one: sm_90, gfx942) instead of resolving TARGET here")] = None,
    measure: Annotated[bool, typer.Option(
        "--measure", help="with --recipe and TARGET (an interpreter here): probe TARGET once with each set of "
                          "variables the recipe's cells set whose effect its evidence does not measure, store it "
                          "(the variables in its identity) and answer those cells from it")] = False,
    db: DbOpt = None,
) -> None:
    """Will a run with this backend and mode work in TARGET (with --recipe: will every cell of an aorta recipe
    leave a profile)? Exit 0 yes, 2 no (any cell), 3 not enough evidence, 8 (--recipe) a profile only on a
    stated condition on the workload's kernels. With --recipe, the command a probe recipe runs goes after
    `--`, as to `aorta sweep run`: survey check --recipe R [TARGET] -- COMMAND..."""
    output_json = wants_json(fmt, output_json)
    command = TRAILING["command"]
    _refuse_mistakes(target, backend, mode, recipe, aorta_environment, measure, platform, command)
    store = open_store(db, create=platform is None)  # --platform: answered from the store, never made

    def say(m: str) -> None:
        err.print(terminal(m), markup=False)

    if recipe is not None:
        from survey.aorta import check as recipe_check

        read, cells = recipe_check.check_recipe(
            store, recipe, target=target, aorta_environment=aorta_environment,
            environment_files=aorta_environments, catalog=catalog, timeout=timeout, engine=engine, pull=pull,
            platform=platform, command=command, measure=measure, say=say)
        _show_cells(cells, read.model_refuses, output_json)
        raise typer.Exit(recipe_check.overall_exit(cells))
    assert backend is not None
    from survey.evidence.queries import mode_from_label

    if aorta_environment is not None:
        from survey.aorta import check as recipe_check

        target, result = recipe_check.check_in_aorta_environment(
            store, aorta_environments, aorta_environment, backend, mode_from_label(mode), timeout=timeout,
            engine=engine, pull=pull, platform=platform, say=say)
    else:
        from survey.flows import check as check_mod

        assert target is not None
        result = check_mod.check_target(store, target, backend, mode_from_label(mode), catalog_path=catalog,
                                        timeout=timeout, engine=engine, pull=pull, platform=platform, say=say)
    _show_result(result, target, backend, mode, output_json)
    raise typer.Exit(result.exit_code)


def _refuse_mistakes(target: str | None, backend: str | None, mode: str | None, recipe: Path | None,
                     aorta_environment: str | None, measure: bool, platform: str | None,
                     command: list[str] | None) -> None:
    """The combinations of arguments ``survey check`` refuses (exit 64), before anything is opened."""
    if target is not None and aorta_environment is not None:
        raise UsageProblem("give TARGET or --aorta-environment NAME, not both")
    if recipe is not None and (backend or mode):
        raise UsageProblem("give --recipe or --backend/--mode, not both")
    if measure and (recipe is None or target is None or platform is not None):
        raise UsageProblem("--measure needs --recipe and TARGET, and probes here (not with --platform)")
    if command is not None and recipe is None:
        raise UsageProblem("a command after -- needs --recipe (it is what the recipe's cells run)")
    if command is not None and not command:
        raise UsageProblem("nothing after --: give the command the recipe's cells run")
    if recipe is not None:
        return
    if not backend:
        raise UsageProblem("--backend (or --recipe) is required")
    if target is None and aorta_environment is None:
        raise UsageProblem("give TARGET (or --aorta-environment NAME)")
    from probes import outcomes as O
    from survey.evidence import queries

    choose(backend, O.BACKENDS, "backend")
    if mode is not None:
        modes = (queries.NO_MODE, *(x for x in O.COMMON_MODES if x), *O.INSTRUMENTATION_MODES)
        choose(mode.split(":", 1)[0], modes, "mode")


def _show_cells(cells: list[CellCheck], refused: str | None, output_json: bool) -> None:
    from survey.aorta import check as recipe_check

    if refused:
        from survey.aorta.model import NAME

        err.print(terminal(f"note: {NAME} would refuse this recipe: {refused}"), markup=False)
    if output_json:
        sys.stdout.write(json_text([c.as_dict() for c in cells], indent=1) + "\n")
        return
    for style, line in recipe_check.render(cells):
        out.print(f"[{style}]{rich_markup(line)}[/]" if style else terminal(line), markup=bool(style),
                  highlight=False)


def _show_result(result: CheckResult, target: str, backend: str, mode: str | None, output_json: bool) -> None:
    if output_json:
        sys.stdout.write(json_text(result.as_dict(), indent=1) + "\n")
        return
    from survey.render import check as view

    out.print(view.head(result, target, backend, mode))
    for line in view.lines(result):
        out.print(terminal(line), markup=False)
