"""``survey run`` as a flow: a **plan** (which candidates, and why each is in it), an
**execution** that says what happens as :data:`Event` values, and reporters that
render them (``survey.flows.reporters``: the terminal with Rich progress, JSON lines,
quiet). The command line only fills a :class:`Launch`, picks a reporter and calls
:func:`survey`.

Why a candidate is in the plan (:class:`Why`): ``new`` (no evidence on this platform
yet), ``recheck`` (evidence exists: probed again only if its environment changed),
``forced`` (``--force``), ``unobtainable`` (it could not be obtained lately: not tried
again before ``--retry-unobtainable`` or the back-off ends). Candidates the plan
leaves out are said as :class:`Skipped` (an aorta environment that cannot be used, a
catalog entry for platforms this host does not offer).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import select

from db import models as m
from db.store import Store, shown
from survey.core.errors import InputError, UsageProblem, did_you_mean
from survey.environments.catalog import Entry
from survey.flows.run import RETRY_AFTER_S, Outcome, ProbeSettings


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Launch:
    """How ``survey run`` launches, declared once: what to survey, where, how hard."""

    catalog: Path | None = None  # the candidate catalog (None: the built-in one)
    only: tuple[str, ...] = ()  # survey only these candidates (families select their members)
    jobs: int = 2  # candidates obtained and probed at once
    timeout: float = 60.0  # seconds for one check of the probe
    repeats: int = 6  # attempts of a check that failed in a way that may not repeat
    force: bool = False  # probe again even when nothing changed
    retry_unobtainable: bool = False  # try unobtainable candidates now, not after the back-off
    engine: str | None = None  # container engine (None: detect)
    pull: str = "missing"  # image pull policy
    ray: str | None = None  # survey a Ray cluster at this address: each platform on the nodes that offer it
    aorta_environments: tuple[Path, ...] = ()  # aorta sidecar files: their environments are surveyed too
    aorta_registry: bool = False  # aorta's environments without a sidecar file

    @property
    def with_aorta(self) -> bool:
        return bool(self.aorta_environments) or self.aorta_registry

    @property
    def retry_after_s(self) -> float:
        return 0.0 if self.retry_unobtainable else RETRY_AFTER_S

    def probe(self) -> ProbeSettings:
        return ProbeSettings(timeout=self.timeout, force=self.force, repeats=self.repeats,
                             retry_after_s=self.retry_after_s)


@dataclass
class Others:
    """Targets surveyed after the catalog's, given by a layer above this one (aorta's
    environments: ``survey.aorta.targets``). ``targets()`` loads them when the plan is
    made (each has ``name``, ``env.name`` and ``unusable``); ``survey(store, targets,
    jobs=, settings=, on_update=, on_done=)`` surveys a list of them."""

    targets: Callable[[], list[Any]]
    survey: Callable[..., list[Outcome]]


# --------------------------------------------------------------------------- events
class Why(StrEnum):
    """Why a candidate is in the plan."""

    NEW = "new"
    RECHECK = "recheck"
    FORCED = "forced"
    UNOBTAINABLE = "unobtainable"


@dataclass(frozen=True)
class Planned:
    """The plan: each candidate (a fleet: each candidate on each platform) and why."""

    candidates: list[tuple[str, Why]]
    fleet: bool = False


@dataclass(frozen=True)
class Rows:
    """The rows the execution will show, in order (a fleet's: a candidate on a platform)."""

    names: list[str]
    fleet: bool = False


@dataclass(frozen=True)
class Skipped:
    """A candidate the plan leaves out, and why (``status``: skipped | not run)."""

    name: str
    status: str
    message: str


@dataclass(frozen=True)
class Said:
    """A line about the survey as a whole (a family's discovery; a fleet's warning)."""

    message: str
    warning: bool = False


@dataclass(frozen=True)
class Step:
    """A candidate's progress: obtaining, probing, storing."""

    name: str
    message: str


@dataclass(frozen=True)
class Done:
    """A candidate's end (a fleet: a candidate on a platform): ``survey.flows.run.Outcome``
    or ``survey.flows.fleet.FleetOutcome``."""

    outcome: Any


@dataclass(frozen=True)
class Measured:
    """A fleet's nodes that offered one platform and measured another."""

    advertised: str
    measured: str


@dataclass(frozen=True)
class Summary:
    counts: dict[str, int]
    store: str  # the store, as a person reads it
    changed: bool  # the survey changed the store (new evidence, a new failure)


@dataclass(frozen=True)
class Interrupted:
    kept: int  # candidates stored before Ctrl-C


Event = Planned | Rows | Skipped | Said | Step | Done | Measured | Summary | Interrupted


class Reporter(Protocol):
    def __call__(self, event: Event) -> None: ...

    def display(self, fleet: bool) -> AbstractContextManager[Any]:
        """The live display while candidates run (a fleet's always; a local survey's on a terminal)."""
        ...


@dataclass
class Result:
    outcomes: list[Any] = field(default_factory=list)  # Outcome (local) or FleetOutcome (fleet)
    finished: list[Any] = field(default_factory=list)  # those that ended so far, in the order they did
    counts: dict[str, int] = field(default_factory=dict)
    scope: str = "catalog"  # the docs table's scope: all where aorta's environments were surveyed
    before: str | None = None  # the store's matrix version before the survey

    @property
    def probed_runs(self) -> list[int]:
        return [o.run_id for o in self.outcomes if o.status == "probed" and o.run_id]


# --------------------------------------------------------------------------- plan
@dataclass
class Plan:
    entries: list[tuple[int, Entry]]
    aorta: list[Any]  # survey.aorta.targets.AortaTarget
    skipped: list[Skipped] = field(default_factory=list)


class StoreOnce:
    """The store, opened when first needed (a plan with no family needs none: the first
    interpreters are asked meanwhile)."""

    def __init__(self, open_store: Callable[[], Store]):
        self._open = open_store
        self._store: Store | None = None
        self.before: str | None = None

    def __call__(self) -> Store:
        if self._store is None:
            from survey.flows.notify import matrix_version

            self._store = self._open()
            self.before = matrix_version(self._store)
        return self._store


def plan(launch: Launch, store: StoreOnce, report: Reporter, others: Others | None = None) -> Plan:
    """The catalog's entries (families expanded to their members) and aorta's environments, narrowed to
    ``launch.only``; unusable aorta environments and, surveying locally, entries for other platforms left out."""
    from survey.environments import catalog as catalog_mod

    if launch.ray is not None and launch.with_aorta:
        raise UsageProblem("--ray surveys the catalog's candidates; survey aorta's environments without it")
    cat = catalog_mod.load(launch.catalog)
    entries = list(enumerate(cat.candidate)) if launch.catalog is not None or not launch.with_aorta else []
    aorta: list[Any] = others.targets() if others is not None else []
    only = list(launch.only)
    if any(e.family for _, e in entries):  # a family: one candidate per release or digest it holds now
        from survey.environments import discovery

        families = [e.name for _, e in entries if e.family]
        entries, _found = discovery.expand(store(), entries, only=only or None, engine=launch.engine,
                                           pull=launch.pull, force=launch.force, retry_after_s=launch.retry_after_s,
                                           say=lambda msg: report(Said(msg)))
        if only:  # --only FAMILY selects its members (none, where none was found)
            only = [o for o in only if o not in families] + [e.name for _, e in entries if e.discovered_from in only]
            if not only:
                entries, aorta = [], []
    if only:
        entries, aorta = _only(only, entries, aorta)
    p = Plan(entries, [t for t in aorta if t.unusable is None])
    p.skipped = [Skipped(t.name, "skipped", t.unusable) for t in aorta if t.unusable is not None]
    if launch.ray is None and any(e.platforms is not None for _, e in entries):
        from survey.evidence.identity import local_platform

        here = local_platform().key
        p.skipped += [Skipped(e.name, "not run", f"its catalog entry names the platforms "
                              f"{', '.join(e.platforms or [])}, and this host is {here} (survey a fleet with --ray)")
                      for _, e in entries if not e.runs_on(here)]
        p.entries = [(i, e) for i, e in entries if e.runs_on(here)]
    return p


def _only(only: list[str], entries: list[tuple[int, Entry]], aorta: list[Any]) -> tuple[list[Any], list[Any]]:
    only = [o.removeprefix("aorta:") for o in only] if aorta else only  # catalog names hold no ':'
    known = [e.name for _, e in entries] + [t.env.name for t in aorta]
    unknown = sorted(set(only) - set(known))
    if unknown:
        what = "in the catalog" if not aorta else "among the catalog's or aorta's environments" if entries \
            else "among aorta's environments"
        near = "".join(f"; {n}: {did_you_mean(n, known).strip()}" for n in unknown if did_you_mean(n, known))
        raise InputError(f"not {what}: {', '.join(unknown)}{near}", hint=f"known: {', '.join(known)}")
    return [(i, e) for i, e in entries if e.name in only], [t for t in aorta if t.env.name in only]


def why(store: Store, names: list[str], launch: Launch, platform_key: str | None) -> list[tuple[str, Why]]:
    """Why each candidate is in the plan, from the store (``platform_key`` None: any platform)."""
    from survey.evidence import queries

    if launch.force:
        return [(n, Why.FORCED) for n in names]
    q = select(m.Candidate.name).join(m.Run, m.Run.candidate_id == m.Candidate.id).where(
        m.Run.status == "complete", m.Candidate.name.in_(names))
    if platform_key is not None:
        q = q.join(m.Platform, m.Run.platform_id == m.Platform.id).where(m.Platform.key == platform_key)
    with store.session() as s:
        measured = set(s.scalars(q.distinct()))
    out = []
    for n in names:
        off = platform_key is not None and queries.backed_off(store, n, platform_key, launch.retry_after_s)
        out.append((n, Why.UNOBTAINABLE if off else Why.RECHECK if n in measured else Why.NEW))
    return out


# --------------------------------------------------------------------------- execute
def survey(launch: Launch, open_store: Callable[[], Store], report: Reporter,
           others: Others | None = None) -> tuple[Store, Result]:
    """Plan, execute, and say it (``report``): the store surveyed and what happened."""
    store = StoreOnce(open_store)
    p = plan(launch, store, report, others)
    for sk in p.skipped:
        if sk.status == "skipped":
            report(sk)
    if launch.ray is not None:
        return _fleet(launch, p, store, report)
    ahead = _ask_ahead(launch, p.entries)
    st = store()
    for sk in p.skipped:
        if sk.status != "skipped":
            report(sk)
    from survey.evidence.identity import local_platform

    names = [e.name for _, e in p.entries] + [t.name for t in p.aorta]
    report(Planned(why(st, names, launch, local_platform().key)))
    res = Result(scope="all" if p.aorta else "catalog", before=store.before)
    try:
        with report.display(fleet=False):
            report(Rows(names))
            res.outcomes = _execute(launch, p, st, ahead, res, report, others)
    except KeyboardInterrupt:  # Ctrl-C: the display is stopped (above); what finished is stored
        report(Interrupted(sum(1 for o in res.finished if o.run_id is not None)))
        raise
    _summarise(st, res, report)
    return st, res


def _ask_ahead(launch: Launch, entries: list[tuple[int, Entry]]) -> dict[str, Any]:
    """The first interpreters the survey will ask are asked now, while the store and the rest load."""
    ahead: dict[str, Any] = {}
    if all(e.platforms is None for _, e in entries):
        from survey.environments.launchers.python import PythonLauncher

        for _, e in entries[:max(1, launch.jobs)]:
            if e.kind == "python" and e.python:
                ahead[e.name] = PythonLauncher(e.python)
                ahead[e.name].prefetch()
    return ahead


def _execute(launch: Launch, p: Plan, store: Store, ahead: dict[str, Any], res: Result, report: Reporter,
             others: Others | None) -> list[Outcome]:
    from survey.flows.run import run_survey

    def on_done(o: Outcome) -> None:
        res.finished.append(o)
        report(Done(o))

    outcomes = run_survey(store, p.entries, jobs=launch.jobs, settings=launch.probe(), engine=launch.engine,
                          pull=launch.pull, on_update=lambda n, msg: report(Step(n, msg)), on_done=on_done,
                          launchers=ahead) if p.entries else []
    if p.aorta and others is not None:
        outcomes += others.survey(store, p.aorta, jobs=launch.jobs, settings=launch.probe(),
                                  on_update=lambda n, msg: report(Step(n, msg)), on_done=on_done)
    return outcomes


def _fleet(launch: Launch, p: Plan, store: StoreOnce, report: Reporter) -> tuple[Store, Result]:
    from survey.flows import fleet

    st = store()
    res = Result(before=store.before)
    report(Planned(why(st, [e.name for _, e in p.entries], launch, None), fleet=True))
    assert launch.ray is not None
    with fleet.connected(launch.ray), report.display(fleet=True):
        res.outcomes = fleet.run_fleet(
            st, p.entries, settings=launch.probe(), jobs=launch.jobs, engine=launch.engine, pull=launch.pull,
            on_plan=lambda names: report(Rows(names, fleet=True)), on_update=lambda r, msg: report(Step(r, msg)),
            on_done=lambda o: report(Done(o)), warn=lambda msg: report(Said(msg, warning=True)))
    _summarise(st, res, report)
    for advertised, measured in sorted({(o.platform, o.measured or "") for o in res.outcomes if o.mismatch}):
        report(Measured(advertised, measured))
    return st, res


def _summarise(store: Store, res: Result, report: Reporter) -> None:
    from survey.flows.notify import matrix_version

    for o in res.outcomes:
        res.counts[o.status] = res.counts.get(o.status, 0) + 1
    report(Summary(res.counts, shown(store.url), matrix_version(store) != res.before))
