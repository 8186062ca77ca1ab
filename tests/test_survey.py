"""`survey run` end to end: a real two-candidate survey (3.7.1 without the registry,
3.8.0 with it), unchanged candidates skipped, a survey killed midway then resumed,
the catalog's errors."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from survey.core.errors import CatalogError
from survey.environments import catalog as catalog_mod
from tests.conftest import survey_cli

ROOT = Path(__file__).resolve().parents[1]

CATALOG = """
[[candidate]]
name = "triton-3.7.1"
label = "Triton 3.7.1"
pip = "triton==3.7.1"

[[candidate]]
name = "triton-3.8.0"
label = "PyPI `triton` 3.8.0"
pip = "triton==3.8.0"

[[candidate]]
name = "unreachable"
label = "An index nobody serves"
pip = "proton-survey-no-such-dist==1.0"
index_url = "http://127.0.0.1:9/simple"
"""


def survey(db: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return survey_cli(*args, "--db", db)


def rows(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as c:
        return c.execute(sql).fetchall()


@pytest.mark.integration
def test_two_candidate_survey_end_to_end(tmp_path: Path) -> None:
    cat = tmp_path / "catalog.toml"
    cat.write_text(CATALOG)
    dbfile = tmp_path / "s.db"
    db = f"sqlite:///{dbfile}"
    r = survey(db, "run", "--catalog", str(cat), "--jobs", "2")
    assert r.returncode == 0, r.stderr
    assert "2 probed, 1 unobtainable" in r.stderr
    table = r.stdout
    assert "| Triton 3.7.1" in table and "backend absent" in table
    assert "`periodic_flushing` only — `pcsampling` raises `unsupported mode`" in table
    assert "no evidence: unobtainable here (" in table
    # the store holds whole runs: report + normalised rows, one per candidate
    runs = rows(dbfile, "select r.id, c.name, r.status, r.triton_version from runs r join candidates c "
                        "on c.id = r.candidate_id order by c.position")
    assert [(n, s, v) for _, n, s, v in runs] == [("triton-3.7.1", "complete", "3.7.1"),
                                                   ("triton-3.8.0", "complete", "3.8.0"),
                                                   ("unreachable", "unobtainable", None)]
    assert rows(dbfile, "select count(*) from reports")[0][0] == 2
    assert rows(dbfile, "select count(*) from mode_results where run_id not in (select run_id from reports)") \
        == [(0,)]
    # check verdicts from the stored evidence
    assert survey(db, "check", "triton-3.7.1", "--backend", "rocprofiler", "--catalog", str(cat)).returncode == 2
    r = survey(db, "check", "triton-3.8.0", "--backend", "rocprofiler", "--mode", "pcsampling", "--catalog",
               str(cat))
    assert r.returncode == 2 and "stub" in r.stdout
    assert survey(db, "check", "triton-3.8.0", "--backend", "cupti", "--catalog", str(cat)).returncode == 3
    # unchanged candidates are not probed again; --force probes them again
    r = survey(db, "run", "--catalog", str(cat), "--only", "triton-3.8.0")
    assert "1 unchanged" in r.stderr
    r = survey(db, "run", "--catalog", str(cat), "--only", "triton-3.8.0", "--force", "--no-table")
    assert "1 probed" in r.stderr
    # the re-probed environment says what it said before: checks are compared as published,
    # pooled over both runs (a check whose attempts disagree in either is unstable in both)
    [first_380] = [run_id for run_id, n, _, _ in runs if n == "triton-3.8.0"]  # ids follow the finishing order
    r = survey(db, "diff", f"run:{first_380}", "triton-3.8.0")
    assert r.returncode == 0 and f"a: run #{first_380}" in r.stdout, r
    r = survey(db, "diff", "triton-3.7.1", "triton-3.8.0")
    assert r.returncode == 1 and "Triton: 3.7.1 -> 3.8.0" in r.stdout, r
    assert "None" not in r.stdout and "['" not in r.stdout


@pytest.mark.integration
def test_killed_survey_leaves_whole_runs_and_resumes(tmp_path: Path) -> None:
    cat = tmp_path / "catalog.toml"
    cat.write_text(CATALOG.split("[[candidate]]\nname = \"unreachable\"")[0])
    dbfile = tmp_path / "k.db"
    db = f"sqlite:///{dbfile}"
    # jobs=1: the first candidate is stored while the second is being probed
    proc = subprocess.Popen([sys.executable, "-m", "survey", "run", "--catalog", str(cat), "--jobs", "1",
                             "--force", "--db", db], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline:
        if dbfile.exists() and rows(dbfile, "select count(*) from sqlite_master where name='runs'")[0][0]:
            if rows(dbfile, "select count(*) from runs")[0][0] >= 1:
                break
        time.sleep(0.05)
    else:
        pytest.fail("the first candidate was never stored")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # whatever was stored is whole: every run has its report and its rows
    stored = rows(dbfile, "select id, status from runs")
    assert stored and all(status == "complete" for _, status in stored)
    for run_id, _ in stored:
        assert rows(dbfile, f"select count(*) from reports where run_id = {run_id}")[0][0] == 1
        assert rows(dbfile, f"select count(*) from mode_results where run_id = {run_id}")[0][0] >= 14
    first = len(stored)
    r = survey(db, "run", "--catalog", str(cat), "--jobs", "1", "--no-table")
    assert r.returncode == 0, r.stderr
    if first == 1:
        assert "1 probed, 1 unchanged" in r.stderr
    names = rows(dbfile, "select c.name from runs r join candidates c on c.id = r.candidate_id "
                         "where r.status = 'complete' order by c.position")
    assert sorted({n for (n,) in names}) == ["triton-3.7.1", "triton-3.8.0"]


def test_catalog_errors_name_the_entry_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "c.toml"
    bad.write_text('[[candidate]]\nname = "a"\npip = "triton"\nimage = "x:1"\n')
    with pytest.raises(CatalogError, match="candidate 'a'.*exactly one of pip, python, image"):
        catalog_mod.load(bad)
    bad.write_text('[[candidate]]\nname = "a"\npip = "triton"\n[[candidate]]\nname = "a"\npip = "x"\n')
    with pytest.raises(CatalogError, match="duplicate"):
        catalog_mod.load(bad)
    bad.write_text('[[candidate]]\nname = "a b"\npip = "triton"\n')
    with pytest.raises(CatalogError, match="field name"):
        catalog_mod.load(bad)
    bad.write_text("[[candidate]\n")
    with pytest.raises(CatalogError, match="not valid TOML"):
        catalog_mod.load(bad)
    r = survey(f"sqlite:///{tmp_path / 'x.db'}", "run", "--catalog", str(bad))
    assert r.returncode == 65 and "not valid TOML" in r.stderr
    r = survey(f"sqlite:///{tmp_path / 'x.db'}", "run", "--only", "nosuch")
    assert r.returncode == 65 and "not in the catalog: nosuch" in r.stderr


def test_default_catalog_holds_the_reference_candidates() -> None:
    cat = catalog_mod.load()
    names = cat.names()
    for want in ("triton-3.6.0", "triton-3.7.0", "triton-3.7.1", "triton-3.8.0", "triton-3.9.0",
                 "pytorch-rocm-nightly", "triton-main", "rocm-pytorch-rocm10.0-2.13.0"):
        assert want in names
    assert {e.kind for e in cat.candidate} == {"pip", "image"}


def test_an_interpreter_asked_ahead_is_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from survey.core.errors import NotAPython
    from survey.environments.launchers import python as python_launcher

    calls: list[str] = []
    real = python_launcher.PythonLauncher._obtain

    def counted(self: python_launcher.PythonLauncher) -> object:
        calls.append(self.python)
        return real(self)

    monkeypatch.setattr(python_launcher.PythonLauncher, "_obtain", counted)
    launcher = python_launcher.PythonLauncher(sys.executable)
    launcher.prefetch()
    ahead = launcher.obtain()
    assert calls == [sys.executable]
    assert launcher.obtain().identity == ahead.identity and len(calls) == 2  # taken once, then asked again
    monkeypatch.setattr(python_launcher, "PREFETCH_FRESH_S", 0.0)  # an answer too old is not used
    launcher.prefetch()
    launcher.obtain()
    assert len(calls) >= 4
    gone = python_launcher.PythonLauncher("/nonexistent/bin/python3")
    gone.prefetch()
    with pytest.raises(NotAPython):
        gone.obtain()


def test_a_changed_interpreter_is_probed_again_though_asked_ahead(tmp_path: Path) -> None:
    """`survey run` asks its first interpreters while the store loads: an environment
    changed since the last survey is still seen as changed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    cat = tmp_path / "catalog.toml"
    cat.write_text(f'[[candidate]]\nname = "venv"\npython = "{venv / "bin" / "python"}"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    first = survey(db, "run", "--catalog", str(cat), "--no-table")
    assert first.returncode == 0 and "1 probed" in first.stderr, first
    assert "1 unchanged" in survey(db, "run", "--catalog", str(cat), "--no-table").stderr
    [site] = venv.glob("lib/python*/site-packages")
    dist = site / "proton_survey_marker-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: proton-survey-marker\nVersion: 1.0\n")
    (dist / "RECORD").write_text("proton_survey_marker-1.0.dist-info/METADATA,,\n")
    assert "1 probed" in survey(db, "run", "--catalog", str(cat), "--no-table").stderr


def test_a_backed_off_image_does_not_ask_the_container_engine(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from db.store import Store
    from survey.environments.catalog import Entry
    from survey.environments.launchers import image as image_mod
    from survey.evidence import identity
    from survey.evidence.ingest import record_failure
    from survey.flows.run import ProbeSettings, run_survey

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    ref = "registry.invalid/proton-survey/none:1"
    with store.session() as s:
        record_failure(s, "img", label=None, kind="image", spec={"image": ref}, position=0,
                       error="the registry cannot be reached", platform=identity.local_platform(), scope="catalog")
    asked: list[str] = []

    def no_engine(engine: str) -> tuple[bool, str]:
        asked.append(engine)
        return False, f"{engine} is not installed (not found on PATH)"

    monkeypatch.setattr(image_mod, "check_engine", no_engine)
    entry = Entry(name="img", image=ref)
    [out] = run_survey(store, [(0, entry)], jobs=1, settings=ProbeSettings())
    assert out.status == "unobtainable" and "not retried" in out.message and asked == []
    # tried again: the engine is asked, and its absence is the answer, stored as unobtainable again
    [out] = run_survey(store, [(0, entry)], jobs=1, settings=ProbeSettings(retry_after_s=0))
    assert out.status == "unobtainable" and out.run_id is not None and asked
    assert "no usable container engine" in out.message
    store.close()


def test_an_image_on_a_host_without_a_container_engine_is_stored_unobtainable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a host with no container engine (a PATH holding neither podman nor docker), an
    image candidate is stored as unobtainable with the engine's real error, `survey run`
    counts it so, and the table shows its row. (Failed first: "1 failed", nothing stored,
    and the row was gone.)"""
    import json

    cat = tmp_path / "catalog.toml"
    cat.write_text('[[candidate]]\nname = "rocm-img"\nlabel = "`rocm/pytorch` image"\n'
                   'image = "registry.invalid/rocm/pytorch:latest"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("SURVEY_ENGINE", raising=False)
    r = survey_cli("run", "--db", db, "--catalog", str(cat), "--no-table")
    assert r.returncode == 0, r
    assert "1 unobtainable" in r.stderr and "failed" not in r.stderr, r.stderr
    rows = json.loads(survey_cli("table", "--db", db, "--format", "json").stdout)
    assert [(x["candidate"], x["status"]) for x in rows] == [("rocm-img", "unobtainable")]
    assert "no usable container engine" in rows[0]["error"] and "podman is not installed" in rows[0]["error"]
    grid = survey_cli("table", "--db", db, "--format", "grid").stdout
    assert "rocm/pytorch" in grid and "unobtainable here" in grid
