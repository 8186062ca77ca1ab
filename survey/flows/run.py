"""``survey run``: obtain each candidate, probe it, store the evidence.

Candidates are independent and run in parallel (``--jobs``). Each ends in exactly
one transaction (its report, or the error that kept it from being obtained), so
a survey killed at any point leaves whole runs only, and the next ``survey run``
picks up where it stopped: candidates whose resolved environment already has a
complete run for this probe version are not probed again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from db.store import Store
from probes import PROBE_VERSION
from survey.core import errortext
from survey.core.errors import SurveyError, TargetError, Unobtainable
from survey.environments import probe as probe_run
from survey.environments.catalog import Entry
from survey.environments.launchers import Launcher
from survey.environments.targets import make_launcher
from survey.evidence import identity, queries
from survey.evidence.identity import Resolved
from survey.evidence.ingest import find_unchanged, ingest, record_failure


@dataclass
class Outcome:
    name: str
    status: str  # probed | unchanged | unobtainable | failed | interrupted (nothing stored)
    run_id: int | None
    message: str
    duration_s: float
    triton: str | None = None


class Deferred:
    """A catalog entry's launcher, made when first used: a candidate that is backed off
    never makes one (an image's launcher asks the container engine, a quarter of a
    second). Its errors (no engine) arise at that first use, before anything is tried."""

    def __init__(self, entry: Entry, engine: str | None, pull: str):
        self.kind = entry.kind
        self._make: Callable[[], Launcher] = lambda: make_launcher(entry, engine=engine, pull=pull)
        self._inner: Launcher | None = None

    def _launcher(self) -> Launcher:
        if self._inner is None:
            self._inner = self._make()
        return self._inner

    def describe(self) -> str:
        return self._launcher().describe()

    def obtain(self) -> Resolved:
        return self._launcher().obtain()

    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]:
        return self._launcher().probe(resolved, args, timeout)


RETRY_AFTER_S = 6 * 3600.0
INTERRUPTED = "interrupted"
_cancelled = threading.Event()  # set when the survey is interrupted (Ctrl-C): nothing more is stored


def cancel() -> None:
    """Stop the survey under way: the probes running now are killed, and the candidates
    they were probing end ``interrupted`` with nothing stored (the next run probes them)."""
    _cancelled.set()
    probe_run.stop_all()


def interrupted(name: str, t0: float) -> Outcome:
    return Outcome(name, INTERRUPTED, None, "interrupted; nothing stored", time.monotonic() - t0)


@dataclass
class ProbeSettings:
    timeout: float = 60.0
    force: bool = False
    captures: tuple[str, ...] = ()
    auto_capture: bool = True
    repeats: int = 6
    # An unobtainable candidate is tried again only after this long (or with --retry-unobtainable):
    # a re-survey of an unchanged catalog must not wait on the network for what was not there.
    retry_after_s: float = RETRY_AFTER_S

    def for_entry(self, entry: Entry) -> ProbeSettings:
        """These settings with the captures the catalog entry asks for."""
        extra = tuple(c for c in entry.captures if c not in self.captures)
        return ProbeSettings(self.timeout, self.force, self.captures + extra, self.auto_capture, self.repeats,
                             self.retry_after_s)


def survey_one(
    store: Store,
    name: str,
    label: str | None,
    kind: str,
    spec: dict[str, Any] | None,
    position: int | None,
    launcher: Launcher,
    settings: ProbeSettings,
    report: Callable[[str], None] = lambda _msg: None,
    scope: str | None = None,
) -> Outcome:
    """Obtain one candidate, probe it unless this environment was already probed
    on this platform by this probe version, and store the result in one transaction.

    ``scope`` catalog publishes it; None files a new candidate ad hoc."""
    t0 = time.monotonic()
    platform = identity.local_platform()

    def failed(e: TargetError, status: str) -> Outcome:
        if _cancelled.is_set():  # the error is the interruption's doing, not the candidate's
            return interrupted(name, t0)
        error = e.message + (f"\n{e.hint}" if e.hint else "")
        with store.session() as s:
            run_id, new = record_failure(s, name, label=label, kind=kind, spec=spec, position=position,
                                         error=error, platform=platform, status=status, scope=scope)
        summary = errortext.cause(error, spec)
        return Outcome(name, status, run_id, summary if new else f"{summary} (again; run #{run_id})",
                       time.monotonic() - t0)

    if not settings.force:
        last = queries.backed_off(store, name, platform.key, settings.retry_after_s)
        if last is not None:
            ago = queries.age_text(last.last_tried_at or last.finished_at).replace(" old", " ago")
            return Outcome(name, "unobtainable", last.id,
                           f"not retried (last tried {ago}; --retry-unobtainable tries now): "
                           f"{errortext.cause(last.error, spec)}", time.monotonic() - t0)
    try:  # an image's launcher asks for the container engine here: no engine is unobtainable, stored
        report(f"obtaining {launcher.describe()}")
        resolved = launcher.obtain()
    except TargetError as e:
        return failed(e, "unobtainable")
    if not settings.force:
        with store.session() as s:
            prior = find_unchanged(s, name, resolved.identity, PROBE_VERSION, platform.key)
            if prior is not None:
                return Outcome(name, "unchanged", prior.id, f"unchanged since run #{prior.id}", time.monotonic() - t0,
                               prior.triton_version)
    report("probing")
    args = probe_run.probe_args(settings.timeout, captures=settings.captures, auto_capture=settings.auto_capture,
                                repeats=settings.repeats)
    try:
        raw, _has_triton = launcher.probe(resolved, args, probe_run.overall_timeout(settings.timeout))
    except TargetError as e:
        return failed(e, "unobtainable" if isinstance(e, Unobtainable) else "failed")
    raw = identity.attach_origin(raw, resolved.origin())
    if _cancelled.is_set():
        return interrupted(name, t0)
    report("storing")
    with store.session() as s:
        res = ingest(s, raw, candidate=name, label=label, kind=kind, spec=spec, position=position,
                     resolved=resolved, source="survey", scope=scope, unless_unchanged=not settings.force)
    if res.unchanged:  # another survey stored this environment while this one probed it
        return Outcome(name, "unchanged", res.run_id, f"unchanged since run #{res.run_id} (stored meanwhile)",
                       time.monotonic() - t0)
    return Outcome(name, "probed" if res.created else "unchanged", res.run_id,
                   "stored" if res.created else f"identical report already stored as run #{res.run_id}",
                   time.monotonic() - t0)


def run_survey(
    store: Store,
    entries: list[tuple[int, Entry]],
    *,
    jobs: int,
    settings: ProbeSettings,
    engine: str | None = None,
    pull: str = "missing",
    on_update: Callable[[str, str], None] = lambda _n, _m: None,
    on_done: Callable[[Outcome], None] = lambda _o: None,
    launchers: dict[str, Launcher] | None = None,
) -> list[Outcome]:
    """``launchers``: the launcher of these entries (by name) already made (and perhaps
    asked ahead: PythonLauncher.prefetch); the others are made here."""

    def one(item: tuple[int, Entry]) -> Outcome:
        position, entry = item
        launcher = (launchers or {}).get(entry.name) or Deferred(entry, engine, pull)
        return survey_one(store, entry.name, entry.display_label, entry.kind, entry.spec(), position,
                          launcher, settings.for_entry(entry), report=lambda msg: on_update(entry.name, msg),
                          scope="catalog")

    return in_parallel(entries, jobs, lambda item: item[1].name, one, on_done)


def in_parallel(items: list[Any], jobs: int, name: Callable[[Any], str], survey: Callable[[Any], Outcome],
                on_done: Callable[[Outcome], None]) -> list[Outcome]:
    """``survey(item)`` for every item, ``jobs`` at a time, in order; a target that
    cannot be surveyed (SurveyError) is a ``failed`` outcome, not the end of the run."""

    def one(item: Any) -> Outcome:
        if _cancelled.is_set():
            return interrupted(name(item), time.monotonic())
        try:
            out = survey(item)
        except SurveyError as e:
            out = interrupted(name(item), time.monotonic()) if _cancelled.is_set() else \
                Outcome(name(item), "failed", None, e.message, 0.0)
        if out.status != INTERRUPTED:
            on_done(out)
        return out

    _cancelled.clear()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, item) for item in items]
        try:
            return [_result(f) for f in futures]
        except KeyboardInterrupt:  # Ctrl-C: stop the probes, wait only for their threads to notice
            cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            for f in futures:
                f.cancel()


def _result(future: Future[Outcome]) -> Outcome:
    """The future's outcome, waited for in short steps. Ctrl-C may reach any thread of the
    process: Python runs its handler in the main thread only, and a main thread asleep until
    the probe ends (an hour, for a hung one) would never see it."""
    while not wait([future], timeout=0.2).done:
        pass
    return future.result()
