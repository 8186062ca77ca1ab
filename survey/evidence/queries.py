"""Read the store: candidates, their latest runs per platform, one run, a reference.

A handful of indexed queries, never a load of every run: the latest complete run
and the latest run of any status of each (candidate, platform) come from two
grouped ``max(id)`` queries, then only those runs are loaded.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, false, func, select
from sqlalchemy.orm import Session, defer, selectinload

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


def run_query() -> Select[m.Run]:
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
    id: int | None = None  # the slots row (None: a candidate with no run)

    @property
    def platform_key(self) -> str | None:
        return self.platform.key if self.platform is not None else None

    @property
    def platform_label(self) -> str:
        p = self.platform
        return slot_platform_label(p.key, p.vendor, p.model, p.arch) if p is not None else slot_platform_label(None)


def slot_platform_label(key: str | None, vendor: str = "", model: str | None = None,
                        arch: str | None = None) -> str:
    """A slot's platform in words (key None: a slot without a platform)."""
    if key is None or key == "unrecorded":
        return "platform not recorded"
    return platform_label(vendor, model, arch)


def _slot_query(s: Session, scope: str, candidate: str | None, platform: str | None,
                only: Any = None, ordered: bool = True) -> Select[int, int]:
    """(candidate id, slot id or None) in matrix order: catalog order, then platform key
    (code points on every store); a candidate with no run has one row without a slot.
    ``only``: a condition on ``slots`` (a filter of a layer above). ``ordered=False``: in
    no order, and without the platforms unless one is asked for (what a count reads)."""
    key = m.Platform.key
    if s.get_bind().dialect.name == "postgresql":
        key = key.collate("C")  # type: ignore[assignment]
    q = select(m.Candidate.id, m.Slot.id).outerjoin(m.Slot, m.Slot.candidate_id == m.Candidate.id)
    if ordered or platform is not None:
        q = q.outerjoin(m.Platform, m.Platform.id == m.Slot.platform_id)
    if scope == "catalog":
        q = q.where(m.Candidate.scope == "catalog")
    if candidate is not None:
        q = q.where(m.Candidate.name == candidate) if "\x00" not in candidate else q.where(false())
    if platform is not None:
        q = q.where(m.Platform.key == platform)
    if only is not None:
        q = q.where(only)
    return q.order_by(m.Candidate.position, m.Candidate.id, func.coalesce(key, "")) if ordered else q


def count_slots(s: Session, scope: str = "all", candidate: str | None = None, platform: str | None = None,
                only: Any = None) -> int:
    """How many slots :func:`slots` gives for these arguments (one counting query)."""
    q = _slot_query(s, scope, candidate, platform, only, ordered=False).subquery()
    return int(s.scalar(select(func.count()).select_from(q)) or 0)


def slots(s: Session, scope: str = "all", candidate: str | None = None, checks: bool = True, *,
          platform: str | None = None, start: int = 0, size: int | None = None, only: Any = None) -> list[Slot]:
    """Every (candidate, platform) with evidence, in catalog order then platform key;
    a candidate with no run at all gives one slot without a platform. ``checks=False``:
    the runs come without their checks, captures and libraries loaded (read them
    through ``survey.verdicts.cells.run_cells``). ``platform``: only that platform's
    slots; ``start``, ``size``: only those slots of the order (a page reads its own).
    Every slot of a scope is read once per Session (kept in ``Session.info``: a Session
    is one command or one request), whoever asks."""
    whole = size is None and not start and only is None
    memo = s.info.setdefault(_SLOTS, {})
    if whole:
        for have in ((scope, candidate, platform, True), (scope, candidate, platform, checks)) + (
                (("all", candidate, platform, True), ("all", candidate, platform, checks)) if scope == "catalog"
                else ()):
            if have in memo:
                return [sl for sl in memo[have] if scope != "catalog" or sl.candidate.scope == "catalog"]
    out = _read_slots(s, scope, candidate, checks, platform, start, size, only)
    if whole:
        memo[(scope, candidate, platform, checks)] = out
    return list(out)


@dataclass(frozen=True)
class SlotLine:
    """One slot as plain values (:func:`slot_lines`): no run loaded."""

    name: str
    label: str
    slot_id: int | None  # None: a candidate with no run
    platform_key: str | None
    platform_label: str
    complete_run_id: int | None
    last_run_id: int | None


def slot_lines(s: Session, scope: str = "all") -> list[SlotLine]:
    """Every slot of a scope, in :func:`slots`' order, in one query of plain rows: for a
    reader that takes each slot's checks from what is kept of them (``survey.verdicts.summary``)."""
    q = _slot_query(s, scope, None, None).with_only_columns(
        m.Candidate.name, m.Candidate.label, m.Slot.id, m.Platform.key, m.Platform.vendor, m.Platform.model,
        m.Platform.arch, m.Slot.complete_run_id, m.Slot.last_run_id)
    labels: dict[tuple[Any, ...], str] = {}  # a store has a few platforms and thousands of slots on each
    out = []
    for name, label, sid, key, vendor, model, arch, complete, last in s.execute(q):
        shown = labels.get((key, vendor, model, arch))
        if shown is None:
            shown = labels[(key, vendor, model, arch)] = slot_platform_label(key, vendor or "", model, arch)
        out.append(SlotLine(name, label, sid, key, shown, complete, last))
    return out


def specs_of(s: Session, names: list[str]) -> dict[str, dict[str, Any]]:
    """Candidate name -> its spec, for these names (500 a query)."""
    names = sorted(set(names))
    out: dict[str, dict[str, Any]] = {}
    for first in range(0, len(names), 500):
        out.update((name, spec) for name, spec in s.execute(
            select(m.Candidate.name, m.Candidate.spec).where(m.Candidate.name.in_(names[first:first + 500]))))
    return out


def runs_by_id(s: Session, ids: list[int]) -> list[m.Run]:
    """These runs (500 ids a query)."""
    ids = sorted(set(ids))
    out: list[m.Run] = []
    for first in range(0, len(ids), 500):
        out += s.scalars(select(m.Run).where(m.Run.id.in_(ids[first:first + 500]))).all()
    return out


_SLOTS = "proton-survey.evidence.slots"
MEMO_PREFIX = "proton-survey."  # Session.info keys of what reads keep for their Session


def forget_reads(s: Session) -> None:
    """Drop what reads kept in this database session (slots, pools, verdicts): a write in it
    (``survey.evidence.ingest``) makes them stale."""
    for key in [k for k in s.info if isinstance(k, str) and k.startswith(MEMO_PREFIX)]:
        del s.info[key]


def platform_keys(s: Session) -> list[str]:
    """The keys of the platforms with evidence, sorted."""
    return sorted(k for k in s.scalars(select(m.Platform.key).where(
        m.Platform.id.in_(select(m.Slot.platform_id).where(m.Slot.platform_id.is_not(None))))))


def _read_slots(s: Session, scope: str, candidate: str | None, checks: bool, platform: str | None, start: int,
                size: int | None, only: Any = None) -> list[Slot]:
    q = _slot_query(s, scope, candidate, platform, only)
    if start:
        q = q.offset(start)
    if size is not None:
        q = q.limit(size)
    order = s.execute(q).all()
    if not order:
        return []
    if size is None and not start:  # all of them: by subquery (a list of ids may pass the store's limit)
        slot_ids: Any = _slot_query(s, scope, candidate, platform, only).with_only_columns(m.Slot.id).order_by(None)
        cand_ids: Any = _slot_query(s, scope, candidate, platform, only).with_only_columns(m.Candidate.id) \
            .order_by(None)
        run_ids: Any = select(m.Slot.last_run_id).where(m.Slot.id.in_(slot_ids)).union_all(
            select(m.Slot.complete_run_id).where(m.Slot.id.in_(slot_ids), m.Slot.complete_run_id.is_not(None)))
    else:
        slot_ids = {i for _, i in order if i}
        cand_ids = {c for c, _ in order}
        run_ids = None
    slot_rows = {sl.id: sl for sl in s.scalars(select(m.Slot).where(m.Slot.id.in_(slot_ids)))}
    cands = {c.id: c for c in s.scalars(select(m.Candidate).where(m.Candidate.id.in_(cand_ids)))}
    if run_ids is None:
        run_ids = {r for sl in slot_rows.values() for r in (sl.last_run_id, sl.complete_run_id) if r is not None}
    # Without checks the runs come without their JSON too (a run's platform detail and
    # profiler lists, its environment's identity document): they load when read.
    query = run_query() if checks else select(m.Run).options(
        defer(m.Run.platform_detail), defer(m.Run.profilers), defer(m.Run.cli_backends),
        selectinload(m.Run.environment).defer(m.Environment.resolved), selectinload(m.Run.platform))
    runs = {r.id: r for r in s.scalars(query.where(m.Run.id.in_(run_ids)))} if slot_rows else {}
    platform_ids = {sl.platform_id for sl in slot_rows.values() if sl.platform_id is not None}
    platforms = {p.id: p for p in s.scalars(select(m.Platform).where(m.Platform.id.in_(platform_ids)))} \
        if platform_ids else {}
    out: list[Slot] = []
    for cid, sid in order:
        sl = slot_rows.get(sid) if sid is not None else None
        if sl is None:
            out.append(Slot(cands[cid], None, None, None))
            continue
        out.append(Slot(cands[cid], platforms.get(sl.platform_id) if sl.platform_id is not None else None,
                        runs.get(sl.complete_run_id) if sl.complete_run_id is not None else None,
                        runs.get(sl.last_run_id), sl.id))
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


def triton_wheels(env: m.Environment | None) -> list[str]:
    """The Triton wheels an environment was resolved to: ``triton 3.6.0 sha256:0123456789ab``."""
    resolved = env.resolved if env else {}
    return [
        f"{i['name']} {i['version']} sha256:{(i.get('sha256') or '?')[:12]}"
        for i in resolved.get("installed", []) if i.get("name") in ("triton", "pytorch-triton-rocm", "pytorch-triton")
    ]


def provenance(run: m.Run) -> dict[str, Any]:
    env = run.environment
    wheels = triton_wheels(env)
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
