"""How a report is stored: zlib with a shipped preset dictionary that the stream names
(db/compression.py), every body written before dictionaries still read as it was, and
revision 0008's leaner rows (no library candidates, no second report hash) on both
stores, up and down."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import inspect, select, text

from db import compression
from db import models as m
from db.store import Store, alembic_config
from survey.evidence.ingest import Filing, identify, ingest, ingest_many
from survey.evidence.report import canonical_json
from survey.verdicts import summary  # noqa: F401  (as the product writes: each run's cells and facts kept)
from tests.conftest import report_bytes

ROOT = Path(__file__).resolve().parents[1]
# Every dictionary ever shipped, by name, with the sha256 of its bytes: a store holds
# bodies that need them, so none may change or go.
SHIPPED = {"10295c2b": "ccac3d36a4f101fffd398630d3df45a6d69ad3dc7082cc5c21c9a1d4788ae3ee"}


def canonical(name: str) -> bytes:
    return canonical_json(json.loads(report_bytes(name)))


def test_every_shipped_dictionary_is_named_by_its_checksum_and_kept() -> None:
    files = {p.stem: p.read_bytes() for p in compression.DICTIONARIES.glob("*.zdict")}
    assert set(SHIPPED) <= set(files)
    for name, data in files.items():
        assert f"{zlib.adler32(data):08x}" == name and len(data) <= 32768  # zlib's window
    assert {n: hashlib.sha256(files[n]).hexdigest() for n in SHIPPED} == SHIPPED
    assert compression.CURRENT in files


def test_a_body_names_its_dictionary_and_one_from_before_dictionaries_still_reads() -> None:
    raw = canonical("h200-sm90-triton-3.6.0.json")
    new = compression.compress(raw)
    assert compression.dictionary_of(new) == compression.CURRENT
    assert compression.decompress(new) == raw
    old = zlib.compress(raw, 6)  # as revisions 0005-0007 wrote it
    assert compression.dictionary_of(old) is None and compression.decompress(old) == raw
    assert len(new) < 0.8 * len(old)  # what the dictionary is for


def test_a_body_naming_a_dictionary_not_shipped_is_refused_by_name() -> None:
    c = zlib.compressobj(6, zdict=b"a dictionary no proton-survey ships" * 10)
    body = c.compress(b'{"schema_version":4}') + c.flush()
    name = compression.dictionary_of(body)
    assert name is not None and name not in SHIPPED
    with pytest.raises(compression.UnknownDictionary, match=f"dictionary {name}.*newer proton-survey"):
        compression.decompress(body)


@pytest.mark.both_stores
def test_a_stored_report_is_served_as_received_whichever_way_its_body_was_written(store: Store,
                                                                                 make_client: Any) -> None:
    raw = report_bytes("h200-sm90-triton-3.6.0.json")
    with store.session() as s:
        run_id = ingest(s, raw, candidate="h200").run_id
    with store.session() as s:
        body = s.scalar(select(m.Report.body).where(m.Report.run_id == run_id))
        digest = s.scalar(select(m.Run.report_hash).where(m.Run.id == run_id))
    assert body is not None and compression.dictionary_of(body) == compression.CURRENT
    c = make_client(store)
    served = c.get(f"/runs/{run_id}/report.json").content
    assert served == canonical("h200-sm90-triton-3.6.0.json") and hashlib.sha256(served).hexdigest() == digest
    with store.engine.begin() as conn:  # the body a store kept from before dictionaries
        conn.execute(text("UPDATE reports SET body = :b WHERE run_id = :r"), {"b": zlib.compress(served, 6),
                                                                           "r": run_id})
    assert make_client(store).get(f"/runs/{run_id}/report.json").content == served


@pytest.mark.both_stores
def test_a_check_without_attempts_stores_null_not_json_null(store: Store) -> None:
    with store.session() as s:
        run_id = ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="c").run_id
    with store.engine.connect() as conn:
        kept = conn.execute(text("SELECT attempts, outcome_counts FROM mode_results WHERE run_id = :r"),
                            {"r": run_id}).all()
    assert kept and all(row == (None, None) for row in kept)


@pytest.mark.both_stores
def test_revision_0008_goes_down_to_what_0007_reads_and_up_again(store: Store) -> None:
    with store.session() as s:
        run_id = ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="h200").run_id
    raw = canonical("h200-sm90-triton-3.6.0.json")
    with store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
        with conn.begin():
            command.downgrade(alembic_config(conn), "0007")
        body, sha = conn.execute(text("SELECT body, sha256 FROM reports WHERE run_id = :r"), {"r": run_id}).one()
        assert zlib.decompress(body) == raw and sha == hashlib.sha256(raw).hexdigest()
        assert "candidates" in {c["name"] for c in inspect(conn).get_columns("library_results")}
        conn.commit()
        with conn.begin():
            command.upgrade(alembic_config(conn), "head")
        assert "sha256" not in {c["name"] for c in inspect(conn).get_columns("reports")}
    with store.session() as s:
        assert s.get(m.Report, run_id).raw.encode() == raw  # type: ignore[union-attr]


def test_every_report_of_a_store_from_an_old_release_reads_after_the_upgrade(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    shutil.copyfile(ROOT / "tests" / "fixtures" / "stores" / "release-1.0.0.db", db)
    store = Store(f"sqlite:///{db}")
    with store.session() as s:
        pairs = s.execute(select(m.Run.report_hash, m.Report).join(m.Report, m.Report.run_id == m.Run.id)).all()
        assert len(pairs) == 5
        for digest, report in pairs:
            # 1.0.0 kept the text as it came; its hash was of the canonical form already
            assert hashlib.sha256(canonical_json(json.loads(report.raw))).hexdigest() == digest
    store.close()


def _generated(n: int) -> list[tuple[Any, Filing]]:
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "bench" / "bench_scale.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tpls = bench.templates()
    return [(identify(raw), Filing(name, name, position=i % (n // 10), scope="catalog"))
            for i, (name, raw) in ((i, bench.variant(tpls, i, n)) for i in range(n))]


def test_a_run_of_the_scale_generator_takes_at_most_ten_kb_of_a_sqlite_store(tmp_path: Path) -> None:
    """bench/bench_scale.py's store, 700 runs (the fixture reports' mix, ten runs a
    candidate): the store's pages in use, per run. 15.0 KB before revision 0008
    (library candidates, reports without a dictionary, texts stored twice)."""
    n = 700
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    with store.session() as s:
        ingest_many(s, _generated(n))
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as c:
        pages = c.execute("PRAGMA page_count").fetchone()[0] - c.execute("PRAGMA freelist_count").fetchone()[0]
        size = pages * c.execute("PRAGMA page_size").fetchone()[0]
    assert size / n <= 10_000, size / n
