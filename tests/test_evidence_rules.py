"""Rules that keep the published evidence what the catalog and the measurements say:
reading never creates a store, a published row is the catalog's, and advice is drawn
from what was measured (refused, not answered here, or measured ad hoc)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from db.store import Store
from survey.evidence import queries
from survey.evidence.ingest import ingest
from tests.conftest import REPORTS, report_bytes, survey_cli

R380 = str(REPORTS / "cpu-triton-3.8.0.json")
R371 = str(REPORTS / "cpu-triton-3.7.1.json")
R360 = str(REPORTS / "cpu-triton-3.6.0.json")


def url(path: Path) -> str:
    return f"sqlite:///{path}"


# reading never creates ------------------------------------------------------------------
def test_check_from_stored_evidence_refuses_a_store_that_does_not_exist(tmp_path: Path) -> None:
    r = survey_cli("check", "triton-3.8.0", "--backend", "cupti", "--platform", "sm_90",
                   "--db", url(tmp_path / "nope.db"))
    assert r.returncode == 65, r
    assert "nope.db" in r.stderr and "no proton-survey store" in r.stderr
    assert not (tmp_path / "nope.db").exists()


def test_serve_refuses_a_store_that_does_not_exist(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "survey", "serve", "--db", url(tmp_path / "none.db"),
                        "--port", "18677"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 65, p.stderr
    assert "none.db" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "none.db").exists()


def test_write_refuses_a_table_without_evidence_and_leaves_the_page(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    Store(url(db)).close()
    page = tmp_path / "page.md"
    page.write_text("# Availability\n\n<!-- proton-survey:availability:start -->\nold table\n"
                    "<!-- proton-survey:availability:end -->\n")
    before = page.read_text()
    r = survey_cli("table", "--write", str(page), "--db", url(db))
    assert r.returncode == 65, r
    assert "no evidence" in r.stderr and "survey run" in r.stderr
    assert page.read_text() == before


def test_an_empty_table_says_why(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    Store(url(db)).close()
    r = survey_cli("table", "--format", "md", "--db", url(db))
    assert r.returncode == 0, r
    assert "no evidence" in r.stderr and "survey run" in r.stderr


# a published row is the catalog's -------------------------------------------------------
def test_ingest_under_a_catalog_name_into_a_new_store_publishes_it_with_the_catalog_label(tmp_path: Path) -> None:
    db = url(tmp_path / "new.db")
    r = survey_cli("ingest", R380, "--candidate", "triton-3.8.0", "--db", db)
    assert r.returncode == 0, r
    table = survey_cli("table", "--format", "md", "--db", db)
    assert "PyPI `triton` 3.8.0" in table.stdout and "| 3.8.0 " in table.stdout, table
    with Store(db).session() as s:
        c = queries.get_candidate(s, "triton-3.8.0")
        assert (c.scope, c.kind, c.spec["pip"]) == ("catalog", "pip", "triton==3.8.0")


def test_ingest_never_relabels_a_catalog_candidate(tmp_path: Path) -> None:
    db = url(tmp_path / "s.db")
    r = survey_cli("ingest", R380, "--candidate", "triton-3.8.0", "--label", "my GPU box", "--db", db)
    assert r.returncode == 64, r
    assert "label" in r.stderr and "catalog" in r.stderr
    with Store(db).session() as s:
        assert queries.candidates(s) == []


def test_ingest_under_a_catalog_name_refuses_a_report_of_another_build(tmp_path: Path) -> None:
    db = url(tmp_path / "s.db")
    r = survey_cli("ingest", R371, "--candidate", "triton-3.8.0", "--db", db)
    assert r.returncode == 65, r
    assert "triton==3.8.0" in r.stderr and "3.7.1" in r.stderr
    with Store(db).session() as s:
        assert queries.candidates(s) == []


def test_a_mistyped_candidate_name_is_not_created_without_new(tmp_path: Path) -> None:
    db = url(tmp_path / "s.db")
    r = survey_cli("ingest", R371, "--candidate", "triton-3.8", "--db", db)
    assert r.returncode == 64, r
    assert "did you mean 'triton-3.8.0'" in r.stderr and "--new" in r.stderr
    with Store(db).session() as s:
        assert queries.candidates(s) == []
    r = survey_cli("ingest", R371, "--candidate", "my-3.7.1-venv", "--new", "--db", db)
    assert r.returncode == 0, r
    with Store(db).session() as s:
        assert [(c.name, c.scope) for c in queries.candidates(s)] == [("my-3.7.1-venv", "adhoc")]
    again = survey_cli("ingest", R371, "--candidate", "my-3.7.1-venv", "--db", db)  # stored now: no --new
    assert again.returncode == 0 and "already stored" in again.stdout, again


# advice from the evidence ---------------------------------------------------------------
def test_no_build_accepts_only_when_every_measured_build_refused(filled_store: Store) -> None:
    """3.6.0 refuses cupti periodic_flushing; 3.7.1-3.9.0 answered no_gpu here (not refused)."""
    r = survey_cli("check", "triton-3.6.0", "--backend", "cupti", "--mode", "periodic_flushing",
                   "--platform", "none:x86_64", "--json", "--db", filled_store.url)
    doc = json.loads(r.stdout)
    assert doc["cause"] == "mode_refused", doc
    assert "no surveyed build accepts" not in doc["fix"]
    assert "not answered here" in doc["fix"] and "triton-3.8.0" in doc["fix"] and "GPU" in doc["fix"]


def test_ad_hoc_evidence_counts_as_measured_when_advising(tmp_path: Path) -> None:
    db = Store(url(tmp_path / "adhoc.db"))
    with db.session() as s:
        ingest(s, report_bytes("cpu-triton-3.7.1.json"), candidate="my-371")
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="my-380")
    r = survey_cli("check", "my-371", "--backend", "rocprofiler", "--platform", "none:x86_64", "--json",
                   "--db", db.url)
    doc = json.loads(r.stdout)
    assert doc["cause"] == "backend_absent", doc
    assert "no surveyed build offers" not in doc["fix"]
    assert "my-380" in doc["fix"] and "ad hoc" in doc["fix"]


def test_since_names_releases_not_answered_here(filled_store: Store) -> None:
    from survey.render import docs_table

    with filled_store.session() as s:
        text = docs_table.build(s, "catalog", docs_table.parse_columns(None), None).markdown()
    line = next(ln for ln in text.splitlines() if "`periodic_flushing` on `cupti`" in ln)
    assert "no other release measured" not in line, line
    assert "not answered" in line and "3.8.0" in line, line
