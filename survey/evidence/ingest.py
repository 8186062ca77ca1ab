"""Write evidence into the store: whole reports, in one transaction each.

A report is validated before anything is written; the run, the report (its
canonical JSON: exactly the text that was validated and hashed) and its normalised
rows go in together or not at all. The same report twice is recognised by its hash
and adds nothing. A run is filed under its environment and its platform, both
derived from the report alone (``survey/evidence/identity.py``), and under a candidate: the
catalog's name, a name the user gave, or one derived from the report's origin.

Writers race (several uploads, a survey, a fleet driver): rows that more than one
writer may create (candidate, environment, platform) are looked up, inserted, and
on a unique-constraint conflict the whole transaction is retried, finding the
other writer's row.

Every write begins by moving the store's ``matrix_version``: a counter (not a clock
reading) that every write a view shows moves, a retry of a failure included, so
readers may cache whatever they show until it moves. Moving it is the write's first
statement, so it is also the store's write lock: on SQLite the write transaction
starts there (writers queue on it), on PostgreSQL the counter's row stays locked
until the commit. What a writer decides after it - that the report is already
stored, that the environment already has a run (``unless_unchanged``), that a
failure is a retry - no other writer can change before it commits.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import pickle
import sqlite3
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BigInteger, Connection, func, insert, select, text, update
from sqlalchemy import String as SqlString
from sqlalchemy import cast as sql_cast
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from db import bulk, widths
from db import models as m
from probes import records
from survey.core import clock, credentials, errortext, names
from survey.core.errors import InvalidReport
from survey.evidence import identity, queries
from survey.evidence.identity import Resolved
from survey.evidence.report import Report, ReportError, canonical_json, parse_report

MATRIX_VERSION = "matrix_version"
NO_VERSION = "0"  # the matrix version of a store nothing was ever ingested into
_VERSION_SQL = f"SELECT value FROM meta WHERE key = '{MATRIX_VERSION}'"
RETRIES = 5
CATALOG, ADHOC = "catalog", "adhoc"


@dataclass
class IngestResult:
    run_id: int
    created: bool
    candidate: str
    note: str | None = None
    unchanged: bool = False  # not stored: the environment already had a run (``unless_unchanged``)


def _parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    # In UTC: SQLite keeps no offset, so 18:21+05:00 stored as is would read back as 18:21+00:00.
    return t.astimezone(dt.UTC) if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _parsed(raw: bytes | str, exact: bool = False) -> tuple[Report, dict[str, Any], bytes]:
    """The report's model, data and canonical JSON (made once: it is most of a report's cost
    after the validation). ``exact``: see :func:`survey.evidence.report.parse_report`."""
    try:
        report, data = parse_report(raw, exact=exact)
    except ReportError as e:
        raise InvalidReport(str(e), field=e.field) from e
    return report, data, canonical_json(data)


def validate(raw: bytes | str) -> tuple[Report, dict[str, Any], str]:
    """Parse and validate a report; returns (model, data, hash of its canonical JSON)."""
    report, data, text = _parsed(raw)
    return report, data, hashlib.sha256(text).hexdigest()


@dataclass(frozen=True)
class Identified:
    """A report read and identified, before anything is written (ingest is parse ->
    identify -> write): its canonical JSON (exactly the text that was validated and
    hashed) in its stored, compressed form, that hash, the environment and platform it
    files under (``survey/evidence/identity.py``: derived from the report alone), and
    what the write takes from it, as plain values: the run's columns, its normalised
    rows (packed), what it measured. Worked out here, so that a writer does it before it
    takes the store's write lock, many reports read before a bulk write hold about a sixth
    of their text (the H200 report: 7 of 48 KB), and a report identified in another process
    comes back cheaply (no model to rebuild: a writer needs none)."""

    body: bytes  # db.models.compress of the canonical JSON
    digest: str
    environment: identity.EnvironmentId
    platform: identity.PlatformId
    nul: bool  # the report holds NUL somewhere (JSON writes it \u0000)
    run: dict[str, Any]  # the run's columns that come from the report (_run_columns)
    packed_rows: bytes  # :attr:`children`, packed (pickled, then zlib): see there
    measured: dict[str, str | None]  # distribution (normalised name) -> the version the report measured
    default_name: str  # the candidate it files under when none is named (default_candidate_name)
    has_origin: bool  # the report names how it was obtained (a launcher's reports must)
    probe_version: str  # as the report says (the run's column keeps its first PROBE_VERSION characters)
    triton: tuple[str | None, str | None]  # (distribution, version)

    @property
    def children(self) -> dict[str, list[dict[str, Any]]]:
        """Table -> its rows, without run_id (``_child_rows``), unpacked anew at each call.
        Kept packed: ``survey ingest`` holds every report of its directories before it writes
        the first, and as dicts these rows were four fifths of what a report held (21 of
        27 KB; packed, 1.5 KB), and they cross from the reading processes as one string."""
        unpacked: dict[str, list[dict[str, Any]]] = pickle.loads(zlib.decompress(self.packed_rows))
        return unpacked


def identify(raw: bytes | str, *, exact: bool = False) -> Identified:
    """Parse, validate and identify one report (:class:`InvalidReport` when it is not one).
    ``exact``: held to its JSON Schema's types exactly, as uploads and ``survey ingest`` are."""
    report, _data, text = _parsed(raw, exact)
    nul = b"\\u0000" in text
    env = report.environment
    return Identified(
        m.compress_bytes(text), hashlib.sha256(text).hexdigest(), identity.environment_of(report),
        identity.platform_of(report), nul, _run_columns(report),
        zlib.compress(pickle.dumps(_child_rows(report, nul), pickle.HIGHEST_PROTOCOL), 1),
        {d.name.lower().replace("_", "-"): d.version for d in env.distributions}, default_candidate_name(report),
        report.origin is not None, report.probe.version, (env.triton.distribution, env.triton.version))


def _run_columns(report: Report) -> dict[str, Any]:
    env = report.environment
    return {
        "started_at": _parse_time(report.probe.started_at),
        "finished_at": _parse_time(report.probe.finished_at),  # None: the write's time
        "host": names.derived(env.platform.hostname, widths.HOST) if env.platform.hostname else None,
        "probe_version": report.probe.version[:widths.PROBE_VERSION], "schema_version": report.schema_version,
        "triton_version": (env.triton.version or None) and env.triton.version[:widths.TRITON_VERSION],
        "profilers": report.registry.profilers, "cli_backends": report.registry.cli_backends,
    }


def default_candidate_name(report: Report) -> str:
    """A name for a report stored without one: how its origin was named, else
    where it says it ran. Always a valid name (survey/core/names.py)."""
    origin = report.origin
    if origin is not None:
        if origin.kind == "interpreter" and origin.interpreter:
            return names.derived(f"python:{origin.interpreter.get('prefix') or origin.target}")
        if origin.kind == "image" and origin.image:
            return names.derived(f"image:{origin.image.get('reference') or origin.target}")
        if origin.kind == "pip" and origin.pip:
            return names.derived("pip:" + " ".join(origin.pip.get("requirements") or [str(origin.target)]))
    env = report.environment
    host = env.platform.hostname or "unknown-host"
    return names.derived(f"{host}:python:{env.python.prefix or env.python.executable or '?'}")


def check_name(name: str, field: str = "candidate") -> str:
    why = names.problem(name)
    if why:
        raise InvalidReport(f"{field}: {why}", field=field)
    return name


def _pinned(spec: dict[str, Any] | None) -> dict[str, str]:
    reqs = (spec or {}).get("pip")
    out = {}
    for r in [reqs] if isinstance(reqs, str) else (reqs or []):
        if isinstance(r, str) and "==" in r and "@" not in r:
            n, v = r.split("==", 1)
            out[n.strip().lower().replace("_", "-")] = v.strip()
    return out


def check_matches_candidate(cand: m.Candidate, ident: Identified) -> None:
    """A report filed under a catalog candidate must have measured what it pins."""
    have = ident.measured
    for name, version in _pinned(cand.spec).items():
        if name in have and have[name] != version:
            raise InvalidReport(
                f"candidate {cand.name!r} is {name}=={version}, but the report measured {name} {have[name]}",
                field="candidate", hint="file it under another candidate name (or none: one is derived)")


_LOOK = object()  # upsert_candidate: look the name up


def upsert_candidate(
    s: Session,
    name: str,
    *,
    label: str | None,
    kind: str,
    spec: dict[str, Any] | None = None,
    position: int | None = None,
    update_kind: bool = True,
    scope: str | None = None,
    found: m.Candidate | None | object = _LOOK,
) -> m.Candidate:
    """The candidate row, created or brought up to date with its catalog entry.

    ``scope`` catalog promotes an ad-hoc candidate into the catalog; None keeps a
    stored candidate's scope and makes a new one ad hoc. The spec is kept with the
    credentials of its URLs masked (survey/credentials.py): nothing reads them back.
    ``found``: the stored row of that name, or None for none, where the caller looked
    it up already (a batch looks up all of its names in one query)."""
    spec = credentials.mask(spec) if spec is not None else None
    cand = s.scalar(select(m.Candidate).where(m.Candidate.name == name)) if found is _LOOK else found
    assert cand is None or isinstance(cand, m.Candidate)
    if cand is None:
        if position is None:  # after every catalog entry
            position = (s.scalar(select(func.max(m.Candidate.position))) or 0) + 1000
        now = clock.now()
        cand = m.Candidate(name=name, label=label or name, kind=kind, spec=spec or {}, position=position,
                           scope=scope or ADHOC, created_at=now, updated_at=now)
        s.add(cand)
        s.flush()
        return cand
    changed = False
    updates = (("label", label), ("kind", kind if update_kind else None), ("spec", spec), ("position", position),
               ("scope", scope))
    for attr, value in updates:
        if value is not None and getattr(cand, attr) != value:
            setattr(cand, attr, value)
            changed = True
    if changed:
        cand.updated_at = clock.now()  # the caller's write moved the matrix version first
    return cand


def platform_row(s: Session, p: identity.PlatformId) -> m.Platform:
    row = s.scalar(select(m.Platform).where(m.Platform.key == p.key))
    if row is None:
        row = m.Platform(key=p.key, vendor=p.vendor, model=p.model, arch=p.arch, created_at=clock.now())
        s.add(row)
        s.flush()
    return row


def environment_row(s: Session, ident: Identified) -> m.Environment:
    row = s.scalar(select(m.Environment).where(m.Environment.identity == ident.environment.identity))
    if row is None:
        row = _new_environment(ident)
        s.add(row)
        s.flush()
    return row


def _new_environment(ident: Identified) -> m.Environment:
    env = ident.environment
    digest = env.doc.get("digest") or env.doc.get("image_id") if env.kind == "image" else None
    return m.Environment(
        identity=env.identity, kind=env.kind, label=env.label[:widths.LABEL], resolved=env.doc,
        image_digest=digest, triton_distribution=ident.triton[0], triton_version=ident.triton[1],
        created_at=clock.now(),
    )


def _batch_rows(s: Session, chunk: list[tuple[Identified, Filing]], rows: dict[Any, Any]) -> None:
    """The environments of a batch's reports, found in one query and the missing ones added
    in one flush, and its stored candidates and platforms, found in a query each, into ``rows`` (by key, as
    :func:`_new_run` looks them up): not a query and a flush per report."""
    wanted = {ident.environment.identity: ident for ident, _ in chunk}
    keys = sorted(wanted)
    found = {e.identity: e for first in range(0, len(keys), 500)
             for e in s.scalars(_ENVIRONMENTS, {"keys": keys[first:first + 500]})}
    new = [_new_environment(ident) for key, ident in wanted.items() if key not in found]
    if new:
        bulk.number(s, new)
        s.add_all(new)
        s.flush()
    for env in [*found.values(), *new]:
        rows[("e", env.identity)] = env
    names = sorted({filing.name for _, filing in chunk})
    for first in range(0, len(names), 500):
        rows.update((("stored", c.name), c) for c in s.scalars(_CANDIDATES, {"keys": names[first:first + 500]}))
    for name in names:
        rows.setdefault(("stored", name), None)  # known not to be stored
    keys = sorted({ident.platform.key for ident, _ in chunk})
    for first in range(0, len(keys), 500):
        rows.update((("p", p.key), p) for p in s.scalars(_PLATFORMS, {"keys": keys[first:first + 500]}))


def _batch_slots(s: Session, runs: list[m.Run], rows: dict[Any, Any]) -> None:
    """The stored slots of the candidates of a batch's runs, in one query per 500, into
    ``rows`` (as :func:`slot_moved` looks them up); a slot not found there is new."""
    cands = sorted({r.candidate_id for r in runs})
    for first in range(0, len(cands), 500):
        for slot in s.scalars(_SLOTS_OF_CANDIDATES, {"keys": cands[first:first + 500]}):
            rows[("s", slot.candidate_id, slot.platform_id)] = slot
    for r in runs:
        rows.setdefault(("s", r.candidate_id, r.platform_id), None)


def matrix_version(conn: Session | Connection | sqlite3.Connection) -> str:
    """The store's matrix version now: one indexed read, through an ORM session, a
    SQLAlchemy connection, or a plain sqlite3 connection (the service reads it on
    every request, outside the ORM)."""
    if isinstance(conn, sqlite3.Connection):
        row = conn.execute(_VERSION_SQL).fetchone()
    else:
        row = conn.execute(text(_VERSION_SQL)).fetchone()
    return str(row[0]) if row is not None and row[0] is not None else NO_VERSION


@dataclass
class Writes:
    """What the open transaction of a database session wrote: how many times it moved the
    matrix version, and the runs it added (or moved a slot to). Kept in ``Session.info``
    until the commit or rollback, for what derives rows from the evidence in the same
    transaction (``survey.verdicts.summary``)."""

    bumps: int = 0
    runs: list[m.Run] = field(default_factory=list)
    # run id -> the report it was written from, for the runs written from one (what was
    # derived from the report need not be read back: survey.verdicts.summary)
    reports: dict[int, Identified] = field(default_factory=dict)


WRITES = "writes:proton-survey.evidence"  # not a read memo: forget_reads keeps it


def writes_of(s: Session) -> Writes:
    found = s.info.get(WRITES)
    if found is None:
        found = s.info[WRITES] = Writes()
    return found


def forget_writes(s: Session) -> None:
    s.info.pop(WRITES, None)


# The statements a write sends, built once: SQLAlchemy builds and keys a statement made
# per call anew (about 0.1 ms of a write's time each; tests/test_scale.py counts them).
# An ``IN`` takes its list as the expanding parameter ``keys``.
_TEXTS = m.Base.metadata.tables["texts"]
_BUMP = (update(m.Meta).where(m.Meta.key == MATRIX_VERSION)
         .values(value=sql_cast(sql_cast(m.Meta.value, BigInteger) + 1, SqlString()))
         .execution_options(synchronize_session=False))
_STORED_RUNS = select(m.Run.report_hash, m.Run.id).where(m.Run.report_hash.in_(m.KEYS))
_ENVIRONMENTS = select(m.Environment).where(m.Environment.identity.in_(m.KEYS))
_CANDIDATES = select(m.Candidate).where(m.Candidate.name.in_(m.KEYS))
_PLATFORMS = select(m.Platform).where(m.Platform.key.in_(m.KEYS))
_SLOTS_OF_CANDIDATES = select(m.Slot).where(m.Slot.candidate_id.in_(m.KEYS))
_TEXT_IDS = select(_TEXTS.c.sha256, _TEXTS.c.id).where(_TEXTS.c.sha256.in_(m.KEYS))
_ADD_TEXTS = insert(_TEXTS)
_ADD_REPORTS = insert(m.Base.metadata.tables["reports"])


def bump_matrix_version(s: Session) -> None:
    """Add one to the matrix version, in SQL (``value + 1`` on the row itself, so writers
    never lose each other's step), creating it at 1 in a store that has none yet. As a
    write's first statement it takes the store's write lock (see the module's doc)."""
    writes_of(s).bumps += 1
    done = s.execute(_BUMP)
    if getattr(done, "rowcount", 0) == 0:
        s.add(m.Meta(key=MATRIX_VERSION, value="1"))
        s.flush()


_MODE_COLUMNS = [c for c in records.fields("mode_result") if c in m.ModeRow.__table__.c]
# Columns that hold a text's id in ``texts`` (db.models.StoredText): the row is built with
# the text under the name it is read by, and the writer swaps in the id.
_TEXT_COLUMNS = {m.ModeRow.__tablename__: {"message": "message_id"},
                 m.LibraryRow.__tablename__: {"error": "error_id", "fix": "fix_id"}, m.CaptureRow.__tablename__: {}}


def _text(value: Any) -> Any:
    """NUL shown as U+2400 inside values bound for JSON columns too, as
    ``db.models.String``/``Text`` show it in text columns (one character for one;
    the stored report keeps the original, escaped by JSON)."""
    if isinstance(value, str):
        return value.replace("\x00", "\u2400")
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    return value


def _same(value: Any) -> Any:
    return value


def _child_rows(report: Report, nul: bool = True) -> dict[str, list[dict[str, Any]]]:
    """The normalised rows of one report, by table, as plain values for one ``INSERT``
    per table (the run's id is added when it has one). ``nul``: the report holds NUL
    somewhere (else its values are taken as they are)."""
    shown = _text if nul else _same
    modes = []
    for i, e in enumerate(report.modes):
        data = shown(e.model_dump())
        modes.append({"ord": i, **{c: data[c] for c in _MODE_COLUMNS}, "message": data["message"]})
    libraries = [{"ord": i, "name": shown(lib.name), "backends": shown(lib.backends),
                  "loads": lib.loads, "error": shown(lib.error), "versioned_only": lib.versioned_only,
                  "fix": shown(lib.fix)}
                 for i, lib in enumerate(report.libraries)]
    captures = [{
        "ord": i, "backend": shown(c.backend), "mode": shown(c.mode), "outcome": c.outcome,
        "exit_code": c.exit_code, "message": shown(c.message), "max_abs_err": c.max_abs_err, "loop_s": c.loop_s,
        "duration_s": c.duration_s, "kernel_count": c.kernel_count, "gpu_time_ns": c.gpu_time_ns,
        "top_kernel": shown(c.top_kernel), "top_kernel_time_ns": c.top_kernel_time_ns,
        "artifact_sha256": c.artifact.sha256 if c.artifact else None,
        "artifact_bytes": c.artifact.bytes if c.artifact else None,
    } for i, c in enumerate(report.captures)]
    return {m.ModeRow.__tablename__: modes, m.LibraryRow.__tablename__: libraries,
            m.CaptureRow.__tablename__: captures}


def _store_children(s: Session, written: list[tuple[m.Run, Identified]]) -> None:
    """The report text and the normalised rows of runs just added: one ``INSERT`` (of
    many rows) per table, whatever the number of runs, and one look-up of the texts
    they repeat."""
    conn = s.connection()  # Core executemany: the ORM's bulk path splits rows by which JSON values are null
    conn.execute(_ADD_REPORTS, [{"run_id": run.id, "body": ident.body} for run, ident in written])
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in _TEXT_COLUMNS}
    for run, ident in written:
        for name, rows in ident.children.items():
            tables[name] += [{"run_id": run.id, **row} for row in rows]
    ids = intern_texts(conn, {row[name] for table, rows in tables.items() for name in _TEXT_COLUMNS[table]
                              for row in rows if row[name] is not None})
    for table, rows in tables.items():
        for row in rows:
            for name, column in _TEXT_COLUMNS[table].items():
                text_ = row.pop(name)
                row[column] = ids[text_] if text_ is not None else None
        bulk.insert_rows(conn, m.Base.metadata.tables[table], rows)


def intern_texts(conn: Connection, texts: set[str]) -> dict[str, int]:
    """Text -> its id in ``texts``, adding the texts not kept yet (inside the write, which
    holds the store's write lock: no other writer adds one meanwhile)."""
    if not texts:
        return {}
    by_hash = {hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest(): t for t in texts}
    found: dict[str, int] = {}

    def look_up(hashes: list[str]) -> None:
        for first in range(0, len(hashes), 500):
            found.update((h, i) for h, i in conn.execute(_TEXT_IDS, {"keys": hashes[first:first + 500]}))

    look_up(sorted(by_hash))
    missing = [h for h in sorted(by_hash) if h not in found]
    if missing:
        conn.execute(_ADD_TEXTS, [{"sha256": h, "body": by_hash[h]} for h in missing])
        look_up(missing)
    return {by_hash[h]: i for h, i in found.items()}


def _existing(s: Session, digest: str, name: str) -> IngestResult | None:
    run = s.scalar(select(m.Run).where(m.Run.report_hash == digest))
    if run is None:
        return None
    note = None
    if run.candidate.name != name:
        note = f"this report is already stored as run #{run.id} under candidate {run.candidate.name!r}; nothing added"
    return IngestResult(run.id, False, run.candidate.name, note)


def ingest(
    s: Session,
    raw: bytes | str | Identified,
    *,
    candidate: str | None = None,
    label: str | None = None,
    kind: str = "ingested",
    spec: dict[str, Any] | None = None,
    position: int | None = None,
    resolved: Resolved | None = None,
    source: str = "ingest",
    scope: str | None = None,
    unless_unchanged: bool = False,
) -> IngestResult:
    """Store one report. Commits on success; rolls back (writing nothing) on error.

    ``scope`` catalog files it as published catalog evidence (``survey run``);
    otherwise a new candidate is ad hoc and a stored one keeps its scope.
    ``unless_unchanged``: store nothing when this candidate already has a complete run
    of the same environment on the same platform by the same probe version (decided
    under the write lock, so two surveys at once store one run). ``raw``: the report, or
    the report read and identified already (:func:`identify`)."""
    ident = raw if isinstance(raw, Identified) else identify(raw)
    if resolved is not None and not ident.has_origin:
        raise InvalidReport("a report from a launcher must carry its origin", field="origin")
    filing = filing_of(ident, candidate=candidate, label=label, kind=kind, spec=spec, position=position, scope=scope)
    name = filing.name
    for attempt in range(RETRIES):
        try:
            bump_matrix_version(s)  # first: the write lock (rolled back with the rest if nothing is added)
            existing = _existing(s, ident.digest, name)
            if existing is not None:
                s.rollback()
                return existing
            if unless_unchanged:
                prior = find_unchanged(s, name, ident.environment.identity, ident.probe_version,
                                       ident.platform.key)
                if prior is not None:
                    s.rollback()
                    return IngestResult(prior.id, False, name, f"unchanged since run #{prior.id}", unchanged=True)
            run = _write(s, ident, filing, source, {})
            s.commit()
            return IngestResult(run.id, True, name)
        except (IntegrityError, OperationalError) as e:
            # Another writer created the same candidate/environment/platform (or
            # stored this very report) first; the next attempt finds its rows.
            s.rollback()
            if attempt == RETRIES - 1 or (isinstance(e, OperationalError) and "locked" not in str(e)):
                raise
        except BaseException:
            s.rollback()
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def check_label(label: str | None) -> None:
    if label is not None and names.problem(label, "label", names.MAX_LABEL):
        raise InvalidReport(f"label: {names.problem(label, 'label', names.MAX_LABEL)}", field="label")


@dataclass(frozen=True)
class Filing:
    """Under which candidate a report is stored, and what that candidate row says
    (:func:`filing_of` checks the name and label)."""

    name: str
    label: str | None = None
    kind: str = "ingested"
    spec: dict[str, Any] | None = None
    position: int | None = None
    scope: str | None = None


def filing_of(ident: Identified, *, candidate: str | None = None, label: str | None = None, kind: str = "ingested",
              spec: dict[str, Any] | None = None, position: int | None = None,
              scope: str | None = None) -> Filing:
    """The filing of one report: under ``candidate`` (a valid name), else under a name
    derived from its origin (:func:`default_candidate_name`)."""
    name = check_name(candidate) if candidate else ident.default_name
    check_label(label)
    return Filing(name, label, kind, spec, position, scope)


def _write(s: Session, ident: Identified, filing: Filing, source: str, rows: dict[Any, Any]) -> m.Run:
    """Add the run of one identified report, its report text and its normalised rows
    (no commit)."""
    run = _new_run(s, ident, filing, source, rows)
    s.flush()
    _store_children(s, [(run, ident)])
    slot_moved(s, run, rows, ident)
    return run


def _new_run(s: Session, ident: Identified, filing: Filing, source: str, rows: dict[Any, Any]) -> m.Run:
    """The run row of one identified report, added to the session (its id comes with the
    next flush). ``rows``: candidate, environment and platform rows already found in this
    transaction, by key (a batch finds each once)."""
    cand = rows.get(("c", filing.name))
    if cand is None:  # a new one is flushed (its id) by upsert_candidate
        cand = rows[("c", filing.name)] = upsert_candidate(
            s, filing.name, label=filing.label, kind=filing.kind, spec=filing.spec, position=filing.position,
            update_kind=filing.spec is not None, scope=filing.scope, found=rows.get(("stored", filing.name), _LOOK))
    check_matches_candidate(cand, ident)
    envrow = rows.get(("e", ident.environment.identity))
    if envrow is None:
        envrow = rows[("e", ident.environment.identity)] = environment_row(s, ident)
    prow = rows.get(("p", ident.platform.key))
    if prow is None:
        prow = rows[("p", ident.platform.key)] = platform_row(s, ident.platform)
    run = m.Run(
        candidate_id=cand.id, environment_id=envrow.id, platform_id=prow.id, platform_detail=ident.platform.detail,
        status="complete", source=source, report_hash=ident.digest, image_digest=envrow.image_digest,
        **{**ident.run, "finished_at": ident.run["finished_at"] or clock.now()},
    )
    s.add(run)
    return run


def slot_moved(s: Session, run: m.Run, rows: dict[Any, Any] | None = None,
               report: Identified | None = None) -> None:
    """The new run is its (candidate, platform)'s latest run (and, complete, its latest
    complete run): the ``slots`` row says so, in the run's own transaction. ``report``: the
    report the run was written from (:attr:`Writes.reports`)."""
    queries.forget_reads(s)
    w = writes_of(s)
    w.runs.append(run)
    if report is not None:
        w.reports[run.id] = report
    key = ("s", run.candidate_id, run.platform_id)
    slot = rows.get(key) if rows is not None else None
    if slot is None and (rows is None or key not in rows):  # in rows as None: known to be new
        where = m.Slot.platform_id == run.platform_id if run.platform_id is not None else m.Slot.platform_id.is_(None)
        slot = s.scalar(select(m.Slot).where(m.Slot.candidate_id == run.candidate_id, where))
    if slot is None:
        slot = m.Slot(candidate_id=run.candidate_id, platform_id=run.platform_id, last_run_id=run.id,
                      complete_run_id=run.id if run.status == "complete" else None)
        s.add(slot)
    else:
        slot.last_run_id = run.id
        if run.status == "complete":
            slot.complete_run_id = run.id
    if rows is not None:
        rows[key] = slot


BATCH = 500  # reports per transaction of a bulk ingest


def ingest_many(s: Session, items: list[tuple[Identified, Filing]], *, source: str = "ingest",
                batch: int = BATCH, on_batch: Callable[[list[IngestResult]], None] | None = None,
                ) -> list[IngestResult]:
    """Store many identified reports (:func:`identify`, all of them read before anything
    is written), ``batch`` per transaction, each transaction moving the matrix version
    once. A report already stored (or twice in ``items``) adds nothing, as in
    :func:`ingest`; a failure rolls back its own batch only, earlier batches stay stored."""
    out: list[IngestResult] = []
    for first in range(0, len(items), batch):
        chunk = items[first:first + batch]
        for attempt in range(RETRIES):
            try:
                done = _ingest_batch(s, chunk, source)
            except (IntegrityError, OperationalError) as e:
                s.rollback()
                if attempt == RETRIES - 1 or (isinstance(e, OperationalError) and "locked" not in str(e)):
                    raise
                continue
            except BaseException:
                s.rollback()
                raise
            out.extend(done)
            if on_batch is not None:
                on_batch(done)
            break
    return out


def _ingest_batch(s: Session, chunk: list[tuple[Identified, Filing]], source: str) -> list[IngestResult]:
    bump_matrix_version(s)  # once for the batch: the write lock, as in ingest()
    stored: dict[str | None, int] = {digest: run_id for digest, run_id in s.execute(
        _STORED_RUNS, {"keys": sorted({i.digest for i, _ in chunk})})}
    results: list[IngestResult] = []
    rows: dict[Any, Any] = {}
    written: list[tuple[m.Run, Identified]] = []
    pending: set[str] = set()
    _batch_rows(s, [item for item in chunk if item[0].digest not in stored], rows)
    with s.no_autoflush:  # the runs go in together, at the flush below
        for ident, filing in chunk:
            if ident.digest in stored or ident.digest in pending:
                results.append(IngestResult(-1, False, filing.name))  # its run id once the batch is flushed
                continue
            pending.add(ident.digest)
            written.append((_new_run(s, ident, filing, source, rows), ident))
            results.append(IngestResult(-1, True, filing.name))
    bulk.number(s, [run for run, _ in written])
    s.flush()  # every run of the batch, and their ids
    if written:
        _store_children(s, written)
        _batch_slots(s, [run for run, _ in written], rows)
    for run, ident in written:
        slot_moved(s, run, rows, ident)
    # the new slots in the order their runs came (dict: each once)
    bulk.number(s, list({id(slot): slot for slot in (rows[("s", run.candidate_id, run.platform_id)]
                                                     for run, _ in written)}.values()))
    stored.update({ident.digest: run.id for run, ident in written})
    for i, (ident, filing) in enumerate(chunk):
        res = results[i]
        if res.created:
            res.run_id = stored[ident.digest]
        else:
            results[i] = _existing(s, ident.digest, filing.name) or IngestResult(stored[ident.digest], False,
                                                                                  filing.name)
    added = len(written)
    if added:
        s.commit()
    else:
        s.rollback()
    return results


def record_failure(
    s: Session,
    name: str,
    *,
    label: str | None,
    kind: str,
    spec: dict[str, Any] | None,
    position: int | None,
    error: str,
    platform: identity.PlatformId,
    status: str = "unobtainable",
    scope: str | None = None,
) -> tuple[int, bool]:
    """Store that a candidate could not be obtained (or its probe failed) on this
    platform, with the raw error. Returns (run id, new?).

    An attempt whose normalised error equals the last one's is a retry of it: its
    count and time go up (and with them the matrix version: views show both), nothing
    else changes."""
    error = credentials.mask_text(error)
    key = errortext.normalise(error)
    for attempt in range(RETRIES):
        try:
            bump_matrix_version(s)  # first: the write lock; a retry is shown too
            cand = upsert_candidate(s, name, label=label, kind=kind, spec=spec, position=position, scope=scope)
            prow = platform_row(s, platform)
            last = s.scalar(select(m.Run).where(m.Run.candidate_id == cand.id, m.Run.platform_id == prow.id)
                            .order_by(m.Run.id.desc()).limit(1))
            now = clock.now()
            if last is not None and last.status == status and (last.error_key or errortext.normalise(last.error)) \
                    == key:
                last.tries = (last.tries or 1) + 1
                last.last_tried_at = now
                s.commit()
                return last.id, False
            run = m.Run(candidate=cand, platform=prow, platform_detail=platform.detail, status=status,
                        source="survey", finished_at=now, last_tried_at=now, tries=1, error=error, error_key=key)
            s.add(run)
            s.flush()
            slot_moved(s, run)
            s.commit()
            return run.id, True
        except IntegrityError:
            s.rollback()
            if attempt == RETRIES - 1:
                raise
        except BaseException:
            s.rollback()
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def find_unchanged(s: Session, name: str, identity_hash: str, probe_version: str, platform_key: str) -> m.Run | None:
    """A complete run of this candidate for the same environment, platform and probe version."""
    return s.scalar(
        select(m.Run)
        .join(m.Candidate)
        .join(m.Environment, m.Run.environment_id == m.Environment.id)
        .join(m.Platform, m.Run.platform_id == m.Platform.id)
        .where(m.Candidate.name == name, m.Environment.identity == identity_hash, m.Run.status == "complete",
               m.Run.probe_version == probe_version, m.Platform.key == platform_key)
        .order_by(m.Run.id.desc())
        .limit(1)
    )
