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


def _latest_bench_api() -> dict:
    import json

    latest = sorted((ROOT / "bench" / "measured").glob("cpu-*/bench_api.json"), key=lambda p: p.parent.name)[-1]
    return json.loads(latest.read_text())


def test_figures_and_defaults_quoted_in_the_docs_are_the_code_s_and_the_bench_s() -> None:
    """The report schema's version, `--repeats`' default and the service-against-datasette
    figure, wherever the docs quote them, are what the code says and what the newest bench
    result measured. (Failed first: README said schema v2 (it is v3), and later evidence.md and
    service.md "schema version 2" and probe-report.v2.schema.json, concepts.md
    `--repeats` default 3 (it is 6), performance.md 21.7x (the newest run: 10.8x).)"""
    from probes import SCHEMA_VERSION
    from survey.flows.run import ProbeSettings

    pages = {p.name: p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    said = r"\bschema v(\d+)\b|\bschema version (?:is )?(\d+)|probe-report\.v(\d+)\.schema"
    schemas = [(name, next(x for x in v if x)) for name, text in pages.items() for v in re.findall(said, text)]
    assert schemas and all(int(v) == SCHEMA_VERSION for _, v in schemas), schemas
    repeats = [(name, v) for name, text in pages.items()
               for v in re.findall(r"`--repeats`[^.)]*?default (\d+)", text)]
    assert repeats and all(int(v) == ProbeSettings().repeats for _, v in repeats), repeats
    figures = _latest_bench_api()["figures"]
    ratio = figures["ours"]["rps"] / figures["datasette"]["rps"]
    row = next(ln for ln in pages["performance.md"].splitlines() if "against datasette" in ln)
    assert f"**{ratio:.1f}x**" in row, row
    assert f"{figures['ours']['rps']:,.0f} vs {figures['datasette']['rps']:,.0f} req/s" in row, row
    assert f"p99 {figures['ours']['p99_ms']:.1f} ms" in row, row


def test_no_dangling_section_reference() -> None:
    """A `README: "Name"` or `concepts.md: "Name"` reference names a heading that page has.
    (Failed first: "Families" is no heading of README.)"""
    files = [*sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "survey" / "data").rglob("*.toml"))]
    refs = [(f.name, page, name) for f in files
            for page, name in re.findall(r'\b(README|[\w-]+\.md): "([^"]+)"', f.read_text(encoding="utf-8"))]
    assert refs
    for where, page, name in refs:
        path = ROOT / "README.md" if page == "README" else ROOT / "docs" / page.removeprefix("docs/")
        headings = set(re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M))
        assert name in headings, (where, page, name)


def test_no_paragraph_is_said_twice() -> None:
    """No page says a paragraph twice (the same opening, reworded or not). (Failed first:
    concepts.md had "Re-surveys stay off the network." twice.)"""
    for page in [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", page.read_text(encoding="utf-8"))]
        openings = [p[:60] for p in paras if len(p) > 100 and not p.startswith(("|", "```", "- ", "#"))]
        twice = {p for p in openings if openings.count(p) > 1}
        assert not twice, (page.name, sorted(twice)[:1])


def test_the_readme_grid_is_what_survey_table_prints(tmp_path: Path) -> None:
    """README's grid is `survey table --all` over the fixture reports it names, as printed
    today (the same words as every other surface). (Failed first: it showed the old
    "✓ accepted" cells that /matrix and `survey check` contradicted.)"""
    from db.store import Store
    from survey.evidence.ingest import ingest
    from survey.render import grid
    from survey.verdicts import matrix
    from tests.conftest import report_bytes

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    for v in ("3.6.0", "3.7.1", "3.8.0", "3.9.0"):
        with store.session() as s:
            ingest(s, report_bytes(f"cpu-triton-{v}.json"), candidate=f"triton-{v}")
    with store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="triton-3.6.0")
    with store.session() as s:
        shown = grid.render(matrix.matrix(s, scope="all"))
    store.close()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "```\n" + shown + "```\n" in readme
