"""``survey check [TARGET] --recipe FILE``: will each cell of an aorta recipe leave
a profile?

Every cell is answered by name, link by link (survey/aorta/links.py): the recipe
as aorta reads it, the cell's effective ``proton`` options, the cell as the recipe
expands to it (a probe recipe's ``mitigation_axis x diagnostic_axis``, each axis
value a mitigation whose variables the cell sets), how aorta attaches Proton,
whether the workload gets the collector at all (survey/aorta/workloads.py), the
environment and every variable aorta sets there (survey/aorta/overlays.py),
``proton.start`` with what really arrives there, and whether a capture there
recorded something.

Where a cell runs:

- with TARGET (``survey check TARGET``'s resolver; ``--platform`` answers from
  stored evidence): a cell in ``local`` or ``default`` (aorta's own process) runs
  in TARGET; a cell in an environment that names only ``env`` runs in TARGET with
  that baseline; a cell in any other environment is checked in TARGET instead,
  and says so;
- with ``--aorta-environment NAME``: every cell in that environment;
- otherwise in the environment the cell names: a registered one (aorta's registry:
  built-ins, the ``aorta.environments`` entry points, ``--aorta-environments``
  sidecar files) or an inline ``{docker: REF, env: {...}}``, launched with its
  ``env`` baseline (survey/aorta/targets.py) and filed as ``aorta:<name>``. A cell
  whose environment cannot be resolved or launched says so (not enough evidence).

The sidecar files also declare mitigations (``--mitigations-file`` to aorta); the
mitigations registry is read with them (survey/aorta/mitigations.py).

Exit: 2 if any cell leaves no profile, else 3 if any lacks evidence, else 8 if any
leaves one only on a stated condition on its workload, else 0.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from db import models as m
from db.store import Store
from probes import outcomes as O
from survey.aorta import links as L
from survey.aorta import model
from survey.aorta.command import AortaSays, ask_aorta, interpreters, judge
from survey.aorta.environments import AortaEnvironment, find_aorta_python, load_environments
from survey.aorta.mitigations import Registry, load_mitigations, overlay
from survey.aorta.overlays import answer_environment, evidence_facts
from survey.aorta.proton_rules import is_vendor, mode_dropped, resolve_auto
from survey.aorta.recipe import Cell, EnvironmentRef, ProtonConfig, Recipe, load_recipe
from survey.aorta.targets import AortaTarget, survey_target
from survey.aorta.workloads import Reach, collector_reach
from survey.core import exitcodes
from survey.core.errors import SurveyError, UnknownTarget, suggestion
from survey.core.versions import release
from survey.evidence import identity, queries
from survey.evidence.queries import mode_label
from survey.flows.check import check_run, check_stored, check_target
from survey.flows.run import ProbeSettings, survey_one
from survey.verdicts.answers import NO, UNKNOWN, Answer
from survey.verdicts.verdict import Cause, CheckEvidence, CheckResult

ROCPROFILER_SDK = "librocprofiler-sdk.so"
REGISTRY_SINCE = (3, 8, 0)  # get_available_profilers() exists from this release on
LOCAL_ENVIRONMENTS = ("local", "default")  # aorta's built-ins for its own process


# --------------------------------------------------------------------------- what is answered
@dataclass
class CellCheck:
    """One cell's answer."""

    cell: str
    where: str
    environment: str | None  # the environment the cell names (None: the recipe's shape names none)
    checked_in: str | None  # TARGET, or aorta:<name>; None where nothing could be checked
    configuration: dict[str, str] | None  # aorta's proton options for the cell; None: no proton collector
    proton_mode: str | None = None  # the --mode aorta renders from them
    auto: str | None = None  # how backend: auto resolves there
    mode_dropped: str | None = None  # why the mode never reaches Proton there
    result: CheckResult | None = None  # proton.start there; None: no proton collector in this cell
    collectors: tuple[str, ...] = ()
    evidence_run: int | None = None  # the complete run that answered; None: no evidence answered
    links: list[L.Link] = field(default_factory=list)
    decision: L.Decision | None = None
    mitigations: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return self.decision.exit_code if self.decision is not None else exitcodes.OK

    @property
    def verdict(self) -> L.CellVerdict:
        return self.decision.verdict if self.decision is not None else L.CellVerdict.NOT_APPLICABLE

    def answer(self) -> L.RecipeCell:
        """What ``survey check --recipe R --json`` prints for the cell."""
        head: dict[str, Any] = {
            "cell": self.cell, "where": self.where, "cell_environment": self.environment,
            "mitigations": list(self.mitigations), "checked_in": self.checked_in,
            "configuration": self.configuration, "proton_mode": self.proton_mode, "auto": self.auto,
            "mode_dropped": self.mode_dropped, "collectors": list(self.collectors)}
        if self.result is None or self.decision is None:
            return L.RecipeCellSkipped(
                **head, exit_code=exitcodes.OK, verdict=L.CellVerdict.NOT_APPLICABLE, cause=None,
                reason=f"this cell collects no proton (collectors: {', '.join(self.collectors) or 'none'})",
                fix=None, links=[])
        d = self.decision
        evidence = {k: getattr(self.result, k) for k in CheckEvidence.model_fields}
        return L.RecipeCellAnswer(
            **head, exit_code=d.exit_code, verdict=d.verdict, cause=d.cause, reason=d.reason, fix=d.fix, **evidence,
            decided_by=d.link,
            condition=next((lk.facts.get("condition") for lk in self.links if lk.answer == L.CONDITIONAL), None),
            links=self.links)

    def as_dict(self) -> dict[str, Any]:
        return self.answer().model_dump(mode="json")


def overall_exit(cells: list[CellCheck]) -> int:
    codes = {c.exit_code for c in cells}
    if exitcodes.CANNOT_RUN in codes:
        return exitcodes.CANNOT_RUN
    if exitcodes.NOT_ENOUGH_EVIDENCE in codes:
        return exitcodes.NOT_ENOUGH_EVIDENCE
    if exitcodes.CONDITIONAL in codes:
        return exitcodes.CONDITIONAL
    return exitcodes.OK


# --------------------------------------------------------------------------- evidence of one environment
@dataclass
class Evidence:
    """The run that answers for one environment, or why there is none."""

    checked_in: str | None
    run_id: int | None = None
    failure: CheckResult | None = None  # when run_id is None: backend-independent
    notes: list[str] = field(default_factory=list)


def _failure(checked_in: str | None, cause: Cause, reason: str, fix: str | None, **kw: Any) -> Evidence:
    return Evidence(checked_in, None, CheckResult(verdict=cause.verdict, cause=cause, reason=reason, fix=fix,
                                                  target=checked_in or "", backend="", mode=None, **kw))


def _from_result(s: Any, checked_in: str, res: CheckResult, probe_backend: str) -> Evidence:
    """The run a check answered from (its notes kept), or the check's own answer
    when it found no complete run."""
    run = queries.get_run(s, res.run_id) if res.run_id is not None else None
    if run is None or run.status != "complete":
        return Evidence(checked_in, None, res)
    plain = check_run(s, run, checked_in, probe_backend, None)
    return Evidence(checked_in, run.id, notes=[d for d in res.details if d not in plain.details])


def target_evidence(store: Store, target: str, *, catalog: Path | None, timeout: float, engine: str | None,
                    pull: str, platform: str | None, say: Callable[[str], None]) -> Evidence:
    """TARGET through ``survey check``'s own resolver (probing it first where needed)."""
    probe_backend = O.BACKENDS[0]  # which run answers does not depend on the backend asked about
    res = check_target(store, target, probe_backend, None, catalog_path=catalog, timeout=timeout, engine=engine,
                       pull=pull, platform=platform, say=say)
    with store.session() as s:
        return _from_result(s, target, res, probe_backend)


def aorta_evidence(store: Store, at: AortaTarget, *, timeout: float, platform: str | None,
                   say: Callable[[str], None]) -> Evidence:
    """An aorta environment: stored evidence of ``aorta:<name>`` on ``platform``, or
    the environment launched here with its baseline (probed unless unchanged)."""
    name = at.name
    why = at.unusable
    if why is not None:
        return _failure(None, Cause.ENVIRONMENT_UNRESOLVED, why, None)
    if platform is not None:
        with store.session() as s:
            if name not in {c.name for c in queries.candidates(s)}:
                return _failure(name, Cause.NOT_PROBED, f"{name} has no stored evidence",
                                "survey it on that platform (`survey run --aorta-environments FILE` there, or "
                                f"`survey probe` and `survey ingest --candidate {name}`)")
            res = check_stored(s, name, name, O.BACKENDS[0], None, platform)
            return _from_result(s, name, res, O.BACKENDS[0])
    here = identity.local_platform()
    say(f"{name}: obtaining {at.label}")
    try:
        outcome = survey_target(store, at, ProbeSettings(timeout=timeout), report=lambda msg: say(f"{name}: {msg}"))
    except SurveyError as e:  # no launcher here (no container engine): nothing stored
        return _failure(name, Cause.NOT_PROBED, f"{name} cannot be probed here: {e.message}", e.hint)
    with store.session() as s:
        if outcome.run_id is not None and outcome.status in ("probed", "unchanged"):
            return Evidence(name, outcome.run_id)
        cand = queries.get_candidate(s, name)
        older = queries.latest_complete(s, cand.id, here.key)
        if older is not None:
            return Evidence(name, older.id, notes=[f"{name} could not be probed again here ({outcome.status}: "
                                                   f"{outcome.message}); answered from run #{older.id}, which may "
                                                   "not be its current state"])
    return _failure(name, Cause.NOT_PROBED, f"{name} could not be probed here ({outcome.status}): {outcome.message}",
                    "probe it where it can be obtained and `survey ingest` the report", platform=here.key)


def measure_overlay(store: Store, target: str | None, name: str, overlay: Mapping[str, str], *, timeout: float,
                    say: Callable[[str], None]) -> Evidence:
    """``--measure``: TARGET (an interpreter here) probed once with ``overlay`` set
    over its environment, filed as ``name`` (the overlay in its identity)."""
    from survey.environments.launchers.python import PythonLauncher

    if target is None or not (os.path.exists(target) or shutil.which(target)):
        return _failure(name, Cause.NOT_PROBED, f"--measure probes TARGET with the cell's variables set: {target!r} "
                                                "is not an interpreter here", "give TARGET as the interpreter's path")
    say(f"{name}: probing {target} with {', '.join(sorted(overlay))} set")
    launcher = PythonLauncher(target, env=dict(overlay))
    outcome = survey_one(store, name, f"{target} with {', '.join(sorted(overlay))} set", "python",
                         {"python": target, "env": dict(sorted(overlay.items()))}, None, launcher,
                         ProbeSettings(timeout=timeout), report=lambda msg: say(f"{name}: {msg}"))
    if outcome.run_id is not None and outcome.status in ("probed", "unchanged"):
        return Evidence(name, outcome.run_id)
    return _failure(name, Cause.NOT_PROBED, f"{name} could not be probed here ({outcome.status}): {outcome.message}",
                    None)


# --------------------------------------------------------------------------- what starts
def _loads(run: m.Run, name: str) -> bool | None:
    row = next((lib for lib in run.libraries if lib.name == name), None)
    return row.loads if row is not None else None


def _registry_missing(run: m.Run) -> bool:
    """A release that has the profiler registry, whose registry was not read."""
    if run.profilers is not None or not run.triton_version:
        return False
    try:
        return release(run.triton_version) >= REGISTRY_SINCE
    except ValueError:
        return True


def _unanswered(res: CheckResult, cause: Cause, reason: str, fix: str | None,
                backend_present: Answer | None = None) -> CheckResult:
    """``res`` (its evidence fields kept) answering for a backend that could not be settled:
    its verdict (and so its exit code) is the cause's."""
    why = "no backend is selected" if backend_present is not None else "which backend runs is not settled"
    return res.model_copy(update=dict(
        verdict=cause.verdict, cause=cause, reason=reason, fix=fix,
        backend_present=backend_present or Answer(UNKNOWN, why), mode_accepted=Answer(UNKNOWN, why),
        library_loads=Answer(UNKNOWN, why), live_outcome=None, details=[]))


def cli_drops_mode(view: L.ReportView | None, run: m.Run, launch: str, mode: str | None) -> tuple[str | None, str]:
    """(why the mode is dropped or None, the source): from the report's measurement
    of Proton's command line given ``--mode`` (option ``cli`` with a value: the
    mode its session really compiled with) where there is one, else from the
    Triton release (survey/aorta/proton_rules.py)."""
    if launch != "cli" or mode is None:
        return None, "recipe"
    cap = view.option("cli", "mma", "instrumentation") if view is not None else None
    session = (cap or {}).get("session_mode")
    if isinstance(session, str) and session:
        if session.split(":", 1)[0] == "mma":
            return None, "measured"
        return (f"mode {mode!r} is silently dropped: aorta's mode: cli passes it as Proton's --mode, and this "
                f"build's command line, given --mode mma, compiled its session with {session.split(':', 1)[0]} "
                "(measured), so the run profiles in the backend's default mode; use mode: env, whose payload calls "
                "proton.start(mode=...) itself, or Triton >= 3.8.0"), "measured"
    try:
        return mode_dropped(launch, run.triton_version, mode), "Triton's code"
    except ValueError:
        return None, "Triton's code"  # a version string that is not a release: no claim


def answer(s: Any, run: m.Run, checked_in: str, proton: ProtonConfig,
           view: L.ReportView | None = None) -> tuple[CheckResult, str | None, str | None]:
    """(the check of what would really start, how auto resolved, why the mode is
    dropped). The check is of the backend's base mode; the mode as it arrives
    (options after ':' included) is in ``result.mode``."""
    backend, auto = proton.backend, None
    if backend == "auto":
        base = check_run(s, run, checked_in, O.BACKENDS[0], None).model_copy(
            update={"backend": "auto", "mode": proton.mode})
        if base.cause is Cause.NO_TRITON:
            return base, None, None
        vendor = run.platform.vendor if run.platform is not None else identity.UNKNOWN_VENDOR
        if not is_vendor(vendor):
            return _unanswered(base, Cause.NOT_CHECKED,
                               "backend auto: Proton picks from the GPU target, and this evidence does not say "
                               f"which GPU vendor it ran on (platform {base.platform})",
                               "probe again with the current probe (its report records the platform), or name "
                               "the backend"), None, None
        if _registry_missing(run):
            return _unanswered(base, Cause.NOT_CHECKED,
                               f"backend auto: Triton {run.triton_version} selects from its profiler registry, "
                               "which the probe did not read here",
                               "probe again (`survey probe`), or name the backend"), None, None
        choice, auto = resolve_auto(vendor, run.profilers, _loads(run, ROCPROFILER_SDK))
        if choice is None:
            if vendor == "none":
                return _unanswered(base, Cause.NO_GPU, auto,
                                   "probe on a GPU host (`survey probe` there, then `survey ingest` the report), "
                                   "or ask about a GPU platform that has evidence with --platform",
                                   Answer(UNKNOWN, auto)), auto, None
            present = Answer(NO, auto, "registry")
            return _unanswered(base, Cause.BACKEND_ABSENT, auto,
                               "name a backend this build registers (" + ", ".join(run.profilers or []) + ")",
                               present), auto, None
        backend = choice
    dropped, _src = cli_drops_mode(view, run, proton.launch, proton.mode)
    mode = None if dropped else proton.mode
    res = check_run(s, run, checked_in, backend, mode.split(":", 1)[0] if mode else None)
    res.mode = mode
    if auto is not None:
        res.details.insert(0, auto)
    if dropped is not None:
        res.details.insert(0, dropped)
        res.reason = (f"what runs is `{backend}` in its default mode (mode {proton.mode!r} is dropped, see note): "
                      + res.reason)
    return res, auto, dropped


# --------------------------------------------------------------------------- links
def _run_source(run: m.Run) -> str:
    where = run.platform.key if run.platform is not None else "no platform"
    return f"measured: run #{run.id} ({run.candidate.name}, {where}, Triton {run.triton_version or '-'})"


def _combine(name: str, parts: list[L.Link], yes_basis: str, source: str | None) -> L.Link:
    """One link from several checks: the first that does not hold decides."""
    for p in parts:
        if p.answer != L.YES:
            return replace(p, link=name, facts={**p.facts, "checks": [q.as_dict() for q in parts]})
    basis = "; ".join([yes_basis] + [p.basis for p in parts if p.basis]) if yes_basis else \
        "; ".join(p.basis for p in parts)
    return L.Link(name, L.YES, basis, None, None, source, {"checks": [q.as_dict() for q in parts]})


def recipe_link(recipe: Recipe, aorta: AortaSays | None = None) -> L.Link:
    refused = recipe.model_refuses
    facts: dict[str, Any] = {"shape": recipe.shape, "source": recipe.source, "model_refuses": refused}
    if aorta is not None and aorta.recipe is not None:
        facts["aorta"] = aorta.recipe
        if not aorta.recipe.get("loaded"):
            return L.Link("recipe", L.NO, f"aorta's own loader refuses the recipe: {aorta.recipe.get('error')}",
                          "recipe_refused", "fix the recipe as the message says", aorta.source, facts)
        return L.Link("recipe", L.YES, f"a {recipe.shape} recipe, loaded by aorta's own loader (cells: "
                                       f"{', '.join(aorta.recipe.get('cells') or [])})", None, None, aorta.source,
                      facts)
    basis = f"a {recipe.shape} recipe, read by {model.NAME}'s loader rules"
    if refused:
        basis += (f"; {model.NAME} would refuse it ({refused}): answered as an aorta that takes it would run it")
    return L.Link("recipe", L.YES, basis, None, None, model.MODEL, facts)


def command_link(recipe: Recipe, cell: Cell, command: list[str] | None, aorta: AortaSays | None,
                 said: dict[str, Any] | None) -> L.Link | None:
    """Whether aorta's collector takes the command a probe recipe's cells run (None:
    the recipe's workload is aorta's own, not a command)."""
    if recipe.shape != "probe" or cell.proton is None:
        return None
    got = judge(cell.proton.launch, command, said, aorta)
    cause = {L.NO: "command_refused", L.UNKNOWN: "command_not_given"}.get(got.answer)
    fix = None
    if got.answer == L.NO:
        fix = ("launch the workload as `python script.py ...` (or `python -m pytest`, `pytest`), or use mode: env "
               "and have the workload call proton.start()/proton.finalize() itself")
    elif got.answer == L.UNKNOWN:
        fix = "give the command after --: survey check --recipe R [TARGET] -- COMMAND..."
    return L.Link("command", got.answer, got.basis, cause, fix, got.source, got.facts)


def options_link(cell: Cell) -> L.Link:
    assert cell.proton is not None
    opts = cell.proton.aorta_options()
    frm = "the cell's own collect:" if cell.collect_from == "cell" else "the recipe's collect:"
    return L.Link("options", L.YES, f"proton {' '.join(f'{k}={v}' for k, v in opts.items())} (from {frm}, aorta's "
                                    "defaults filled in)", None, None, "recipe",
                  {"options": opts, "rendered_mode": cell.proton.mode, "from": cell.collect_from})


def cell_link(recipe: Recipe, cell: Cell, registry: Registry) -> tuple[L.Link, dict[str, str]]:
    """The cell as the recipe expands to it, and the variables its mitigations set."""
    ov = overlay(registry, cell.mitigations, probe=recipe.shape == "probe")
    facts = {"mitigations": list(cell.mitigations), "variables": ov.env, "set_by": ov.origin,
             "extra_env": dict(cell.extra_env)}
    what = (f"probe cell {cell.where} (mitigation axis x diagnostic axis)" if recipe.shape == "probe"
            else f"{cell.where}" + (f", mitigations {', '.join(cell.mitigations)}" if cell.mitigations else ""))
    if ov.conflict:
        return L.Link("cell", L.NO, f"{what}: {ov.conflict}", "recipe_refused", "set each variable once",
                      model.MODEL, facts), ov.env
    if ov.unknown:
        near = "".join(suggestion(name, sorted(registry.mitigations)) for name in ov.unknown[:1])
        return L.Link("cell", L.UNKNOWN, f"{what}: mitigation {', '.join(map(repr, ov.unknown))} is not registered "
                                         f"in {registry.where()}{near}, so the variables it sets are not known "
                                         "(aorta refuses the recipe where it is not registered either)",
                      "mitigation_unresolved", "give the sidecar file that declares it with --aorta-environments "
                                               "FILE (aorta: --mitigations-file)", model.MODEL, facts), ov.env
    sets = ", ".join(f"{k}={v!r}" for k, v in ov.env.items())
    return L.Link("cell", L.YES, f"{what}: its mitigations set {sets or 'nothing'}", None, None,
                  f"{model.MODEL} ({registry.where()})", facts), ov.env


def attach_link(proton: ProtonConfig) -> L.Link:
    """How aorta attaches Proton (the declared release's instrumentation/proton/__init__.py)."""
    if proton.launch == "env":
        names = ["AORTA_PROTON_NAME", "AORTA_PROTON_DIR", "AORTA_PROTON_CONTEXT", "AORTA_PROTON_DATA"]
        if proton.backend != "auto":
            names.append("AORTA_PROTON_BACKEND")
        if proton.mode:
            names.append("AORTA_PROTON_MODE")
        return L.Link("attach", L.YES, "mode: env: aorta leaves the command as it is and exports "
                                       f"{', '.join(names)}; the workload must call proton.start() with them and "
                                       "proton.finalize() itself (one that does not writes no profile)", None, None,
                      model.MODEL, {"launch": "env", "variables": names})
    argv = ["python", "-m", "triton.profiler.proton", "-n", "<dir>/proton"]
    if proton.backend != "auto":
        argv += ["-b", proton.backend]
    argv += ["--context", proton.context, "--data", proton.data]
    if proton.mode:
        argv += ["--mode", proton.mode]
    return L.Link("attach", L.YES, f"mode: cli: aorta runs `{' '.join(argv)} <script>`; it wraps only a Python "
                                   "script launch (`python script.py`, pytest), anything else fails the trial at "
                                   "setup", None, None, model.MODEL, {"launch": "cli", "argv": argv})


def collector_link(reach: Reach) -> L.Link:
    cause = {L.NO: "not_attached", L.UNKNOWN: Cause.NOT_CHECKED}.get(reach.answer)
    fix = ("run the command as a mode: probe recipe (`aorta sweep run --recipe R -- COMMAND`), whose "
           "`_subprocess` workload gets the collector") if reach.answer == L.NO else None
    return L.Link("collector", reach.answer, reach.basis, cause, fix, reach.aorta, {"aorta": reach.aorta})


def environment_link(where: str, layers: list[tuple[str, Mapping[str, str]]], run: m.Run, view: L.ReportView,
                     proton: ProtonConfig, backend: str, mode: str | None, notes: list[str]) -> L.Link:
    ident_env = ((run.environment.resolved or {}).get("env") if run.environment is not None else None) or {}
    vendor = run.platform.vendor if run.platform is not None else identity.UNKNOWN_VENDOR
    facts = evidence_facts(vendor, view.doc, ident_env, run.modes)
    variables, moved = answer_environment(layers, facts, proton.backend, backend, mode)
    info = {"checked_in": where, "run": run.id, "layers": [name for name, _env in layers],
            "variables": [v.as_dict() for v in variables], "device_translation": moved, "notes": notes}
    src = _run_source(run)
    for answer_word in (L.NO, L.UNKNOWN):
        hit = next((v for v in variables if v.answer == answer_word), None)
        if hit is not None:
            fix = None
            if hit.cause == O.DISABLED:
                fix = f"drop {hit.name} from {hit.set_by}"
            elif hit.cause == O.NO_GPU:
                fix = f"select a device in {hit.name} ({hit.set_by}), or leave it unset"
            elif hit.cause == "overlay_not_measured":
                fix = ("measure it on that host: `survey check TARGET --recipe R --measure` probes TARGET with the "
                       "cell's variables set and stores it (or an aorta environment whose env sets it: `survey run "
                       "--aorta-environments FILE`); later checks answer from that evidence")
            return L.Link("environment", answer_word, f"in {where}, {hit.name}={hit.value!r} (set by {hit.set_by}): "
                                                      f"{hit.basis}", hit.cause, fix, src, info)
    said = (f"{len(variables)} variables set by aorta, none keeps a profile from being written there"
            if variables else "aorta sets no variable that matters here")
    return L.Link("environment", L.YES, f"in {where}: {said}" + (f"; {moved}" if moved else ""), None, None, src,
                  info)


def start_link(res: CheckResult, proton: ProtonConfig, view: L.ReportView, src: str, auto: str | None,
               dropped: str | None) -> L.Link:
    """proton.start with the backend and the mode as they arrive, then the options
    past them (each measured by an option record of the report)."""
    facts = {"backend": res.backend, "mode": res.mode, "live_outcome": res.live_outcome, "auto": auto,
             "mode_dropped": dropped}
    if res.cause in (Cause.CAPTURE_EMPTY, Cause.CAPTURE_FAILED) or res.exit_code == exitcodes.OK:
        how = [x for x in (auto, dropped) if x]
        head = L.Link("start", L.YES, f"proton.start(backend={res.backend!r}, mode={res.mode!r}) succeeded here"
                      + (f" ({'; '.join(how)})" if how else ""), None, None, src, facts)
    elif res.exit_code == exitcodes.CANNOT_RUN:
        return L.Link("start", L.NO, res.reason, res.cause, res.fix, src, facts)
    else:
        return L.Link("start", L.UNKNOWN, res.reason, res.cause, res.fix, src, facts)
    parts: list[L.Link] = []
    wanted = []
    if proton.context != "shadow":
        wanted.append(("context", proton.context))
    if proton.data != "tree":
        wanted.append(("data", proton.data))
    if res.mode and ":" in res.mode:
        wanted.append(("mode", res.mode))
    for option, value in wanted:
        what = f"{option}={value}"
        if view.options is None:
            parts.append(L.Link("start", L.UNKNOWN, f"{what} was not measured: this report predates the option "
                                                    "checks (report schema 3)", Cause.NOT_CHECKED,
                                "probe again with the current probe", src))
            continue
        cap = view.option(option, value, res.backend)
        if cap is None:
            parts.append(L.Link("start", L.UNKNOWN, f"{what} with {res.backend} was not measured here",
                                Cause.NOT_CHECKED, "probe again with the current probe", src))
            continue
        failed = L.option_capture_link(cap, what, src)
        parts.append(failed or L.Link("start", L.YES, f"{what} measured to work here", None, None, src,
                                      {"option": what, "outcome": cap.get("outcome")}))
    return _combine("start", [head] + parts, "", src)


def capture_link(res: CheckResult, proton: ProtonConfig, view: L.ReportView, run: m.Run, src: str) -> L.Link:
    """Whether a capture of what starts there recorded something."""
    backend, mode = res.backend, res.mode
    base = mode.split(":", 1)[0] if mode else None
    parts: list[L.Link] = []
    if proton.launch == "cli":
        cli = view.option("cli", None, backend)
        if cli is not None:  # the command line itself, measured launching a script
            parts.append(L.capture_link(cli, f"{backend} under Proton's command line", src, view.schema))
    options = [(o, v) for o, v, default in (("context", proton.context, "shadow"), ("data", proton.data, "tree"))
               if v != default]
    if mode and ":" in mode:
        options.append(("mode", mode))
    if options:
        for option, value in options:
            cap = view.option(option, value, backend)
            if cap is not None:
                parts.append(L.capture_link(cap, f"{backend} with {option}={value}", src, view.schema))
    elif backend != "instrumentation":
        cap = view.capture(backend, base) if view.doc is not None else None
        if cap is None and view.doc is None:
            row = next((c for c in run.captures if c.backend == backend and c.mode == base), None)
            cap = ({"outcome": row.outcome, "message": row.message, "kernel_count": row.kernel_count}
                   if row is not None else None)
        parts.append(L.capture_link(cap, f"{backend} mode {mode_label(base)}", src, view.schema))
    if backend == "instrumentation":  # what a capture does depends on the workload's kernels: each shape apart
        parts.append(L.kernels_link(view, base, src))
    return _combine("capture", parts, "", src)


def _not_evaluated(name: str, why: str) -> L.Link:
    return L.Link(name, L.UNKNOWN, f"not evaluated: {why}", Cause.NOT_CHECKED)


# --------------------------------------------------------------------------- the recipe
def _unresolved_cell(ref: EnvironmentRef | None, registry: Mapping[str, AortaEnvironment],
                     files: list[Path]) -> str:
    if ref is None:
        return "this recipe names no environment (a top-level proton: block); give TARGET"
    known = ", ".join(sorted(registry))
    aorta_py = find_aorta_python()
    where = ("aorta's built-ins" + (f", the aorta.environments entry points of {aorta_py}" if aorta_py
                                    else " (no `aorta` on PATH, so no entry points were read)")
             + (", " + ", ".join(map(str, files)) if files else ""))
    return (f"environment {ref.name!r} is not registered in {where}{suggestion(ref.name, sorted(registry))} "
            f"(known: {known}); give the sidecar file that "
            "declares it with --aorta-environments FILE, or TARGET")


def _env_only(env: AortaEnvironment) -> bool:
    return env.kind == "local" and env.name not in LOCAL_ENVIRONMENTS


def overlay_candidate(base: str, overlay: Mapping[str, str]) -> str:
    """The candidate the evidence of ``base`` probed with ``overlay`` set is filed under
    (the overlay is part of the environment's identity as well)."""
    return f"{base} +" + ",".join(f"{k}={v}" for k, v in sorted(overlay.items()))


def _from_run(store: Store, ev: Evidence, cell: Cell, layers: list[tuple[str, Mapping[str, str]]],
              notes: list[str], cc: CellCheck) -> tuple[CheckResult, list[L.Link], dict[str, str]]:
    """(what starts, the environment/start/capture links, the variables whose
    effect this evidence did not measure) for one cell from the run of ``ev``."""
    assert ev.run_id is not None and cell.proton is not None
    with store.session() as s:
        run = queries.get_run(s, ev.run_id)
        view = L.ReportView(run)
        res, cc.auto, cc.mode_dropped = answer(s, run, ev.checked_in or "", cell.proton, view)
        res.details.extend(ev.notes)
        src = _run_source(run)
        base = res.mode.split(":", 1)[0] if res.mode else None
        env = environment_link(ev.checked_in or "", layers, run, view, cell.proton, res.backend, base,
                               notes + ev.notes)
        slink = start_link(res, cell.proton, view, src, cc.auto, cc.mode_dropped)
        tail = [env, slink]
        if slink.answer == L.YES:
            tail.append(capture_link(res, cell.proton, view, run, src))
        else:
            tail.append(_not_evaluated("capture", "proton.start does not succeed there"))
        overlay = {v["name"]: v["value"] for v in env.facts.get("variables") or []
                   if v.get("cause") == "overlay_not_measured"}
        return res, tail, overlay


def check_recipe(
    store: Store,
    recipe_path: Path,
    *,
    target: str | None = None,
    aorta_environment: str | None = None,
    environment_files: list[Path] | None = None,
    catalog: Path | None = None,
    timeout: float = 60.0,
    engine: str | None = None,
    pull: str = "missing",
    platform: str | None = None,
    command: list[str] | None = None,
    measure: bool = False,
    say: Callable[[str], None] = lambda _m: None,
) -> tuple[Recipe, list[CellCheck]]:
    """Every cell of the recipe at ``recipe_path``, answered link by link;
    ``command``: what a probe recipe's cells run (``aorta sweep run --recipe R --
    COMMAND``)."""
    recipe = load_recipe(recipe_path)
    files = list(environment_files or [])
    option_sets = list({json.dumps(c.proton.aorta_options(), sort_keys=True): c.proton.aorta_options()
                        for c in recipe.cells if c.proton is not None}.values())
    aorta = ask_aorta(interpreters(target, find_aorta_python()), recipe_path, files, command or ["python", "x.py"],
                      option_sets, timeout) if option_sets else None
    wrap_of = {json.dumps(o, sort_keys=True): (aorta.wraps[i] if aorta is not None and i < len(aorta.wraps)
                                               and command is not None else None)
               for i, o in enumerate(option_sets)}
    registry = load_environments(files or None)
    mitigations = load_mitigations(files or None)
    fixed: AortaTarget | None = None
    if target is None and aorta_environment is not None:
        fixed = aorta_target(registry, aorta_environment, engine=engine, pull=pull, files=files)
    reach = collector_reach(recipe.shape, recipe.workload)
    evidence: dict[str, Evidence] = {}  # one answer per environment, shared by its cells

    def of_target(text: str) -> Evidence:
        if "" not in evidence:
            evidence[""] = target_evidence(store, text, catalog=catalog, timeout=timeout, engine=engine, pull=pull,
                                           platform=platform, say=say)
        return evidence[""]

    def of_overlay(base: Evidence, overlay: dict[str, str]) -> Evidence | None:
        """Evidence of TARGET probed with ``overlay`` set: stored (on ``platform``, or
        here), else probed here once with ``measure``; None: neither."""
        with store.session() as s:
            assert base.run_id is not None
            name = overlay_candidate(queries.get_run(s, base.run_id).candidate.name, overlay)
        if name in evidence:
            return evidence[name]
        with store.session() as s:
            known = name in {c.name for c in queries.candidates(s)}
            if known and platform is not None:
                found = _from_result(s, name, check_stored(s, name, name, O.BACKENDS[0], None, platform),
                                     O.BACKENDS[0])
            elif known:
                older = queries.latest_complete(s, queries.get_candidate(s, name).id,
                                                identity.local_platform().key)
                found = Evidence(name, older.id) if older is not None else Evidence(name, None)
            else:
                found = Evidence(name, None)
        if found.run_id is None and measure and platform is None:
            found = measure_overlay(store, target, name, overlay, timeout=timeout, say=say)
        evidence[name] = found
        return found if (found.run_id is not None or found.failure is not None) else None

    def of_aorta(at: AortaTarget) -> Evidence:
        if at.name not in evidence:
            evidence[at.name] = aorta_evidence(store, at, timeout=timeout, platform=platform, say=say)
        return evidence[at.name]

    cells: list[CellCheck] = []
    for cell in recipe.cells:
        ref = cell.environment
        cc = CellCheck(cell.name, cell.where, ref.name if ref is not None else None, None,
                       cell.proton.aorta_options() if cell.proton is not None else None,
                       cell.proton.mode if cell.proton is not None else None, collectors=cell.collectors,
                       mitigations=cell.mitigations)
        cells.append(cc)
        if cell.proton is None:
            continue
        env = None
        if ref is not None and (ref.inline or ref.name in registry):
            env = ref.resolve(registry)
        notes: list[str] = []
        baseline: tuple[str, Mapping[str, str]] | None = None
        if target is not None:
            ev = of_target(target)
            if env is not None and env.name in LOCAL_ENVIRONMENTS:
                pass  # aorta's own process: what TARGET names
            elif env is not None and _env_only(env):
                baseline = (f"environment {env.name}'s env", env.env)
            elif ref is not None:
                notes.append(f"checked in {target}, not in the environment the cell names ({ref.name})")
        elif fixed is not None:
            ev = of_aorta(fixed)
            if ref is not None:
                notes.append(f"checked in {ev.checked_in or fixed.name}, not in the environment the cell names "
                             f"({ref.name})")
        elif env is None:
            ev = _failure(None, Cause.ENVIRONMENT_UNRESOLVED, _unresolved_cell(ref, registry, files), None)
        elif env.kind == "local":
            what = ("aorta's own process" if env.name in LOCAL_ENVIRONMENTS
                    else f"aorta's own process with the baseline {', '.join(sorted(env.env))} (it names only env)")
            ev = _failure(None, Cause.ENVIRONMENT_UNRESOLVED,
                          f"aorta environment {env.name!r} is {what}: which Python the cell's command runs in is not "
                          "named here", "give TARGET, the interpreter the cell's command runs in: the cell is "
                                        "checked there" + (" with that baseline" if env.env else ""))
        else:
            ev = of_aorta(AortaTarget(env, engine=engine, pull=pull))
            if env.env:
                baseline = (f"environment {env.name}'s env", env.env)
        clink, _env = cell_link(recipe, cell, mitigations)
        layers: list[tuple[str, Mapping[str, str]]] = ([baseline] if baseline else [])
        layers += [(f"mitigation {name}", mitigations.mitigations[name].env) for name in cell.mitigations
                   if name in mitigations.mitigations]
        if cell.extra_env:
            layers.append(("extra_env", cell.extra_env))
        links = [recipe_link(recipe, aorta), options_link(cell), clink, attach_link(cell.proton)]
        cmd = command_link(recipe, cell, command, aorta,
                           wrap_of.get(json.dumps(cell.proton.aorta_options(), sort_keys=True)))
        links += ([cmd] if cmd is not None else []) + [collector_link(reach)]
        cc.checked_in, cc.evidence_run = ev.checked_in, ev.run_id
        if ev.run_id is None:
            assert ev.failure is not None
            f = ev.failure
            res = f.model_copy(update={"backend": cell.proton.backend, "mode": cell.proton.mode,
                                       "details": list(f.details)})
            links.append(L.Link("environment", L.UNKNOWN, f.reason, f.cause, f.fix, None,
                                {"checked_in": ev.checked_in, "layers": [n for n, _e in layers], "notes": notes}))
            links += [_not_evaluated("start", "no evidence for the environment"),
                      _not_evaluated("capture", "no evidence for the environment")]
        else:
            head = list(links)
            res, tail, overlay = _from_run(store, ev, cell, layers, notes, cc)
            if overlay:  # variables whose effect this evidence did not measure: evidence that had them set
                ov = of_overlay(ev, overlay)
                if ov is not None and ov.run_id is not None:
                    cc.checked_in, cc.evidence_run = ov.checked_in, ov.run_id
                    res, tail, _still = _from_run(store, ov, cell, layers, notes, cc)
                    res.details.append(f"answered from {ov.checked_in}: {ev.checked_in} probed with "
                                       f"{', '.join(f'{k}={v}' for k, v in sorted(overlay.items()))} set")
                elif ov is not None and ov.failure is not None:
                    tail[0].facts["measure"] = ov.failure.reason
            links = head + tail
        res.details.extend(notes)
        cc.result = res
        cc.links = links
        cc.decision = L.decide(links)
    return recipe, cells


def aorta_target(registry: Mapping[str, AortaEnvironment], name: str, *, engine: str | None = None,
                 pull: str = "missing", files: list[Path] | None = None) -> AortaTarget:
    """The environment ``--aorta-environment NAME`` names; refused (exit 65) when
    unknown or of a kind that cannot be launched."""
    if name not in registry:
        raise UnknownTarget(f"aorta environment {name!r} is not registered{suggestion(name, sorted(registry))} "
                            f"(known: {', '.join(sorted(registry))})",
                            hint="give the sidecar file that declares it with --aorta-environments FILE")
    at = AortaTarget(registry[name], engine=engine, pull=pull)
    if at.unusable is not None:
        raise UnknownTarget(at.unusable)
    return at


def check_in_aorta_environment(store: Store, environment_files: list[Path] | None, name: str, backend: str,
                               mode: str | None, *, timeout: float, engine: str | None, pull: str,
                               platform: str | None, say: Callable[[str], None]) -> tuple[str, CheckResult]:
    """``survey check --aorta-environment NAME [--aorta-environments FILE...]``: the
    environment's name as a target, and the answer there."""
    at = aorta_target(load_environments(environment_files or None), name, engine=engine, pull=pull)
    return at.name, check_aorta_environment(store, at, backend, mode, timeout=timeout, platform=platform, say=say)


def check_aorta_environment(store: Store, at: AortaTarget, backend: str, mode: str | None, *, timeout: float,
                            platform: str | None, say: Callable[[str], None]) -> CheckResult:
    """``survey check --aorta-environment NAME --backend B [--mode M]``."""
    ev = aorta_evidence(store, at, timeout=timeout, platform=platform, say=say)
    if ev.run_id is None:
        assert ev.failure is not None
        return ev.failure.model_copy(update={"backend": backend, "mode": mode, "target": at.name,
                                             "details": list(ev.failure.details)})
    with store.session() as s:
        res = check_run(s, queries.get_run(s, ev.run_id), at.name, backend, mode)
    res.details.extend(ev.notes)
    return res


# --------------------------------------------------------------------------- text
WORDS = {0: "will leave a profile", 2: "no profile", 3: "not enough evidence",
         8: "a profile only on a condition on the workload"}


def render(cells: list[CellCheck]) -> list[tuple[str | None, str]]:
    """(style, line) pairs for the terminal: a heading per cell, then its links."""
    colors = {0: "green", 2: "red", 3: "yellow", 8: "cyan"}
    marks = {L.YES: "ok", L.NO: "NO", L.UNKNOWN: "??", L.CONDITIONAL: "if"}
    lines: list[tuple[str | None, str]] = []
    for c in cells:
        env = f" [environment {c.environment}]" if c.environment else ""
        if c.result is None or c.decision is None:
            lines.append(("dim", f"cell {c.cell}{env}: no proton collector (collectors: "
                                 f"{', '.join(c.collectors) or 'none'})"))
            continue
        d, r = c.decision, c.result
        head = f"cell {c.cell}{env}: {WORDS.get(d.exit_code, d.verdict)}" + (f" ({d.cause})" if d.cause else "")
        lines.append((f"bold {colors.get(d.exit_code, 'white')}", head))
        for lk in c.links:
            said = f" [{lk.source}]" if lk.link == "collector" and lk.source else ""  # which aorta it describes
            lines.append((None, f"  {marks.get(lk.answer, lk.answer):2} {lk.link}: {lk.basis}{said}"))
        if d.fix:
            lines.append((None, f"  fix: {d.fix}"))
        if c.evidence_run is not None:
            for q, a in (("backend present", r.backend_present), ("mode accepted", r.mode_accepted),
                         ("library loads", r.library_loads)):
                src = f" [{a.source}]" if a.source else ""
                lines.append((None, f"  {q}: {a.answer}{src} - {a.basis}"))
        for note in r.details:
            lines.append((None, f"  note: {note}"))
        if c.evidence_run is not None:
            lines.append((None, f"  evidence: run #{r.run_id} ({r.candidate}, {r.platform}), {r.evidence_date} "
                                f"({r.evidence_age})"))
    cannot = [c.cell for c in cells if c.exit_code == exitcodes.CANNOT_RUN]
    unknown = [c.cell for c in cells if c.exit_code == exitcodes.NOT_ENOUGH_EVIDENCE]
    conditional = [c.cell for c in cells if c.exit_code == exitcodes.CONDITIONAL]
    runs = [c.cell for c in cells if c.result is not None and c.exit_code == exitcodes.OK]
    parts = [f"{len(cells)} cell{'' if len(cells) == 1 else 's'}: {len(runs)} will leave a profile"]
    if cannot:
        parts.append(f"{len(cannot)} will not ({', '.join(cannot)})")
    if unknown:
        parts.append(f"{len(unknown)} without enough evidence ({', '.join(unknown)})")
    if conditional:
        parts.append(f"{len(conditional)} only on a condition ({', '.join(conditional)})")
    skipped = len(cells) - len(runs) - len(cannot) - len(unknown) - len(conditional)
    if skipped:
        parts.append(f"{skipped} collect no proton")
    lines.append(("bold", ", ".join(parts)))
    return lines
