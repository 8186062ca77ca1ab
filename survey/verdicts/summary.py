"""Each slot's cells, kept in the store (the ``cells`` table) by the transaction that
writes the evidence, so a read takes them instead of working every slot out again; and
beside them its facts (the ``slot_facts`` table: what the docs table reads,
``survey.verdicts.facts``).

The invariant: while the ``cells_stamp`` meta row reads ``RULES:V`` with ``V`` the
store's matrix version, the ``cells`` rows of every slot are exactly what
``survey.verdicts.cells.run_cells`` works out for its latest complete run, and its
``slot_facts`` row what ``survey.verdicts.facts.facts_of`` works out from that run and
those cells (a test holds them equal after every kind of write). Readers check the stamp (one query per
database session) and, when it is not current, work the cells out from the runs as
before: an answer never comes from rows that may be stale.

Who keeps it current:

- every commit that moved the matrix version (``survey.evidence.ingest`` notes its
  writes in the session): when the stamp was current before the write, the cells of
  the slots whose latest complete run shares an environment, platform and probe
  version with a run just written are worked out again (the stability rule pools
  exactly those runs), and the stamp moves with the version, in the same transaction;
- :func:`rebuild`: every slot, in transactions of its own; ``survey serve`` runs it
  before it listens, ``survey ingest`` after it stores, when the stamp is not current
  (a store made by an older proton-survey, migrated, or replaced whole).

A write does not read back the checks of the runs it writes from a report in hand: what
those checks derive (each run's cells but its capture measurements, and its answers)
depends on them and on their environment's pool only, and is kept by exactly those
(:data:`_DERIVED`), so the checks of an unchanged environment probed again, or of
environments that agree, are worked out once.

A writer that does not load this module (an older proton-survey on the same store)
moves the version without the stamp: the cells stop being current, which is safe.
:data:`RULES` changes whenever the derivation does, which makes every stored stamp
stale.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, event, exists, func, insert, select, tuple_, update
from sqlalchemy.orm import Session, selectinload

from db import bulk
from db import models as m
from db.store import Store
from probes import outcomes as O
from survey.evidence import queries
from survey.evidence.ingest import MATRIX_VERSION, WRITES, Identified, forget_writes, intern_texts
from survey.verdicts import cells as cells_mod
from survey.verdicts import facts as facts_mod
from survey.verdicts import modes, stability
from survey.verdicts.modes import Acceptance
from survey.verdicts.verdict import Cause, Verdict

RULES = "4"  # the derivation's version: change it with survey.verdicts.cells or .facts (what they call, how kept)
STAMP = "cells_stamp"
_CURRENT = queries.MEMO_PREFIX + "verdicts.summary.current"
CHUNK = 500  # slots per statement
_ACCEPTANCE = {str(a): a for a in Acceptance}  # the stored text -> the enum (a dict look-up, not a call)
_HERE = {str(v): v for v in Verdict}
_CAUSE = {str(c): c for c in Cause}
_COLUMNS = [m.Cell.__table__.c[k] for k in cells_mod.ALL_KEYS]


# The statements a write sends, built once (as survey.evidence.ingest's); an IN takes its list
# as the expanding parameter ``keys``.
_META = select(m.Meta.key, m.Meta.value).where(m.Meta.key.in_((MATRIX_VERSION, STAMP)))
_SET_STAMP = (update(m.Meta).where(m.Meta.key == STAMP).values(value=bindparam("stamp"))
              .execution_options(synchronize_session=False))
_DROP_CELLS = delete(m.Cell).where(m.Cell.slot_id.in_(m.KEYS))
_DROP_FACTS = delete(m.SlotFacts).where(m.SlotFacts.slot_id.in_(m.KEYS))
_SLOT_RUNS = select(m.Slot.id, m.Slot.complete_run_id).where(m.Slot.id.in_(m.KEYS))
_RUNS_TO_READ = select(m.Run).where(m.Run.id.in_(m.KEYS)).options(
    selectinload(m.Run.modes), selectinload(m.Run.captures), selectinload(m.Run.environment))
_ADD_FACTS = insert(m.Base.metadata.tables["slot_facts"])
_SLOTS_SHOWING = select(m.Slot.id).where(m.Slot.complete_run_id.in_(m.KEYS))


def stamp_of(version: str | int) -> str:
    return f"{RULES}:{version}"


def _meta(s: Session) -> dict[str, str]:
    return {k: v for k, v in s.execute(_META)}


def current(s: Session) -> bool:
    """Do the stored cells hold for the evidence as it is? (Once per database session:
    a session is one command or one request.)"""
    found = s.info.get(_CURRENT)
    if found is None:
        meta = _meta(s)
        found = s.info[_CURRENT] = meta.get(STAMP) == stamp_of(meta.get(MATRIX_VERSION, "0"))
    return bool(found)


def slot_batches(column: Any, ids: list[int]) -> list[Any]:
    """Conditions on ``column`` (a slot id) that together hold every id of ``ids`` (sorted,
    distinct), :data:`CHUNK` ids a statement: a range where those ids are dense (at least
    half of the ids between their first and last, as a whole table's are), else their list.
    A range also holds the ids in its gaps: its reader skips them. (A docs table reads every
    slot: 55 lists of 500 ids were 0.42 s of PostgreSQL's time at 100,000 runs, each list
    bound, planned and probed id by id; a range is one index scan.)"""
    out = []
    for first in range(0, len(ids), CHUNK):
        part = ids[first:first + CHUNK]
        dense = len(part) > 1 and 2 * len(part) >= part[-1] - part[0] + 1
        out.append(column.between(part[0], part[-1]) if dense else column.in_(part))
    return out


def stored_cells(s: Session, slot_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Slot id -> its stored cells, in their order (read them only while :func:`current`).
    Cells that say the same are one dict, shared by their slots: read them, never change them."""
    ids = sorted(set(slot_ids))
    out: dict[int, list[dict[str, Any]]] = {}
    # Cells repeat from slot to slot (every slot of an image says the same of most of its
    # (backend, mode) pairs): each distinct one is built once (the 380,016 cells of the
    # scale benchmark's 100,000 runs are 41), not once per slot.
    made: dict[tuple[Any, ...], dict[str, Any]] = {}
    texts: dict[str, str] = {}  # and cells that differ (a capture's numbers) share their texts
    wanted = set(ids)
    for where in slot_batches(m.Cell.slot_id, ids):
        for row in s.execute(select(m.Cell.slot_id, *_COLUMNS).where(where).order_by(m.Cell.slot_id, m.Cell.ord)):
            if row[0] not in wanted:  # in a range's gaps
                continue
            said = tuple(row[1:])
            cell = made.get(said)
            if cell is None:
                cell = made[said] = _cell(said, texts)
            out.setdefault(row[0], []).append(cell)
    return out


def _cell(said: tuple[Any, ...], texts: dict[str, str]) -> dict[str, Any]:
    """A cell from its ``cells`` row (the columns of ``ALL_KEYS``): the enums back, the reason
    filled in, each text the one copy in ``texts``."""
    cell = {k: texts.setdefault(v, v) if isinstance(v, str) else v
            for k, v in zip(cells_mod.ALL_KEYS, said, strict=True)}
    if cell["reason"] is None:  # stored once: the same text as the verdict's (_row)
        cell["reason"] = cell["verdict_reason"]
    cell["verdict"] = _ACCEPTANCE[cell["verdict"]]
    cell["here"] = _HERE[cell["here"]]
    cell["cause"] = _CAUSE[cell["cause"]] if cell["cause"] is not None else None
    return cell


def matching(backend: str | None = None, mode: str | None = None, outcome: str | None = None,
             verdict: str | None = None, *, counting: bool = False) -> Any:
    """A condition on ``slots``: the slot has a stored cell that passes these filters
    (each slot's cells read by its key, so a page stops at its last slot); None when no
    filter is given. ``mode``: a mode's label (``none``: no mode), None: any.
    ``counting``: for a count of every such slot, which reads the cells of the backend,
    outcome or verdict asked for through its index instead (each slot's cells, read one
    slot at a time, were 70-100 ms of a filtered page at 100,000 runs; the index range,
    9-27 ms)."""
    conds = []
    if backend:
        conds.append(m.Cell.backend == backend)
    if mode is not None:
        conds.append(m.Cell.mode == queries.mode_label(queries.mode_from_label(mode)))
    if outcome:
        conds.append(m.Cell.outcome == outcome)
    if verdict:
        conds.append(m.Cell.verdict == verdict)
    if not conds:
        return None
    if counting and (backend or outcome or verdict):
        return m.Slot.id.in_(select(m.Cell.slot_id).where(*conds))
    return exists().where(m.Cell.slot_id == m.Slot.id, *conds)


def measured_slots(s: Session, backend: str, mode: str | None, verdicts: Iterable[Acceptance],
                   limit: int) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` slots (every scope, in matrix order) whose stored cell of
    (``backend``, ``mode``: the mode's argument, None for none) has one of ``verdicts``,
    as matrix rows' keys (candidate, scope, platform, platform_label, triton_version,
    verdict_source), and how many slots have one: what ``survey check`` names where else
    a backend or mode is, without a matrix of every slot (read them only while
    :func:`current`)."""
    wanted = sorted(str(v) for v in verdicts)
    where = (m.Cell.backend == backend, m.Cell.mode == queries.mode_label(mode), m.Cell.verdict.in_(wanted))
    q = (select(m.Candidate.name, m.Candidate.scope, m.Platform.key, m.Platform.vendor, m.Platform.model,
                m.Platform.arch, m.Run.triton_version, m.Cell.verdict_source)
         .select_from(m.Cell).join(m.Slot, m.Slot.id == m.Cell.slot_id)
         .join(m.Candidate, m.Candidate.id == m.Slot.candidate_id)
         .join(m.Run, m.Run.id == m.Slot.complete_run_id)
         .outerjoin(m.Platform, m.Platform.id == m.Slot.platform_id)
         .where(*where)
         .order_by(m.Candidate.position, m.Candidate.id, func.coalesce(m.Platform.key, "")).limit(limit))
    rows = [{"candidate": name, "scope": scope, "platform": key,
             "platform_label": queries.slot_platform_label(key, vendor or "", model, arch),
             "triton_version": version, "verdict_source": source}
            for name, scope, key, vendor, model, arch, version, source in s.execute(q)]
    total = len(rows) if len(rows) < limit else int(s.scalar(select(func.count()).select_from(m.Cell).where(*where))
                                                     or 0)
    return rows, total


def refresh(s: Session, slot_ids: list[int], reports: dict[int, Identified] | None = None,
            ) -> dict[int, tuple[int, list[dict[str, Any]]]]:
    """Work the cells of these slots out again and store them (no commit); slot id ->
    (its latest complete run, its cells), for the slots that have one. ``reports``: run
    id -> the report a run was just written from (:class:`survey.evidence.ingest.Writes`);
    such a run's checks are not read back, and what they derive may come from
    :data:`_DERIVED`."""
    out: dict[int, tuple[int, list[dict[str, Any]]]] = {}
    reports = reports or {}
    for first in range(0, len(slot_ids), CHUNK):
        ids = slot_ids[first:first + CHUNK]
        s.execute(_DROP_CELLS, {"keys": ids})
        s.execute(_DROP_FACTS, {"keys": ids})
        slot_runs: dict[int, int] = {sid: rid for sid, rid in s.execute(_SLOT_RUNS, {"keys": ids}) if rid is not None}
        wanted = set(slot_runs.values())
        written = {rid: reports[rid] for rid in wanted if rid in reports}
        read = wanted - written.keys()
        runs = {r.id: r for r in s.scalars(_RUNS_TO_READ, {"keys": sorted(read)})} if read else {}
        if written:  # their checks are in hand
            runs.update((r.id, r) for r in s.scalars(stability.RUNS_WITH_ENVIRONMENT, {"keys": sorted(written)}))
        worked, given, keys = _derive(s, runs, written)
        rows = [_row(sid, rid, i, c) for sid, rid in slot_runs.items() for i, c in enumerate(worked[rid])]
        conn = s.connection()
        bulk.insert_rows(conn, m.Base.metadata.tables["cells"], rows)  # one executemany
        if slot_runs:
            facts = run_facts(s, runs, worked, given)
            for rid, key in keys.items():  # what the runs derived that the memo did not hold
                _DERIVED.put(key, _Derived([_unmeasured(c) for c in worked[rid]], facts[rid].answers),
                             cells_mod.cells_bytes(worked[rid]) + len(facts[rid].answers))
            parts = {rid: facts[rid].parts() for rid in set(slot_runs.values())}
            text_ids = intern_texts(conn, {checks for checks, _ in parts.values()})
            conn.execute(_ADD_FACTS, [
                {"slot_id": sid, "run_id": rid, "checks_id": text_ids[parts[rid][0]], "facts": parts[rid][1]}
                for sid, rid in slot_runs.items()])
        out.update((sid, (rid, worked[rid])) for sid, rid in slot_runs.items())
    return out


def run_facts(s: Session, runs: dict[int, m.Run], worked: dict[int, list[dict[str, Any]]],
              given: dict[int, tuple[str, list[list[Any]]]] | None = None) -> dict[int, facts_mod.Facts]:
    """Run id -> the facts of the slot it is the latest complete run of, from the runs and
    their cells; ``given``: run id -> its (answers, capture rows), where known already."""
    for rid, cells in worked.items():  # the run's published verdicts, as its cells hold them
        modes.remember(s, rid, [cells_mod.verdict_of(c) for c in cells])
    stability.first_runs(s, runs.values())
    given = given or {}
    return {rid: facts_mod.facts_of(run, worked[rid], *given.get(rid, ())) for rid, run in runs.items()}


# ------------------------------------------------------------------ what written checks derive
@dataclass(frozen=True)
class _Derived:
    """What a run's checks derive, whatever run made them: its cells with the capture
    measurements left out (:data:`MEASURES`: each run's own), and its answers
    (``survey.verdicts.since.answers_of``)."""

    cells: list[dict[str, Any]]
    answers: str


# (checks_key, pool_key) -> _Derived. A nightly survey or CI uploads of an unchanged
# environment write the same checks again and again: their verdicts are worked out once.
# Only writes use it, for the runs they write (the checks are in hand: nothing is read to
# make the key). It holds what pure functions give for exactly these inputs, so it is
# shared by every store of the process and is never stale (tests/test_summary.py holds the
# cells and facts written through it equal to those worked out from the runs). What the
# derivation reads of a run must be in checks_key.
DERIVED_BYTES = 16 * 2**20
_DERIVED: cells_mod.Cells[_Derived] = cells_mod.Cells(DERIVED_BYTES)
MEASURES = ("capture_kernel_count", "capture_gpu_time_ns")
_CAPTURES, _MODES, _LIBRARIES = m.CaptureRow.__tablename__, m.ModeRow.__tablename__, m.LibraryRow.__tablename__


def checks_key(rows: dict[str, list[dict[str, Any]]], run: dict[str, Any]) -> str:
    """sha256 of everything the cells and answers of a run read of it
    (``survey.verdicts.cells._cells_of``, ``survey.verdicts.since.answers_of``) but its
    environment's pool and its capture measurements: its checks, libraries, captures'
    outcomes, registry, CLI choices, and whether it names its Triton version. ``rows``, ``run``:
    a report's :attr:`~survey.evidence.ingest.Identified.children` and ``run``."""
    captures = [(c["backend"], c["mode"], c["outcome"]) for c in rows[_CAPTURES]]
    said = (rows[_MODES], rows[_LIBRARIES], captures, run["profilers"], run["cli_backends"],
            run["triton_version"] is None)
    return hashlib.sha256(pickle.dumps(said, 4)).hexdigest()


def pool_key(pooled: dict[stability.CheckKey, stability.Pooled]) -> frozenset[Any]:
    """What a run's published checks take from its environment's other runs
    (``survey.verdicts.stability.published_rows``): each check's pooled outcome, and for an
    unstable one the attempts and runs its reason counts (``survey.verdicts.modes.mode_verdict``:
    no other verdict reads them). So the runs of an environment probed again and again, whose
    checks agree, share one key while their number grows."""
    return frozenset((k, p.outcome, frozenset(p.counts.items()), p.runs) if p.outcome == O.UNSTABLE
                     else (k, p.outcome) for k, p in pooled.items())


def _unmeasured(cell: dict[str, Any]) -> dict[str, Any]:
    return {**cell, **dict.fromkeys(MEASURES)}


def _measured(cells: list[dict[str, Any]], captures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cells from :data:`_DERIVED` with this run's capture measurements, as ``_cells_of``
    gives them (the last capture of a (backend, mode); its time a float, as the column reads)."""
    by_check = {(c["backend"], c["mode"]): c for c in captures}
    out = []
    for cell in cells:
        cap = by_check.get((cell["backend"], cell["mode_arg"]))
        cell = dict(cell)
        if cap is not None:
            time_ns = cap["gpu_time_ns"]
            cell.update(capture_kernel_count=cap["kernel_count"],
                        capture_gpu_time_ns=float(time_ns) if time_ns is not None else None)
        out.append(cell)
    return out


def _derive(s: Session, runs: dict[int, m.Run], written: dict[int, Identified],
            ) -> tuple[dict[int, list[dict[str, Any]]], dict[int, tuple[str, list[list[Any]]]],
                       dict[int, tuple[str, frozenset[Any]]]]:
    """The cells of ``runs``: from :data:`_DERIVED` for a run written from a report whose
    checks and pool it holds, else worked out (``cells.run_cells`` reads the checks).
    Also the (answers, capture rows) of the first, for :func:`run_facts`, and the key of
    each run written that it did not hold."""
    pools = stability.pooled(s, runs.values()) if written else {}
    worked: dict[int, list[dict[str, Any]]] = {}
    given: dict[int, tuple[str, list[list[Any]]]] = {}
    keys: dict[int, tuple[str, frozenset[Any]]] = {}
    for rid, report in written.items():
        rows = report.children
        key = (checks_key(rows, report.run), pool_key(pools[rid]))
        found = _DERIVED.get(key)
        if found is None:
            keys[rid] = key
            continue
        captures = rows[_CAPTURES]
        worked[rid] = _measured(found.cells, captures)
        given[rid] = (found.answers, facts_mod.capture_rows(captures))
    worked.update(cells_mod.run_cells(s, [r for rid, r in runs.items() if rid not in worked]))
    return worked, given, keys


def stored_facts(s: Session, slot_ids: Iterable[int]) -> dict[int, facts_mod.Facts]:
    """Slot id -> its stored facts (read them only while :func:`current`)."""
    ids = sorted(set(slot_ids))
    asked = set(ids)
    kept: list[Any] = []
    for where in slot_batches(m.SlotFacts.slot_id, ids):
        kept += [row for row in s.execute(select(m.SlotFacts.slot_id, m.SlotFacts.checks_id, m.SlotFacts.facts)
                                          .where(where)) if row[0] in asked]
    # the checks texts, each read once (27,000 slots of 100,000 runs share 7: as a column of
    # every row they were 52 MB and half the docs table's time)
    wanted = sorted({checks_id for _, checks_id, _ in kept})
    bodies: dict[int, str] = {}
    for first in range(0, len(wanted), CHUNK):
        bodies.update((i, body) for i, body in s.execute(select(m.StoredText.id, m.StoredText.body)
                                                          .where(m.StoredText.id.in_(wanted[first:first + CHUNK]))))
    read: dict[str, dict[str, str]] = {}  # each checks text parsed once (a table of 27,000 slots: 0.45 -> 0.1 s)
    return {sid: facts_mod.Facts.from_parts(bodies[checks_id], rest, read) for sid, checks_id, rest in kept}


_ENUMS = ("verdict", "here", "cause")  # the keys whose values are enums (stored_cells reads them back)


def _row(slot_id: int, run_id: int, ord_: int, cell: dict[str, Any]) -> dict[str, Any]:
    """A cell as the ``cells`` table keeps it: its enums as their text, and its ``reason``
    (the verdict's reason, normalised) NULL where normalising left the verdict's reason as
    it was, which is nearly always: a text is not stored twice in one row."""
    row = {"slot_id": slot_id, "run_id": run_id, "ord": ord_, **{k: cell[k] for k in cells_mod.ALL_KEYS}}
    for k in _ENUMS:
        if row[k] is not None:
            row[k] = str(row[k])
    if row["reason"] == row["verdict_reason"]:
        row["reason"] = None
    return row


def _set_stamp(s: Session, version: str) -> None:
    moved = s.execute(_SET_STAMP, {"stamp": stamp_of(version)})
    if getattr(moved, "rowcount", 0) == 0:
        s.add(m.Meta(key=STAMP, value=stamp_of(version)))
        s.flush()


def rebuild(s: Session) -> int:
    """Every slot's cells, worked out and stored, and the stamp set, in one transaction
    of ``s`` (committed); how many slots. Nothing when they are current already."""
    queries.forget_reads(s)
    if current(s):
        s.rollback()
        return 0
    s.execute(delete(m.Cell))
    s.execute(delete(m.SlotFacts))
    n = len(refresh(s, list(s.scalars(select(m.Slot.id).order_by(m.Slot.id)))))
    _set_stamp(s, _meta(s).get(MATRIX_VERSION, "0"))
    s.commit()
    queries.forget_reads(s)
    return n


def bring_current(store: Store) -> int:
    """:func:`rebuild` on a store that can be written (a read-only one is read as it is:
    its answers are worked out from the runs); how many slots were worked out."""
    if store.read_only:
        return 0
    with store.session() as s:
        return rebuild(s)


def _own_slots(s: Session, runs: list[m.Run]) -> list[int]:
    """The slots whose latest complete run is one of ``runs``."""
    ids = sorted({r.id for r in runs if r.status == "complete"})
    out: set[int] = set()
    for first in range(0, len(ids), CHUNK):
        out.update(s.scalars(_SLOTS_SHOWING, {"keys": ids[first:first + CHUNK]}))
    return sorted(out)


def _shared(s: Session, runs: list[m.Run]) -> list[int]:
    """The slots whose latest complete run shares an environment, platform and probe
    version with one of ``runs`` (the stability rule pools exactly those runs)."""
    groups = {(r.environment_id, r.platform_id, r.probe_version) for r in runs}
    out: set[int] = set()
    keyed = sorted(g for g in groups if g[0] is not None and g[1] is not None and g[2] is not None)
    for first in range(0, len(keyed), CHUNK):
        out.update(s.scalars(select(m.Slot.id).join(m.Run, m.Run.id == m.Slot.complete_run_id).where(
            tuple_(m.Run.environment_id, m.Run.platform_id, m.Run.probe_version).in_(keyed[first:first + CHUNK]))))
    for env, platform, probe in (g for g in groups if g not in keyed):
        out.update(s.scalars(select(m.Slot.id).join(m.Run, m.Run.id == m.Slot.complete_run_id).where(
            m.Run.environment_id.is_(None) if env is None else m.Run.environment_id == env,
            m.Run.platform_id.is_(None) if platform is None else m.Run.platform_id == platform,
            m.Run.probe_version.is_(None) if probe is None else m.Run.probe_version == probe)))
    return sorted(out)


def _unsettled(cells: list[dict[str, Any]]) -> bool:
    return any(c["outcome"] == O.UNSTABLE or c["stub_outcome"] == O.UNSTABLE for c in cells)


def _after_write(s: Session, runs: list[m.Run], reports: dict[int, Identified] | None = None) -> None:
    """The cells a write of ``runs`` changed, stored again. A run's slot always; the
    other slots of its environment only when one of its published checks is unstable:
    a run's cells depend on its environment's other runs only through the pooled
    outcome of each check (``survey.verdicts.stability``), which is the same for every
    run that made the check. When none of the new run's checks is unstable, none of
    them was before (the rule is sticky) and the new run agreed with every earlier one,
    so the others' cells are as they were; an unstable check's reason counts the
    attempts and runs, which move with every run. A written run no slot shows has its
    environment's slots worked out again."""
    own = refresh(s, _own_slots(s, runs), reports)
    complete = {r.id: r for r in runs if r.status == "complete"}
    shown = {rid for rid, _ in own.values()}
    moving = [complete[rid] for rid, cells in own.values() if _unsettled(cells) and rid in complete]
    # a run that no slot shows (its slot's next run came in the same write) still counts in its
    # environment's pool: whether it unsettled a check there is not worked out, so its
    # environment's slots are
    moving += [r for rid, r in complete.items() if rid not in shown]
    if moving:
        refresh(s, [sid for sid in _shared(s, moving) if sid not in own])


@event.listens_for(Session, "before_commit")
def _before_commit(s: Session) -> None:
    w = s.info.get(WRITES)
    if w is None or not w.bumps:
        return
    runs, bumps, reports = list(w.runs), w.bumps, dict(w.reports)
    forget_writes(s)
    queries.forget_reads(s)
    meta = _meta(s)
    version = meta.get(MATRIX_VERSION, "0")
    try:
        before = str(int(version) - bumps)
    except ValueError:
        return
    if meta.get(STAMP) != stamp_of(before) and not (meta.get(STAMP) is None and before == "0"):
        return  # not current before this write: it stays so (rebuild makes it current)
    s.flush()
    _after_write(s, runs, reports)
    _set_stamp(s, version)
    queries.forget_reads(s)


@event.listens_for(Session, "after_soft_rollback")
def _after_rollback(s: Session, _previous: Any) -> None:
    forget_writes(s)
    s.info.pop(_CURRENT, None)

