"""Published answers that hold still: every run of one environment, pooled.

Some ``proton.start`` checks are undefined behaviour in some builds (Triton
3.7.x's ``periodic_flushing`` on a host without a GPU reads garbage: most
attempts crash, some raise ``library_missing``, some an unrecognised error).
The probe runs every check at least twice and more while the attempts fail or
disagree (``probes/orchestrator.py``), but a run can still be lucky: every one
of its attempts may agree by chance. So the answer that is published is never
one run's alone.

The rule. A check - (backend, mode, clean or inherited environment, live or
stub rerun) - of an environment is published as ``unstable`` when

- its attempts disagreed in any stored complete run of that environment (the
  probe said ``unstable``), or
- two stored complete runs of that environment gave it different outcomes;

otherwise it is published as those runs measured it (the latest run's record).
"That environment" is one environment identity (``survey/evidence/identity.py``: the
same wheels, interpreter and distributions, image digest, baseline variables)
on one platform, measured by one probe version: another platform is other
evidence, and another probe version another instrument. The rule is sticky:
once a check of an environment has been seen unstable it stays published
unstable however many later runs agree, so re-probing an unchanged environment
(``survey run --force``) never changes what is published - neither the docs
table (``survey/render/docs_table.py``) nor the Since section (``survey/verdicts/since.py``),
where an unstable answer is neither accepted nor refused.

The attempts per outcome (summed over the environment's runs) and the number of
runs change with every run, so the byte-checked docs table shows only the
words "unstable across attempts"; the counts are in ``survey check``'s reason,
``survey history`` and ``/history`` (each run's own), and the matrix rows.

Everything here is read in a few queries for all the runs asked about at once
and kept for the session (``Session.info``): sessions are short (one command,
one request).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Text as SqlText
from sqlalchemy import cast, func, select
from sqlalchemy.orm import Session, object_session, selectinload

from db import models as m
from probes import outcomes as O

CheckKey = tuple[str, "str | None", str, bool]  # backend, mode, env (clean | inherited), stub
GroupKey = tuple["int | None", "int | None", "str | None"]  # environment id, platform id, probe version
_INFO = "proton-survey.verdicts.stability"


@dataclass
class Pooled:
    """One check over every run of an environment."""

    outcome: str  # as published: ``unstable`` when the rule says so
    counts: dict[str, int] = field(default_factory=dict)  # attempts per outcome, over those runs
    runs: int = 0  # runs of the environment that made this check
    run_outcomes: dict[str, int] = field(default_factory=dict)  # each run's own outcome -> runs


@dataclass
class PublishedRow:
    """A stored check as published: the run's own record, with the outcome and
    the counts of its environment's runs (``survey.verdicts.modes`` reads these)."""

    ord: int  # the check's place in its run's report
    run_id: int
    backend: str
    mode: str | None
    env: str
    stub: bool
    outcome: str
    rule: str | None
    library: str | None
    signal: str | None
    message: str | None
    outcome_counts: dict[str, int] | None
    runs: int = 1  # runs of the environment the outcome and counts are pooled over
    own_outcome: str | None = None  # what this run's own attempts said


def group_key(run: m.Run) -> GroupKey:
    return (run.environment_id, run.platform_id, run.probe_version)


def check_key(row: Any) -> CheckKey:
    return (row.backend, row.mode, row.env, bool(row.stub))


def _cache(s: Session) -> dict[str, Any]:
    cache: dict[str, Any] = s.info.setdefault(_INFO, {"groups": {}, "pooled": {}, "candidate": {}, "keys": {}})
    return cache


def _attempts(row: Any) -> dict[str, int]:
    return dict(row.outcome_counts) if row.outcome_counts else {row.outcome: 1}


def pool(rows: Iterable[Any]) -> dict[CheckKey, Pooled]:
    """The rule, applied to the checks of one environment's complete runs (a row with
    a ``runs`` attribute stands for that many runs' identical rows)."""
    out: dict[CheckKey, Pooled] = {}
    for row in rows:
        times = getattr(row, "runs", 1)
        p = out.setdefault(check_key(row), Pooled(row.outcome))
        p.runs += times
        p.run_outcomes[row.outcome] = p.run_outcomes.get(row.outcome, 0) + times
        for outcome, n in _attempts(row).items():
            p.counts[outcome] = p.counts.get(outcome, 0) + n * times
    for p in out.values():
        if len(p.run_outcomes) > 1 or O.UNSTABLE in p.run_outcomes:
            p.outcome = O.UNSTABLE
    return out


# The statements of the rule, built once (as survey.evidence.ingest's): an IN takes its list
# as the expanding parameter ``keys`` (db.models.KEYS). RUNS_WITH_ENVIRONMENT: runs by id, each
# with its environment (survey.verdicts.summary reads them so too).
_GROUPS = (select(m.Run.id, m.Run.environment_id, m.Run.platform_id, m.Run.probe_version, m.Run.candidate_id)
           .where(m.Run.environment_id.in_(m.KEYS), m.Run.status == "complete"))
_POOLED_COLUMNS = (m.Run.environment_id, m.Run.platform_id, m.Run.probe_version, m.ModeRow.backend, m.ModeRow.mode,
                   m.ModeRow.env, m.ModeRow.stub, m.ModeRow.outcome, cast(m.ModeRow.outcome_counts, SqlText))
_POOLED = (select(*_POOLED_COLUMNS, func.count()).join(m.Run, m.Run.id == m.ModeRow.run_id)
           .where(m.ModeRow.run_id.in_(m.KEYS)).group_by(*_POOLED_COLUMNS))
RUNS_WITH_ENVIRONMENT = select(m.Run).where(m.Run.id.in_(m.KEYS)).options(selectinload(m.Run.environment))


def groups(s: Session, runs: Iterable[m.Run]) -> dict[int, tuple[int, ...]]:
    """Run id -> the ids of every complete run of its environment (one query for
    all the runs the Session has not asked about yet)."""
    cache, candidate_of, keys = _cache(s)["groups"], _cache(s)["candidate"], _cache(s)["keys"]
    todo = {r.id: group_key(r) for r in runs if r.id not in cache and r.environment_id is not None}
    if todo:
        envs = sorted({k[0] for k in todo.values() if k[0] is not None})
        members: dict[GroupKey, list[int]] = {}
        for rid, env_id, platform_id, probe_version, candidate_id in s.execute(_GROUPS, {"keys": envs}):
            members.setdefault((env_id, platform_id, probe_version), []).append(rid)
            candidate_of[rid] = candidate_id
        for rid, key in todo.items():
            group = cache[rid] = tuple(sorted(set(members.get(key, [])) | {rid}))
            if rid in members.get(key, ()) and None not in key:
                keys[group] = key  # exactly the complete runs of this key: pooled in SQL
    return {r.id: cache.get(r.id, (r.id,)) for r in runs}


@dataclass(frozen=True)
class _Counted:
    """Identical check rows of ``runs`` runs (one row of a grouped query)."""

    backend: str
    mode: str | None
    env: str
    stub: bool
    outcome: str
    outcome_counts: dict[str, int] | None
    runs: int


def pooled(s: Session, runs: Iterable[m.Run]) -> dict[int, dict[CheckKey, Pooled]]:
    """Run id -> its checks pooled over its environment's runs (the rule above). A
    group that is exactly the complete runs of an environment, platform and probe
    version is read grouped in SQL (identical rows counted, not fetched one by one,
    so a group of many runs costs a few rows); any other group row by row."""
    runs = list(runs)
    ids = groups(s, runs)
    cache, keys = _cache(s)["pooled"], _cache(s)["keys"]
    todo = {g for g in ids.values() if g not in cache}
    grouped = {g: keys[g] for g in todo if g in keys}
    if grouped:
        by_key: dict[GroupKey, list[Any]] = {}
        wanted = sorted({rid for g in grouped for rid in g})
        for first in range(0, len(wanted), 5000):
            for env_id, platform_id, probe, backend, mode, env, stub, outcome, counts, n in s.execute(
                    _POOLED, {"keys": wanted[first:first + 5000]}):
                by_key.setdefault((env_id, platform_id, probe), []).append(
                    _Counted(backend, mode, env, bool(stub), outcome, json.loads(counts) if counts else None, n))
        for g, key in grouped.items():
            cache[g] = pool(by_key.get(key, []))
    loose = todo - grouped.keys()
    if loose:
        wanted = sorted({rid for g in loose for rid in g})
        rows: dict[int, list[Any]] = {}
        for row in s.execute(select(m.ModeRow.run_id, m.ModeRow.backend, m.ModeRow.mode, m.ModeRow.env,
                                    m.ModeRow.stub, m.ModeRow.outcome, m.ModeRow.outcome_counts)
                             .where(m.ModeRow.run_id.in_(wanted))):
            rows.setdefault(row.run_id, []).append(row)
        for g in loose:
            cache[g] = pool(row for rid in g for row in rows.get(rid, []))
    return {rid: cache[g] for rid, g in ids.items()}


def published_rows(run: m.Run) -> list[PublishedRow]:
    """The run's checks as published (its own rows when it is not in a session)."""
    s = object_session(run)
    by_check = pooled(s, [run])[run.id] if s is not None else {}
    out = []
    for r in run.modes:
        p = by_check.get(check_key(r))
        outcome, counts, runs = r.outcome, r.outcome_counts, 1
        if p is not None and p.runs > 1:
            outcome, counts, runs = p.outcome, dict(p.counts), p.runs
        out.append(PublishedRow(r.ord, r.run_id, r.backend, r.mode, r.env, bool(r.stub), outcome, r.rule, r.library,
                                r.signal, r.message, counts, runs, r.outcome))
    return out


def signature(s: Session, runs: Iterable[m.Run]) -> dict[int, tuple[int, ...]]:
    """Run id -> what its published answers depend on besides its own report: the
    complete runs of its environment (``survey.verdicts.matrix`` keys its cache with it)."""
    return groups(s, runs)


def first_run(run: m.Run) -> m.Run:
    """The earliest complete run of the run's environment filed under the run's
    candidate: what the docs table cites, so that re-probing an unchanged
    environment does not change it."""
    s = object_session(run)
    if s is None:
        return run
    candidate_of = _cache(s)["candidate"]
    first = min(i for i in groups(s, [run])[run.id] if candidate_of.get(i, run.candidate_id) == run.candidate_id)
    if first == run.id:
        return run
    found = s.get(m.Run, first)
    return found if found is not None else run


def first_runs(s: Session, runs: Iterable[m.Run]) -> None:
    """Load the :func:`first_run` of every run at once (one query per 500), so that
    asking each then reads nothing."""
    runs = list(runs)
    ids = groups(s, runs)
    candidate_of = _cache(s)["candidate"]
    want = sorted({min(i for i in ids[r.id] if candidate_of.get(i, r.candidate_id) == r.candidate_id)
                   for r in runs} - {r.id for r in runs})
    held = _cache(s).setdefault("firsts", [])  # the Session holds its objects weakly: these are kept here
    for first in range(0, len(want), 500):
        held += s.scalars(RUNS_WITH_ENVIRONMENT, {"keys": want[first:first + 500]}).all()  # what a footnote cites


def counts_text(counts: dict[str, int] | None) -> str:
    """``crash x3, library_missing x3``."""
    return ", ".join(f"{k} x{n}" for k, n in sorted((counts or {}).items()))
