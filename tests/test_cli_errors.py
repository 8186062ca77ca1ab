"""Bad input on the command line: one clear line and a documented exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from survey.core import exitcodes
from tests.conftest import survey_cli, survey_fresh


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
    (["ingest", "{dir}"], exitcodes.INPUT, "utf16.json: the report is UTF-16"),  # a directory: its *.json
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


def test_one_format_flag_across_commands(filled_store) -> None:  # type: ignore[no-untyped-def]
    """`--format json` on every command that prints JSON; the old `--json` still works but
    is no longer shown. (Failed first: changes, check, diff and platform took only --json.)"""
    db = ["--db", filled_store.url]
    for args in (["changes", *db], ["diff", "triton-3.8.0", "triton-3.9.0", *db], ["platform"],
                 ["check", "triton-3.8.0", "--backend", "cupti", "--platform", "none:x86_64", *db]):
        new, old = survey_cli(*args, "--format", "json"), survey_cli(*args, "--json")
        assert new.returncode == old.returncode and new.returncode in (0, 1, 3), (args, new)
        assert new.stdout == old.stdout and new.stdout.lstrip().startswith(("{", "[")), args
        helptext = survey_cli(args[0], "--help").stdout
        assert "--format" in helptext and "--json" not in helptext, args[0]
        bad = survey_cli(*args, "--format", "xml")
        assert bad.returncode == exitcodes.USAGE and "one of text, json" in bad.stderr, args


def test_only_takes_a_comma_list(tmp_path: Path) -> None:
    """`--only a,b` is `--only a --only b`. (Failed first: "a,b" was one unknown name, exit 64.)"""
    cat = tmp_path / "catalog.toml"
    cat.write_text("".join(f'[[candidate]]\nname = "{n}"\npython = "/nonexistent/{n}/python3"\n\n'
                           for n in ("a", "b", "c")))
    db = f"sqlite:///{tmp_path / 's.db'}"
    r = survey_cli("run", "--db", db, "--catalog", str(cat), "--only", "a,b", "--no-table")
    assert r.returncode == 0 and "survey: 2 unobtainable" in r.stderr, r
    assert "c:" not in r.stderr


def test_a_failed_ingest_creates_no_store(tmp_path: Path) -> None:
    """An ingest that files nothing leaves no new store behind (a typo'd --db is not a new
    store). (Failed first: the store file was created anyway.)"""
    from tests.conftest import report_bytes

    report = tmp_path / "r.json"
    report.write_bytes(report_bytes("cpu-triton-3.8.0.json"))
    db = tmp_path / "new.db"
    r = survey_cli("ingest", str(report), "--candidate", "no-such-candidate", "--db", f"sqlite:///{db}")
    assert r.returncode != 0 and "--new" in r.stderr, r
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    r = survey_cli("ingest", str(report), "--candidate", "mine", "--new", "--db", f"sqlite:///{db}")
    assert r.returncode == 0 and db.exists(), r


def test_a_postgresql_store_without_its_driver_names_the_extra() -> None:
    """The PostgreSQL driver is the `postgres` extra: where it is not installed (here: an
    interpreter whose `import psycopg` fails), a postgresql:// store is one line naming it."""
    r = survey_fresh("table", "--db", "postgresql://survey@127.0.0.1:9/survey", without=("psycopg",))
    assert r.returncode == exitcodes.INPUT, r
    assert "Traceback" not in r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1 and "pip install 'proton-survey[postgres]'" in r.stderr


def test_one_process_makes_the_command_once_and_runs_it_again_and_again(tmp_path: Path) -> None:
    """survey.cli.app.command() is made once in a process; every run gets a context of its
    own, so a run's options and errors do not carry into the next."""
    import importlib

    cli_app = importlib.import_module("survey.cli.app")
    assert cli_app.command() is cli_app.command()
    bad = survey_cli("table", "--db", f"sqlite:///{tmp_path / 'none.db'}", "--format", "nope")
    assert bad.returncode == exitcodes.USAGE and "nope" in bad.stderr
    first, again = survey_cli("table", "--help"), survey_cli("table", "--help")
    assert first.returncode == again.returncode == 0 and first.stdout == again.stdout and "--format" in first.stdout
