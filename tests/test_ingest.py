"""Ingest: all-or-nothing, duplicates add nothing, invalid input names the field."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
from sqlalchemy import event, func, select

from db import models as m
from survey.core import exitcodes
from survey.core.errors import InvalidReport
from survey.evidence.ingest import ingest
from survey.evidence.report import canonical_json
from tests.conftest import report_bytes, survey_cli

pytestmark = pytest.mark.both_stores  # the store itself is under test

ROOT = Path(__file__).resolve().parents[1]


def counts(store) -> dict[str, int]:
    with store.session() as s:
        return {t.__tablename__: s.scalar(select(func.count()).select_from(t)) for t in
                (m.Candidate, m.Environment, m.Run, m.Report, m.ModeRow, m.LibraryRow, m.CaptureRow)}


def test_report_is_stored_whole_and_verbatim(store) -> None:
    raw = report_bytes("h200-triton-3.6.0.json")
    with store.session() as s:
        res = ingest(s, raw, candidate="h200", label="H200, Triton 3.6.0")
        assert res.created
        run = s.get(m.Run, res.run_id)
        # stored: exactly the canonical JSON that was validated and hashed
        assert run.report.raw.encode() == canonical_json(json.loads(raw))
        assert run.report_hash == hashlib.sha256(canonical_json(json.loads(raw))).hexdigest()
        assert run.triton_version == "3.6.0" and run.status == "complete" and run.host
        data = json.loads(raw)
        assert len(run.modes) == len(data["modes"])
        assert len(run.libraries) == len(data["libraries"])
        caps = {(c.backend, c.mode): c for c in run.captures}
        assert caps[("cupti", None)].outcome == "ok" and caps[("cupti", None)].kernel_count == 50
        assert caps[("instrumentation", None)].outcome == "empty_capture"


def test_duplicate_adds_nothing(store) -> None:
    raw = report_bytes("cpu-triton-3.8.0.json")
    with store.session() as s:
        first = ingest(s, raw)
    before = counts(store)
    pretty = json.dumps(json.loads(raw), indent=4).encode()  # same report, other formatting
    with store.session() as s:
        again = ingest(s, pretty)
    assert (again.created, again.run_id) == (False, first.run_id)
    assert counts(store) == before


def test_invalid_report_writes_nothing(store) -> None:
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.7.1.json"))
    before = counts(store)
    data = json.loads(report_bytes("cpu-triton-3.8.0.json"))
    del data["modes"][0]["backend"]
    with store.session() as s, pytest.raises(InvalidReport) as e:
        ingest(s, json.dumps(data))
    assert e.value.field == "modes.0.backend"
    assert counts(store) == before


def test_cli_ingest_invalid_then_duplicate(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    bad = tmp_path / "bad.json"
    data = json.loads(report_bytes("cpu-triton-3.9.0.json"))
    data["environment"]["triton"]["status"] = "maybe"
    bad.write_text(json.dumps(data))
    good = tmp_path / "good.json"
    good.write_bytes(report_bytes("cpu-triton-3.9.0.json"))

    def survey(*args):
        return survey_cli(*args, "--db", db)

    # one bad file in the batch: nothing at all is stored
    r = survey("ingest", str(good), str(bad))
    assert r.returncode == 65
    assert "environment.triton.status" in r.stderr and "nothing was stored" in r.stderr
    assert not (tmp_path / "s.db").exists()  # validated before the store was opened
    r = survey("table", "--format", "json")  # a reader does not create a store
    assert r.returncode == 65 and f"no proton-survey store at {tmp_path / 's.db'}" in r.stderr
    assert not (tmp_path / "s.db").exists()
    r = survey("ingest", str(good))
    assert r.returncode == 0 and "stored as run #1" in r.stdout
    r = survey("ingest", str(good))
    assert r.returncode == 0 and "already stored as run #1" in r.stdout and "nothing added" in r.stdout


def test_surveys_building_one_venv_at_once_build_it_one_at_a_time(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two surveys obtaining the same pip spec at once (tests in parallel did): one builds
    the venv while the other waits, instead of removing it from under the first one's pip.
    The index (on 127.0.0.1) holds each request until a second one arrives, or 10 s:
    two requests at once mean two builds at once."""
    import http.server
    from concurrent.futures import ThreadPoolExecutor

    from survey.core.errors import Unobtainable
    from survey.environments.launchers.pip import PipLauncher

    state = {"in_flight": 0, "most": 0}
    cond = threading.Condition()

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            with cond:
                state["in_flight"] += 1
                state["most"] = max(state["most"], state["in_flight"])
                cond.notify_all()
                cond.wait_for(lambda: state["in_flight"] >= 2, timeout=10)
                state["in_flight"] -= 1
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    monkeypatch.setenv("SURVEY_CACHE", str(tmp_path / "cache"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    index = f"http://127.0.0.1:{server.server_address[1]}/simple"

    def obtain(_: int) -> str:
        try:
            PipLauncher(["proton-survey-no-such-dist==1.0"], index_url=index, pip_timeout=30).obtain()
        except Unobtainable as e:
            return e.message.splitlines()[0]
        return "obtained"

    try:
        with ThreadPoolExecutor(2) as pool:
            got = list(pool.map(obtain, range(2)))
    finally:
        server.shutdown()
    assert state["most"] == 1
    assert got == ["pip install proton-survey-no-such-dist==1.0 failed:"] * 2, got


def test_unobtainable_is_recorded_once_per_error(store) -> None:
    """Real pip failures (nothing listens on port 9 here), stored with their text."""
    from survey.environments.launchers.pip import PipLauncher
    from survey.flows.run import ProbeSettings, survey_one

    def attempt(index: str, dist: str = "proton-survey-no-such-dist", retry_after_s: float = 0.0):
        launcher = PipLauncher([f"{dist}==1.0"], index_url=index, pip_timeout=5)
        return survey_one(store, "unreachable", "Unreachable index", "pip", {"pip": "triton==3.8.0"}, 0, launcher,
                          ProbeSettings(retry_after_s=retry_after_s))

    a = attempt("http://127.0.0.1:9/simple")
    held = attempt("http://127.0.0.1:9/simple", retry_after_s=3600)  # within the back-off: not tried
    b = attempt("http://127.0.0.1:19/simple")  # the port is run-to-run detail: the same failure again
    c = attempt("http://127.0.0.1:9/simple", dist="proton-survey-other-dist")  # another failure
    assert (a.status, held.status, b.status, c.status) == ("unobtainable",) * 4
    assert held.message.startswith("not retried") and held.run_id == a.run_id
    assert a.run_id == b.run_id != c.run_id
    with store.session() as s:
        run = s.get(m.Run, a.run_id)
        assert run.status == "unobtainable" and run.report is None and run.tries == 2
        # pip's own words are kept under ours (their wording is pip's and this machine's
        # configuration; pip names the requirement it could not install, whatever went wrong)
        ours, _, pips = run.error.partition("\n")
        assert ours == "pip install proton-survey-no-such-dist==1.0 failed:"
        assert "proton-survey-no-such-dist" in pips, run.error
        assert "proton-survey-other-dist" in s.get(m.Run, c.run_id).error.partition("\n")[2]


# --------------------------------------------------------------------------- concurrent writers
RACE_XFAIL = (
    "look-up-then-insert race in survey/evidence/ingest.py: upsert_candidate, environment_for and bump_matrix_version "
    "SELECT a row and INSERT it when absent; two writers that both looked first both INSERT, and the second "
    "hits the UNIQUE constraint (candidates.name, environments.identity, meta.key); ingest re-raises the "
    "IntegrityError because the report itself is new"
)


def test_concurrent_uploads_of_new_candidates_are_all_stored(store) -> None:
    """Eight writers store eight different reports at once: six new candidates, and two
    reports for one more new candidate, all from one environment. Every report is
    stored, each candidate and the environment exactly once.

    The writers are released together, and each one's first INSERT waits (at most 5 s)
    until every writer has got that far, i.e. has looked up what it is about to create:
    the interleaving two uploads arriving at once can have, made certain instead of
    likely. A writer that serialises (a lock taken before the look-ups) only makes the
    gate time out and go on."""
    base = json.loads(report_bytes("cpu-triton-3.9.0.json"))
    uploads = []
    for i, name in enumerate([f"upload-{k}" for k in range(6)] + ["shared", "shared"]):
        data = json.loads(json.dumps(base))
        data["probe"]["started_at"] = f"2026-12-03T10:00:{i:02d}+00:00"  # another report, same environment
        uploads.append((name, json.dumps(data).encode()))
    n = len(uploads)
    gate = threading.Barrier(n, timeout=5)
    gated = threading.local()

    @event.listens_for(store.engine, "before_cursor_execute")
    def first_insert_waits(conn, cursor, statement, params, context, executemany) -> None:
        if statement.lstrip().upper().startswith("INSERT") and not getattr(gated, "done", False):
            gated.done = True
            try:
                gate.wait()
            except threading.BrokenBarrierError:
                pass

    start = threading.Barrier(n)
    results: dict[int, object] = {}

    def upload(i: int) -> None:
        name, raw = uploads[i]
        start.wait()
        try:
            with store.session() as s:
                results[i] = ingest(s, raw, candidate=name, label=name, kind="ingested", source="upload")
        except Exception as e:  # what a concurrent POST /runs would turn into an error
            results[i] = e

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    event.remove(store.engine, "before_cursor_execute", first_insert_waits)

    failures = [f"{uploads[i][0]}: {str(r).splitlines()[0]}" for i, r in sorted(results.items())
                if isinstance(r, Exception)]
    assert failures == [], "\n".join(failures)
    assert sorted((r.candidate, r.created) for r in results.values()) == \
        sorted((name, True) for name, _ in uploads)
    assert len({r.run_id for r in results.values()}) == n
    assert counts(store)["candidates"] == 7 and counts(store)["environments"] == 1 and counts(store)["runs"] == n
    with store.session() as s:
        shared = s.scalar(select(m.Candidate).where(m.Candidate.name == "shared"))
        assert len(shared.runs) == 2


# --------------------------------------------------------------------------- what PostgreSQL refuses
# PostgreSQL refuses what SQLite would store: NUL characters in text, and strings
# longer than a String(n) column. A report holding them is refused by name on both
# stores (the probe escapes NUL in what it captures), or stored with a name cut to size.


def _edited(edit) -> bytes:
    data = json.loads(report_bytes("cpu-triton-3.9.0.json"))
    edit(data)
    return json.dumps(data).encode()


@pytest.mark.parametrize("raw,field", [
    pytest.param(_edited(lambda d: d["modes"][0].update(mode="m" * 100)), "modes.0.mode", id="mode-of-100-chars"),
])
def test_reports_with_text_no_store_can_hold_are_refused_by_name(store, raw: bytes, field: str) -> None:
    with store.session() as s, pytest.raises(InvalidReport) as e:
        ingest(s, raw, source="upload")
    assert e.value.field == field
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(m.Run)) == 0


def test_nul_is_kept_in_the_report_and_shown_as_a_symbol_in_columns(store) -> None:
    """A crashed check's stderr can hold NUL; PostgreSQL text cannot: the row shows
    U+2400, one character for one, so a value at its column's length still fits
    (schemathesis: a 20-character signal holding NUL overflowed VARCHAR(20))."""
    signal = "\u0000" * 20
    raw = _edited(lambda d: d["modes"][0].update(stderr_tail="dump:\u0000 end", message="bad\u0000name",
                                                 signal=signal))
    with store.session() as s:
        res = ingest(s, raw, source="upload")
        run = s.get(m.Run, res.run_id)
        assert run.modes[0].stderr_tail == "dump:\u2400 end" and run.modes[0].message == "bad\u2400name"
        assert run.modes[0].signal == "\u2400" * 20
        assert json.loads(run.report.raw)["modes"][0]["stderr_tail"] == "dump:\x00 end"


def test_nul_anywhere_in_a_report_is_stored_and_shown(store) -> None:
    """Every text column takes NUL as U+2400 (db.models.String), on PostgreSQL too,
    which refuses NUL in text and in comparisons (schemathesis: the Triton version,
    a platform's model, a capture's artifact digest)."""
    def edit(d: dict) -> None:
        d["environment"]["triton"]["version"] = "3.9\u0000"
        d["probe"]["version"] = "2.0\u0000"
        d["platform"] = {**h200["platform"], "key": "nvidia:sm_90:H\u0000200", "model": "H\u0000200"}
        d["captures"] = [{**h200["captures"][0], "backend": "cu\u0000pti", "top_kernel": "k\u0000",
                          "artifact": {**h200["captures"][0]["artifact"], "sha256": "ab\u0000cd"}}]

    h200 = json.loads(report_bytes("h200-sm90-triton-3.6.0.json"))
    raw = _edited(edit)
    with store.session() as s:
        res = ingest(s, raw, source="upload")
    with store.session() as s:
        run = s.get(m.Run, res.run_id)
        assert run.triton_version == "3.9\u2400" and run.probe_version == "2.0\u2400"
        assert run.platform.key == "nvidia:sm_90:H\u2400200"
        assert run.captures[0].backend == "cu\u2400pti" and run.captures[0].artifact_sha256 == "ab\u2400cd"
    with store.session() as s:  # the same report again is found, NUL and all: stored once
        again = ingest(s, raw, source="upload")
    assert again.run_id == res.run_id and not again.created


def test_a_300_character_hostname_gives_a_name_cut_to_size(store) -> None:
    raw = _edited(lambda d: d["environment"]["platform"].update(hostname="h" * 300))
    with store.session() as s:
        res = ingest(s, raw, source="upload")
        assert res.created and len(res.candidate) <= 200
        assert s.get(m.Run, res.run_id).report.raw.encode() == canonical_json(json.loads(raw))


def test_ingest_of_a_directory_reads_every_report_first_then_stores_them_in_one_batch(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    names = [f"cpu-triton-{v}.json" for v in ("3.6.0", "3.7.1", "3.8.0", "3.9.0")]
    for name in names:
        (reports / name).write_bytes(report_bytes(name))
    (reports / "notes.txt").write_text("not a report, not read")
    db = f"sqlite:///{tmp_path / 's.db'}"
    r = survey_cli("ingest", str(reports), "--db", db)
    assert r.returncode == 0, r
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == [str(reports / n) for n in names]
    assert all("stored as run #" in line for line in r.stdout.splitlines())
    from db.store import Store
    from survey.evidence.ingest import matrix_version

    store = Store(db)
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(m.Run)) == 4
        assert s.scalar(select(func.count()).select_from(m.Slot)) == 4
        assert matrix_version(s) == "1"  # one transaction: one move of the version
    store.close()
    again = survey_cli("ingest", str(reports), "--db", db)  # all stored already: nothing added
    assert again.returncode == 0 and again.stdout.count("already stored as run #") == 4, again
    (reports / "zz-broken.json").write_text("{")
    broken = survey_cli("ingest", str(reports), "--db", db)
    assert broken.returncode == exitcodes.INPUT, broken
    assert "zz-broken.json" in broken.stderr and "nothing was stored" in broken.stderr


def test_many_reports_are_identified_in_a_pool_as_one_process_identifies_them(tmp_path: Path) -> None:
    from survey.flows.filing import read_reports

    limit = 1_000_000

    reports = tmp_path / "reports"
    reports.mkdir()
    for i, v in enumerate(("3.6.0", "3.7.1", "3.8.0", "3.9.0") * 3):
        (reports / f"{i:02d}.json").write_bytes(report_bytes(f"cpu-triton-{v}.json"))
    alone = read_reports([reports], limit, processes=1)
    pooled = read_reports([reports], limit, processes=2, pool_from=1)
    assert pooled == alone and len(alone[1]) == 12  # the same files, and the same values of each
    # a file that is not a report: the first in order is named, whichever process read it
    (reports / "05.json").write_text("{")
    (reports / "09.json").write_bytes(b"x" * (limit + 1))
    for processes, pool_from in ((1, 400), (2, 1)):
        with pytest.raises(InvalidReport) as e:
            read_reports([reports], limit, processes=processes, pool_from=pool_from)
        assert str(e.value).startswith(f"{reports / '05.json'}: not JSON") and e.value.hint == "nothing was stored"


def test_a_report_read_for_ingest_holds_under_a_quarter_of_its_text() -> None:
    """`survey ingest` reads every report of its directories before it stores the first (a
    file that is not a report stores nothing), so what it holds of each report is held for
    all of them at once. The H200 report held 27 KB of its 48 KB of JSON, four fifths of that
    its rows as dicts (100,000 reports: 2.7 GB); they are kept packed until the write."""
    import tracemalloc

    from survey.evidence.ingest import identify

    raw = report_bytes("h200-sm90-triton-3.6.0.json")
    identify(raw, exact=True)  # what is made once (compiled patterns, caches) is made before the count
    tracemalloc.start()
    try:
        held = [identify(raw, exact=True) for _ in range(40)]
        size, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size / len(held) < len(raw) / 4, (size / len(held), len(raw))
    rows = held[0].children  # unpacked as they were made
    assert rows == held[-1].children and len(rows["mode_results"]) > 10 and rows["library_results"]


def test_where_no_pool_process_can_start_the_reports_are_read_here(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine that refuses new processes (a container's process limit: EAGAIN) still ingests."""
    import errno
    import multiprocessing.context

    from survey.flows.filing import read_reports

    reports = tmp_path / "reports"
    reports.mkdir()
    for i, v in enumerate(("3.6.0", "3.7.1", "3.8.0")):
        (reports / f"{i:02d}.json").write_bytes(report_bytes(f"cpu-triton-{v}.json"))
    alone = read_reports([reports], 1_000_000, processes=1)

    def refused(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    for kind in ("ForkServerProcess", "SpawnProcess"):
        monkeypatch.setattr(getattr(multiprocessing.context, kind), "_Popen", staticmethod(refused))
    assert read_reports([reports], 1_000_000, processes=2, pool_from=1) == alone


def test_a_pool_process_collects_garbage_as_the_command_does() -> None:
    """Reading a report makes tens of thousands of short-lived objects: a pool process sets
    the command's collector thresholds (survey.core.collector), not the interpreter's defaults."""
    import gc

    from survey.core import collector
    from survey.flows.filing import pool_of

    with pool_of(2) as pool:
        assert {pool.submit(gc.get_threshold).result() for _ in range(4)} == {collector.THRESHOLDS}
    assert collector.THRESHOLDS != (700, 10, 10)
