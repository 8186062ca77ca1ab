"""Read the store: candidates, their latest runs per platform, one run, a reference.

A handful of indexed queries, never a load of every run: the latest complete run
and the latest run of any status of each (candidate, platform) come from two
grouped ``max(id)`` queries, then only those runs are loaded.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, selectinload

from db import models as m
from probes import outcomes as O
from survey.core import clock
from survey.core.ages import age_text as age_text  # re-exported: callers read it here
from survey.core.errors import UnknownTarget, did_you_mean
from survey.evidence.identity import platform_label

if TYPE_CHECKING:
    from db.store import Store

NO_MODE = "none"  # the label of "no mode given"; `default` is a real instrumentation mode
MODE_LABELS = (NO_MODE, *(m for m in O.COMMON_MODES if m), *O.INSTRUMENTATION_MODES)  # every mode, as labels
SCOPES = ("catalog", "all")


def mode_label(mode: str | None) -> str:
    return NO_MODE if mode is None else mode


def mode_from_label(label: str | None) -> str | None:
    return None if label in (None, "", NO_MODE, "null") else label


def iso(t: dt.datetime | None) -> str | None:
    """ISO 8601 with the offset the time carries (naive times are UTC)."""
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.isoformat(timespec="seconds")


def run_query() -> Select[m.Run]:  # type: ignore[type-var]
    return select(m.Run).options(
        selectinload(m.Run.modes), selectinload(m.Run.captures), selectinload(m.Run.libraries),
        selectinload(m.Run.candidate), selectinload(m.Run.environment), selectinload(m.Run.platform),
    )


def candidates(s: Session, scope: str = "all") -> list[m.Candidate]:
    q = select(m.Candidate).order_by(m.Candidate.position, m.Candidate.id)
    if scope == "catalog":
        q = q.where(m.Candidate.scope == "catalog")
    return list(s.scalars(q))


@dataclass
class Slot:
    """One (candidate, platform): its latest complete run and its latest run."""

    candidate: m.Candidate
    platform: m.Platform | None
    complete: m.Run | None
    last: m.Run | None

    @property
    def platform_key(self) -> str | None:
        return self.platform.key if self.platform is not None else None

    @property
    def platform_label(self) -> str:
        p = self.platform
        if p is None or p.key == "unrecorded":
            return "platform not recorded"
        return platform_label(p.vendor, p.model, p.arch)


def slots(s: Session, scope: str = "all", candidate: str | None = None, checks: bool = True) -> list[Slot]:
    """Every (candidate, platform) with evidence, in catalog order then platform key;
    a candidate with no run at all gives one slot without a platform. ``checks=False``:
    the runs come without their checks, captures and libraries loaded (read them
    through ``survey.verdicts.matrix.run_cells``)."""
    cands = candidates(s, scope)
    if candidate is not None:
        cands = [c for c in cands if c.name == candidate]
    ids = [c.id for c in cands]
    if not ids:
        return []
    group = (m.Run.candidate_id, m.Run.platform_id)
    last_ids = dict(((c, p), i) for c, p, i in s.execute(
        select(*group, func.max(m.Run.id)).where(m.Run.candidate_id.in_(ids)).group_by(*group)))
    complete_ids = dict(((c, p), i) for c, p, i in s.execute(
        select(*group, func.max(m.Run.id)).where(m.Run.candidate_id.in_(ids), m.Run.status == "complete")
        .group_by(*group)))
    wanted = set(last_ids.values()) | set(complete_ids.values())
    query = run_query() if checks else select(m.Run).options(
        selectinload(m.Run.environment), selectinload(m.Run.platform))
    runs = {r.id: r for r in s.scalars(query.where(m.Run.id.in_(wanted)))} if wanted else {}
    platforms = {p.id: p for p in s.scalars(select(m.Platform))}
    by_candidate: dict[int, list[tuple[int, int | None]]] = {}
    for k in last_ids:
        by_candidate.setdefault(k[0], []).append(k)
    out: list[Slot] = []
    for c in cands:
        keys = sorted(by_candidate.get(c.id, []), key=lambda k: platforms[k[1]].key if k[1] in platforms else "")
        if not keys:
            out.append(Slot(c, None, None, None))
        for k in keys:
            out.append(Slot(c, platforms.get(k[1]) if k[1] is not None else None,
                            runs.get(complete_ids.get(k, -1)), runs.get(last_ids[k])))
    return out


def find_candidate(s: Session, name: str) -> m.Candidate | None:
    """The stored candidate of this name, or None. A name holding NUL cannot be
    stored (survey.core.names); looked up, its NUL would be bound as U+2400
    (db.models.String) and could find a name that holds that symbol."""
    if "\x00" in name:
        return None
    return s.scalar(select(m.Candidate).where(m.Candidate.name == name))


def get_candidate(s: Session, name: str) -> m.Candidate:
    c = find_candidate(s, name)
    if c is None:
        near = did_you_mean(name, list(s.scalars(select(m.Candidate.name))))
        raise UnknownTarget(f"no candidate named {name!r} in the store" + (f"; {near.strip()}" if near else ""),
                            hint="`survey run` surveys the catalog; `survey table --all` lists what is stored")
    return c


# Run ids are INTEGER columns (db.models): 32 bits on PostgreSQL, which refuses a
# larger literal in a comparison (DataError) where SQLite would just find nothing.
MAX_RUN_ID = 2**31 - 1


def get_run(s: Session, run_id: int) -> m.Run:
    if not 0 < run_id <= MAX_RUN_ID:
        raise UnknownTarget(f"no run #{run_id} in the store")
    r = s.scalar(run_query().where(m.Run.id == run_id))
    if r is None:
        raise UnknownTarget(f"no run #{run_id} in the store")
    return r


def latest_complete(s: Session, candidate_id: int, platform_key: str | None = None,
                    environment_identity: str | None = None) -> m.Run | None:
    q = run_query().where(m.Run.candidate_id == candidate_id, m.Run.status == "complete")
    if platform_key is not None:
        q = q.join(m.Platform, m.Run.platform_id == m.Platform.id).where(m.Platform.key == platform_key)
    if environment_identity is not None:
        q = q.join(m.Environment, m.Run.environment_id == m.Environment.id) \
            .where(m.Environment.identity == environment_identity)
    return s.scalar(q.order_by(m.Run.id.desc()).limit(1))


def resolve_ref(s: Session, ref: str) -> m.Run:
    """A run from ``run:12``, ``#12``, ``12`` or a candidate name (its latest complete run)."""
    text = ref.strip()
    for prefix in ("run:", "#"):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    else:
        if not (text.isascii() and text.isdigit()):
            cand = get_candidate(s, ref)
            run = latest_complete(s, cand.id)
            if run is None:
                raise UnknownTarget(f"candidate {ref!r} has no complete run yet")
            return run
    if not text.isdigit() or not text.isascii():
        raise UnknownTarget(f"{ref!r} is neither a run id nor a candidate name")
    if int(text) > MAX_RUN_ID:
        raise UnknownTarget(f"no run #{text} in the store")
    return get_run(s, int(text))


def provenance(run: m.Run) -> dict[str, Any]:
    env = run.environment
    resolved = env.resolved if env else {}
    wheels = [
        f"{i['name']} {i['version']} sha256:{(i.get('sha256') or '?')[:12]}"
        for i in resolved.get("installed", []) if i.get("name") in ("triton", "pytorch-triton-rocm", "pytorch-triton")
    ]
    return {
        "run_id": run.id,
        "date": iso(run.finished_at),
        "source": run.source,
        "host": run.host,
        "probe_version": run.probe_version,
        "image_digest": run.image_digest,
        "environment": env.label if env else None,
        "platform": run.platform.key if run.platform else None,
        "resolved": wheels,
    }


def backed_off(store: Store, name: str, platform_key: str, retry_after_s: float) -> m.Run | None:
    """The last run of (candidate, platform) when it was unobtainable less than
    ``retry_after_s`` ago: not worth another try yet."""
    if retry_after_s <= 0:
        return None
    with store.session() as s:
        last = s.scalar(select(m.Run).join(m.Candidate).join(m.Platform, m.Run.platform_id == m.Platform.id)
                        .where(m.Candidate.name == name, m.Platform.key == platform_key)
                        .order_by(m.Run.id.desc()).limit(1))
        if last is None or last.status != "unobtainable":
            return None
        when = last.last_tried_at or last.finished_at
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        age = (clock.now() - when).total_seconds()
        return last if age < retry_after_s else None
