"""What the store's matrix version promises readers, and who decides a duplicate.

- Every write a view shows moves the version - a retry of an unobtainable
  candidate too (its ``tries`` and ``last_attempt_date`` are shown) - so the
  service's per-version caches never answer from before it.
- The version is a counter, not a clock reading: two writes within one reading of
  a frozen (or stepped) clock are still two versions.
- Two surveys of one environment at once store it once: the writer that holds the
  store's write lock decides whether the environment is unchanged.

Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from db import models as m
from db.store import Store
from survey.evidence import ingest as ingest_mod
from survey.evidence.identity import PlatformId
from survey.evidence.ingest import ingest, record_failure
from tests.conftest import report_bytes

NONE = PlatformId("none:x86_64", "none", None, "x86_64", {})
ROOT = Path(__file__).resolve().parents[1]


def fail(store: Store, error: str = "pip could not reach the index") -> tuple[int, bool]:
    with store.session() as s:
        return record_failure(s, "gone", label="Gone", kind="pip", spec={"pip": "gone==1"}, position=0,
                              error=error, platform=NONE, scope="catalog")


def version(store: Store) -> str | None:
    with store.session() as s:
        return s.scalar(select(m.Meta.value).where(m.Meta.key == "matrix_version"))


def test_a_retry_moves_the_matrix_version_and_every_view_shows_it(store: Store, make_client: Any) -> None:
    first, new = fail(store)
    assert new
    c = make_client(store)
    views = {
        "/candidates.json": lambda r: r.json()["candidates"][0]["tries"],
        "/matrix.json": lambda r: r.json()["rows"][0]["tries"],
        "/matrix.csv": lambda r: next(csv.DictReader(io.StringIO(r.text)))["tries"],
        "/history.json?candidate=gone&backend=cupti": lambda r: r.json()["runs"][0]["tries"],
    }
    before = {path: c.get(path) for path in views}
    for path, r in before.items():
        assert r.status_code == 200, (path, r.text)
    assert views["/candidates.json"](before["/candidates.json"]) == 1
    assert views["/matrix.csv"](before["/matrix.csv"]) == "1"
    dates = c.get("/candidates.json").json()["candidates"][0]["last_attempt_date"]
    v1 = version(store)
    again, new = fail(store)
    assert again == first and not new
    assert version(store) != v1
    for path, shown in views.items():
        r = c.get(path)
        assert r.status_code == 200 and r.content != before[path].content, path
        assert shown(r) != shown(before[path]), path
    assert c.get("/candidates.json").json()["candidates"][0]["tries"] == 2
    assert c.get("/candidates.json").json()["candidates"][0]["last_attempt_date"] >= dates


class _FrozenDatetime(dt.datetime):
    """A clock that reads the same instant every time (a frozen or coarse clock)."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:  # type: ignore[override]
        return dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


def test_two_writes_within_one_clock_reading_are_two_versions(filled_store: Store, make_client: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    frozen = types.SimpleNamespace(datetime=_FrozenDatetime, UTC=dt.UTC, timezone=dt.timezone,
                                   timedelta=dt.timedelta)
    monkeypatch.setattr(ingest_mod, "dt", frozen)
    c = make_client(filled_store)

    def names() -> set[str]:
        r = c.get("/matrix.json?scope=all&_size=1000")
        assert r.status_code == 200, r.text
        return {row["candidate"] for row in r.json()["rows"]}

    with filled_store.session() as s:
        assert ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate="h200-a").created
    assert "h200-a" in names()
    v = version(filled_store)
    with filled_store.session() as s:
        assert ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="h200-b").created
    assert version(filled_store) != v
    assert {"h200-a", "h200-b"} <= names()


def test_the_version_only_ever_grows(store: Store) -> None:
    seen = []
    for i in range(3):
        fail(store, f"error {i}")
        seen.append(int(version(store) or 0))
        fail(store, f"error {i}")  # a retry of it
        seen.append(int(version(store) or 0))
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


# --------------------------------------------------------------------------- duplicates
RENDEZVOUS = '''
import os, pathlib, time
_d = pathlib.Path({where!r})
_me = os.environ.get("SURVEY_TEST_RENDEZVOUS", "?")
(_d / (_me + "." + str(os.getpid()))).touch()
_deadline = time.monotonic() + 60
while len({{p.name.split(".")[0] for p in _d.iterdir()}}) < 2 and time.monotonic() < _deadline:
    time.sleep(0.02)
__version__ = "0.0.0+rendezvous"
'''


def rendezvous_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A venv whose ``triton`` (imported by the probe only, never while the environment
    is obtained) waits until probes from two different surveys have both started: each
    survey has then looked for an unchanged run, and neither has stored its own yet."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = venv.glob("lib/python*/site-packages")
    arrivals = tmp_path / "arrivals"
    arrivals.mkdir()
    (site / "triton").mkdir()
    (site / "triton" / "__init__.py").write_text(textwrap.dedent(RENDEZVOUS.format(where=str(arrivals))))
    return venv, arrivals


def test_two_surveys_at_once_store_one_run_of_an_environment(store_url: str, tmp_path: Path) -> None:
    Store(store_url).close()  # the schema, once, before both start
    venv, arrivals = rendezvous_venv(tmp_path)
    cat = tmp_path / "catalog.toml"
    cat.write_text(f'[[candidate]]\nname = "venv"\npython = "{venv / "bin" / "python"}"\n')
    procs = [subprocess.Popen([sys.executable, "-m", "survey", "run", "--catalog", str(cat), "--db", store_url,
                               "--no-table", "--timeout", "30"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "SURVEY_TEST_RENDEZVOUS": who})
             for who in ("a", "b")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert {p.name.split(".")[0] for p in arrivals.iterdir()} == {"a", "b"}  # both probed at once
    store = Store(store_url)
    try:
        with store.session() as s:
            runs = list(s.scalars(select(m.Run).where(m.Run.status == "complete")))
        assert len(runs) == 1, [r.id for r in runs]
    finally:
        store.close()
    said = sorted(next(ln for ln in err.splitlines() if ln.startswith("survey: ")) for _out, err in outs)
    assert said[0].startswith("survey: 1 probed") and said[1].startswith("survey: 1 unchanged"), outs


def test_an_unchanged_environment_is_decided_inside_the_write(store: Store) -> None:
    """The writer decides: a second report of the environment already stored for this
    candidate, platform and probe version adds nothing unless asked to (--force)."""
    import json

    raw = json.loads(report_bytes("cpu-triton-3.9.0.json"))
    other = dict(raw, probe={**raw["probe"], "finished_at": "2026-12-02T13:30:00+00:00"})
    with store.session() as s:
        first = ingest(s, json.dumps(raw), candidate="c", unless_unchanged=True)
    with store.session() as s:
        second = ingest(s, json.dumps(other), candidate="c", unless_unchanged=True)
    assert first.created and not second.created and second.run_id == first.run_id
    assert second.note is not None and f"#{first.run_id}" in second.note
    with store.session() as s:
        forced = ingest(s, json.dumps(other), candidate="c")
    assert forced.created and forced.run_id != first.run_id


def test_a_store_whose_version_was_a_clock_reading_is_upgraded_to_the_counter(store_url: str) -> None:
    from alembic import command
    from sqlalchemy import text

    from db.store import alembic_config, make_engine

    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))  # a fresh PostgreSQL database is at head
            for table in ("deliveries", "capture_results", "library_results", "mode_results", "reports", "runs",
                          "platforms", "environments", "candidates", "meta"):
                conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0002")
            conn.execute(text("INSERT INTO meta (key, value) VALUES ('matrix_version', '1796320784.235478')"))
    finally:
        engine.dispose()
    store = Store(store_url)
    try:
        assert version(store) == "1"
        fail(store)
        assert version(store) == "2"
    finally:
        store.close()
