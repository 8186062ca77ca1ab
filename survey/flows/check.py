"""``survey check``: will (backend, mode) run in TARGET, on this platform?

Three questions, answered apart (``survey.verdicts.answers``), because they have three
different fixes:

- ``backend_present``: does this build have the backend (registry, ``-b`` choices,
  ``proton.start`` itself)?
- ``mode_accepted``: does the build accept the mode (live, or from the stub-library
  rerun where the real library failed first)?
- ``library_loads``: do the shared libraries Proton loads for this backend load
  (which soname, and the fix)?

and one ``verdict`` (runs | cannot_run | not_enough_evidence) with its ``cause``,
which never contradicts them: where the library fails first and the stub shows the
mode refused, the cause is ``mode_refused`` - providing the library would not make
it run - and both are said.

The answer comes from stored evidence for the environment *as it is now*: TARGET is
resolved again (a pinned venv, a local image digest: no network), and probed first
when this environment has no evidence on this platform. ``platform=KEY`` answers
from the evidence of another platform (a GPU host's, ingested) without resolving.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session

from db import models as m
from db.store import Store
from probes import PROBE_VERSION
from probes import outcomes as O
from survey.core import errortext
from survey.core.errors import TargetError, UnknownTarget, did_you_mean
from survey.environments import catalog as catalog_mod
from survey.environments import targets
from survey.environments.launchers import Launcher
from survey.evidence import identity, queries
from survey.evidence.identity import Resolved
from survey.evidence.ingest import find_unchanged
from survey.evidence.queries import age_text, iso, mode_label
from survey.verdicts import matrix as survey_matrix
from survey.verdicts import summary
from survey.verdicts.answers import NO, Answer, backend_present, library_loads, mode_accepted
from survey.verdicts.modes import Acceptance, published_verdicts
from survey.verdicts.verdict import Cause, CheckResult, Verdict, runs_here

# ----------------------------------------------------------------- where else
LISTED = 10  # builds a fix names where else; the rest it counts


def _measured_builds(s: Session, backend: str, mode: str | None, verdicts: frozenset[Acceptance],
                     note_stub: bool = False) -> list[str]:
    """The first :data:`LISTED` candidates (per platform) whose latest complete run has a
    published check of (backend, mode) with one of ``verdicts``, then how many more:
    from the stored cells while they are current (``survey.verdicts.summary``: the
    slots asked for, not the matrix), else from the matrix rows. Ad-hoc evidence counts
    as measured too, and says so."""
    if summary.current(s):
        rows, total = summary.measured_slots(s, backend, mode, verdicts, LISTED)
    else:
        every = [r for r in survey_matrix.matrix(s, scope="all", backend=backend, mode=mode_label(mode))
                 if r["status"] == "measured" and r["verdict"] in verdicts]
        rows, total = every[:LISTED], len(every)
    out = []
    for r in rows:
        stub = ", stub-derived" if note_stub and r["verdict_source"] == "stub" else ""
        adhoc = ", ad hoc" if r["scope"] != "catalog" else ""
        where = f", {r['platform_label']}" if r["platform"] is not None else ""
        out.append(f"{r['candidate']} (Triton {r['triton_version']}{where}{stub}{adhoc})")
    if total > len(rows):
        out.append(f"and {total - len(rows):,} more")
    return out


def _who_has_backend(s: Session, backend: str) -> list[str]:
    return _measured_builds(s, backend, None, frozenset(Acceptance) - {Acceptance.ABSENT})


def _mode_fix(s: Session, backend: str, mode: str | None) -> str:
    """Where else the mode is accepted; else where it was not answered (no GPU, a crash:
    not refused); only when every measured build refused it, that none accepts it."""
    acc = _measured_builds(s, backend, mode, frozenset({Acceptance.ACCEPTED}), note_stub=True)
    if acc:
        return "builds that accept it (measured): " + ", ".join(acc)
    open_ = _measured_builds(s, backend, mode, frozenset({Acceptance.UNKNOWN}))
    if open_:
        return ("not answered here for " + ", ".join(open_) + " (not refused: no GPU, or no clean answer, where "
                "they were probed); probe them on a GPU to know")
    return "every measured build that has the backend refuses it"


# ----------------------------------------------------------------- verdict
def check_run(s: Session, run: m.Run, target: str, backend: str, mode: str | None) -> CheckResult:
    """Will (backend, mode) run in the environment of ``run``, on its platform?"""
    base_mode = mode.split(":", 1)[0] if mode else None
    res = CheckResult(verdict=Verdict.NOT_ENOUGH_EVIDENCE, cause=None, reason="", fix=None, target=target,
                      backend=backend, mode=mode, candidate=run.candidate.name,
                      environment=run.environment.label if run.environment else None,
                      platform=run.platform.key if run.platform else None, run_id=run.id,
                      evidence_date=iso(run.finished_at), evidence_age=age_text(run.finished_at))
    if base_mode != mode:
        res.details.append(f"mode options after ':' are not checked; answering for `{base_mode}`")
    verdicts = {(v.backend, v.mode): v for v in published_verdicts(run)}
    v = verdicts.get((backend, base_mode))
    res.backend_present = backend_present(run, backend)
    res.mode_accepted = mode_accepted(v)
    res.library_loads = library_loads(run, backend, v)
    def verdict(cause: Cause | None, reason: str, fix: str | None) -> CheckResult:
        return res.decide(cause, reason, fix, here)

    here, cause = runs_here(run, backend, base_mode, v)  # the verdict, decided once; here it is explained
    if cause == Cause.NO_TRITON:
        res.backend_present = Answer(NO, "there is no Triton in this environment", "live")
        return verdict(cause, "this environment has no Triton (so no Proton)",
                       "install triton (or use an environment that has it)")
    if v is None:
        return verdict(cause, f"the probe did not check backend={backend!r} mode={mode_label(base_mode)!r} here",
                       "probe again with `survey probe --only BACKEND:MODE`")
    res.live_outcome = v.outcome
    if cause in (Cause.DISABLED, Cause.DEVICES_ENV_REJECTED):
        r = next(r for r in run.modes if r.env == "inherited" and not r.stub and r.backend == backend
                 and r.mode == base_mode)
        return verdict(cause,
                       f"with the environment's own variables: {r.outcome}: {r.message or 'start() returned None'}",
                       "unset TRITON_PROTON_DISABLE" if r.outcome == O.DISABLED else
                       "unset HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES and select devices with ROCR_VISIBLE_DEVICES")
    if cause == Cause.BACKEND_ABSENT:
        have = _who_has_backend(s, backend)
        return verdict(cause,
                       f"Triton {run.triton_version} has no `{backend}` backend ({v.message})",
                       ("builds with it (measured): " + ", ".join(have)) if have else
                       f"no measured build offers `{backend}`")
    if cause == Cause.MODE_REFUSED:
        src = " (answer from a stub library: the real library did not load first)" if v.source == "stub" else ""
        verdict(cause,
                f"this build refuses `{backend}` with mode `{mode_label(base_mode)}`: {v.reason}{src}",
                _mode_fix(s, backend, base_mode))
        if res.library_loads.answer == NO:
            res.details.append(f"`{res.library_loads.library}` does not load either, but providing it would not "
                               f"make this run: the build refuses the mode ({res.library_loads.fix})")
        return res
    if cause == Cause.LIBRARY_MISSING:
        lib = res.library_loads
        verdict(cause, lib.basis, lib.fix)
        if v.source == "stub" and v.verdict == Acceptance.ACCEPTED:
            res.details.append("with the library in place this build accepts the mode (stub-derived)")
        return res
    cap = next((c for c in run.captures if c.backend == backend and c.mode == base_mode), None)
    if cause == Cause.CAPTURE_EMPTY and cap is not None:
        return verdict(cause,
                       "proton.start() succeeded here, but the GELU capture recorded no kernel "
                       f"({cap.message}); whether your run's capture will hold data is not established",
                       "check that your kernels give this backend something to record")
    if cause == Cause.CAPTURE_FAILED and cap is not None:
        return verdict(cause, f"proton.start() works but the GELU capture did not: {cap.outcome} ({cap.message})",
                       None)
    if here == Verdict.RUNS:
        return verdict(None, "proton.start() succeeded here" + (
            f" and a GELU capture recorded {cap.kernel_count} kernel launches" if cap is not None else ""), None)
    if cause == Cause.NO_GPU:
        known = ("the mode is accepted (stub-derived)" if v.verdict == Acceptance.ACCEPTED
                 else "whether the mode is accepted is unknown")
        return verdict(cause, f"probed where there is no GPU; the backend is present and {known}",
                       "probe on a GPU host (`survey probe` there, then `survey ingest` the report), or ask about "
                       "a GPU platform that has evidence with --platform")
    if here == Verdict.CANNOT_RUN:
        return verdict(cause, f"proton.start(): {v.reason}", None)
    return verdict(cause, v.reason, None)


# ----------------------------------------------------------------- target
def check_target(
    store: Store,
    target: str,
    backend: str,
    mode: str | None,
    *,
    catalog_path: Path | None = None,
    timeout: float = 60.0,
    engine: str | None = None,
    pull: str = "missing",
    platform: str | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> CheckResult:
    from survey.flows.run import ProbeSettings, survey_one

    cat = catalog_mod.load(catalog_path)
    with store.session() as s:
        t = targets.resolve(s, target, cat, engine=engine, pull=pull)
        if platform is not None:
            return _from_platform(s, t, target, backend, mode, platform)
    here = identity.local_platform()
    if t.launcher is None:  # ingested evidence with no way to obtain it here
        with store.session() as s:
            assert t.name is not None
            cand = queries.get_candidate(s, t.name)
            run = queries.latest_complete(s, cand.id, here.key)
            if run is None:  # its only platform's evidence, or the list to choose from
                res = check_stored(s, cand.name, target, backend, mode, None)
            else:
                res = check_run(s, run, target, backend, mode)
            if res.run_id is not None:
                res.details.append(f"{cand.name} cannot be obtained here (ingested evidence): answered from its "
                                   f"latest run on {res.platform}")
            return res
    try:
        resolved = t.launcher.obtain()
    except TargetError as e:
        return _not_obtained(store, t, target, backend, mode, e, here)
    name = t.name_for(resolved)
    with store.session() as s:
        prior = find_unchanged(s, name, resolved.identity, PROBE_VERSION, here.key)
        if prior is not None:
            return check_run(s, queries.get_run(s, prior.id), target, backend, mode)
    say(f"{target}: not probed in this state on this platform ({here.label}); probing it now")
    outcome = survey_one(store, name, t.label or target, t.kind, t.spec or None, t.position,
                         _Fixed(t.launcher, resolved), ProbeSettings(timeout=timeout, captures=t.captures),
                         scope=t.scope)
    with store.session() as s:
        if outcome.run_id is not None and outcome.status in ("probed", "unchanged"):
            return check_run(s, queries.get_run(s, outcome.run_id), target, backend, mode)
    return CheckResult(verdict=Verdict.NOT_ENOUGH_EVIDENCE, cause=Cause.NOT_PROBED,
                       reason=f"{target} could not be probed here ({outcome.status}): {outcome.message}",
                       fix="probe it where it can be obtained and `survey ingest` the report", target=target,
                       backend=backend, mode=mode, candidate=name, platform=here.key, run_id=outcome.run_id)


def _from_platform(s: Session, t: targets.Target, target: str, backend: str, mode: str | None,
                   platform: str) -> CheckResult:
    name = t.name or targets.stored_candidate(s, target)
    if name is None:
        raise UnknownTarget(f"--platform answers from stored evidence: {target!r} is not a stored candidate",
                            hint="name a candidate (`survey table --all` lists them)")
    return check_stored(s, name, target, backend, mode, platform)


def check_stored(s: Session, name: str, target: str, backend: str, mode: str | None,
                 platform: str | None) -> CheckResult:
    """From stored evidence only (the service; ``--platform``): the candidate's latest
    run on ``platform`` (a key or a part of one), or on its only platform."""
    cand = queries.get_candidate(s, name)
    if platform is None:
        keys = {slot.platform_key for slot in queries.slots(s, candidate=cand.name, checks=False)
                if slot.complete is not None}
        if len(keys) == 1:
            platform = next(iter(keys)) or ""
        else:
            return _elsewhere(s, cand, target, backend, mode, "(none given)", ambiguous=len(keys) > 1)
    keys = {slot.platform_key for slot in queries.slots(s, candidate=cand.name, checks=False)
            if slot.complete is not None}
    match = [k for k in keys if k and (k == platform or platform in k.split(":"))]
    if len(match) != 1:
        return _elsewhere(s, cand, target, backend, mode, platform, ambiguous=len(match) > 1)
    run = queries.latest_complete(s, cand.id, match[0])
    assert run is not None
    return check_run(s, run, target, backend, mode)


def _elsewhere(s: Session, cand: m.Candidate, target: str, backend: str, mode: str | None, platform: str,
               ambiguous: bool = False) -> CheckResult:
    cand_slots = queries.slots(s, candidate=cand.name)
    keys = sorted(k for k in (slot.platform_key for slot in cand_slots if slot.complete is not None) if k)
    failed = [slot.last for slot in cand_slots if slot.complete is None and slot.last is not None]
    if ambiguous:
        what = f"has evidence on several platforms{'' if platform == '(none given)' else f' matching {platform!r}'}"
    else:
        what = "has no evidence yet" if platform == "(none given)" else f"has no evidence for platform {platform}"
        if failed:
            what += f": its last attempt was {failed[0].status} ({errortext.cause(failed[0].error, cand.spec)})"
    parts = sorted({part for k in keys for part in [k, *k.split(":")]})
    near = did_you_mean(platform, parts) if platform != "(none given)" and not ambiguous else ""
    return CheckResult(verdict=Verdict.NOT_ENOUGH_EVIDENCE, cause=Cause.NOT_PROBED, reason=f"{cand.name} {what}",
                       fix=(near + "evidence exists for: " + ", ".join(keys) + " (ask with --platform KEY)") if keys
                       else "probe it there (`survey probe`, then `survey ingest`)", target=target, backend=backend,
                       mode=mode, candidate=cand.name, platform=platform)


def _not_obtained(store: Store, t: targets.Target, target: str, backend: str, mode: str | None, e: TargetError,
                  here: identity.PlatformId) -> CheckResult:
    """TARGET could not be resolved again here: record it (catalog entries and stored
    candidates), and answer from older evidence only with that said."""
    from survey.evidence.ingest import record_failure

    cause = errortext.cause(e.message + (f"\n{e.hint}" if e.hint else ""), t.spec)
    if t.name is None:
        raise e
    with store.session() as s:
        record_failure(s, t.name, label=t.label, kind=t.kind, spec=t.spec or None, position=t.position,
                       error=e.message + (f"\n{e.hint}" if e.hint else ""), platform=here, scope=t.scope)
        cand = queries.get_candidate(s, t.name)
        run = queries.latest_complete(s, cand.id, here.key)
        if run is None:  # the same exit as any target that cannot be obtained here (7)
            return CheckResult(verdict=Verdict.NOT_ENOUGH_EVIDENCE, cause=Cause.UNOBTAINABLE,
                               reason=f"{target} cannot be obtained here: {cause}",
                               fix="probe it where it can be obtained and `survey ingest` the report", target=target,
                               backend=backend, mode=mode, candidate=t.name, platform=here.key)
        res = check_run(s, run, target, backend, mode)
        res.details.append(f"{target} could not be resolved again here ({cause}); answered from run #{run.id}, "
                           "which may not be its current state")
        return res


class _Fixed:
    """A launcher whose environment was already obtained (no second resolve)."""

    def __init__(self, inner: Launcher, resolved: Resolved):
        self.inner = inner
        self.resolved = resolved
        self.kind = inner.kind

    def describe(self) -> str:
        return self.inner.describe()

    def obtain(self) -> Resolved:
        return self.resolved

    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]:
        return self.inner.probe(resolved, args, timeout)
