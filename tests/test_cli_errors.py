"""Bad input on the command line: one clear line and a documented exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from survey.core import exitcodes
from tests.conftest import survey_cli


@pytest.fixture
def junk(tmp_path: Path) -> dict[str, Path]:
    binary = tmp_path / "binary.toml"
    binary.write_bytes(bytes(range(256)))
    utf16 = tmp_path / "utf16.json"
    utf16.write_bytes('{"schema_version": 2}'.encode("utf-16"))
    return {"binary": binary, "dir": tmp_path, "utf16": utf16}


@pytest.mark.parametrize("args,code,words", [
    (["run", "--catalog", "{binary}"], exitcodes.INPUT, "binary data, not a TOML catalog"),
    (["run", "--catalog", "{dir}"], exitcodes.INPUT, "is a directory"),
    (["ingest", "{utf16}"], exitcodes.INPUT, "UTF-16"),
    (["ingest", "{binary}"], exitcodes.INPUT, "not UTF-8"),
    (["ingest", "{dir}"], exitcodes.INPUT, "Is a directory"),
    (["table", "--format", "gird"], exitcodes.USAGE, "one of md"),
    (["table", "--db", "sqlite:////proc/nope/x.db"], exitcodes.INPUT, "no proton-survey store"),
    (["diff", "run:99999999999999999999999", "1"], exitcodes.INPUT, "no run #99999999999999999999999"),
    (["schema", "--write", "{dir}/no/such/dir/s.json"], exitcodes.INPUT, "cannot write it"),
    (["no-such-command"], exitcodes.USAGE, "No such command 'no-such-command'"),
])
def test_bad_input_is_one_line_and_a_documented_code(junk: dict[str, Path], filled_store, args: list[str],
                                                    code: int, words: str) -> None:
    argv = [a.format(**junk) for a in args]
    if argv[0] in ("table", "diff", "ingest") and "--db" not in argv:
        argv += ["--db", filled_store.url]
    r = survey_cli(*argv)
    assert r.returncode == code, r
    assert "Traceback" not in r.stderr + r.stdout
    assert words in r.stderr


def test_a_candidate_that_cannot_be_obtained_is_exit_7_like_any_target(tmp_path: Path) -> None:
    catalog = tmp_path / "c.toml"
    catalog.write_text('[[candidate]]\nname = "gone"\npip = "proton-survey-no-such==1.0"\n'
                       'index_url = "http://127.0.0.1:9/simple"\n')
    r = survey_cli("check", "gone", "--backend", "cupti", "--catalog", str(catalog), "--json",
                   "--db", f"sqlite:///{tmp_path / 's.db'}")
    assert r.returncode == exitcodes.UNOBTAINABLE and '"cause": "unobtainable"' in r.stdout


def test_a_postgresql_store_without_its_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """The PostgreSQL driver is the `postgres` extra: where it is not installed (here: an
    environment whose `import psycopg` fails), a postgresql:// store is one line naming it."""
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where the package is not installed
    r = survey_cli("table", "--db", "postgresql://survey@127.0.0.1:9/survey")
    assert r.returncode == exitcodes.INPUT, r
    assert "Traceback" not in r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1 and "pip install 'proton-survey[postgres]'" in r.stderr
