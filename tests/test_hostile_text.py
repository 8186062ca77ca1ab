"""Text written by a probed environment, through every output of the CLI and the API.

A report's strings (its Triton version, its GPU's name, an error message, a
library's name, its ``-b`` choices) are whatever the environment printed. A
corpus of hostile text (HTML, Markdown links and images, terminal escapes, Rich
markup, spreadsheet formulas, NUL, bidi overrides) is written into real reports
(tests/fixtures/reports, fields replaced), ingested, and read back through every
format: nothing live may come out. Live means, per medium:

- Markdown (rendered as GitHub would, raw HTML allowed): no HTML element we did
  not write, no link or image to anything but https:// and our own paths;
- terminals: no control character (ESC, C1, NUL, a bare CR) and no bidi or
  invisible format character; the only escape sequences are Rich's own colours;
- Rich markup: hostile text is shown, never read as markup (no traceback, no link);
- CSV: no cell a spreadsheet reads as a formula;
- HTML: no element or attribute we did not write, no control or bidi character;
- JSON: the text kept exactly, with nothing raw that a terminal would act on.
"""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from markdown_it import MarkdownIt

from db.store import Store
from survey.core import names
from survey.evidence.identity import PlatformId
from survey.evidence.ingest import ingest, record_failure
from survey.render import grid
from survey.verdicts import matrix as survey_matrix
from tests.conftest import report_bytes, survey_cli

HOSTILE = {
    "html": "<img src=x onerror=alert(1)>",
    "script": "<script>alert(1)</script>",
    "md-link": "[click](javascript:alert(1))",
    "md-image": "![x](javascript:alert(1))",
    "md-autolink": "<javascript:alert(1)>",
    "md-entity": "&lt;img src=x onerror=alert(1)&gt;",
    "code-spans": "`a``b` [x](javascript:alert(1)) `c`",
    "backslash": "\\[x](javascript:alert(1))",
    "osc-title": "\x1b]0;owned\x07",
    "clear-screen": "\x1b[2J\x1b[H",
    "osc8-link": "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "c1-csi": "\x9b2J\x9d0;owned\x9c",
    "bare-cr": "ok\rFAKE",
    "rich-close": "[/]",
    "rich-link": "[link=http://evil.example]3.6.0[/link]",
    "rich-style": "[bold red on white]loud[/]",
    "formula": '=HYPERLINK("http://evil.example","x")',
    "formula-plus": "+cmd|' /C calc'!A0",
    "formula-at": "@SUM(A1)",
    "nul": "a\x00b",
    "bidi": "abc\u202edef\u202c",
    "bidi-isolate": "\u2066x\u2069",
}
LIB = "libroctracer64.so"  # the library the reports say does not load


def hostile_report(text: str) -> bytes:
    """The H200 report with ``text`` in every field an environment writes that we show."""
    data = json.loads(report_bytes("h200-sm90-triton-3.6.0.json"))
    data["environment"]["triton"]["version"] = "3.6.0" + text
    model = "NVIDIA " + text
    data["platform"].update(model=model, key="nvidia:sm_90:" + model)
    data["platform"]["devices"][0]["model"] = model
    data["registry"]["cli_backends"] = [*data["registry"]["cli_backends"], text]
    for m in data["modes"]:
        m["message"] = text + " " + (m["message"] or "")
        if m["library"] == LIB:
            m["library"] = "lib" + text
    for lib in data["libraries"]:
        if lib["name"] == LIB:
            lib.update(name="lib" + text, error=text)
    return json.dumps(data).encode()


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One measured candidate and one unobtainable candidate per corpus entry (labels
    carry the entry where the names rule lets a label hold it), and a plain one."""
    url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'survey.db'}"
    store = Store(url)
    cpu = PlatformId("none:x86_64", "none", None, "x86_64", {})
    with store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="plain", label="Plain", position=0,
               scope="catalog")
    for i, text in enumerate(HOSTILE.values(), 1):
        label = text if names.problem(text, "label", names.MAX_LABEL) is None else f"Hostile {i}"
        with store.session() as s:
            ingest(s, hostile_report(text), candidate=f"h{i}", label=label, position=i, scope="catalog")
        with store.session() as s:
            record_failure(s, f"u{i}", label=label, kind="pip", spec={"pip": text}, position=100 + i,
                           error=f"pip: {text}\nERROR: {text} (exit 1)", platform=cpu, scope="catalog")
    yield store
    store.close()


CANDIDATES = [f"h{i}" for i in range(1, len(HOSTILE) + 1)]


# --------------------------------------------------------------------------- what "live" means
# Control characters (C0, DEL, C1), bidi controls, line separators and invisible format characters.
_HAZARD = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
_ALLOWED_CONTROLS = {"\n", "\t"}


def terminal_hazards(text: str, *, colours: bool = False) -> list[str]:
    """What a terminal would act on: control characters other than newline and tab
    (CR only as part of CRLF), and bidi or invisible format characters. ``colours``:
    Rich's own SGR sequences are allowed."""
    if colours:
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = text.replace("\r\n", "\n")
    return sorted({repr(ch) for ch in _HAZARD.findall(text) if ch not in _ALLOWED_CONTROLS})


class Elements(HTMLParser):
    """Every element and attribute of an HTML text."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


LIVE_TAGS = {"img", "script", "iframe", "object", "embed", "svg", "math", "style", "form", "input", "base",
             "meta", "video", "audio", "source", "details"}


def html_problems(html: str, *, ours: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Elements and attributes that would act: tags that load or run something
    (``ours``: tags our own page uses), event handlers, links anywhere but https://,
    ``#`` and our own paths."""
    out = []
    for tag, attrs in Elements(html).tags:
        if tag in LIVE_TAGS - ours:
            out.append(f"<{tag}>")
        for name, value in attrs.items():
            if name.startswith("on"):
                out.append(f"<{tag} {name}>")
            if name in ("href", "src", "action", "formaction") and value is not None:
                v = re.sub(r"[\x00-\x20]", "", value).lower()
                here = v.startswith(("#", "/", "?")) and not v.startswith("//")  # a path of this service
                if not here and not (v.startswith("https://") and "evil.example" not in v):
                    out.append(f"<{tag} {name}={value!r}>")
    return out


_MD = MarkdownIt("commonmark", {"html": True}).enable("table")


def markdown_problems(text: str) -> list[str]:
    """The Markdown as GitHub renders it (raw HTML passed through): anything live,
    and anything a terminal would act on in the text itself."""
    return html_problems(_MD.render(text)) + terminal_hazards(text)


def csv_problems(text: str) -> list[str]:
    cells = [c for row in csv.reader(io.StringIO(text, newline="")) for c in row]
    return [repr(c) for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")] + terminal_hazards(text)


def json_problems(text: str) -> list[str]:
    json.loads(text)
    return terminal_hazards(text)


def test_the_corpus_reaches_the_outputs(hostile_store: Store) -> None:
    """The fields we replace are the ones shown (else the tests below prove nothing)."""
    with hostile_store.session() as s:
        rows = survey_matrix.matrix(s)
    for i, text in enumerate(HOSTILE.values(), 1):
        mine = [r for r in rows if r["candidate"] == f"h{i}"]
        kept = text.replace("\x00", "\u2400")  # the store shows NUL as U+2400 (db.models.String)
        assert mine and all(r["triton_version"] == "3.6.0" + kept for r in mine)
        assert all(r["platform_label"].startswith("NVIDIA " + kept) for r in mine)
        assert any(kept in (r["reason"] or "") for r in mine)
        failed = next(r for r in rows if r["candidate"] == f"u{i}")
        assert kept in failed["error"] or len(text.splitlines()) > 1  # the error's telling line


# --------------------------------------------------------------------------- the CLI
def _cli(*args: str, ok: tuple[int, ...] = (0,)) -> str:
    r = survey_cli(*args)
    assert r.returncode in ok, r
    assert "Traceback" not in r.stderr, r
    assert not terminal_hazards(r.stderr), (args, terminal_hazards(r.stderr))
    return r.stdout


@pytest.mark.parametrize("fmt", ["md", "html", "grid", "csv", "json"])
def test_survey_table(hostile_store: Store, fmt: str) -> None:
    out = _cli("table", "--format", fmt, "--all", "--db", hostile_store.url)
    check = {"md": markdown_problems, "csv": csv_problems, "json": json_problems,
             "html": lambda t: html_problems(t) + terminal_hazards(t), "grid": terminal_hazards}[fmt]
    assert check(out) == []
    if fmt == "json":  # the data itself is kept exactly
        versions = {r["triton_version"] for r in json.loads(out)}
        assert "3.6.0" + HOSTILE["osc-title"] in versions and "3.6.0" + HOSTILE["rich-close"] in versions


def test_survey_table_write(hostile_store: Store, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# page\n\n<!-- proton-survey:availability:start -->\n"
                    "<!-- proton-survey:availability:end -->\n")
    _cli("table", "--write", str(page), "--db", hostile_store.url)
    assert markdown_problems(page.read_text()) == []
    assert "**Since**" in page.read_text()  # the section that showed versions raw


def test_the_grid_in_colour_carries_no_markup_from_the_evidence(hostile_store: Store) -> None:
    with hostile_store.session() as s:
        rows = survey_matrix.matrix(s, scope="all")
    text = grid.render(rows, 200, color=True)
    assert terminal_hazards(text, colours=True) == []
    assert "\x1b]8;" not in text  # no hyperlink
    assert "[link=http://evil.example]3.6.0[/link]" in text  # shown as written


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "md"])
def test_survey_history(hostile_store: Store, fmt: str) -> None:
    check = {"table": terminal_hazards, "json": json_problems, "csv": csv_problems, "md": markdown_problems}[fmt]
    for name in CANDIDATES:
        for backend in ("cupti", "roctracer"):
            out = _cli("history", name, "--backend", backend, "--format", fmt, "--db", hostile_store.url)
            assert check(out) == [], (name, backend)


@pytest.mark.parametrize("as_json", [False, True])
def test_survey_diff(hostile_store: Store, as_json: bool) -> None:
    for name in CANDIDATES:
        out = _cli("diff", "plain", name, *(["--json"] if as_json else []), "--db", hostile_store.url, ok=(1,))
        assert (json_problems(out) if as_json else terminal_hazards(out)) == [], name


@pytest.mark.parametrize("as_json", [False, True])
def test_survey_check(hostile_store: Store, as_json: bool) -> None:
    for name in CANDIDATES:
        for backend in ("cupti", "roctracer", "rocprofiler"):
            out = _cli("check", name, "--backend", backend, *(["--json"] if as_json else []),
                       "--db", hostile_store.url, ok=(0, 2, 3))
            assert (json_problems(out) if as_json else terminal_hazards(out)) == [], (name, backend)


# --------------------------------------------------------------------------- the API
PAGE_TAGS = {"details", "form", "input", "meta", "style"}  # what our own pages are made of


def api_problems(path: str, text: str) -> list[str]:
    last = path.split("?")[0].rsplit("/", 1)[-1]
    fmt = last.rsplit(".", 1)[-1] if "." in last else "html"
    if fmt == "md":
        return markdown_problems(text)
    if fmt == "csv":
        return csv_problems(text)
    if fmt == "json":
        return json_problems(text)
    return html_problems(text, ours=PAGE_TAGS) + terminal_hazards(text)


def _paths(store: Store) -> list[str]:
    with store.session() as s:
        from survey.evidence import queries

        runs = [r.id for c in queries.candidates(s) for r in c.runs]
    paths = ["/matrix", "/matrix.json", "/matrix.csv", "/matrix.md", "/candidates", "/candidates.json",
             "/candidates.csv", "/candidates.md"]
    for fmt in ("", ".json", ".csv", ".md"):
        paths += [f"/runs/{r}{fmt}" for r in runs]
        for name in CANDIDATES:
            paths += [f"/candidates/{quote(name)}{fmt}", f"/candidates/u{name[1:]}{fmt}",
                      f"/history{fmt}?candidate={name}&backend=roctracer",
                      f"/check{fmt}?target={name}&backend=rocprofiler",
                      f"/check{fmt}?target={name}&backend=roctracer&mode=pcsampling",
                      f"/diff{fmt}?a=plain&b={name}"]
    return paths


def test_every_api_format(hostile_store: Store, make_client: Any) -> None:
    c = make_client(hostile_store)
    bad = {}
    for path in _paths(hostile_store):
        r = c.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        problems = api_problems(path, r.text)
        if problems:
            bad[path] = problems[:5]
    assert bad == {}


@pytest.mark.parametrize("text", ["plain ascii", "del \x7f in ascii", "C1 \x85 and bidi \u202e", "é only",
                                  "tab\tnewline\n", "zero width \u200b", "\x7f"])
def test_json_text_escapes_what_a_terminal_acts_on_in_any_text(text: str) -> None:
    """JSON escapes C0 only; json_text also escapes DEL, C1 and the invisible and bidi
    characters, whether or not the rest of the text is ASCII (DEL is ASCII: a check
    that skips ASCII text must still find it), and leaves everything else as it is."""
    from survey.render.escape import json_text

    out = json_text({"t": text})
    assert json.loads(out) == {"t": text}
    assert not terminal_hazards(out) and "\x7f" not in out
    assert out == json.dumps({"t": text}, ensure_ascii=False, separators=(",", ":")).replace(
        "\x7f", "\\u007f").replace("\x85", "\\u0085").replace("\u202e", "\\u202e").replace("\u200b", "\\u200b")
