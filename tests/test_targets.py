"""Targets as a person types them: relative paths, a venv directory, a catalog's
relative interpreter, a mistyped name; the CLI and the service resolve them alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from db.store import Store
from survey.core import exitcodes
from survey.evidence import queries
from tests.conftest import survey_cli
from tests.helpers.api import assert_error


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv (no pip, no Triton)."""
    root = tmp_path_factory.mktemp("venvs") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root


def stored(db: str) -> dict[str, dict[str, Any]]:
    store = Store(db, create=False)
    try:
        with store.session() as s:
            return {c.name: dict(c.spec or {}) for c in queries.candidates(s)}
    finally:
        store.close()


@pytest.mark.parametrize("typed", ["venv/bin/python", "./venv/bin/python"])
def test_a_missing_relative_interpreter_is_no_such_file(typed: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not an image to pull (exit 7): the file the user meant, which is not there (exit 4)."""
    monkeypatch.chdir(tmp_path)
    r = survey_cli("check", typed, "--backend", "cupti", "--db", str(tmp_path / "s.db"))
    assert r.returncode == exitcodes.NOT_A_PYTHON, r
    assert f"{tmp_path}/venv/bin/python: no such file" in r.stderr and "pull" not in r.stderr


def test_a_venv_directory_is_its_interpreter_and_is_stored_absolute(venv: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(venv.parent)
    db = str(tmp_path / "s.db")
    r = survey_cli("check", "venv", "--backend", "cupti", "--json", "--db", db)  # the directory, relative
    assert r.returncode == exitcodes.CANNOT_RUN, r
    assert json.loads(r.stdout)["cause"] == "no_triton"
    assert stored(db) == {f"python:{venv}": {"python": str(venv)}}  # absolute: usable from anywhere
    # from another directory, the interpreter's path and the directory name the same evidence
    monkeypatch.chdir(tmp_path)
    for typed in (str(venv / "bin" / "python"), str(venv)):
        again = survey_cli("check", typed, "--backend", "cupti", "--json", "--db", db)
        assert again.returncode == exitcodes.CANNOT_RUN and json.loads(again.stdout)["candidate"] == f"python:{venv}"
    assert list(stored(db)) == [f"python:{venv}"]


def test_the_service_resolves_targets_as_the_cli_does(venv: Path, tmp_path: Path,
                                                     make_client: Any) -> None:  # noqa: F811 (the fixture)
    db = str(tmp_path / "s.db")
    assert survey_cli("check", str(venv), "--backend", "cupti", "--db", db).returncode == exitcodes.CANNOT_RUN
    store = Store(db)
    client = make_client(store)
    for typed in (str(venv / "bin" / "python"), str(venv)):
        body = client.get("/check.json", params={"target": typed, "backend": "cupti"}).json()
        assert body["candidate"] == f"python:{venv}" and body["cause"] == "no_triton", (typed, body)
    # a name that is nothing: refused as the CLI refuses it, with the name it was likely meant to be
    cli = survey_cli("check", "triton-3.8", "--backend", "cupti", "--db", db)
    assert cli.returncode == exitcodes.INPUT and "did you mean 'triton-3.8.0'?" in cli.stderr, cli
    err = assert_error(client.get("/check.json", params={"target": "triton-3.8", "backend": "cupti"}),
                       404, "not_found", "target")
    assert "did you mean 'triton-3.8.0'?" in err["message"]
    # a catalog entry not yet stored: not enough evidence, with the command that gets some
    body = client.get("/check.json", params={"target": "triton-3.8.0", "backend": "cupti"}).json()
    assert body["verdict"] == "not_enough_evidence" and "survey check triton-3.8.0 --backend cupti" in body["fix"]
    store.close()


def test_a_catalogs_relative_interpreter_is_relative_to_the_catalog(venv: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    catalogs = venv.parent / "catalogs"
    catalogs.mkdir(exist_ok=True)
    cat = catalogs / "c.toml"
    cat.write_text('[[candidate]]\nname = "v"\npython = "../venv/bin/python"\n')
    monkeypatch.chdir(tmp_path)  # not where the catalog is
    db = str(tmp_path / "s.db")
    r = survey_cli("run", "--catalog", str(cat), "--no-table", "--db", db)
    assert r.returncode == 0 and "1 probed" in r.stderr, r
    assert stored(db) == {"v": {"name": "v", "python": str(venv / "bin" / "python")}}
