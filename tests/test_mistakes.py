"""What a person types wrong: a suggestion wherever a name is typed, one exit code per
kind of mistake whatever the command (64: the command line itself; 65: a name or file
that names nothing), help that shows flags as flags, and words instead of Python reprs."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.store import Store
from survey.core import exitcodes
from survey.core.errors import nearest
from tests.conftest import survey_cli

BACKENDS = ("cupti", "roctracer", "rocprofiler", "instrumentation")


@pytest.mark.parametrize("typed,choices,meant", [
    ("triton-3.8", ("triton-3.6.0", "triton-3.8.0", "triton-3.9.0", "triton-main"), "triton-3.8.0"),
    ("triton3.8.0", ("triton-3.6.0", "triton-3.8.0", "triton-3.9.0", "triton-main"), "triton-3.8.0"),
    ("markdown", ("md", "html", "grid", "csv", "json"), "md"),
    ("JSON", ("md", "html", "grid", "csv", "json"), "json"),
    ("ROCPROFILER", BACKENDS, "rocprofiler"),
    ("captur", ("source", "triton", "choices", "capture", "evidence"), "capture"),
    ("cuptii", BACKENDS, "cupti"),
    ("rocprofilr", BACKENDS, "rocprofiler"),
    ("nvtx", BACKENDS, None),
])
def test_the_name_meant(typed: str, choices: tuple[str, ...], meant: str | None) -> None:
    assert nearest(typed, choices) == meant


@pytest.mark.parametrize("args,code,says", [
    # a word of a fixed vocabulary (format, backend, mode, column): usage, 64
    (["table", "--format", "markdown"], exitcodes.USAGE, "did you mean 'md'?"),
    (["table", "--format", "JSON"], exitcodes.USAGE, "did you mean 'json'?"),
    (["check", "triton-3.8.0", "--backend", "ROCPROFILER"], exitcodes.USAGE, "did you mean 'rocprofiler'?"),
    (["history", "triton-3.8.0", "--backend", "ROCPROFILER"], exitcodes.USAGE, "did you mean 'rocprofiler'?"),
    (["table", "--columns", "+captur"], exitcodes.USAGE, "did you mean 'capture'?"),
    (["probe", "--python", "python3", "--only", "cuptii"], exitcodes.USAGE,
     "--only cuptii: unknown backend 'cuptii'; did you mean 'cupti'?"),
    (["probe", "--python", "python3", "--capture", "rocprofiller:pcsampling"], exitcodes.USAGE,
     "did you mean 'rocprofiler'?"),
    (["probe", "--python", "python3", "--only", "rocprofiler:pcsamplin"], exitcodes.USAGE,
     "did you mean 'pcsampling'?"),
    # a command line that is wrong in itself: usage, 64, whichever command
    (["check", "triton-3.8.0"], exitcodes.USAGE, "--backend"),
    (["history", "triton-3.8.0"], exitcodes.USAGE, "--backend"),
    (["probe"], exitcodes.USAGE, "give exactly one of --python PATH or --image IMAGE"),
    (["check", "--backend", "cupti"], exitcodes.USAGE, "give TARGET"),
    (["check", "h200", "--aorta-environment", "x", "--backend", "cupti"], exitcodes.USAGE, "not both"),
    (["platform", "--head", "--address", "h:1"], exitcodes.USAGE, "not both"),
    # a name that names nothing stored or catalogued: data, 65, with the name it was likely meant to be
    (["check", "triton-3.8", "--backend", "cupti"], exitcodes.INPUT, "did you mean 'triton-3.8.0'?"),
    (["check", "triton3.8.0", "--backend", "cupti"], exitcodes.INPUT, "did you mean 'triton-3.8.0'?"),
    (["history", "triton-3.8", "--backend", "cupti"], exitcodes.INPUT, "did you mean 'triton-3.8.0'?"),
    (["diff", "triton3.8.0", "triton-3.9.0"], exitcodes.INPUT, "did you mean 'triton-3.8.0'?"),
    (["run", "--only", "triton-3.8"], exitcodes.INPUT, "did you mean 'triton-3.8.0'?"),
])
def test_one_code_per_kind_of_mistake_and_a_suggestion(filled_store: Store, args: list[str], code: int,
                                                       says: str) -> None:
    r = survey_cli(*args, *(["--db", filled_store.url] if args[0] != "platform" else []))
    assert r.returncode == code, r
    assert says in r.stderr and "Traceback" not in r.stderr, r
    if code == exitcodes.INPUT or "did you mean" in says:
        assert len([ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("  ")]) == 1, r


def test_a_recipes_misspelt_backend_is_suggested(filled_store: Store, tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nworkload: gpu_smoke\ncollect:\n  proton:\n    mode: env\n"
                      "    backend: rocprofilr\ncells:\n  - name: a\n    environment: local\n")
    r = survey_cli("check", "triton-3.8.0", "--recipe", str(recipe), "--db", filled_store.url)
    assert r.returncode == exitcodes.INPUT and "did you mean 'rocprofiler'?" in r.stderr, r


def test_db_takes_a_plain_file_path(filled_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As datasette takes a file: --db survey.db (relative or absolute), not only a SQLAlchemy URL."""
    if not filled_store.url.startswith("sqlite:///"):
        pytest.skip("a file store")
    path = Path(filled_store.url.removeprefix("sqlite:///"))
    for given in (str(path), path.name):
        monkeypatch.chdir(path.parent)
        r = survey_cli("table", "--db", given)
        assert r.returncode == 0 and "| Triton 3.8.0 " in r.stdout, r
    new = tmp_path / "new.db"
    assert survey_cli("ingest", "--db", str(new), str(Path(__file__).parent / "fixtures" / "reports" /
                                                      "cpu-triton-3.8.0.json")).returncode == 0
    assert new.is_file() and new.stat().st_size > 0


@pytest.mark.parametrize("command", [[], ["table"], ["check"], ["run"], ["diff"]])
def test_help_shows_flags_as_flags(command: list[str]) -> None:
    r = survey_cli(*command, "--help")
    assert r.returncode == 0
    assert "<bool>" not in r.stdout, r.stdout
    assert "--help" in r.stdout


def test_a_column_asked_for_is_shown_even_empty(filled_store: Store) -> None:
    """The CPU reports hold no GELU capture: `--columns capture` says so in its column."""
    r = survey_cli("table", "--columns", "capture", "--db", filled_store.url)
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[0] == "| Source | GELU capture |", r.stdout
    assert "| Triton 3.8.0 ¹ | — |" in r.stdout or "| Triton 3.8.0 " in r.stdout.splitlines()[2 + 2]


def test_diff_says_words(filled_store: Store) -> None:
    r = survey_cli("diff", "triton-3.6.0", "triton-3.9.0", "--db", filled_store.url)
    assert r.returncode == exitcodes.FAILURE, r
    assert "None" not in r.stdout and "['" not in r.stdout, r.stdout
    assert "not read -> cupti, rocprofiler, roctracer, instrumentation" in r.stdout
    assert "not checked" in r.stdout
