"""The CLI cache (survey.replay): `survey table`, `survey check --platform` and
`--help` asked again with nothing changed print the kept answer; any change to the
store, to a file the answer read, to the evidence age it shows, or to the arguments,
environment or terminal runs the command again. PostgreSQL and unreadable stores are
never kept, a missing store is never created, a corrupt entry is ignored."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from db.store import Store
from survey import replay
from survey.identity import PlatformId
from survey.ingest import ingest, record_failure
from tests.conftest import CliResult, report_bytes, survey_cli

ROOT = Path(__file__).resolve().parents[1]
CHECK = ["check", "triton-3.8.0", "--backend", "rocprofiler", "--mode", "pcsampling", "--platform", "none:x86_64"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI cache on, in a directory of this test's own."""
    d = tmp_path / "cache"
    monkeypatch.setenv("SURVEY_CACHE", str(d))
    monkeypatch.setenv("SURVEY_CLI_CACHE", "1")
    return d / "cli"


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    """The four real CPU reports in a SQLite store (as the conftest's filled_store)."""
    store = Store(f"sqlite:///{tmp_path / 'survey.db'}")
    for pos, v in enumerate(("3.6.0", "3.7.1", "3.8.0", "3.9.0")):
        with store.session() as s:
            ingest(s, report_bytes(f"cpu-triton-{v}.json"), candidate=f"triton-{v}", label=f"Triton {v}",
                   kind="pip", spec={"pip": f"triton=={v}"}, position=pos, source="ingest", scope="catalog")
    return store


def replayed(*args: str) -> CliResult | None:
    """The kept answer to ``survey ARGS`` (as survey_cli would print it), or None: it would run."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            replay.answer(list(args))
    except SystemExit as e:
        assert isinstance(e.code, int)
        return CliResult(e.code, out.getvalue(), err.getvalue())
    return None


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.json")) if cache.is_dir() else []


def test_table_is_replayed_until_a_report_is_ingested(sqlite_store: Store, cache: Path) -> None:
    args = ("table", "--db", sqlite_store.url)
    assert replayed(*args) is None
    first = survey_cli(*args)
    assert first.returncode == 0 and "Triton 3.8.0" in first.stdout
    again = replayed(*args)
    assert again is not None and (again.returncode, again.stdout, again.stderr) == (0, first.stdout, first.stderr)
    with sqlite_store.session() as s:  # new evidence: a fifth candidate
        res = ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate="triton-gpu", label="Triton on a GPU",
                     kind="pip", spec={"pip": "triton==3.6.0"}, position=9, source="ingest", scope="catalog")
    assert res.created
    assert replayed(*args) is None
    after = survey_cli(*args)
    assert after.returncode == 0 and "Triton on a GPU" in after.stdout and after.stdout != first.stdout
    replayed_after = replayed(*args)
    assert replayed_after is not None and replayed_after.stdout == after.stdout


def test_a_retry_that_keeps_the_matrix_version_is_still_a_change(sqlite_store: Store, cache: Path) -> None:
    """A failure seen again only counts a retry; the tidy rows show the count, so the
    kept answer must not be replayed."""
    platform = PlatformId("none:x86_64", "none", None, "x86_64", {})
    fail = {"label": "Gone", "kind": "pip", "spec": {"pip": "gone==1"}, "position": 7, "error": "no such package",
            "platform": platform, "scope": "catalog"}
    with sqlite_store.session() as s:
        record_failure(s, "gone", **fail)  # type: ignore[arg-type]
    args = ("table", "--format", "csv", "--db", sqlite_store.url)
    first = survey_cli(*args)
    assert replayed(*args) is not None
    with sqlite_store.session() as s:
        _, new = record_failure(s, "gone", **fail)  # type: ignore[arg-type]
    assert not new
    assert replayed(*args) is None
    assert survey_cli(*args).stdout != first.stdout


def test_check_from_stored_evidence_is_replayed_with_its_exit_code(sqlite_store: Store, cache: Path) -> None:
    args = (*CHECK, "--db", sqlite_store.url)
    first = survey_cli(*args)
    assert first.returncode == 2 and "cannot run it" in first.stdout and " old)" in first.stdout
    again = replayed(*args)
    assert again is not None and (again.returncode, again.stdout) == (2, first.stdout)
    as_json = survey_cli(*args, "--json")
    kept = replayed(*args, "--json")
    assert kept is not None and kept.stdout == as_json.stdout and json.loads(kept.stdout)["evidence_age"]


def test_an_answer_that_shows_an_age_lasts_as_long_as_the_age_reads_the_same() -> None:
    t = dt.datetime(2026, 12, 1, 10, 0, 0, 400000, tzinfo=dt.UTC)
    date = t.isoformat(timespec="seconds")
    now = t + dt.timedelta(hours=5, minutes=3)
    assert replay.age_holds(date, "5 hours old", now)
    assert not replay.age_holds(date, "4 hours old", now)
    # within the second the date cannot tell apart, the words may differ: not replayed
    edge = dt.datetime(2026, 12, 1, 11, 0, 0, tzinfo=dt.UTC)
    assert not replay.age_holds(date, "59 minutes old", edge) and not replay.age_holds(date, "1 hour old", edge)


def test_check_of_a_target_that_is_not_a_stored_name_is_not_kept(sqlite_store: Store, cache: Path) -> None:
    args = ("check", sys.executable, "--backend", "cupti", "--platform", "none:x86_64", "--db", sqlite_store.url)
    first = survey_cli(*args)
    assert first.returncode != 0
    assert replayed(*args) is None and entries(cache) == []


def test_a_corrupt_entry_is_ignored_and_replaced(sqlite_store: Store, cache: Path) -> None:
    args = ("table", "--db", sqlite_store.url)
    first = survey_cli(*args)
    [entry] = entries(cache)
    for garbage in (b"", b"{not json", json.dumps({"format": replay.FORMAT, "key": entry.stem}).encode(),
                    json.dumps({**json.loads(first_entry := entry.read_text()), "chunks": [[7, "x"]]}).encode()):
        entry.write_bytes(garbage)
        assert replayed(*args) is None
        res = survey_cli(*args)
        assert (res.returncode, res.stdout) == (0, first.stdout)
        assert json.loads(entry.read_text())["chunks"] == json.loads(first_entry)["chunks"]
    again = replayed(*args)
    assert again is not None and again.stdout == first.stdout


def test_a_missing_store_is_not_created_and_nothing_is_kept(tmp_path: Path, cache: Path) -> None:
    db = tmp_path / "nowhere" / "survey.db"
    for _ in range(2):
        res = survey_cli("table", "--db", f"sqlite:///{db}")
        assert res.returncode != 0 and "no proton-survey store" in res.stderr
    assert not db.exists() and not db.parent.exists() and entries(cache) == []


def test_a_store_replaced_at_the_same_path_is_read_again(sqlite_store: Store, tmp_path: Path, cache: Path) -> None:
    args = ("table", "--db", sqlite_store.url)
    first = survey_cli(*args)
    path = sqlite_store.sqlite_file()
    assert path is not None
    sqlite_store.close()
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    with other.session() as s:
        ingest(s, report_bytes("cpu-triton-3.6.0.json"), candidate="only-one", label="Only one", kind="pip",
               spec={"pip": "triton==3.6.0"}, position=0, source="ingest", scope="catalog")
    other.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(tmp_path / "other.db", path)
    assert replayed(*args) is None
    res = survey_cli(*args)
    assert "Only one" in res.stdout and res.stdout != first.stdout


def test_a_documented_file_given_is_read_by_content(sqlite_store: Store, tmp_path: Path, cache: Path) -> None:
    claims = tmp_path / "claims.yaml"
    claims.write_text((ROOT / "survey" / "documented" / "triton-main.yaml").read_text())
    args = ("table", "--db", sqlite_store.url, "--documented", str(claims))
    first = survey_cli(*args)
    assert first.returncode == 0 and replayed(*args) is not None
    claims.write_text("claims: []\n")
    assert replayed(*args) is None


def test_check_and_write_of_a_docs_file_are_not_kept(sqlite_store: Store, tmp_path: Path, cache: Path) -> None:
    docs = tmp_path / "docs.md"
    docs.write_text("<!-- proton-survey:availability:start -->\n<!-- proton-survey:availability:end -->\n")
    survey_cli("table", "--db", sqlite_store.url, "--write", str(docs))
    survey_cli("table", "--db", sqlite_store.url, "--check", str(docs))
    assert entries(cache) == []


def test_help_is_replayed(cache: Path) -> None:
    first = survey_cli("check", "--help")
    assert first.returncode == 0 and "--platform" in first.stdout
    again = replayed("check", "--help")
    assert again is not None and again.stdout == first.stdout
    survey_cli("no-such-command", "--help")
    assert replayed("no-such-command", "--help") is None


def test_the_switch_turns_it_off(sqlite_store: Store, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURVEY_CLI_CACHE", "0")
    survey_cli("table", "--db", sqlite_store.url)
    assert entries(cache) == []


def test_an_other_environment_or_argument_is_an_other_answer(sqlite_store: Store, cache: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    survey_cli("table", "--db", sqlite_store.url)
    assert replayed("table", "--db", sqlite_store.url) is not None
    assert replayed("table", "--all", "--db", sqlite_store.url) is None
    monkeypatch.setenv("NO_COLOR", "1")
    assert replayed("table", "--db", sqlite_store.url) is None


def test_a_store_that_is_not_a_sqlite_file_is_not_kept(cache: Path) -> None:
    rec = replay.Recording("k" * 64, ["table"])
    rec.read_store(None)  # Store.sqlite_file() of PostgreSQL or an in-memory database
    rec.replayable()
    rec.finish(0)
    assert entries(cache) == []


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_postgresql_is_never_kept(filled_store: Store, cache: Path) -> None:
    assert filled_store.sqlite_file() is None
    for args in (("table", "--db", filled_store.url), (*CHECK, "--db", filled_store.url)):
        first = survey_cli(*args)
        assert first.returncode in (0, 2)
        assert replayed(*args) is None
    assert entries(cache) == []


def test_python_m_survey_answers_without_sqlalchemy(sqlite_store: Store, cache: Path) -> None:
    """The real entry point: the second run replays before Typer or SQLAlchemy load."""
    env = {**os.environ, "SURVEY_DB": sqlite_store.url, "COLUMNS": "200"}
    path = sqlite_store.sqlite_file()
    sqlite_store.close()
    first = subprocess.run([sys.executable, "-m", "survey", "table"], capture_output=True, text=True, env=env,
                           cwd=ROOT)
    assert first.returncode == 0 and "Triton 3.9.0" in first.stdout
    assert not Path(f"{path}-wal").exists()  # the process closed the store before it ended (a checkpoint)
    second = subprocess.run([sys.executable, "-X", "importtime", "-m", "survey", "table"], capture_output=True,
                            text=True, env=env, cwd=ROOT)
    assert second.returncode == 0 and second.stdout == first.stdout
    imported = second.stderr
    assert "survey.replay" in imported and "sqlalchemy" not in imported and "typer" not in imported


def test_bytes_written_past_the_text_layer_are_not_kept(cache: Path) -> None:
    raw = io.BytesIO()
    with contextlib.redirect_stdout(io.TextIOWrapper(raw, encoding="utf-8")):
        with replay.recording("k" * 64, ["table"]) as rec:
            print("kept")
            sys.stdout.buffer.write(b"not kept\n")
            rec.replayable()
            rec.finish(0)
    assert entries(cache) == []


def test_an_answer_that_asked_the_container_engine_is_not_kept(sqlite_store: Store, tmp_path: Path, cache: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Naming an image, `survey check` makes its launcher, which asks for a container
    engine (and fails without one): that is not in the key, so nothing is kept."""
    from survey.launchers import image as image_mod

    monkeypatch.setattr(image_mod, "check_engine", lambda engine: (True, "4.3.1"))
    cat = tmp_path / "catalog.toml"
    cat.write_text('[[candidate]]\nname = "triton-3.8.0"\nimage = "registry.invalid/triton:3.8.0"\n')
    args = (*CHECK, "--catalog", str(cat), "--db", sqlite_store.url)
    res = survey_cli(*args)
    assert res.returncode == 2 and "cannot run it" in res.stdout
    assert replayed(*args) is None and entries(cache) == []


def test_a_read_only_store_reads_as_before_and_nothing_is_made_beside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 0444 store in a directory the reader cannot write (read as `nobody` when run
    as root): the table reads as it does without the cache, twice, and nothing is
    created or changed next to the store."""
    import shutil
    import tempfile

    from tests.test_db import filled_sqlite, sha256, unprivileged

    d = Path(tempfile.mkdtemp(prefix="proton-survey-replay-ro-"))
    try:
        os.chmod(d, 0o755)
        store_dir, cache_dir = d / "ro", d / "cache"
        store_dir.mkdir()
        cache_dir.mkdir()
        os.chmod(cache_dir, 0o777)
        filled_sqlite(store_dir / "s.db")
        warm = d / "warm.db"  # the child as `nobody` cannot read root's interpreter: import what it needs here
        shutil.copy(store_dir / "s.db", warm)
        monkeypatch.setenv("SURVEY_CACHE", str(d / "warm-cache"))
        for switch in ("0", "1", "1"):
            monkeypatch.setenv("SURVEY_CLI_CACHE", switch)
            survey_cli("table", "--format", "json", "--db", f"sqlite:///{warm}")
        os.chmod(store_dir / "s.db", 0o444)
        os.chmod(store_dir, 0o555)
        before = sha256(store_dir / "s.db")
        url = f"sqlite:///{store_dir / 's.db'}"
        monkeypatch.setenv("SURVEY_CLI_CACHE", "0")
        plain = unprivileged(lambda: vars(survey_cli("table", "--format", "json", "--db", url)))
        monkeypatch.setenv("SURVEY_CLI_CACHE", "1")
        monkeypatch.setenv("SURVEY_CACHE", str(cache_dir))
        twice = unprivileged(lambda: [vars(survey_cli("table", "--format", "json", "--db", url)) for _ in range(2)])
        assert plain["returncode"] == 0 and json.loads(plain["stdout"])
        assert [(r["returncode"], r["stdout"]) for r in twice] == [(0, plain["stdout"])] * 2
        assert sorted(p.name for p in store_dir.iterdir()) == ["s.db"] and sha256(store_dir / "s.db") == before
    finally:
        for p in [d, *d.rglob("*")]:
            if p.is_dir():
                os.chmod(p, 0o755)
        shutil.rmtree(d)
