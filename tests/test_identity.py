"""Evidence identity: what was probed, on which machine, told the same way every time.

Each reproduction of the issue is a test here; the environments are real (venvs made
with ``python -m venv``, real reports from tests/fixtures/reports)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from db import models as m
from db.store import Store
from probes import classify
from probes import outcomes as O
from survey.core import errortext
from survey.evidence import queries
from survey.evidence.ingest import ingest, matrix_version
from tests.conftest import report_bytes, survey_cli

ROOT = Path(__file__).resolve().parents[1]


def make_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


# 1 + 3 ------------------------------------------------------------------------------------------
def test_venvs_checked_by_path_are_their_own_environments_and_not_published(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    venvs = [make_venv(tmp_path / f"venv{i}") for i in range(4)]
    for py in venvs:
        r = survey_cli("check", str(py), "--backend", "rocprofiler", "--db", db, "--json")
        # a Python without Triton is evidence: stored, and the backend is absent there
        assert r.returncode == 2, r
        out = json.loads(r.stdout)
        assert out["candidate"] == f"python:{py.parent.parent}" and out["cause"] == "no_triton"
    store = Store(db)
    with store.session() as s:
        names = [c.name for c in queries.candidates(s)]
        assert names == [f"python:{v.parent.parent}" for v in venvs]
        assert {c.scope for c in queries.candidates(s)} == {"adhoc"}
        assert s.scalar(select(func.count()).select_from(m.Environment)) == 4
    table = survey_cli("table", "--db", db)
    assert table.returncode == 0 and "venv" not in table.stdout
    assert all(str(v.parent.parent) in survey_cli("table", "--all", "--db", db).stdout for v in venvs)


def test_a_python_without_triton_is_stored_evidence(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    r = survey_cli("probe", "--python", sys.executable, "-o", str(report), "--no-auto-capture")
    if r.returncode == 0:
        pytest.skip("this interpreter has Triton")
    assert r.returncode == 5
    data = json.loads(report.read_text())
    assert data["probe"]["isolation"] and data["origin"]["kind"] == "interpreter"
    db = f"sqlite:///{tmp_path / 's.db'}"
    r = survey_cli("ingest", str(report), "--db", db)
    assert r.returncode == 0 and "stored as run #1" in r.stdout


# 2 ------------------------------------------------------------------------------------------------
def test_check_answers_three_questions_and_never_contradicts_them(filled_store: Store) -> None:
    r = survey_cli("check", "triton-3.8.0", "--backend", "rocprofiler", "--mode", "pcsampling", "--json",
                   "--platform", "none:x86_64", "--db", filled_store.url)
    assert r.returncode == 2
    v = json.loads(r.stdout)
    assert "outcome" not in v  # the old field that answered three questions at once
    assert v["verdict"] == "cannot_run" and v["cause"] == "mode_refused"
    assert v["backend_present"]["answer"] == "yes" and v["backend_present"]["source"] == "registry"
    assert v["mode_accepted"] == {**v["mode_accepted"], "answer": "no", "source": "stub"}
    assert v["library_loads"]["answer"] == "no" and v["library_loads"]["library"] == "librocprofiler-sdk.so"
    assert any("providing it would not make this run" in d for d in v["details"])
    r = survey_cli("check", "triton-3.8.0", "--backend", "rocprofiler", "--mode", "periodic_flushing", "--json",
                   "--platform", "none:x86_64", "--db", filled_store.url)
    v = json.loads(r.stdout)
    assert r.returncode == 2 and v["cause"] == "library_missing" and v["mode_accepted"]["answer"] == "yes"


# 4 ------------------------------------------------------------------------------------------------
def test_error_text_is_normalised() -> None:
    a = ("pip failed: <urllib3.connection.HTTPSConnection object at 0x7f3a9c2b1d90>: Failed to establish a new "
         "connection: [Errno 111] Connection refused (10.1.2.3:443) pid 4242 /tmp/pip-req-build-abc123/x "
         "HTTPConnectionPool(host='127.0.0.1', port=9)")
    b = a.replace("0x7f3a9c2b1d90", "0x7f00deadbeef").replace("10.1.2.3", "192.168.7.9").replace("4242", "77") \
        .replace("abc123", "zz9").replace("port=9", "port=19")
    assert errortext.normalise(a) == errortext.normalise(b) != a
    # worked out once per text among the last few: the same answer whether kept or not, and
    # neither a long text nor more texts than the memo holds are kept
    long = a + " x" * errortext.MEMO_CHARS
    texts = [f"{a} {i}" for i in range(errortext.MEMO_TEXTS + 10)] + [long, a]
    first = [errortext.normalise(t) for t in texts]
    assert first == [errortext.normalise(t) for t in texts] == [errortext._normalise(t) for t in texts]
    assert errortext._memo.cache_info().currsize <= errortext.MEMO_TEXTS
    assert errortext.normalise(long).endswith(" x x") and errortext.normalise(None) == ""
    assert errortext.cause(a, {"index_url": "https://download.pytorch.org/whl/nightly/rocm7.0"}) == \
        "the PyTorch package index (download.pytorch.org) cannot be reached from this host"
    assert errortext.cause("fatal: unable to access 'https://github.com/triton-lang/triton.git/': Could not "
                           "resolve host: github.com", {"pip": "triton @ git+https://github.com/x/y.git@main"}) == \
        "the git repository GitHub (github.com) cannot be reached from this host"


def test_an_unobtainable_candidate_retried_is_a_retry_not_a_new_run(tmp_path: Path) -> None:
    catalog = tmp_path / "c.toml"
    catalog.write_text('[[candidate]]\nname = "gone"\nlabel = "Gone"\npip = "proton-survey-no-such==1.0"\n'
                       'index_url = "http://127.0.0.1:9/simple"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    doc = tmp_path / "page.md"
    doc.write_text("<!-- proton-survey:availability:start -->\n<!-- proton-survey:availability:end -->\n")
    assert survey_cli("run", "--catalog", str(catalog), "--db", db, "--no-table").returncode == 0
    assert survey_cli("table", "--write", str(doc), "--db", db).returncode == 0
    store = Store(db)
    with store.session() as s:
        version = matrix_version(s)
    # within the back-off it is not tried again at all (no network wait) ...
    r = survey_cli("run", "--catalog", str(catalog), "--db", db, "--no-table")
    assert r.returncode == 0 and "not retried" in r.stderr
    with store.session() as s:
        assert [run.tries for run in s.scalars(select(m.Run))] == [1]
    # ... and tried again when asked: the same failure is a retry of the last one
    assert survey_cli("run", "--catalog", str(catalog), "--db", db, "--no-table",
                      "--retry-unobtainable").returncode == 0
    with store.session() as s:
        runs = list(s.scalars(select(m.Run)))
        assert len(runs) == 1 and runs[0].tries == 2 and runs[0].last_tried_at > runs[0].finished_at
        # the matrix version moves: views show the count and the time of the last try
        assert matrix_version(s) != version
    r = survey_cli("table", "--check", str(doc), "--db", db)
    assert r.returncode == 0, r
    assert "the package index 127.0.0.1 cannot be reached from this host" in doc.read_text()


# 5 ------------------------------------------------------------------------------------------------
def test_check_resolves_the_candidate_again_before_answering(tmp_path: Path) -> None:
    py = make_venv(tmp_path / "v")
    catalog = tmp_path / "c.toml"
    catalog.write_text(f'[[candidate]]\nname = "mine"\npython = "{py}"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"

    def check() -> dict:
        r = survey_cli("check", "mine", "--backend", "cupti", "--catalog", str(catalog), "--json", "--db", db)
        assert r.returncode == 2, r
        return json.loads(r.stdout)

    first = check()
    assert check()["run_id"] == first["run_id"]  # unchanged: the same evidence
    # the environment changes: a distribution appears in the venv
    site = next((tmp_path / "v" / "lib").glob("python*/site-packages"))
    info = site / "extra_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: extra-dist\nVersion: 1.0\n")
    (info / "RECORD").write_text("extra_dist-1.0.dist-info/METADATA,,\n")
    assert check()["run_id"] != first["run_id"]  # probed again in its current state


# 6 ------------------------------------------------------------------------------------------------
def test_catalog_captures_are_honoured_and_unknown_fields_named(tmp_path: Path) -> None:
    from survey.environments import catalog as catalog_mod
    from survey.flows.run import ProbeSettings

    bad = tmp_path / "bad.toml"
    bad.write_text('[[candidate]]\nname = "x"\npip = "triton==3.6.0"\ncaptuers = ["cupti"]\n')
    r = survey_cli("run", "--catalog", str(bad))
    assert r.returncode == 65 and "captuers" in r.stderr
    good = tmp_path / "good.toml"
    good.write_text('[[candidate]]\nname = "x"\npip = "triton==3.6.0"\ncaptures = ["cupti", "rocprofiler:x"]\n')
    entry = catalog_mod.load(good).candidate[0]
    assert ProbeSettings(captures=("cupti",)).for_entry(entry).captures == ("cupti", "rocprofiler:x")
    text = (ROOT / "survey" / "data" / "catalog" / "default.toml").read_text()
    assert "interpreter" in text and ", python)" not in text


# 7 ------------------------------------------------------------------------------------------------
def test_one_classifier_and_unknown_mode_is_a_refused_mode() -> None:
    cls = classify.classify_message("Unknown mode: pcsampling", False)
    assert cls["outcome"] == O.UNSUPPORTED_MODE and cls["rule"] == "unknown-mode"
    gelu = (ROOT / "probes" / "gelu.py").read_text()
    assert "classify.classify_message" in gelu and "re.search(r\"\\w+Profiler" not in gelu
    assert "first shipped" not in gelu
    # measured on the H200 with the schema-2 probe
    data = json.loads(report_bytes("h200-sm90-triton-3.6.0.json"))
    inst = {m["mode"]: m for m in data["modes"] if m["backend"] == "instrumentation" and m["env"] == "clean"}
    assert inst["pcsampling"]["outcome"] == "unsupported_mode" and inst["pcsampling"]["rule"] == "unknown-mode"


# platforms ----------------------------------------------------------------------------------------
def test_the_h200_report_is_platform_sm90_next_to_cpu_evidence(filled_store: Store) -> None:
    with filled_store.session() as s:
        res = ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="triton-3.6.0")
        assert res.created
        run = queries.get_run(s, res.run_id)
        assert run.platform.key == "nvidia:sm_90:NVIDIA H200" and run.platform_detail["driver"] == "580.159.04"
        slots = [(sl.candidate.name, sl.platform_key) for sl in queries.slots(s, "catalog", "triton-3.6.0")]
        assert slots == [("triton-3.6.0", "none:x86_64"), ("triton-3.6.0", "nvidia:sm_90:NVIDIA H200")]
    table = survey_cli("table", "--columns", "+platform", "--db", filled_store.url).stdout
    assert "| Platform" in table and "NVIDIA H200 (sm_90)" in table and "no GPU (x86_64)" in table
    r = survey_cli("check", "triton-3.6.0", "--backend", "cupti", "--platform", "sm_90", "--json",
                   "--db", filled_store.url)
    assert r.returncode == 0 and json.loads(r.stdout)["platform"] == "nvidia:sm_90:NVIDIA H200"
    # a report that measured another Triton cannot be filed under a pinned catalog candidate
    r = survey_cli("ingest", str(ROOT / "tests/fixtures/reports/h200-triton-3.6.0.json"), "--candidate",
                   "triton-3.8.0", "--db", filled_store.url)
    assert r.returncode == 65 and "measured triton 3.6.0" in r.stderr


# migration ----------------------------------------------------------------------------------------
OLD_STORE = ROOT / "tests" / "fixtures" / "stores" / "release-1.0.0.db"


def test_migration_keeps_every_run_of_a_store_made_by_the_previous_release(tmp_path: Path) -> None:
    """The fixture store was written by proton-survey 1.0.0 (the last release of the old
    identity model): the CPU reports of 3.7.1 and 3.8.0 under their catalog names, the
    3.9.0 and 3.6.0 venvs checked by path (1.x filed both under their base interpreter,
    python:/usr/bin/python3.11), the H200 report as `h200`, and triton-main unobtainable."""
    db = tmp_path / "old.db"
    shutil.copyfile(OLD_STORE, db)
    with sqlite3.connect(db) as c:
        assert c.execute("select version_num from alembic_version").fetchone() == ("0001",)
        before = c.execute("select count(*) from runs").fetchone()[0]
    store = Store(f"sqlite:///{db}")
    with store.session() as s:
        runs = list(s.scalars(select(m.Run)))
        assert len(runs) == before == 6
        assert all(r.platform is not None for r in runs)
        keys = {r.candidate.name: r.platform.key for r in runs}
        assert keys["triton-3.7.1"] == "none:x86_64" and keys["h200"] == "nvidia:unknown-arch:unknown-model"
        assert keys["triton-main"] == "unrecorded"
        names = {c.name: c.scope for c in queries.candidates(s)}
        # the collapsed interpreter candidate is split by each run's own prefix, and removed
        assert "python:/usr/bin/python3.11" not in names
        assert names["python:/tmp/venvs/t3.9.0"] == names["python:/tmp/venvs/t3.6.0"] == "adhoc"
        assert names["triton-3.7.1"] == "catalog" and names["h200"] == "adhoc"
    table = survey_cli("table", "--db", f"sqlite:///{db}")
    assert table.returncode == 0 and "| 3.7.1 " in table.stdout


@pytest.mark.both_stores
def test_a_reported_identity_with_a_null_version_is_stored(store: Store) -> None:
    """Found by schemathesis: two distributions of one name, one without a version."""
    data = json.loads(report_bytes("cpu-triton-3.8.0.json"))
    data["environment"]["distributions"] = [{"name": "x", "version": "1"}, {"name": "x", "version": None}]
    with store.session() as s:
        assert ingest(s, json.dumps(data), candidate="nulls").created
