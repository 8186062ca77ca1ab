"""``survey check``: answer from stored evidence, probing TARGET first when needed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from db.store import Store
from probes import PROBE_VERSION
from survey import catalog as catalog_mod
from survey import evidence, exitcodes
from survey.errors import UnknownTarget
from survey.evidence import CheckResult
from survey.ingest import find_unchanged
from survey.launchers import Launcher
from survey.survey_run import ProbeSettings, make_launcher, survey_one


def _looks_like_path(target: str) -> bool:
    return target.startswith((".", "/", "~")) or os.path.exists(target)


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
    say: Callable[[str], None] = lambda _m: None,
) -> CheckResult:
    # 1. a candidate with evidence
    with store.session() as s:
        cand = next((c for c in evidence.candidates(s) if c.name == target), None)
        if cand is not None:
            run = evidence.latest_complete(s, cand.id)
            if run is not None:
                return evidence.check_run(s, run, target, backend, mode)
    # 2. a catalog entry not probed yet (or only ever unobtainable): probe it now
    cat = catalog_mod.load(catalog_path)
    entry = cat.get(target)
    launcher: Launcher
    if entry is not None:
        position = cat.names().index(target)
        say(f"{target}: no evidence yet; probing it now")
        launcher = make_launcher(entry, engine=engine, pull=pull)
        outcome = survey_one(store, entry.name, entry.display_label, entry.kind, entry.spec(), position, launcher,
                             ProbeSettings(timeout=timeout))
        return _after_probe(store, target, backend, mode, outcome.run_id, outcome.status, outcome.message)
    # 3. an interpreter or an image we may have seen before
    if _looks_like_path(target):
        from survey.launchers.python import PythonLauncher

        launcher = PythonLauncher(os.path.expanduser(target))
        name = f"python:{os.path.realpath(os.path.expanduser(target))}"
    elif any(c in target for c in "/:@"):
        from survey.launchers.image import ImageLauncher

        launcher = ImageLauncher(target, engine=engine, pull=pull)
        name = f"image:{target}"
    else:
        raise UnknownTarget(
            f"{target!r} is not a stored candidate, a catalog entry, an interpreter path or an image reference",
            hint=f"catalog entries: {', '.join(cat.names())}",
        )
    resolved = launcher.obtain()
    with store.session() as s:
        prior = find_unchanged(s, name, resolved.identity, PROBE_VERSION)
        if prior is not None:
            return evidence.check_run(s, evidence.get_run(s, prior.id), target, backend, mode)
    say(f"{target}: not probed in this state before; probing it now")
    outcome = survey_one(store, name, target, launcher.kind, None, None, _Fixed(launcher, resolved),
                         ProbeSettings(timeout=timeout))
    return _after_probe(store, target, backend, mode, outcome.run_id, outcome.status, outcome.message)


class _Fixed:
    """A launcher whose environment was already obtained (no second resolve)."""

    def __init__(self, inner: Launcher, resolved):  # type: ignore[no-untyped-def]
        self.inner = inner
        self.resolved = resolved
        self.kind = inner.kind

    def describe(self) -> str:
        return self.inner.describe()

    def obtain(self):  # type: ignore[no-untyped-def]
        return self.resolved

    def probe(self, resolved, args, timeout):  # type: ignore[no-untyped-def]
        return self.inner.probe(resolved, args, timeout)


def _after_probe(store: Store, target: str, backend: str, mode: str | None, run_id: int | None, status: str,
                 message: str) -> CheckResult:
    with store.session() as s:
        if run_id is not None and status in ("probed", "unchanged"):
            return evidence.check_run(s, evidence.get_run(s, run_id), target, backend, mode)
    return CheckResult(exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence",
                       f"{target} could not be probed here ({status}): {message}",
                       "probe it where it can be obtained and `survey ingest` the report", target, backend, mode,
                       run_id)
