"""How a report is stored: zstd with a shipped preset dictionary that the body names
(db/compression.py), every body written before (zlib, with the dictionary or without)
still read as it was, revision 0009 down to zlib bodies and up, and revision 0008's
leaner rows (no library candidates, no second report hash) on both stores, up and down."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import zlib
from concurrent.futures import ThreadPoolExecutor
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
from survey.verdicts import summary  # as the product writes: each run's cells and facts kept
from tests.conftest import report_bytes
from tests.helpers.scripts import load_script

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


def zlib_with_dictionary(raw: bytes, name: str = compression.CURRENT) -> bytes:
    """A body as revision 0008 wrote it."""
    c = zlib.compressobj(6, zdict=compression.dictionary(name))
    return c.compress(raw) + c.flush()


def test_a_body_names_its_dictionary_and_every_form_written_before_still_reads() -> None:
    raw = canonical("h200-sm90-triton-3.6.0-schema3.json")  # 157 KB: longer than zlib's 32 KiB window
    new = compression.compress(raw)
    assert new[:4] == (0x184D2A50).to_bytes(4, "little")  # a zstd skippable frame: the name
    assert compression.dictionary_of(new) == compression.CURRENT
    assert compression.decompress(new) == raw
    r8 = zlib_with_dictionary(raw)  # revision 0008
    assert compression.dictionary_of(r8) == compression.CURRENT and compression.decompress(r8) == raw
    old = zlib.compress(raw, 6)  # revisions 0005-0007
    assert compression.dictionary_of(old) is None and compression.decompress(old) == raw
    # what each change was for: zstd's matches across the whole report, then the dictionary
    assert len(new) < 0.8 * len(r8), (len(new), len(r8))
    small = canonical("h200-triton-3.6.0.json")
    assert len(zlib_with_dictionary(small)) < 0.8 * len(zlib.compress(small, 6))


def test_a_body_compresses_the_same_in_every_thread() -> None:
    raw = canonical("h200-sm90-triton-3.6.0.json")
    with ThreadPoolExecutor(4) as pool:
        bodies = list(pool.map(lambda _: compression.compress(raw), range(16)))
        texts = list(pool.map(compression.decompress, bodies))
    assert set(bodies) == {compression.compress(raw)} and set(texts) == {raw}


def test_a_body_naming_a_dictionary_not_shipped_is_refused_by_name() -> None:
    c = zlib.compressobj(6, zdict=b"a dictionary no proton-survey ships" * 10)
    body = c.compress(b'{"schema_version":4}') + c.flush()
    name = compression.dictionary_of(body)
    assert name is not None and name not in SHIPPED
    with pytest.raises(compression.UnknownDictionary, match=f"dictionary {name}.*newer proton-survey"):
        compression.decompress(body)
    named = compression.compress(b'{"schema_version":4}')
    other = named[:8] + bytes.fromhex("0badf00d") + named[12:]
    assert compression.dictionary_of(other) == "0badf00d"
    with pytest.raises(compression.UnknownDictionary, match="dictionary 0badf00d.*newer proton-survey"):
        compression.decompress(other)


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
    for before in (zlib_with_dictionary(served), zlib.compress(served, 6)):  # revision 0008's; 0005-0007's
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE reports SET body = :b WHERE run_id = :r"), {"b": before, "r": run_id})
        assert make_client(store).get(f"/runs/{run_id}/report.json").content == served


@pytest.mark.both_stores
def test_a_check_without_attempts_stores_null_not_json_null(store: Store) -> None:
    with store.session() as s:
        run_id = ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="c").run_id
    with store.engine.connect() as conn:
        kept = conn.execute(text("SELECT attempts, outcome_counts FROM mode_results WHERE run_id = :r"),
                            {"r": run_id}).all()
    assert kept and all(row == (None, None) for row in kept)


_CHECK = "backend, mode, env, stub, outcome, message_id"


@pytest.mark.both_stores
def test_revision_0010_keys_a_runs_rows_by_their_place_and_goes_down_to_row_ids_in_that_order(store: Store) -> None:
    names = ("h200-sm90-triton-3.6.0.json", "cpu-triton-3.8.0.json")
    with store.session() as s:
        runs = [ingest(s, report_bytes(n), candidate=f"c{i}", scope="catalog").run_id for i, n in enumerate(names)]
    for run_id, name in zip(runs, names, strict=True):  # a check's place is its place in the report
        with store.session() as s:
            assert [(r.ord, r.backend, r.mode, r.env) for r in s.get(m.Run, run_id).modes] == [  # type: ignore[union-attr]
                (i, e["backend"], e["mode"], e["env"]) for i, e in enumerate(json.loads(report_bytes(name))["modes"])]
    with store.session() as s:
        cells = summary.stored_cells(s, s.scalars(select(m.Slot.id)))
    tables = ("mode_results", "library_results", "capture_results")
    with store.engine.connect() as conn:
        def keyed() -> dict[str, list[Any]]:
            found = {t: [tuple(r) for r in conn.execute(text(f"SELECT * FROM {t} ORDER BY run_id, ord"))]
                     for t in tables}
            conn.commit()
            return found

        before = keyed()
        assert all(before.values())
        with conn.begin():
            command.downgrade(alembic_config(conn), "0009")
        for t in tables:  # row ids in (run, place) order, and the run's index back
            rows = [tuple(r._mapping.values()) for r in conn.execute(text(f"SELECT * FROM {t} ORDER BY id"))]
            assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
            assert [r[1:] for r in rows] == [(r[0], *r[2:]) for r in before[t]]
            assert f"ix_{t}_run" in {i["name"] for i in inspect(conn).get_indexes(t)}
        conn.commit()
        with conn.begin():  # a row added by revision 0009's writer gets the next id
            conn.execute(text(f"INSERT INTO mode_results (run_id, {_CHECK}, exit_code, duration_s, hung_at_exit, "
                              f"stderr_tail) SELECT run_id, {_CHECK}, exit_code, duration_s, hung_at_exit, stderr_tail "
                              f"FROM mode_results WHERE id = 1"))
        assert conn.execute(text("SELECT max(id) FROM mode_results")).scalar() == len(before["mode_results"]) + 1
        conn.commit()
        with conn.begin():
            conn.execute(text(f"DELETE FROM mode_results WHERE id = {len(before['mode_results']) + 1}"))
            command.upgrade(alembic_config(conn), "head")
        assert keyed() == before
        assert conn.execute(text("SELECT count(*) FROM meta WHERE key = 'cells_stamp'")).scalar() == 0
    assert summary.bring_current(store) == len(runs)  # the cells worked out again: the same as before
    with store.session() as s:
        assert summary.stored_cells(s, cells) == cells


@pytest.mark.both_stores
def test_revision_0009_goes_down_to_zlib_bodies_that_0008_reads_and_up_again(store: Store) -> None:
    with store.session() as s:
        new = ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="h200").run_id
        kept = ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="cpu").run_id
    raw = {new: canonical("h200-sm90-triton-3.6.0.json"), kept: canonical("cpu-triton-3.8.0.json")}
    r8 = zlib_with_dictionary(raw[kept])
    with store.engine.begin() as conn:  # a body 0008 wrote stays as it is
        conn.execute(text("UPDATE reports SET body = :b WHERE run_id = :r"), {"b": r8, "r": kept})
    with store.engine.connect() as conn:
        with conn.begin():
            command.downgrade(alembic_config(conn), "0008")
        bodies = dict(conn.execute(text("SELECT run_id, body FROM reports")).all())
        assert bytes(bodies[kept]) == r8
        d = zlib.decompressobj(zdict=compression.dictionary(compression.CURRENT))
        assert bytes(bodies[new])[:1] == b"\x78" and d.decompress(bytes(bodies[new])) + d.flush() == raw[new]
        conn.commit()
        with conn.begin():
            command.upgrade(alembic_config(conn), "head")
    with store.session() as s:
        assert {rid: s.get(m.Report, rid).raw.encode() for rid in raw} == raw  # type: ignore[union-attr]


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
    bench = load_script(ROOT / "bench" / "bench_scale.py", "bench_scale")
    tpls = bench.templates()
    return [(identify(raw), Filing(name, name, position=i % (n // 10), scope="catalog"))
            for i, (name, raw) in ((i, bench.variant(tpls, i, n)) for i in range(n))]


def test_a_run_of_the_scale_generator_takes_at_most_eight_and_a_half_kb_of_a_sqlite_store(tmp_path: Path) -> None:
    """bench/bench_scale.py's store, 700 runs (the fixture reports' mix, ten runs a
    candidate): the store's pages in use, per run. 7.7 KB; 9.5 KB with revision 0008's
    zlib bodies, 15.0 KB before it (library candidates, reports without a dictionary,
    texts stored twice)."""
    n = 700
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    with store.session() as s:
        ingest_many(s, _generated(n))
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as c:
        pages = c.execute("PRAGMA page_count").fetchone()[0] - c.execute("PRAGMA freelist_count").fetchone()[0]
        size = pages * c.execute("PRAGMA page_size").fetchone()[0]
    assert size / n <= 8_500, size / n
