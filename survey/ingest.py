"""Write evidence into the store: whole reports, in one transaction each.

A report is validated before anything is written; the run, the verbatim report
and its normalised rows go in together or not at all. The same report twice is
recognised by its hash and adds nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db import models as m
from survey.errors import InvalidReport
from survey.launchers import Resolved
from survey.report import Report, ReportError, canonical_json, parse_report

MATRIX_VERSION = "matrix_version"


@dataclass
class IngestResult:
    run_id: int
    created: bool
    candidate: str


def _parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    # In UTC: SQLite keeps no offset, so 18:21+05:00 stored as is would read back as 18:21+00:00.
    return t.astimezone(dt.UTC) if t.tzinfo else t.replace(tzinfo=dt.UTC)


def validate(raw: bytes | str) -> tuple[Report, dict[str, Any], str]:
    """Parse and validate a report; returns (model, data, hash)."""
    try:
        report, data = parse_report(raw)
    except ReportError as e:
        raise InvalidReport(str(e), field=e.field) from e
    return report, data, hashlib.sha256(canonical_json(data)).hexdigest()


def default_candidate_name(report: Report) -> str:
    tri = report.environment.triton
    host = report.environment.platform.model_extra.get("hostname") if report.environment.platform.model_extra else None
    what = f"{tri.distribution}-{tri.version}" if tri.distribution else "no-triton"
    return f"{host or 'unknown-host'}.{what}".replace("/", "-")


def upsert_candidate(
    s: Session,
    name: str,
    *,
    label: str | None,
    kind: str,
    spec: dict[str, Any] | None = None,
    position: int | None = None,
    update_kind: bool = True,
) -> m.Candidate:
    """The candidate row, created or brought up to date with its catalog entry."""
    cand = s.scalar(select(m.Candidate).where(m.Candidate.name == name))
    if cand is None:
        if position is None:  # after every catalog entry
            position = (s.scalar(select(func.max(m.Candidate.position))) or 0) + 1000
        cand = m.Candidate(name=name, label=label or name, kind=kind, spec=spec or {}, position=position)
        s.add(cand)
        s.flush()
    else:
        changed = False
        updates = (("label", label), ("kind", kind if update_kind else None), ("spec", spec), ("position", position))
        for attr, value in updates:
            if value is not None and getattr(cand, attr) != value:
                setattr(cand, attr, value)
                changed = True
        if changed:
            cand.updated_at = m.utcnow()
            bump_matrix_version(s)
    return cand


def environment_for(s: Session, resolved: Resolved | None, report: Report) -> m.Environment:
    if resolved is None:
        # An ingested report: its environment is what the report itself lists.
        env = report.environment
        resolved_data: dict[str, Any] = {
            "from_report": True,
            "host": (env.platform.model_extra or {}).get("hostname"),
            "python": (env.python.model_extra or {}).get("executable"),
            "machine": (env.platform.model_extra or {}).get("machine"),
            "distributions": [d.model_dump() for d in env.distributions],
        }
        resolved = Resolved(kind="ingested", resolved=resolved_data)
    envrow = s.scalar(select(m.Environment).where(m.Environment.identity == resolved.identity))
    if envrow is None:
        envrow = m.Environment(
            identity=resolved.identity,
            kind=resolved.kind,
            resolved=resolved.resolved,
            image_digest=resolved.image_digest,
            triton_distribution=report.environment.triton.distribution,
            triton_version=report.environment.triton.version,
        )
        s.add(envrow)
        s.flush()
    return envrow


def bump_matrix_version(s: Session) -> None:
    row = s.scalar(select(m.Meta).where(m.Meta.key == MATRIX_VERSION))
    stamp = f"{dt.datetime.now(dt.UTC).timestamp():.6f}"
    if row is None:
        s.add(m.Meta(key=MATRIX_VERSION, value=stamp))
    else:
        row.value = stamp


def ingest(
    s: Session,
    raw: bytes | str,
    *,
    candidate: str | None = None,
    label: str | None = None,
    kind: str = "ingested",
    spec: dict[str, Any] | None = None,
    position: int | None = None,
    resolved: Resolved | None = None,
    source: str = "ingest",
) -> IngestResult:
    """Store one report. Commits on success; rolls back (writing nothing) on error."""
    report, data, digest = validate(raw)
    existing = s.scalar(select(m.Run).where(m.Run.report_hash == digest))
    if existing is not None:
        return IngestResult(existing.id, False, existing.candidate.name)
    name = candidate or default_candidate_name(report)
    try:
        cand = upsert_candidate(s, name, label=label, kind=kind, spec=spec, position=position,
                                update_kind=spec is not None)
        envrow = environment_for(s, resolved, report)
        env = report.environment
        run = m.Run(
            candidate=cand,
            environment=envrow,
            status="complete",
            source=source,
            started_at=_parse_time(report.probe.started_at),
            finished_at=_parse_time(report.probe.finished_at) or m.utcnow(),
            host=(env.platform.model_extra or {}).get("hostname"),
            probe_version=report.probe.version,
            schema_version=report.schema_version,
            report_hash=digest,
            triton_version=env.triton.version,
            image_digest=resolved.image_digest if resolved else None,
            profilers=report.registry.profilers,
            cli_backends=report.registry.cli_backends,
        )
        s.add(run)
        s.flush()
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        s.add(m.Report(run_id=run.id, raw=text, sha256=digest))
        for e in report.modes:
            s.add(
                m.ModeRow(
                    run_id=run.id, backend=e.backend, mode=e.mode, env=e.env, stub=e.stub, outcome=e.outcome,
                    rule=e.rule, library=e.library, signal=e.signal, exc_type=e.exc_type, message=e.message,
                    exit_code=e.exit_code, duration_s=e.duration_s, hung_at_exit=e.hung_at_exit,
                    stderr_tail=e.stderr_tail,
                )
            )
        for lib in report.libraries:
            s.add(
                m.LibraryRow(
                    run_id=run.id, name=lib.name, backends=lib.backends, loads=lib.loads, error=lib.error,
                    versioned_only=lib.versioned_only, fix=lib.fix,
                    candidates=[c.model_dump() for c in lib.candidates],
                )
            )
        for c in report.captures:
            s.add(
                m.CaptureRow(
                    run_id=run.id, backend=c.backend, mode=c.mode, outcome=c.outcome, exit_code=c.exit_code,
                    message=c.message, max_abs_err=c.max_abs_err, loop_s=c.loop_s, duration_s=c.duration_s,
                    kernel_count=c.kernel_count, gpu_time_ns=c.gpu_time_ns, top_kernel=c.top_kernel,
                    top_kernel_time_ns=c.top_kernel_time_ns,
                    artifact_sha256=c.artifact.sha256 if c.artifact else None,
                    artifact_bytes=c.artifact.bytes if c.artifact else None,
                )
            )
        bump_matrix_version(s)
        s.commit()
    except IntegrityError:
        s.rollback()
        # A concurrent writer stored the same report first.
        existing = s.scalar(select(m.Run).where(m.Run.report_hash == digest))
        if existing is None:
            raise
        return IngestResult(existing.id, False, existing.candidate.name)
    except BaseException:
        s.rollback()
        raise
    return IngestResult(run.id, True, name)


def record_unobtainable(
    s: Session,
    name: str,
    *,
    label: str | None,
    kind: str,
    spec: dict[str, Any] | None,
    position: int | None,
    error: str,
    status: str = "unobtainable",
) -> tuple[int, bool]:
    """Store that a candidate could not be obtained (or its probe failed), with the
    real error. Returns (run id, new?).

    Trying again with the same result only refreshes the time of the last try.
    """
    try:
        cand = upsert_candidate(s, name, label=label, kind=kind, spec=spec, position=position)
        last = s.scalar(select(m.Run).where(m.Run.candidate_id == cand.id).order_by(m.Run.id.desc()).limit(1))
        if last is not None and last.status == status and last.error == error:
            last.finished_at = m.utcnow()
            bump_matrix_version(s)  # "last tried" is part of what the matrix shows
            s.commit()
            return last.id, False
        run = m.Run(candidate=cand, status=status, source="survey", finished_at=m.utcnow(), error=error)
        s.add(run)
        s.flush()
        bump_matrix_version(s)
        s.commit()
        return run.id, True
    except BaseException:
        s.rollback()
        raise


def find_unchanged(s: Session, name: str, identity: str, probe_version: str) -> m.Run | None:
    """A complete run of this candidate for the same environment and probe version."""
    return s.scalar(
        select(m.Run)
        .join(m.Candidate)
        .join(m.Environment, m.Run.environment_id == m.Environment.id)
        .where(m.Candidate.name == name, m.Environment.identity == identity, m.Run.status == "complete",
               m.Run.probe_version == probe_version)
        .order_by(m.Run.id.desc())
        .limit(1)
    )


def dumps_report(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1)
