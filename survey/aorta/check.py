"""``survey check [TARGET] --recipe FILE``: one verdict per cell of an aorta recipe.

Every cell is answered by name. A cell that collects with proton is checked with
its own effective configuration (survey/aorta/recipe.py: the recipe's ``collect:``, or
the cell's, which replaces it) in

- TARGET, when one is given (``survey check TARGET``'s resolver; ``--platform``
  answers from stored evidence), or the aorta environment ``--aorta-environment
  NAME`` names;
- otherwise the environment the cell names: a registered one (aorta's registry:
  built-ins, the ``aorta.environments`` entry points, ``--aorta-environments``
  sidecar files) or an inline ``{docker: REF, env: {...}}``, launched with its
  ``env`` baseline (survey/aorta/targets.py) and filed as ``aorta:<name>``. A cell
  whose environment cannot be resolved or launched says so (not enough evidence).

Two of Proton's own rules (survey/aorta/proton_rules.py) turn the configuration into
what would really run, from the evidence of that environment and platform:
``backend: auto`` is the backend Proton would select there (the platform's GPU
vendor, the build's profiler registry, whether ``librocprofiler-sdk.so`` loads),
and a mode that aorta's ``mode: cli`` passes to a Proton CLI that drops it (Triton
< 3.8.0) is said to be dropped; the verdict is then the backend's default mode.

Exit: 2 if any cell cannot run, else 3 if any lacks evidence, else 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from db import models as m
from db.store import Store
from probes import facts as probe_facts
from probes import outcomes as O
from survey.aorta.environments import AortaEnvironment, find_aorta_python, load_environments
from survey.aorta.proton_rules import mode_dropped, resolve_auto
from survey.aorta.recipe import Cell, EnvironmentRef, ProtonConfig, Recipe, load_recipe
from survey.aorta.targets import AortaTarget, survey_target
from survey.core import exitcodes
from survey.core.errors import SurveyError, UnknownTarget
from survey.core.versions import release
from survey.evidence import identity, queries
from survey.evidence.queries import mode_label
from survey.flows.check import CheckResult, check_run, check_stored, check_target
from survey.flows.run import ProbeSettings
from survey.verdicts.answers import NO, UNKNOWN, Answer

ROCPROFILER_SDK = "librocprofiler-sdk.so"
REGISTRY_SINCE = (3, 8, 0)  # get_available_profilers() exists from this release on


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
    result: CheckResult | None = None  # None: no proton collector in this cell
    collectors: tuple[str, ...] = ()
    evidence_run: int | None = None  # the complete run that answered; None: no evidence answered

    @property
    def exit_code(self) -> int:
        return self.result.exit_code if self.result is not None else exitcodes.OK

    @property
    def verdict(self) -> str:
        return self.result.verdict if self.result is not None else "not_applicable"

    def as_dict(self) -> dict[str, Any]:
        head = {"cell": self.cell, "where": self.where, "cell_environment": self.environment,
                "checked_in": self.checked_in, "configuration": self.configuration,
                "proton_mode": self.proton_mode, "auto": self.auto, "mode_dropped": self.mode_dropped,
                "collectors": list(self.collectors)}
        if self.result is None:
            return {**head, "exit_code": exitcodes.OK, "verdict": "not_applicable", "cause": None,
                    "reason": "this cell collects no proton (collectors: "
                              f"{', '.join(self.collectors) or 'none'})", "fix": None}
        return {**head, **self.result.as_dict()}


def overall_exit(cells: list[CellCheck]) -> int:
    codes = {c.exit_code for c in cells}
    if exitcodes.CANNOT_RUN in codes:
        return exitcodes.CANNOT_RUN
    if exitcodes.NOT_ENOUGH_EVIDENCE in codes:
        return exitcodes.NOT_ENOUGH_EVIDENCE
    return exitcodes.OK


# --------------------------------------------------------------------------- evidence of one environment
@dataclass
class Evidence:
    """The run that answers for one environment, or why there is none."""

    checked_in: str | None
    run_id: int | None = None
    failure: CheckResult | None = None  # when run_id is None: backend-independent
    notes: list[str] = field(default_factory=list)


def _failure(checked_in: str | None, cause: str, reason: str, fix: str | None, **kw: Any) -> Evidence:
    return Evidence(checked_in, None, CheckResult(exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence", cause,
                                                  reason, fix, checked_in or "", "", None, **kw))


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
        return _failure(None, "environment_unresolved", why, None)
    if platform is not None:
        with store.session() as s:
            if name not in {c.name for c in queries.candidates(s)}:
                return _failure(name, "not_probed", f"{name} has no stored evidence",
                                "survey it on that platform (`survey run --aorta-environments FILE` there, or "
                                f"`survey probe` and `survey ingest --candidate {name}`)")
            res = check_stored(s, name, name, O.BACKENDS[0], None, platform)
            return _from_result(s, name, res, O.BACKENDS[0])
    here = identity.local_platform()
    say(f"{name}: obtaining {at.label}")
    try:
        outcome = survey_target(store, at, ProbeSettings(timeout=timeout), report=lambda msg: say(f"{name}: {msg}"))
    except SurveyError as e:  # no launcher here (no container engine): nothing stored
        return _failure(name, "not_probed", f"{name} cannot be probed here: {e.message}", e.hint)
    with store.session() as s:
        if outcome.run_id is not None and outcome.status in ("probed", "unchanged"):
            return Evidence(name, outcome.run_id)
        cand = queries.get_candidate(s, name)
        older = queries.latest_complete(s, cand.id, here.key)
        if older is not None:
            return Evidence(name, older.id, notes=[f"{name} could not be probed again here ({outcome.status}: "
                                                   f"{outcome.message}); answered from run #{older.id}, which may "
                                                   "not be its current state"])
    return _failure(name, "not_probed", f"{name} could not be probed here ({outcome.status}): {outcome.message}",
                    "probe it where it can be obtained and `survey ingest` the report", platform=here.key)


# --------------------------------------------------------------------------- one configuration
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


def _unanswered(res: CheckResult, code: int, verdict: str, cause: str, reason: str, fix: str | None,
                backend_present: Answer | None = None) -> CheckResult:
    """``res`` (its evidence fields kept) answering for a backend that could not be settled."""
    why = "no backend is selected" if backend_present is not None else "which backend runs is not settled"
    return replace(res, exit_code=code, verdict=verdict, cause=cause, reason=reason, fix=fix,
                   backend_present=backend_present or Answer(UNKNOWN, why), mode_accepted=Answer(UNKNOWN, why),
                   library_loads=Answer(UNKNOWN, why), live_outcome=None, details=[])


def answer(s: Any, run: m.Run, checked_in: str, proton: ProtonConfig) -> tuple[CheckResult, str | None, str | None]:
    """(the check of what would really run, how auto resolved, why the mode is dropped)."""
    backend, auto = proton.backend, None
    if backend == "auto":
        base = replace(check_run(s, run, checked_in, O.BACKENDS[0], None), backend="auto", mode=proton.mode)
        if base.cause == "no_triton":
            return base, None, None
        vendor = run.platform.vendor if run.platform is not None else "unknown"
        if vendor not in ("nvidia", "amd", "none"):
            return _unanswered(base, exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence", "not_checked",
                               "backend auto: Proton picks from the GPU target, and this evidence does not say "
                               f"which GPU vendor it ran on (platform {base.platform})",
                               "probe again with the current probe (its report records the platform), or name "
                               "the backend"), None, None
        if _registry_missing(run):
            return _unanswered(base, exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence", "not_checked",
                               f"backend auto: Triton {run.triton_version} selects from its profiler registry, "
                               "which the probe did not read here",
                               "probe again (`survey probe`), or name the backend"), None, None
        choice, auto = resolve_auto(vendor, run.profilers, _loads(run, ROCPROFILER_SDK))  # type: ignore[arg-type]
        if choice is None:
            if vendor == "none":
                return _unanswered(base, exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence", "no_gpu", auto,
                                   "probe on a GPU host (`survey probe` there, then `survey ingest` the report), "
                                   "or ask about a GPU platform that has evidence with --platform",
                                   Answer(UNKNOWN, auto)), auto, None
            present = Answer(NO, auto, "registry")
            return _unanswered(base, exitcodes.CANNOT_RUN, "cannot_run", "backend_absent", auto,
                               "name a backend this build registers (" + ", ".join(run.profilers or []) + ")",
                               present), auto, None
        backend = choice
    dropped = None
    try:
        dropped = mode_dropped(proton.launch, run.triton_version, proton.mode)
    except ValueError:
        pass  # a version string that is not a release: no claim
    res = check_run(s, run, checked_in, backend, None if dropped else proton.mode)
    if auto is not None:
        res.details.insert(0, auto)
    if dropped is not None:
        res.details.insert(0, dropped)
        res.reason = (f"what runs is `{backend}` in its default mode (mode {proton.mode!r} is dropped, see note): "
                      + res.reason)
    return res, auto, dropped


# --------------------------------------------------------------------------- the recipe
def _controlled_extra_env(cell: Cell) -> str | None:
    names = sorted(k for k in cell.extra_env if probe_facts.is_controlled(k))
    if not names:
        return None
    return (f"the cell's extra_env sets {', '.join(names)}, which change{'s' if len(names) == 1 else ''} what "
            "Proton does and {} not part of this check".format("is" if len(names) == 1 else "are"))


def _unresolved_cell(ref: EnvironmentRef | None, registry: Mapping[str, AortaEnvironment],
                     files: list[Path]) -> str:
    if ref is None:
        return "this recipe names no environment (a top-level proton: block); give TARGET"
    known = ", ".join(sorted(registry))
    aorta_py = find_aorta_python()
    where = ("aorta's built-ins" + (f", the aorta.environments entry points of {aorta_py}" if aorta_py
                                    else " (no `aorta` on PATH, so no entry points were read)")
             + (", " + ", ".join(map(str, files)) if files else ""))
    return (f"environment {ref.name!r} is not registered in {where} (known: {known}); give the sidecar file that "
            "declares it with --aorta-environments FILE, or TARGET")


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
    say: Callable[[str], None] = lambda _m: None,
) -> tuple[Recipe, list[CellCheck]]:
    """Every cell of the recipe at ``recipe_path``, answered."""
    recipe = load_recipe(recipe_path)
    files = list(environment_files or [])
    registry: dict[str, AortaEnvironment] | None = None
    fixed: AortaTarget | None = None
    if target is None:
        registry = load_environments(files or None)
        if aorta_environment is not None:
            fixed = aorta_target(registry, aorta_environment, engine=engine, pull=pull, files=files)
    evidence: dict[str, Evidence] = {}  # one answer per environment, shared by its cells

    def of_target(text: str) -> Evidence:
        if "" not in evidence:
            evidence[""] = target_evidence(store, text, catalog=catalog, timeout=timeout, engine=engine, pull=pull,
                                           platform=platform, say=say)
        return evidence[""]

    def of_aorta(at: AortaTarget) -> Evidence:
        if at.name not in evidence:
            evidence[at.name] = aorta_evidence(store, at, timeout=timeout, platform=platform, say=say)
        return evidence[at.name]

    cells: list[CellCheck] = []
    for cell in recipe.cells:
        ref = cell.environment
        cc = CellCheck(cell.name, cell.where, ref.name if ref is not None else None, None,
                       cell.proton.aorta_options() if cell.proton is not None else None,
                       cell.proton.mode if cell.proton is not None else None, collectors=cell.collectors)
        cells.append(cc)
        if cell.proton is None:
            continue
        notes: list[str] = []
        if target is not None:
            ev = of_target(target)
        elif fixed is not None:
            ev = of_aorta(fixed)
        else:
            assert registry is not None
            env = ref.resolve(registry) if ref is not None and (ref.inline or ref.name in registry) else None
            if env is None:
                ev = _failure(None, "environment_unresolved", _unresolved_cell(ref, registry, files), None)
            else:
                ev = of_aorta(AortaTarget(env, engine=engine, pull=pull))
        if ref is not None and (target is not None or fixed is not None):
            notes.append(f"checked in {ev.checked_in or target}, not in the environment the cell names "
                         f"({ref.name})")
        cc.checked_in, cc.evidence_run = ev.checked_in, ev.run_id
        if ev.run_id is None:
            assert ev.failure is not None
            res = replace(ev.failure, backend=cell.proton.backend, mode=cell.proton.mode,
                          details=list(ev.failure.details))
        else:
            with store.session() as s:
                res, cc.auto, cc.mode_dropped = answer(s, queries.get_run(s, ev.run_id), ev.checked_in or "",
                                                       cell.proton)
            res.details.extend(ev.notes)
        extra = _controlled_extra_env(cell)
        res.details.extend(notes + ([extra] if extra else []))
        cc.result = res
    return recipe, cells


def aorta_target(registry: Mapping[str, AortaEnvironment], name: str, *, engine: str | None = None,
                 pull: str = "missing", files: list[Path] | None = None) -> AortaTarget:
    """The environment ``--aorta-environment NAME`` names; refused (exit 65) when
    unknown or of a kind that cannot be launched."""
    if name not in registry:
        raise UnknownTarget(f"aorta environment {name!r} is not registered "
                            f"(known: {', '.join(sorted(registry))})",
                            hint="give the sidecar file that declares it with --aorta-environments FILE")
    at = AortaTarget(registry[name], engine=engine, pull=pull)
    if at.unusable is not None:
        raise UnknownTarget(at.unusable)
    return at


def check_aorta_environment(store: Store, at: AortaTarget, backend: str, mode: str | None, *, timeout: float,
                            platform: str | None, say: Callable[[str], None]) -> CheckResult:
    """``survey check --aorta-environment NAME --backend B [--mode M]``."""
    ev = aorta_evidence(store, at, timeout=timeout, platform=platform, say=say)
    if ev.run_id is None:
        assert ev.failure is not None
        return replace(ev.failure, backend=backend, mode=mode, target=at.name, details=list(ev.failure.details))
    with store.session() as s:
        res = check_run(s, queries.get_run(s, ev.run_id), at.name, backend, mode)
    res.details.extend(ev.notes)
    return res


# --------------------------------------------------------------------------- text
def render(cells: list[CellCheck]) -> list[tuple[str | None, str]]:
    """(style, line) pairs for the terminal: a heading per cell, then its answer."""
    words = {0: "will run", 2: "cannot run it", 3: "not enough evidence"}
    colors = {0: "green", 2: "red", 3: "yellow"}
    lines: list[tuple[str | None, str]] = []
    for c in cells:
        env = f" [environment {c.environment}]" if c.environment else ""
        if c.result is None:
            lines.append(("dim", f"cell {c.cell}{env}: no proton collector (collectors: "
                                 f"{', '.join(c.collectors) or 'none'})"))
            continue
        r = c.result
        head = f"cell {c.cell}{env}: {words.get(r.exit_code, r.verdict)}" + (f" ({r.cause})" if r.cause else "")
        lines.append((f"bold {colors.get(r.exit_code, 'white')}", head))
        opts = " ".join(f"{k}={v}" for k, v in (c.configuration or {}).items())
        lines.append((None, f"  configuration: proton {opts}" + (f" (--mode {c.proton_mode})" if c.proton_mode
                                                                  else "")))
        if c.evidence_run is not None:
            lines.append((None, f"  proton runs: backend={r.backend} mode={mode_label(r.mode)}"
                                + (f" in {c.checked_in}" if c.checked_in else "")))
        lines.append((None, f"  reason: {r.reason}"))
        if r.fix:
            lines.append((None, f"  fix: {r.fix}"))
        if c.evidence_run is not None:
            for q, a in (("backend present", r.backend_present), ("mode accepted", r.mode_accepted),
                         ("library loads", r.library_loads)):
                src = f" [{a.source}]" if a.source else ""
                lines.append((None, f"  {q}: {a.answer}{src} - {a.basis}"))
        for d in r.details:
            lines.append((None, f"  note: {d}"))
        if c.evidence_run is not None:
            lines.append((None, f"  evidence: run #{r.run_id} ({r.candidate}, {r.platform}), {r.evidence_date} "
                                f"({r.evidence_age})"))
    cannot = [c.cell for c in cells if c.exit_code == exitcodes.CANNOT_RUN]
    unknown = [c.cell for c in cells if c.exit_code == exitcodes.NOT_ENOUGH_EVIDENCE]
    runs = [c.cell for c in cells if c.result is not None and c.exit_code == exitcodes.OK]
    parts = [f"{len(cells)} cells: {len(runs)} will run"]
    if cannot:
        parts.append(f"{len(cannot)} cannot run ({', '.join(cannot)})")
    if unknown:
        parts.append(f"{len(unknown)} without enough evidence ({', '.join(unknown)})")
    skipped = len(cells) - len(runs) - len(cannot) - len(unknown)
    if skipped:
        parts.append(f"{skipped} collect no proton")
    lines.append(("bold", ", ".join(parts)))
    return lines
