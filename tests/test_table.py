"""The Availability table: phrased from evidence, in four formats, and kept in
step with a docs file (drift check, write-in-place touching nothing else)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from survey import docs_table
from survey import matrix as survey_matrix
from survey import table as table_mod
from survey.errors import InputError
from survey.ingest import ingest
from tests.conftest import report_bytes, survey_cli

ROOT = Path(__file__).resolve().parents[1]


def rows_by_source(store) -> dict[str, dict[str, str]]:
    with store.session() as s:
        return {r["Source"]: r for r in docs_table.table_rows(s)}


def test_cells_are_phrased_from_what_was_measured(filled_store) -> None:
    rows = rows_by_source(filled_store)
    assert list(rows) == ["Triton 3.6.0", "Triton 3.7.1", "Triton 3.8.0", "Triton 3.9.0"]
    assert rows["Triton 3.7.1"]["`rocprofiler` modes"] == "backend absent"
    assert rows["Triton 3.7.1"]["Proton `-b` choices"] == "`cupti`, `roctracer`, `instrumentation`"
    r38 = rows["Triton 3.8.0"]
    assert r38["Triton"] == "3.8.0"
    assert r38["Proton `-b` choices"] == "`cupti`, `rocprofiler`, `roctracer`, `instrumentation`"
    assert r38["`rocprofiler` modes"].startswith("`librocprofiler-sdk.so` did not load first, so no live answer")
    assert "with a stub library (not a live result)" in r38["`rocprofiler` modes"]
    assert "`pcsampling` refused (unsupported mode)" in r38["`rocprofiler` modes"]
    assert "no mode and `periodic_flushing` accepted" in r38["`rocprofiler` modes"]
    r39 = rows["Triton 3.9.0"]["`rocprofiler` modes"]
    assert "`pcsampling` refused (built without rocprofiler-sdk PC sampling support)" in r39
    assert rows["Triton 3.8.0"]["Evidence"].startswith("run #3, 2026-12-02")


def test_rows_without_evidence_say_why(filled_store) -> None:
    from survey.launchers.pip import PipLauncher
    from survey.survey_run import ProbeSettings, survey_one

    out = survey_one(filled_store, "nightly", "PyTorch ROCm nightly", "pip", {}, 9,
                     PipLauncher(["proton-survey-no-such-dist==1.0"], index_url="http://127.0.0.1:9/simple",
                                 pip_timeout=5), ProbeSettings(), scope="catalog")
    assert out.status == "unobtainable"
    with filled_store.session() as s:
        from survey.ingest import upsert_candidate

        upsert_candidate(s, "later", label="Not probed yet", kind="pip", position=10, scope="catalog")
        s.commit()
    rows = rows_by_source(filled_store)
    assert rows["PyTorch ROCm nightly"]["Evidence"].startswith("no evidence: unobtainable here (")
    assert rows["Not probed yet"]["Evidence"] == "no evidence: not yet probed"


@pytest.mark.parametrize("fmt", table_mod.FORMATS)
def test_formats(filled_store, fmt: str) -> None:
    with filled_store.session() as s:
        text = table_mod.render(table_mod.frame(docs_table.table_rows(s), docs_table.TABLE_COLUMNS), fmt)
    if fmt == "json":
        assert [r["Triton"] for r in json.loads(text)] == ["3.6.0", "3.7.1", "3.8.0", "3.9.0"]
    elif fmt == "csv":
        assert text.splitlines()[0] == ",".join(docs_table.TABLE_COLUMNS)
    elif fmt == "md":
        assert text.splitlines()[0].startswith("| Source")
    else:
        assert "<table" in text and "&lt;" not in text


def test_markdown_escapes_pipes(store) -> None:
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="piped", label="a | b", scope="catalog")
        text = table_mod.render(table_mod.frame(docs_table.table_rows(s), docs_table.TABLE_COLUMNS), "md")
    assert "a \\| b" in text


DOC = """# amd-rocprofiler

Some prose the table must not touch. Trailing spaces stay:\x20\x20\x20
<!-- proton-survey:availability:start -->
| Source | Triton |
|:--|:--|
| stale | 0.0 |
<!-- proton-survey:availability:end -->

More prose after. \u00e9\n"""


def test_drift_check_and_write_in_place(filled_store, tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(DOC)
    db = filled_store.url

    def survey(*args):
        return survey_cli("table", *args, "--db", db)

    r = survey("--check", str(doc))
    assert r.returncode == 1
    assert "-| stale | 0.0 |" in r.stdout and "+| Triton 3.8.0" in r.stdout
    assert "no longer matches the evidence" in r.stderr
    r = survey("--write", str(doc))
    assert r.returncode == 0 and "table updated" in r.stderr
    new = doc.read_text()
    head, tail = DOC.split("<!-- proton-survey:availability:start -->")[0], DOC.split(
        "<!-- proton-survey:availability:end -->")[1]
    assert new.startswith(head) and new.endswith(tail)
    assert survey().stdout.strip() in new
    r = survey("--check", str(doc))
    assert r.returncode == 0 and "matches the evidence" in r.stderr
    r = survey("--write", str(doc))
    assert "already up to date" in r.stderr
    # new evidence makes the docs stale again: the same Triton measured on another platform
    with filled_store.session() as s:
        ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate="triton-3.6.0")
    assert survey("--check", str(doc)).returncode == 1


def test_docs_without_markers_is_an_input_error(tmp_path: Path) -> None:
    doc = tmp_path / "plain.md"
    doc.write_text("no markers here\n")
    with pytest.raises(InputError, match="markers"):
        table_mod.write(doc, "| a |\n")
    assert doc.read_text() == "no markers here\n"


def test_pivot_for_the_matrix(filled_store) -> None:
    with filled_store.session() as s:
        p = table_mod.pivot(survey_matrix.matrix(s))
    assert p.loc["triton-3.7.1", "rocprofiler:none"] == "unknown_backend"
    assert p.loc["triton-3.8.0", "rocprofiler:pcsampling"] == "library_missing"
    assert p.loc["triton-3.8.0", "roctracer:pcsampling"] == "unsupported_mode"
