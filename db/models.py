"""Tables of the evidence store.

Three identities, kept apart:

- an *environment* is the software that was probed: a venv or interpreter (its
  prefix and its distributions' RECORD hashes), a pip candidate (the resolved
  wheels and their sha256), an image (its digest);
- a *platform* is the machine it ran on: GPU vendor, architecture and model
  (``nvidia:sm_90:NVIDIA H200``), or no GPU (``none:x86_64``);
- a *candidate* is how people name it: a catalog entry (``scope`` catalog: what the
  docs table and ``/matrix`` publish) or a target checked or ingested ad hoc
  (``scope`` adhoc: kept, not published unless asked).

A *run* is one probe report of one environment on one platform, filed under one
candidate. The report is kept in its canonical JSON, compressed (zstd with a preset
dictionary: db/compression.py), in a table
of its own that only the routes returning it read; its mode, library and capture
results are also normalised into rows for querying. A *slot* row per (candidate,
platform) names its latest run and its latest complete run, kept by the writer in
the transaction that adds the run, so a page of the matrix reads its own slots. A candidate that could not be
obtained (or whose probe failed) gets a run with that status, the raw error and
its normalised form (``error_key``); the same failure again only counts a retry
(``tries``, ``last_tried_at``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BindParameter,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    UniqueConstraint,
    bindparam,
    select,
)
from sqlalchemy import String as _String
from sqlalchemy import Text as _Text
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, column_property, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from db import compression
from db import widths as W

NUL_SHOWN = "\u2400"  # SYMBOL FOR NULL: one character for one, so a value still fits its column
# The list of an ``IN`` in a statement built once, at import (``column.in_(KEYS)``), and given
# as ``{"keys": [...]}`` when it runs: a statement built per call is built and keyed by
# SQLAlchemy each time (a write sends about thirty).
KEYS: BindParameter[Any] = bindparam("keys", expanding=True)


class String(TypeDecorator[str]):
    """VARCHAR that holds any text a report can carry: PostgreSQL refuses NUL in text
    (and in a comparison), so NUL is written (and looked up) as U+2400 on every
    store. The stored report keeps the original, escaped by JSON."""

    impl = _String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return value.replace("\x00", NUL_SHOWN) if isinstance(value, str) else value


class Text(String):
    """TEXT, with NUL as in :class:`String`."""

    impl = _Text
    cache_ok = True


class Base(DeclarativeBase):
    """Every time a row holds is given by its writer, from the product's one clock
    (survey/core/clock.py): no column defaults to the wall clock."""


class Candidate(Base):
    __tablename__ = "candidates"
    __table_args__ = (Index("ix_candidates_position", "position", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(W.NAME), unique=True)
    label: Mapped[str] = mapped_column(String(W.LABEL))
    kind: Mapped[str] = mapped_column(String(20))  # python | pip | image | ingested
    scope: Mapped[str] = mapped_column(String(20), default="catalog")  # catalog | adhoc
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    position: Mapped[int] = mapped_column(Integer, default=0)  # order in its catalog
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))

    runs: Mapped[list[Run]] = relationship(back_populates="candidate", order_by="Run.id")


class Environment(Base):
    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    identity: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 of `resolved` (the identity document)
    kind: Mapped[str] = mapped_column(String(20))  # interpreter | pip | image | reported (| python, ingested: 0001)
    label: Mapped[str | None] = mapped_column(String(W.LABEL), nullable=True)
    resolved: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    image_digest: Mapped[str | None] = mapped_column(String(200), nullable=True)
    triton_distribution: Mapped[str | None] = mapped_column(String(100), nullable=True)
    triton_version: Mapped[str | None] = mapped_column(String(W.TRITON_VERSION), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Platform(Base):
    __tablename__ = "platforms"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(W.PLATFORM_KEY), unique=True)
    vendor: Mapped[str] = mapped_column(String(W.VENDOR))  # nvidia | amd | none | unknown
    model: Mapped[str | None] = mapped_column(String(W.MODEL), nullable=True)
    arch: Mapped[str | None] = mapped_column(String(W.ARCH), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_candidate_finished", "candidate_id", "finished_at"),
        Index("ix_runs_candidate_platform", "candidate_id", "platform_id", "id"),
        # stability: the complete runs of an environment (on a platform, by a probe version)
        Index("ix_runs_environment", "environment_id", "platform_id", "probe_version", "status"),
        Index("ix_runs_platform", "platform_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"))
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environments.id"), nullable=True)
    platform_id: Mapped[int | None] = mapped_column(ForeignKey("platforms.id"), nullable=True)
    platform_detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # driver, runtime, devices
    status: Mapped[str] = mapped_column(String(20))  # complete | unobtainable | failed
    source: Mapped[str] = mapped_column(String(20))  # survey | ingest | upload | probe
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    host: Mapped[str | None] = mapped_column(String(W.HOST), nullable=True)
    probe_version: Mapped[str | None] = mapped_column(String(W.PROBE_VERSION), nullable=True)
    schema_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    report_hash: Mapped[str | None] = mapped_column(String(64), unique=True, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_key: Mapped[str | None] = mapped_column(Text, nullable=True)  # normalised: survey/core/errortext.py
    tries: Mapped[int] = mapped_column(Integer, default=1)
    last_tried_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    triton_version: Mapped[str | None] = mapped_column(String(W.TRITON_VERSION), nullable=True)
    image_digest: Mapped[str | None] = mapped_column(String(200), nullable=True)
    profilers: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)  # get_available_profilers()
    cli_backends: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)  # proton -b choices

    candidate: Mapped[Candidate] = relationship(back_populates="runs")
    environment: Mapped[Environment | None] = relationship()
    platform: Mapped[Platform | None] = relationship()
    report: Mapped[Report | None] = relationship(back_populates="run", uselist=False)
    modes: Mapped[list[ModeRow]] = relationship(order_by="ModeRow.ord")
    libraries: Mapped[list[LibraryRow]] = relationship(order_by="LibraryRow.ord")
    captures: Mapped[list[CaptureRow]] = relationship(order_by="CaptureRow.ord")


class Report(Base):
    """The probe report exactly as it was received: its canonical JSON, compressed
    (``body``, :mod:`db.compression`; :attr:`raw` is the text). Its sha256 is the
    run's ``report_hash``."""

    __tablename__ = "reports"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    body: Mapped[bytes] = mapped_column(LargeBinary)

    run: Mapped[Run] = relationship(back_populates="report")

    @property
    def raw(self) -> str:
        return compression.decompress(self.body).decode("utf-8")


def compress_bytes(raw: bytes) -> bytes:
    """A report's stored form, from its canonical text (:func:`db.compression.compress`)."""
    return compression.compress(raw)


class Slot(Base):
    """One (candidate, platform) with evidence: its latest run and its latest complete
    run. Written with every run (``survey.evidence.ingest``), never recomputed on a read."""

    __tablename__ = "slots"
    __table_args__ = (
        UniqueConstraint("candidate_id", "platform_id"),
        Index("ix_slots_platform", "platform_id"),
        Index("ix_slots_last_run", "last_run_id"),
        Index("ix_slots_complete_run", "complete_run_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"))
    platform_id: Mapped[int | None] = mapped_column(ForeignKey("platforms.id"), nullable=True)
    last_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    complete_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"), nullable=True)


# A run's checks, libraries and captures, and a slot's cells, are rows keyed by their
# parent and their place in it: no row id of their own (a parent's rows are read and
# written together), and on SQLite the table is kept in that key's order (WITHOUT
# ROWID), so it needs no second index.
_CHILD = {"sqlite_with_rowid": False}


def _place() -> Mapped[int]:
    return mapped_column(Integer, primary_key=True, autoincrement=False)


class Cell(Base):
    """One published check of a slot's latest complete run: the matrix row's parts that
    come from its runs (outcome, verdict, here, cause, capture), derived from the
    evidence by ``survey.verdicts.summary`` in the transaction that writes the runs,
    never edited by hand. Readers use these rows only while the ``cells_stamp`` meta
    row names the current matrix version and the derivation's rules; otherwise they
    work the rows out from the runs."""

    __tablename__ = "cells"
    # a filter's slots, by the value (a filtered page's count: migration 0011; survey check's
    # where else: 0013)
    __table_args__ = (Index("ix_cells_backend", "backend", "mode", "verdict", "slot_id"),
                      Index("ix_cells_outcome", "outcome", "slot_id"), Index("ix_cells_verdict", "verdict", "slot_id"),
                      _CHILD)

    slot_id: Mapped[int] = mapped_column(ForeignKey("slots.id"), primary_key=True)
    ord: Mapped[int] = _place()  # the row's place in its slot
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    backend: Mapped[str] = mapped_column(String(W.BACKEND))
    mode: Mapped[str] = mapped_column(String(W.MODE))  # the label: none for no mode
    mode_arg: Mapped[str | None] = mapped_column(String(W.MODE), nullable=True)
    outcome: Mapped[str] = mapped_column(String(40))
    verdict: Mapped[str] = mapped_column(String(20))
    verdict_source: Mapped[str | None] = mapped_column(String(20), nullable=True)
    here: Mapped[str] = mapped_column(String(40))
    cause: Mapped[str | None] = mapped_column(String(40), nullable=True)
    stub_outcome: Mapped[str | None] = mapped_column(String(40), nullable=True)
    library: Mapped[str | None] = mapped_column(String(W.LIBRARY), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)  # NULL: the same as verdict_reason
    capture_outcome: Mapped[str | None] = mapped_column(String(40), nullable=True)
    capture_kernel_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    capture_gpu_time_ns: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the rest of the published verdict (survey.verdicts.modes.ModeVerdict)
    verdict_reason: Mapped[str] = mapped_column(Text)
    rule: Mapped[str | None] = mapped_column(String(W.RULE), nullable=True)
    stub_rule: Mapped[str | None] = mapped_column(String(W.RULE), nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    live_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    stub_id: Mapped[int | None] = mapped_column(Integer, nullable=True)


class SlotFacts(Base):
    """What the docs table and its Since section read of a slot's latest complete run
    (``survey.verdicts.facts``: two texts of JSON), kept with the slot's cells by the same writer,
    under the same stamp: its checks, which slots share, kept once in ``texts``, and the rest."""

    __tablename__ = "slot_facts"

    slot_id: Mapped[int] = mapped_column(ForeignKey("slots.id"), primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    checks_id: Mapped[int] = mapped_column(ForeignKey("texts.id"))
    facts: Mapped[str] = mapped_column(Text)


class StoredText(Base):
    """A text that checks repeat from run to run (a Proton message, a library's error
    and fix), kept once and named by its sha256: the rows that say it hold its id
    (written by ``survey.evidence.ingest``; read as the rows' ``message``, ``error``
    and ``fix``)."""

    __tablename__ = "texts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)  # of the text as given, UTF-8
    body: Mapped[str] = mapped_column(Text)


def _text_of(column: Any) -> Any:
    """A row's text by its id, read in the row's own SELECT (a primary-key look-up)."""
    return column_property(select(StoredText.body).where(StoredText.id == column).correlate_except(StoredText)
                           .scalar_subquery())


class ModeRow(Base):
    __tablename__ = "mode_results"
    __table_args__ = _CHILD

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    ord: Mapped[int] = _place()  # the check's place in its report's modes (from 0)
    backend: Mapped[str] = mapped_column(String(W.BACKEND))
    mode: Mapped[str | None] = mapped_column(String(W.MODE), nullable=True)
    env: Mapped[str] = mapped_column(String(20))
    stub: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str] = mapped_column(String(40))
    rule: Mapped[str | None] = mapped_column(String(W.RULE), nullable=True)
    library: Mapped[str | None] = mapped_column(String(W.LIBRARY), nullable=True)
    signal: Mapped[str | None] = mapped_column(String(W.SIGNAL), nullable=True)
    exc_type: Mapped[str | None] = mapped_column(String(W.EXC_TYPE), nullable=True)
    message_id: Mapped[int | None] = mapped_column(ForeignKey("texts.id"), nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    duration_s: Mapped[float] = mapped_column(Float)
    hung_at_exit: Mapped[bool] = mapped_column(Boolean, default=False)
    stderr_tail: Mapped[str] = mapped_column(Text, default="")
    # none: SQL NULL (rows before revision 0008 may hold JSON null: read the same)
    attempts: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    outcome_counts: Mapped[dict[str, int] | None] = mapped_column(JSON(none_as_null=True), nullable=True)

    message: Mapped[str | None] = _text_of(message_id)


class LibraryRow(Base):
    __tablename__ = "library_results"
    __table_args__ = _CHILD

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    ord: Mapped[int] = _place()
    name: Mapped[str] = mapped_column(String(W.LIBRARY))
    backends: Mapped[list[str]] = mapped_column(JSON, default=list)
    loads: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    error_id: Mapped[int | None] = mapped_column(ForeignKey("texts.id"), nullable=True)
    versioned_only: Mapped[bool] = mapped_column(Boolean, default=False)
    fix_id: Mapped[int | None] = mapped_column(ForeignKey("texts.id"), nullable=True)
    # where the probe looked for the library is not kept here: the report has it (migration 0008)

    error: Mapped[str | None] = _text_of(error_id)
    fix: Mapped[str | None] = _text_of(fix_id)


class CaptureRow(Base):
    __tablename__ = "capture_results"
    __table_args__ = _CHILD

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    ord: Mapped[int] = _place()
    backend: Mapped[str | None] = mapped_column(String(W.BACKEND), nullable=True)
    mode: Mapped[str | None] = mapped_column(String(W.MODE), nullable=True)
    outcome: Mapped[str] = mapped_column(String(40))
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    max_abs_err: Mapped[float | None] = mapped_column(Float, nullable=True)
    loop_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    duration_s: Mapped[float] = mapped_column(Float)
    kernel_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    gpu_time_ns: Mapped[float | None] = mapped_column(Float, nullable=True)
    top_kernel: Mapped[str | None] = mapped_column(Text, nullable=True)
    top_kernel_time_ns: Mapped[float | None] = mapped_column(Float, nullable=True)
    artifact_sha256: Mapped[str | None] = mapped_column(Text, nullable=True)  # as the report says (any text)
    artifact_bytes: Mapped[int | None] = mapped_column(Integer, nullable=True)


class Meta(Base):
    """Key/value facts about the store; ``matrix_version`` changes whenever evidence
    arrives, so readers can cache the matrix until it does."""

    __tablename__ = "meta"
    __table_args__ = (UniqueConstraint("key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(100))
    value: Mapped[str] = mapped_column(Text)


class Delivery(Base):
    """One webhook delivery of what a survey changed (``survey run --notify URL``):
    delivered, or failed after its retries, with the last answer or error."""

    __tablename__ = "deliveries"
    __table_args__ = (Index("ix_deliveries_status_id", "status", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    url: Mapped[str] = mapped_column(Text)  # as given, any password in it replaced by ***
    status: Mapped[str] = mapped_column(String(20))  # delivered | failed
    attempts: Mapped[int] = mapped_column(Integer)
    http_status: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the last answer's, if any
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    changes: Mapped[int] = mapped_column(Integer)  # entries in the payload
    run_ids: Mapped[list[int]] = mapped_column(JSON, default=list)  # the runs whose changes it carried
    payload_sha256: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
