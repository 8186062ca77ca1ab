"""The evidence as one tidy DataFrame (survey.render.frame) and `survey export`, on the
real reports of tests/fixtures/reports."""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import pandas as pd

from db.store import Store
from survey.core import exitcodes
from survey.render.frame import COLUMNS, evidence_frame
from survey.verdicts import matrix as matrix_mod
from tests.conftest import survey_cli, survey_fresh

ROOT = Path(__file__).resolve().parents[1]
KEY = ["candidate", "platform", "backend", "mode", "check"]


def test_one_row_per_environment_platform_backend_mode_and_check(filled_store: Store) -> None:
    df = evidence_frame(filled_store)
    assert list(df.columns) == list(COLUMNS)
    assert {c: str(t) for c, t in df.dtypes.items()} == {c: t for c, t in COLUMNS.items()}
    assert not df.duplicated(KEY).any()
    with filled_store.session() as s:
        rows = [r for r in matrix_mod.matrix(s) if r["status"] == "measured"]
    starts = df[df.check == "start"]
    assert len(starts) == len(rows)
    # the rows say what the matrix says, typed
    row = rows[0]
    [first] = starts[(starts.candidate == row["candidate"]) & (starts.backend == row["backend"])
                     & (starts["mode"] == row["mode"])].to_dict("records")
    assert (first["outcome"], first["verdict"], first["run_id"]) == (row["outcome"], row["verdict"], row["run_id"])
    assert first["date"] == pd.Timestamp(row["date"])


def test_captures_are_rows_of_their_own(h200_store: Store) -> None:
    df = evidence_frame(h200_store)
    caps = df[df.check == "capture"]
    ok = caps[(caps.backend == "cupti") & (caps["mode"] == "none")]
    assert ok[["outcome", "kernel_count"]].values.tolist() == [["ok", 50]]
    assert caps.verdict.isna().all() and df[df.check == "start"].kernel_count.isna().all()


def test_export_csv_is_the_frame(filled_store: Store, tmp_path: Path) -> None:
    out = tmp_path / "evidence.csv"
    r = survey_cli("export", "--format", "csv", "-o", str(out), "--db", filled_store.url)
    assert r.returncode == 0, r
    df = evidence_frame(filled_store)
    with out.open(newline="", encoding="utf-8") as f:
        got = list(csv.DictReader(f))
    assert len(got) == len(df) and f"{len(df)} rows written" in r.stderr
    assert list(got[0]) == list(COLUMNS)
    want = df.iloc[0]
    assert got[0]["candidate"] == want["candidate"] and got[0]["date"] == want["date"].isoformat()
    assert got[0]["kernel_count"] == ""  # missing is empty, not "<NA>"


def test_export_parquet_keeps_the_types(filled_store: Store, tmp_path: Path) -> None:
    out = tmp_path / "evidence.parquet"
    r = survey_cli("export", "--format", "parquet", "-o", str(out), "--db", filled_store.url)
    assert r.returncode == 0, r
    pd.testing.assert_frame_equal(pd.read_parquet(out), evidence_frame(filled_store))


def test_parquet_without_pyarrow_names_the_extra(filled_store: Store, tmp_path: Path) -> None:
    r = survey_fresh("export", "--format", "parquet", "-o", str(tmp_path / "e.parquet"), "--db", filled_store.url,
                     without=("pyarrow",))  # pandas then never uses it either
    assert r.returncode == exitcodes.ENGINE_UNAVAILABLE, r
    assert len(r.stderr.strip().splitlines()) == 1 and "pip install 'proton-survey[parquet]'" in r.stderr
    assert not (tmp_path / "e.parquet").exists()


def test_export_refuses_an_unknown_format(filled_store: Store, tmp_path: Path) -> None:
    r = survey_cli("export", "--format", "xlsx", "-o", str(tmp_path / "e"), "--db", filled_store.url)
    assert r.returncode == exitcodes.USAGE and "unknown format 'xlsx'" in r.stderr


def test_pandas_is_imported_only_by_the_frame() -> None:
    importers = []
    for path in [*(ROOT / "survey").rglob("*.py"), *(ROOT / "api").rglob("*.py"), *(ROOT / "db").rglob("*.py")]:
        for n in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module or ""] if isinstance(n, ast.ImportFrom) else []
            if any(x.split(".")[0] in ("pandas", "pyarrow") for x in names):
                importers.append(str(path.relative_to(ROOT)))
    assert sorted(set(importers)) == ["survey/render/frame.py"]
