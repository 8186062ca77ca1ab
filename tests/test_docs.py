"""The documentation: docs/cli.md is generated from the commands themselves and fails
here when it is stale; the README stays short; the links between the docs resolve."""

from __future__ import annotations

import re
from pathlib import Path

from survey.cli import reference
from tests.conftest import survey_cli

ROOT = Path(__file__).resolve().parents[1]


def test_the_cli_reference_is_what_the_commands_say() -> None:
    assert reference.DOC == ROOT / "docs" / "cli.md"
    assert reference.DOC.read_text(encoding="utf-8") == reference.markdown(), \
        "docs/cli.md is stale: python -m survey.cli.reference --write"


def test_the_reference_holds_every_command_and_option_that_help_lists() -> None:
    text = reference.markdown()
    top = survey_cli("--help")
    commands = re.findall(r"^│ (\w[\w-]*) ", top.stdout, re.M)
    assert commands and all(f"## `survey {c}`" in text for c in commands), commands
    table = survey_cli("table", "--help").stdout
    for option in ("--format", "--columns", "--width", "--check", "--write", "--all", "--db"):
        assert option in table and f"- `{option}" in text.split("## `survey table`")[1].split("## ")[0], option
    assert "| 64 | `USAGE` |" in text and "| 2 | `CANNOT_RUN` |" in text


def test_the_reference_reads_as_text_and_names_values_not_types() -> None:
    """docs/cli.md reads in a terminal (no line over 120 characters) and an option that
    takes a value shows it as `--engine ENGINE`, never `--engine <str>`, in --help too.
    (Failed first: 37 lines over 120; 34 `<str>`-like metavars.)"""
    text = reference.markdown()
    long = [ln for ln in text.splitlines() if len(ln) > 120]
    assert long == [], long[:5]
    assert re.findall(r"`--[\w-]+ <\w+[^`]*`", text) == []
    assert "`--engine ENGINE`" in text
    helptext = survey_cli("run", "--help").stdout
    assert "<str>" not in helptext and "<int>" not in helptext and "ENGINE" in helptext


def test_check_says_when_the_reference_is_stale(tmp_path: Path, monkeypatch, capsys) -> None:
    stale = tmp_path / "cli.md"
    stale.write_text(reference.markdown().replace("survey table", "survey tabel", 1))
    monkeypatch.setattr(reference, "DOC", stale)
    assert reference.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert reference.main(["--write"]) == 0 and reference.main(["--check"]) == 0
    assert stale.read_text() == reference.markdown()


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, len(lines)


def test_links_between_the_docs_resolve() -> None:
    """Relative links in docs/ and bench/README.md name files of the repository (and, with
    a #fragment, a heading of that file)."""
    pages = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "bench" / "README.md"]
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), (page.name, target)
            if fragment and dest.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), re.M)
                slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
                assert fragment in slugs, (page.name, target, sorted(slugs))
