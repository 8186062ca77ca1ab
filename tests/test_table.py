"""The Availability table: the reference page's layout and words, footnotes,
columns, per-platform rows where the evidence differs, Markdown and HTML, the
terminal grid, the tidy matrix rows (csv/json, with a published schema), and a
docs file kept in step (drift check, write-in-place touching nothing else)."""

from __future__ import annotations

import json
import os
import re
import select
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from db.store import Store
from survey.cli import app as cli_app
from survey.core.errors import InputError
from survey.environments import catalog as catalog_mod
from survey.evidence.ingest import ingest, upsert_candidate
from survey.render import docs_table, grid
from survey.render import table as table_mod
from survey.verdicts import cells as cells_mod
from survey.verdicts import matrix as survey_matrix
from survey.verdicts import rows as matrix_schema
from survey.verdicts import vocabulary
from tests.conftest import report_bytes, survey_cli
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schema" / "matrix-rows.v1.schema.json"
SUP = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")


def cells_by_source(store: Store, columns: list[str] | None = None) -> dict[str, dict[str, docs_table.Cell]]:
    with store.session() as s:
        return {r["source"].text: r for r in docs_table.build(s, columns=columns).rows}


@pytest.fixture
def catalog_store(filled_store: Store) -> Store:
    """The default catalog as the development machine surveys it: the four real
    CPU reports under their catalog names and labels, the committed H200 report
    filed under triton-3.6.0, and every other catalog entry really attempted and
    stored as unobtainable (an interpreter that does not exist: a real failure)."""
    from survey.environments.launchers.python import PythonLauncher
    from survey.flows.run import ProbeSettings, survey_one

    cat = catalog_mod.load()
    for pos, entry in enumerate(cat.candidate):
        if entry.name in ("triton-3.6.0", "triton-3.7.1", "triton-3.8.0", "triton-3.9.0"):
            with filled_store.session() as s:
                upsert_candidate(s, entry.name, label=entry.display_label, kind=entry.kind, spec=entry.spec(),
                                 position=pos, scope="catalog")
                s.commit()
            continue
        out = survey_one(filled_store, entry.name, entry.display_label, entry.kind, None, pos,
                         PythonLauncher("/nonexistent/bin/python3"), ProbeSettings(), scope="catalog")
        assert out.status == "unobtainable"
    with filled_store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="triton-3.6.0")
    return filled_store


# ---------------------------------------------------------------------------- cells
def test_cells_read_like_the_reference_page(filled_store: Store) -> None:
    rows = cells_by_source(filled_store)
    assert list(rows) == ["Triton 3.6.0", "Triton 3.7.1", "Triton 3.8.0", "Triton 3.9.0"]
    assert [c for c in rows["Triton 3.6.0"]] == ["source", "triton", "choices", "rocprofiler"]
    assert rows["Triton 3.6.0"]["choices"].text == "`cupti`, `roctracer`, `instrumentation`"
    assert rows["Triton 3.7.1"]["choices"].text == "same three"
    assert rows["Triton 3.7.1"]["rocprofiler"].text == "backend absent"
    r38, r39 = rows["Triton 3.8.0"], rows["Triton 3.9.0"]
    assert r38["choices"].text == "`cupti`, `rocprofiler`, `roctracer`, `instrumentation`"
    assert r39["choices"].text == "same four"
    assert r38["rocprofiler"].text == "`periodic_flushing` only — `pcsampling` raises `unsupported mode`"
    assert r39["rocprofiler"].text == \
        "`periodic_flushing` only — `pcsampling` refused: built without PC sampling support"
    # both answered through the stub library: one caveat, one footnote
    assert r38["rocprofiler"].note == r39["rocprofiler"].note
    # the footnote says both facts of each stub-derived mode in /matrix's words (one vocabulary)
    with filled_store.session() as s:
        matrix = {(r["candidate"], r["mode"]): r for r in survey_matrix.matrix(s) if r["backend"] == "rocprofiler"}
    for name in ("triton-3.8.0", "triton-3.9.0"):
        for mode in ("pcsampling", "periodic_flushing"):
            assert f"`{mode}`: {vocabulary.say(matrix[name, mode])}" in r38["rocprofiler"].note, (name, mode)
    assert "cannot run: runtime library missing here; supported by the build (stub-derived)" in r38["rocprofiler"].note
    assert "`librocprofiler-sdk.so` did not load here" in r38["rocprofiler"].note
    assert re.fullmatch(r"run #\d+, 2026-12-02, host vm", r38["source"].note or "")


def test_other_backends_columns_and_the_captures(catalog_store: Store) -> None:
    rows = cells_by_source(catalog_store, docs_table.parse_columns("source,cupti,instrumentation,capture"))
    h200 = rows["Triton 3.6.0 on NVIDIA H200 (sm_90)"]
    assert h200["cupti"].text == "`pcsampling` only — `periodic_flushing` raises `unsupported mode`"
    assert h200["instrumentation"].text == "`default` and `mma`"
    assert h200["capture"].text == ("`cupti` (no mode, `pcsampling`): ok, 50 launches; "
                                    "`instrumentation` (no mode, `default`, `mma`): empty capture")
    cpu = rows["Triton 3.6.0 on no GPU (x86_64)"]
    assert cpu["cupti"].text == "`periodic_flushing` raises `unsupported mode`; `pcsampling`: no GPU here"
    assert cpu["capture"].text == "—"
    assert rows["Triton 3.7.1"]["cupti"].text == "`pcsampling`: no GPU here; `periodic_flushing`: crashed"


def test_rows_without_evidence_say_why_in_a_footnote(catalog_store: Store) -> None:
    with catalog_store.session() as s:
        upsert_candidate(s, "later", label="Not probed yet", kind="pip", position=20, scope="catalog")
        s.commit()
    rows = cells_by_source(catalog_store)
    gone = rows["`rocm/pytorch:latest`"]
    assert [gone[k].text for k in ("triton", "choices", "rocprofiler")] == ["—", "—", "—"]
    assert re.fullmatch(r"no evidence: unobtainable here \(/nonexistent/bin/python3: no such file\), "
                        r"since \d{4}-\d\d-\d\d", gone["source"].note or "")
    assert rows["Not probed yet"]["source"].note == "no evidence: not yet probed"


def test_the_platform_is_shown_where_the_evidence_differs(catalog_store: Store) -> None:
    # the reference page's columns read the same on both platforms: one row, both runs in its footnote
    rows = cells_by_source(catalog_store)
    assert "Triton 3.6.0" in rows and not any(" on " in k for k in rows)
    note = rows["Triton 3.6.0"]["source"].note or ""
    assert re.fullmatch(r"run #\d+, 2026-12-02, no GPU \(x86_64\), host vm; "
                        r"run #\d+, 2026-12-03, NVIDIA H200 \(sm_90\), host vm", note)
    # with the captures, they differ: a row per platform
    md = survey_cli("table", "--columns", "+capture", "--db", catalog_store.url).stdout
    assert re.search(r"^\| Triton 3\.6\.0 on no GPU \(x86_64\) \S+ \| 3\.6\.0 \|", md, re.M)
    assert re.search(r"^\| Triton 3\.6\.0 on NVIDIA H200 \(sm_90\) \S+ \| 3\.6\.0 \| same three \|.*50 launches", md,
                     re.M)
    # or in a Platform column of their own
    md = survey_cli("table", "--columns", "+platform,+capture", "--db", catalog_store.url).stdout
    head = md.splitlines()[0]
    assert head == "| Source | Triton | Proton `-b` choices | `rocprofiler` modes | Platform | GELU capture |"
    assert "| NVIDIA H200 (sm_90) | `cupti` (no mode, `pcsampling`): ok, 50 launches;" in md


def test_a_column_asked_for_is_shown_even_with_nothing_in_it(filled_store: Store) -> None:
    md = survey_cli("table", "--columns", "+capture,+platform,+cupti", "--db", filled_store.url).stdout
    # one platform, no capture anywhere: asked for by name, so shown (a column of "—" is the answer)
    assert md.splitlines()[0] == ("| Source | Triton | Proton `-b` choices | `rocprofiler` modes | GELU capture "
                                  "| Platform | `cupti` modes |")
    assert "| backend absent | — | no GPU (x86_64) | " in md
    md = survey_cli("table", "--columns", "source,evidence", "--db", filled_store.url).stdout
    assert md.splitlines()[0] == "| Source | Evidence |" and "| Triton 3.8.0 | run #" in md


@pytest.mark.parametrize("args, message", [
    (["--columns", "source,nonsense"], "--columns: unknown column 'nonsense'; one of source, platform, triton"),
    (["--columns", "+capture,platform"], "--columns: give either a list of columns or a list of +additions"),
    (["--columns", "+capture", "--format", "json"], "--columns chooses the docs table's columns"),
    (["--format", "md", "--width", "100"], "--width fits the terminal grid"),
    (["--format", "yaml"], "unknown format 'yaml'; one of md, html, grid, csv, json"),
    (["--format", "csv", "--check", "README.md"], "--check and --write work on the Markdown table"),
])
def test_bad_table_options_are_one_line_errors(filled_store: Store, args: list[str], message: str) -> None:
    r = survey_cli("table", *args, "--db", filled_store.url)
    assert r.returncode == 64 and r.stdout == ""  # the command line itself is wrong: usage
    assert r.stderr.splitlines()[0] == f"error: {message}" or message in r.stderr.splitlines()[0], r.stderr


# ---------------------------------------------------------------------------- Markdown and HTML
PYTHON_REPRS = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|\['|'\]|\{'|\bTrue\b|\bFalse\b")


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_no_python_repr_and_no_markdown_in_html(catalog_store: Store, fmt: str) -> None:
    r = survey_cli("table", "--format", fmt, "--columns", "+capture,+platform,+cupti,+instrumentation,+evidence",
                   "--db", catalog_store.url)
    assert r.returncode == 0, r
    assert not PYTHON_REPRS.search(r.stdout), PYTHON_REPRS.search(r.stdout)
    if fmt == "html":
        assert "`" not in r.stdout and "**" not in r.stdout and "[doc-" not in r.stdout
        assert "<code>periodic_flushing</code> only — <code>pcsampling</code> raises <code>unsupported mode</code>" \
            in r.stdout
        assert '<sup><a href="#availability-note-1">1</a></sup>' in r.stdout
        assert '<li id="availability-note-1">' in r.stdout


def test_no_markdown_line_is_longer_than_200_characters(catalog_store: Store) -> None:
    md = survey_cli("table", "--format", "md", "--db", catalog_store.url).stdout
    labels = [e.display_label for e in catalog_mod.load().candidate]
    # every catalog row is there; a long image tag shortened as the reference page does, in full in its footnote
    assert all(f"| {docs_table.short_label(label)[0]} " in md for label in labels)
    assert "| `rocm/pytorch:rocm10.0_...pytorch_release_2.13.0` " in md
    assert re.search(r"^\d+\. `rocm/pytorch:rocm10\.0_ubuntu26\.04_py3\.14_pytorch_release_2\.13\.0`: no evidence: ",
                     md, re.M)
    longest = max(md.splitlines(), key=len)
    assert len(longest) <= docs_table.LINE_LIMIT == 200, longest
    # however a tool counts: characters, or bytes of UTF-8 (the quotes “” are three bytes each)
    widest = max(md.splitlines(), key=lambda line: len(line.encode()))
    assert len(widest.encode()) <= 200, widest
    # the footnotes, the since section and the documented section are all under the table
    assert "\n1. run #" in md and "**Since**" in md and "**Documented, not measured**" in md


@pytest.mark.parametrize("text", [
    "run #1, 2026-09-21, no GPU (x86_64), host host-0",  # one line: the short way
    "x" * 197, "x" * 198, "x" * 199,  # at the limit with the indent "1. ", and one past it
    "a  b   c",  # runs of spaces inside a line stay
    " leading", "trailing ", "tab\there", "line\nbreak", "cr\rhere", "form\x0cfeed",  # textwrap reshapes these
    "non\u00a0breaking\u2003spaces",  # not whitespace to textwrap
    "“quoted”" * 24,  # 192 characters, 576 bytes: too wide in bytes
    "", "   ",
    " ".join(f"word{i}" for i in range(60)),  # several lines
])
def test_a_footnote_that_fits_one_line_is_wrapped_as_textwrap_wraps_it(text: str) -> None:
    """The Markdown's lines come from docs_table._wrap, which skips textwrap for a text
    that fits one line (10,000 footnotes: a fifth of `survey table`)."""
    for first, rest in (("1. ", "   "), ("- ", "  "), ("", "")):
        assert docs_table._wrap(text, first, rest) == docs_table._wrapped(text, first, rest), (text, first)


def test_survey_table_prints_the_docs_table(catalog_store: Store) -> None:
    """``docs_table.markdown`` (what /matrix.md serves) is byte for byte what ``survey
    table`` prints, and ``--format html`` is the same table as HTML."""
    with catalog_store.session() as s:
        direct = docs_table.markdown(s)
        html = docs_table.build(s).html()
    assert direct == survey_cli("table", "--db", catalog_store.url).stdout
    assert html == survey_cli("table", "--format", "html", "--db", catalog_store.url).stdout
    assert html.startswith('<table class="availability">')
    cli = CliRunner().invoke(cli_app, ["table", "--db", catalog_store.url])  # not a terminal: Markdown
    assert cli.exit_code == 0 and cli.stdout == direct


def test_markdown_escapes_pipes(store: Store) -> None:
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="piped", label="a | b", scope="catalog")
        text = docs_table.markdown(s)
    assert "| a \\| b ¹ |" in text


# ---------------------------------------------------------------------------- the docs file
DOC = """# amd-rocprofiler

Some prose the table must not touch. Trailing spaces stay:\x20\x20\x20
<!-- proton-survey:availability:start -->
| Source | Triton |
|:--|:--|
| stale | 0.0 |
<!-- proton-survey:availability:end -->

More prose after. \u00e9\n"""


def test_drift_check_and_write_in_place(filled_store: Store, tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(DOC)
    db = filled_store.url

    def survey(*args: str) -> Any:
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
    between = new.split("<!-- proton-survey:availability:start -->\n")[1].split(
        "<!-- proton-survey:availability:end -->")[0]
    assert between == survey().stdout  # footnotes and sections too, inside the markers
    assert "\n1. run #" in between and "**Documented, not measured**" in between
    r = survey("--check", str(doc))
    assert r.returncode == 0 and "matches the evidence" in r.stderr
    r = survey("--write", str(doc))
    assert "already up to date" in r.stderr
    # new evidence makes the docs stale again: the same Triton measured on another platform
    with filled_store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="triton-3.6.0")
    assert survey("--check", str(doc)).returncode == 1


def test_the_project_evidence_page_takes_the_new_layout(catalog_store: Store, tmp_path: Path) -> None:
    doc = tmp_path / "evidence.md"
    text = (ROOT / "docs" / "evidence.md").read_text()
    doc.write_text(text)
    assert survey_cli("table", "--write", str(doc), "--db", catalog_store.url).returncode == 0
    assert survey_cli("table", "--check", str(doc), "--db", catalog_store.url).returncode == 0
    new = doc.read_text()
    start, end = f"\n{table_mod.START}\n", f"\n{table_mod.END}\n"  # the marker lines (prose may name them)
    assert new.split(start)[0] == text.split(start)[0] and new.split(end)[1] == text.split(end)[1]
    assert new.split(start)[1].split(end)[0] + "\n" == survey_cli("table", "--db", catalog_store.url).stdout


def test_docs_without_markers_is_an_input_error(tmp_path: Path) -> None:
    doc = tmp_path / "plain.md"
    doc.write_text("no markers here\n")
    with pytest.raises(InputError, match="markers"):
        table_mod.write(doc, "| a |\n")
    assert doc.read_text() == "no markers here\n"


# ---------------------------------------------------------------------------- csv and json
def test_json_rows_follow_the_published_schema(catalog_store: Store) -> None:
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    assert schema == json.loads(json.dumps(matrix_schema.json_schema(), sort_keys=True))  # kept in step
    r = survey_cli("table", "--format", "json", "--db", catalog_store.url)
    assert r.returncode == 0, r
    rows = json.loads(r.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(rows)
    assert all(list(row) == matrix_schema.FIELDS for row in rows)  # the same keys, in the same order, every row
    with catalog_store.session() as s:
        raw = survey_matrix.matrix(s)
    assert len(rows) == len(raw) and [(x["candidate"], x["platform"], x["backend"], x["mode"]) for x in rows] == \
        [(x["candidate"], x["platform"], x["backend"], x["mode"]) for x in raw]
    assert {x["status"] for x in rows} == {"measured", "unobtainable"}
    # the schema is not a formality: a row with a stray key or an unknown outcome is refused
    bad = dict(rows[0], outcome="fine")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([bad], schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([dict(rows[0], extra=1)], schema)


def test_a_large_table_is_written_in_pieces_that_make_the_whole(catalog_store: Store) -> None:
    """``survey table --format json|csv`` streams: a table of 380,000 rows (a store of
    100,000 runs) was one 350 MB string and 3.4 GB of memory. JSON is an array with one
    row a line; the pieces joined are the table, and no piece holds more than its share."""
    with catalog_store.session() as s:
        some = survey_matrix.matrix(s)
    rows = [dict(some[i % len(some)], run_id=i) for i in range(2 * table_mod.CHUNK_ROWS + 7)]
    for fmt in ("json", "csv"):
        pieces = list(table_mod.stream(rows, matrix_schema.FIELDS, fmt))
        assert len(pieces) >= 3 and "".join(pieces) == table_mod.render(rows, matrix_schema.FIELDS, fmt)
        assert max(len(p) for p in pieces) < len("".join(pieces)) / 2
    text = table_mod.render(rows, matrix_schema.FIELDS, "json")
    lines = text.splitlines()
    assert lines[0] == "[" and lines[-1] == "]" and len(lines) == len(rows) + 2
    assert [json.loads(line.rstrip(",")) for line in lines[1:-1]] == rows
    assert json.loads(text) == rows
    assert table_mod.render([], ["a"], "json") == "[]\n" and json.loads(table_mod.render([], ["a"], "json")) == []
    with pytest.raises(InputError, match="unknown format"):
        table_mod.stream(rows, ["a"], "xml")


def test_csv_is_the_same_rows(catalog_store: Store) -> None:
    import csv
    import io

    js = json.loads(survey_cli("table", "--format", "json", "--db", catalog_store.url).stdout)
    text = survey_cli("table", "--format", "csv", "--db", catalog_store.url).stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0] == ",".join(matrix_schema.FIELDS)
    assert len(rows) == len(js)
    for a, b in zip(rows, js, strict=True):
        assert a == {k: "" if v is None else str(v) for k, v in b.items()}
    kernels = [r["capture_kernel_count"] for r in rows if r["capture_kernel_count"]]
    assert kernels and all(k.isdigit() for k in kernels)  # 50, not 50.0


# ---------------------------------------------------------------------------- the terminal grid
def test_grid_is_never_cut_when_stdout_is_not_a_terminal(catalog_store: Store) -> None:
    r = CliRunner().invoke(cli_app, ["table", "--format", "grid", "--db", catalog_store.url],
                           env={"COLUMNS": "80", "NO_COLOR": None})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(ln) for ln in lines) > 80  # its own width, not 80
    assert "\x1b[" not in r.stdout  # no colour codes into a file or pipe
    label = "rocm/pytorch:rocm10.0_ubuntu26.04_py3.14_pytorch_release_2.13.0 — no evidence: unobtainable here"
    assert any(label in ln for ln in lines)  # whole, on one line
    head = lines[0] + "\n" + lines[1]
    for word in ("cupti", "roctracer", "rocprofiler", "instrumentation", "pc pf df mm"):
        assert word in head
    h200 = next(ln for ln in lines if "Triton 3.6.0 · NVIDIA H200 (sm_90)" in ln)
    assert re.search(r"3\.6\.0\s+✓  ✓  ✗ ", h200)  # cupti: no mode, pcsampling accepted; periodic_flushing refused
    r38 = next(ln for ln in lines if "PyPI triton 3.8.0" in ln)
    # rocprofiler: the library does not load here, so nothing runs; the build supports two modes (through the
    # stub) and refuses pcsampling (through the stub): the grid says both, in survey check's words
    assert "✗+ ✗* ✗+" in r38
    assert "✓ runs" in r.stdout and "✗ cannot run" in r.stdout and "? not enough evidence" in r.stdout
    assert "+ the build supports it" in r.stdout and "* stub-derived" in r.stdout


def test_grid_fits_a_given_width(catalog_store: Store) -> None:
    with catalog_store.session() as s:
        rows = survey_matrix.matrix(s)
    text = grid.render(rows, width=72)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 72
    assert all(b in lines[0] for b in ("cupti", "roctracer", "rocprofiler", "instrumentation"))
    (r38,) = [ln for ln in lines if re.match(r"PyPI triton\s+3\.8\.0 ", ln)]  # the label wraps ...
    assert "✗+ ✗* ✗+" in r38  # ... the symbols stay whole
    r = survey_cli("table", "--format", "grid", "--width", "72", "--db", catalog_store.url)
    assert r.returncode == 0 and max(len(ln) for ln in r.stdout.splitlines()) <= 72


def _run_in_a_terminal(args: list[str], columns: int, env: dict[str, str]) -> str:
    """``survey ARGS`` with stdout on a real pseudo-terminal of the given width."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "survey", *args], stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    os.close(slave)
    chunks = []
    deadline = time.time() + 60
    while time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode()


def test_on_a_terminal_the_grid_is_the_default_fitted_and_coloured(catalog_store: Store) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES", "FORCE_COLOR")}
    env["TERM"] = "xterm-256color"
    text = _run_in_a_terminal(["table", "--db", catalog_store.url], 90, env)
    assert "\x1b[" in text and "✓" in text  # the grid, coloured
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text).replace("\r\n", "\n")
    assert "| Source |" not in plain
    assert max(len(ln) for ln in plain.splitlines()) <= 90
    assert "rocprofiler" in plain and "stub-derived" in plain


def test_survey_run_shows_the_grid_on_a_terminal_and_markdown_when_piped(tmp_path: Path) -> None:
    """`survey run` ends with the grid on a terminal, the docs table when piped, either when
    asked (--format). (Failed first: it printed the whole Markdown document on a terminal.)"""
    cat = tmp_path / "catalog.toml"
    cat.write_text('[[candidate]]\nname = "ghost"\nlabel = "a `python` that is not there"\n'
                   'python = "/nonexistent/bin/python3"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES", "FORCE_COLOR")}
    env["TERM"] = "xterm-256color"
    on_tty = re.sub(r"\x1b\[[0-9;]*m", "", _run_in_a_terminal(["run", "--db", db, "--catalog", str(cat)], 100, env))
    assert "ghost" not in on_tty and "a python that is not there — no evidence: unobtainable here" in on_tty
    assert "| Source |" not in on_tty and "✓ runs" in on_tty
    piped = survey_cli("run", "--db", db, "--catalog", str(cat))
    assert piped.returncode == 0 and piped.stdout.startswith("| Source |"), piped.stdout
    asked = re.sub(r"\x1b\[[0-9;]*m", "", _run_in_a_terminal(["run", "--db", db, "--catalog", str(cat),
                                                                 "--format", "md"], 100, env))
    assert asked.startswith("| Source |")
    r = survey_cli("run", "--db", db, "--catalog", str(cat), "--format", "csv")
    assert r.returncode == 64 and "format" in r.stderr


def test_survey_version() -> None:
    """(Failed first: `survey --version` was "No such option".)"""
    from importlib.metadata import version

    from probes import PROBE_VERSION, SCHEMA_VERSION

    r = survey_cli("--version")
    assert r.returncode == 0
    assert r.stdout == f"proton-survey {version('proton-survey')} (probe {PROBE_VERSION}, report schema " \
                       f"v{SCHEMA_VERSION})\n"


# ---------------------------------------------------------------------------- in a browser
GITHUB_LIKE_CSS = """
body { margin: 0; background: #fff; }
.markdown-body { box-sizing: border-box; min-width: 200px; max-width: 980px; margin: 0 auto; padding: 45px;
  font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif;
  font-size: 16px; line-height: 1.5; word-wrap: break-word; color: #1f2328; }
.markdown-body table { border-spacing: 0; border-collapse: collapse; display: block; width: max-content;
  max-width: 100%; overflow: auto; margin: 0 0 16px; }
.markdown-body td, .markdown-body th { padding: 6px 13px; border: 1px solid #d1d9e0; }
.markdown-body th { font-weight: 600; }
.markdown-body code { padding: .2em .4em; margin: 0; font-size: 85%; white-space: break-spaces;
  background-color: rgba(129, 139, 152, .12); border-radius: 6px;
  font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace; }
.markdown-body ol, .markdown-body ul { padding-left: 2em; margin: 0 0 16px; }
"""

OVERFLOW = """() => {
  const vw = document.documentElement.clientWidth;
  const out = [];
  if (document.documentElement.scrollWidth > vw) out.push(`page ${document.documentElement.scrollWidth} > ${vw}`);
  for (const t of document.querySelectorAll('table'))
    if (t.scrollWidth > t.clientWidth) out.push(`table scrolls: ${t.scrollWidth} > ${t.clientWidth}`);
  for (const e of document.querySelectorAll('.markdown-body *')) {
    const r = e.getBoundingClientRect();
    if (r.right > vw + 0.5) out.push(`${e.tagName} "${e.textContent.slice(0, 60)}" ends at ${r.right}`);
  }
  return out;
}"""


@pytest.mark.browser
def test_the_markdown_table_fits_1000_px_in_chromium(catalog_store: Store, tmp_path: Path) -> None:
    """GitHub-like rendering of `survey table --format md` in Debian's chromium at
    1000 px: no horizontal overflow anywhere (DOM geometry); the screenshot is
    kept in the test's directory."""
    from markdown_it import MarkdownIt
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    md = survey_cli("table", "--format", "md", "--db", catalog_store.url).stdout
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md)
    page_html = (f"<!doctype html><html><head><meta charset='utf-8'><style>{GITHUB_LIKE_CSS}</style></head>"
                 f"<body><article class='markdown-body'>{body}</article></body></html>")
    (tmp_path / "table.html").write_text(page_html)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.set_content(page_html, wait_until="load")
            assert page.locator("table tbody tr").count() == len(catalog_mod.load().candidate)
            assert page.locator("ol li").count() >= 5 and page.locator("table code").count() > 10
            page.screenshot(path=str(tmp_path / "table-1000px.png"), full_page=True)
            problems = page.evaluate(OVERFLOW)
        finally:
            browser.close()
    assert (tmp_path / "table-1000px.png").stat().st_size > 0
    assert problems == [], problems


def test_a_reports_checks_are_read_once_and_never_mix_stores(tmp_path: Path) -> None:
    """survey.verdicts.matrix keeps each report's checks by its sha256: the same report in
    two stores (other run ids, other candidates) gives each store its own rows, and
    the rows from the kept checks equal the rows read afresh."""
    a, b = Store(f"sqlite:///{tmp_path / 'a.db'}"), Store(f"sqlite:///{tmp_path / 'b.db'}")
    with a.session() as s:
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="x", scope="catalog")
    with b.session() as s:  # another run first: the shared report gets run id 2 here
        ingest(s, report_bytes("cpu-triton-3.9.0.json"), candidate="first", scope="catalog")
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="y", scope="catalog")
    cells_mod._CELLS.clear()
    with a.session() as s:
        fresh = survey_matrix.matrix(s)
    with a.session() as s:
        again = survey_matrix.matrix(s)  # from the kept checks
    assert again == fresh and {r["run_id"] for r in fresh} == {1}
    with b.session() as s:
        rows = [r for r in survey_matrix.matrix(s) if r["candidate"] == "y"]
    assert {r["run_id"] for r in rows} == {2} and {r["evidence"] for r in rows} == {"/runs/2"}
    strip = ("candidate", "label", "run_id", "evidence", "date")
    assert [{k: v for k, v in r.items() if k not in strip} for r in rows] == \
        [{k: v for k, v in r.items() if k not in strip} for r in fresh]
    a.close()
    b.close()


def test_write_through_a_symlinked_page_updates_its_target(filled_store: Store, tmp_path: Path) -> None:
    """`--write` on a link writes the page it points to (atomically) and leaves the link a link."""
    real_dir = tmp_path / "docs"
    real_dir.mkdir()
    real = real_dir / "availability.md"
    real.write_text(f"# Availability\n\n{table_mod.START}\nold\n{table_mod.END}\n\ntail\n")
    real.chmod(0o640)
    link = tmp_path / "README-table.md"
    link.symlink_to(real)
    r = survey_cli("table", "--write", str(link), "--db", filled_store.url)
    assert r.returncode == 0, r
    assert link.is_symlink() and os.readlink(link) == str(real)
    text = real.read_text()
    assert "old" not in text and "| Triton 3.9.0" in text and text.endswith("\n\ntail\n")
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in real_dir.iterdir()) == ["availability.md"]  # no temporary file left
    assert survey_cli("table", "--check", str(link), "--db", filled_store.url).returncode == 0


def test_a_table_measured_only_without_a_gpu_says_so(filled_store: Store) -> None:
    """(Failed first: a table of CPU-only evidence never said it was measured without a GPU.)"""
    cpu = survey_cli("table", "--db", filled_store.url).stdout
    assert "Measured without a GPU (no GPU (x86_64))" in cpu
    html = survey_cli("table", "--format", "html", "--db", filled_store.url).stdout
    assert '<p class="availability-platform">Measured without a GPU' in html
    with filled_store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="triton-3.6.0")
    assert "Measured without a GPU" not in survey_cli("table", "--db", filled_store.url).stdout


def test_a_table_of_no_evidence_says_so_instead_of_a_bare_header(store: Store) -> None:
    """`survey table` on a store with no evidence (for the scope asked) says that there is
    none and what gives some, never an empty table. (Failed first: `| Source |` over
    `|:---|` and nothing under it.)"""
    r = survey_cli("table", "--db", store.url)
    assert r.returncode == 0, r
    assert "| Source |" not in r.stdout and "|:---|" not in r.stdout
    assert "No evidence stored for these candidates yet" in r.stdout and "`survey run`" in r.stdout
    assert "**Documented, not measured**" in r.stdout  # the claims still stand apart
