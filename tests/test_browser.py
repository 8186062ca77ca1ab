"""The pages as a person sees them: Debian's chromium, driven by Playwright, on
the real app served by uvicorn over a temporary SQLite store.

The store holds the real reports of tests/fixtures/reports, a candidate that
could not be obtained (the real launcher's error), and the report of the real
probe run against an environment double: a fake ``triton`` whose
``proton.start`` writes ``<script>window.__xss = 1</script>`` to stderr and
raises ``<b>bold</b> failure``. Evidence is untrusted: it must show as text.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from api.app import create_app
from db.store import Store
from probes import outcomes as O
from survey.environments import probe as probe_run
from survey.environments.launchers.python import PythonLauncher
from survey.evidence import queries
from survey.evidence.ingest import ingest
from survey.flows.run import ProbeSettings, survey_one
from tests.conftest import report_bytes
from tests.envs import fake_triton
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.browser

VERSIONS = ("3.6.0", "3.7.1", "3.8.0", "3.9.0")
PAYLOAD = "<script>window.__xss = 1</script>"
DOUBLE = "python:double-with-script"
H200 = "h200.triton-3.6.0"
MISSING = "python:/nonexistent/bin/python3"


def probe_the_double(root: Path) -> bytes:
    """The real probe, run in this interpreter with the fake triton on PYTHONPATH."""
    pkg = fake_triton(root, {b: "script" for b in O.BACKENDS})
    env = dict(os.environ)
    env["PYTHONPATH"] = str(pkg)
    out = probe_run.run_bundle([sys.executable], probe_run.probe_args(10), 120, env=env)
    raw, has_triton = probe_run.collect_report(out, "the environment double")
    assert has_triton
    return raw


class Served:
    def __init__(self, store: Store, base: str, ids: dict[str, int]):
        self.store = store
        self.base = base
        self.ids = ids


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("served")
    store = Store(f"sqlite:///{root / 'survey.db'}")
    for pos, v in enumerate(VERSIONS):
        with store.session() as s:
            ingest(s, report_bytes(f"cpu-triton-{v}.json"), candidate=f"triton-{v}", label=f"Triton {v}",
                   kind="pip", spec={"pip": f"triton=={v}"}, position=pos, scope="catalog")
    with store.session() as s:
        ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate=H200, label="Triton 3.6.0 on an H200",
               kind="python", position=4, scope="catalog")
    raw = probe_the_double(root / "double")
    assert PAYLOAD.encode() in raw
    with store.session() as s:
        ingest(s, raw, candidate=DOUBLE, label="fake triton (environment double)", kind="python", position=5,
               source="probe", scope="catalog")
    out = survey_one(store, MISSING, "/nonexistent/bin/python3", "python", None, 6,
                     PythonLauncher("/nonexistent/bin/python3"), ProbeSettings(), scope="catalog")
    assert out.status == "unobtainable"
    with store.session() as s:
        ids = {c.name: r.id for c in queries.candidates(s) if (r := queries.latest_complete(s, c.id))}

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(store), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert thread.is_alive() and time.time() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield Served(store, f"http://127.0.0.1:{port}", ids)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        store.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page that records every dialog and console message."""
    ctx = browser.new_context()
    pg = ctx.new_page()
    pg.dialogs = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    yield pg
    ctx.close()


def background(locator: Any) -> str:
    return str(locator.evaluate("e => getComputedStyle(e).backgroundColor"))


def test_matrix_cell_leads_to_its_evidence(served: Served, page: Any) -> None:
    page.goto(f"{served.base}/matrix")
    assert page.title() == "Availability matrix · proton-survey"
    row = page.locator('tr[data-candidate="triton-3.9.0"]')
    cell = row.locator("td.cell", has=page.locator('a[href$="#check-rocprofiler-pcsampling"]'))
    assert cell.count() == 1
    text = " ".join(cell.inner_text().split())
    assert "cannot run" in text and "mode refused by the build" in text
    assert "Outcome library_missing" in (cell.get_attribute("title") or "")
    assert "2026-12-02" in row.locator("th.cand").inner_text()  # the row's run and its date
    assert cell.locator(".stub-mark").is_visible()
    assert "stub-derived" in cell.locator(".stub-mark").inner_text()
    # Coloured by whether it runs here (the outcome is the detail): cannot run is the key's red.
    key = page.locator(".legend summary.key .c-cannot_run:not(.is-stub)")
    assert key.is_visible() and background(cell) == background(key) != "rgba(0, 0, 0, 0)"
    no_gpu = row.locator("td.cell", has=page.locator('a[href$="#check-cupti"]'))
    grey = background(page.locator(".key .c-not_enough_evidence"))
    assert "no GPU here" in no_gpu.inner_text() and background(no_gpu) == grey
    assert background(no_gpu) != background(cell)
    # Live answers carry no stub marker.
    refused_live = row.locator("td.cell", has=page.locator('a[href$="#check-roctracer-pcsampling"]'))
    assert "Outcome unsupported_mode" in (refused_live.get_attribute("title") or "")
    assert refused_live.locator(".stub-mark").count() == 0

    cell.locator("a").first.click()  # the evidence (then its history link)
    page.wait_for_url(f"**/runs/{served.ids['triton-3.9.0']}#check-rocprofiler-pcsampling")
    assert page.title() == f"Run #{served.ids['triton-3.9.0']} of triton-3.9.0 · proton-survey"
    group = page.locator("#check-rocprofiler-pcsampling")
    assert group.is_visible()
    shown = " ".join(group.inner_text().split())
    assert "refused" in shown and "2026-12-02" in shown
    assert "built without rocprofiler-sdk PC sampling support" in shown
    live = group.locator("#mode-rocprofiler-pcsampling-clean")
    stub = group.locator("#mode-rocprofiler-pcsampling-clean-stub")
    assert "LIVE" in live.inner_text() and "library_missing" in live.inner_text()
    assert "proton.start('proton', backend='rocprofiler', mode='pcsampling')" in live.inner_text()
    assert "STUB-DERIVED: STUB FOR LIBROCPROFILER-SDK.SO" in stub.inner_text()
    assert "unsupported_mode" in stub.inner_text()
    assert "LD_LIBRARY_PATH=" in stub.inner_text()  # how the stub was put in place
    # The library search results and the fix are on the same page.
    libs = " ".join(page.locator("section.lib").all_inner_texts())
    assert "librocprofiler-sdk.so" in libs and "does not load" in libs and "fix" in libs
    assert page.dialogs == []


def test_a_working_check_leads_to_its_capture(served: Served, page: Any) -> None:
    page.goto(f"{served.base}/matrix")
    cell = page.locator(f'tr[data-candidate="{H200}"] td.cell', has=page.locator('a[href$="#check-cupti"]'))
    text = " ".join(cell.inner_text().split())
    assert "✓ runs" in text and "capture: ok, 50 kernels" in text
    assert background(cell) == background(page.locator(".key .c-runs"))
    assert cell.locator(".stub-mark").count() == 0
    cell.locator("a").first.click()
    page.wait_for_url(f"**/runs/{served.ids[H200]}#check-cupti")
    group = page.locator("#check-cupti")
    assert "LIVE" in group.inner_text() and "accepted" in group.inner_text()
    group.get_by_text("ok, 50 kernel launches recorded").click()
    page.wait_for_url("**#capture-cupti")
    capture = page.locator("#capture-cupti")
    shown = " ".join(capture.inner_text().split())
    assert "50 launches" in shown and "gelu_kernel" in shown and "NVIDIA H200" in shown
    assert "--backend cupti" in shown  # the command that ran
    assert page.dialogs == []


def test_filters_and_candidate_history(served: Served, page: Any) -> None:
    page.goto(f"{served.base}/matrix")
    page.select_option('select[name="backend"]', "rocprofiler")
    page.select_option('select[name="outcome"]', "library_missing")
    page.click('form.filters button[type="submit"]')
    page.wait_for_url("**/matrix?backend=rocprofiler&mode=&verdict=&outcome=library_missing&platform=&candidate=")
    heads = {t.strip() for t in page.locator("table.matrix thead .backend").all_inner_texts()}
    assert heads == {"rocprofiler"}
    cands = page.locator("table.matrix tbody tr").evaluate_all("rows => rows.map(r => r.dataset.candidate)")
    assert cands == ["triton-3.8.0", "triton-3.9.0"]  # only these could not load librocprofiler-sdk.so

    page.goto(f"{served.base}/matrix")
    missing = page.locator(f'tr[data-candidate="{MISSING}"]')
    assert "unobtainable" in missing.inner_text() and "no such file" in missing.inner_text()
    missing.locator("th a.cand-link").click()
    page.wait_for_url("**/candidates/**")
    body = page.locator("main").inner_text()
    assert "No complete run yet" in body and "unobtainable" in body
    assert "/nonexistent/bin/python3: no such file" in body  # the real error, in the history


def test_evidence_holding_script_renders_as_text(served: Served, page: Any) -> None:
    run_id = served.ids[DOUBLE]
    for path in ("/matrix", f"/candidates/{DOUBLE}", f"/runs/{run_id}", f"/runs/{run_id}#check-cupti"):
        page.goto(f"{served.base}{path}")
        page.wait_for_load_state("load")
        assert page.locator("script").count() == 0, path
        assert page.evaluate("typeof window.__xss") == "undefined", path

    # The run page shows the payload as the literal text it was.
    stderr = page.locator("#mode-cupti---clean pre.stderr")
    assert stderr.inner_text().strip() == PAYLOAD
    assert stderr.locator("*").count() == 0  # text, not elements
    assert page.get_by_text("<b>bold</b> failure").first.is_visible()
    assert page.locator("main b").count() == 0
    raw = page.locator("details.raw")
    raw.locator("summary").click()
    assert PAYLOAD in raw.inner_text()

    # On the matrix the reason (in the rows table and the cell's title) is text too.
    page.goto(f"{served.base}/matrix")
    page.locator("details.rows summary").click()
    assert page.get_by_text("not recognised: <b>bold</b> failure").first.is_visible()
    title = page.locator(f'tr[data-candidate="{DOUBLE}"] td.cell').first.get_attribute("title")
    assert title == "cannot run: an unrecognised error. Outcome error: not recognised: <b>bold</b> failure"
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.dialogs == []


def test_a_matrix_cell_leads_to_its_history(served: Served, page: Any) -> None:
    page.goto(f"{served.base}/matrix")
    row = page.locator('tr[data-candidate="triton-3.9.0"]')
    cell = row.locator("td.cell", has=page.locator('a[href$="#check-rocprofiler-pcsampling"]'))
    link = cell.locator("a.history-link")
    assert link.count() == 1 and link.is_visible()
    link.click()
    page.wait_for_url("**/history?candidate=triton-3.9.0&backend=rocprofiler&mode=pcsampling*")
    assert page.title().startswith("History: ")
    rows = page.locator("table.history tbody tr")
    assert rows.count() == 1  # one run of this candidate in the store
    shown = " ".join(rows.first.inner_text().split())
    assert f"run #{served.ids['triton-3.9.0']}" in shown and "library_missing" in shown and "refused" in shown


def shots(tmp_path: Path) -> Path:
    """Where screenshots go: $SURVEY_SCREENSHOTS (kept, to be looked at), else the test's tmp_path."""
    where = Path(os.environ.get("SURVEY_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    return where


ROWS_ON_A_LAPTOP = 5  # rows of the matrix in view at 1400x900 before any scrolling (a cell says two facts)


# Where a line of a candidate's label may end: after a separator of its tokens, or at a space.
BREAKS = " /:_.-@("

LINE_ENDS = """e => {  // the text of each rendered line of e, from the characters' boxes
  const lines = []; let top = null;
  const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (let i = 0; i < n.data.length; i++) {
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      const box = r.getClientRects()[0]; if (!box) continue;
      if (top === null || box.top > top + 2) { lines.push(""); top = box.top; }
      lines[lines.length - 1] += n.data[i];
    }
  }
  return lines;
}"""

NESTED_SCROLLERS = """() => [...document.querySelectorAll('body *')].filter(e => {
  const s = getComputedStyle(e);
  return ['auto', 'scroll'].includes(s.overflowY) && e.scrollHeight > e.clientHeight + 1;
}).map(e => e.tagName + '.' + e.className)"""


@pytest.mark.browser
@pytest.mark.parametrize("width", [1400, 800])
def test_matrix_page_geometry(served: Served, browser: Any, width: int, tmp_path: Path) -> None:
    """Measured in the DOM, not by eye. The page is the one thing that scrolls: no box in it
    scrolls on its own (a scroller inside the page took the wheel from the page's own
    scroll). At 1400 px every column is in view without scrolling sideways and the first
    screen holds ROWS_ON_A_LAPTOP rows; at 800 px the page scrolls sideways, and scrolled to
    its last cell the header rows stay at the top of the window and the candidate column at
    its left. A candidate's label wraps only between its tokens, never inside one.
    (Failed first: the matrix scrolled in a box of its own, and `python:/nonexistent/bin/
    python3` broke inside `python3`.) Screenshots are kept (see shots())."""
    height = 900 if width == 1400 else 500
    ctx = browser.new_context(viewport={"width": width, "height": height})
    pg = ctx.new_page()
    try:
        pg.goto(f"{served.base}/matrix")
        assert pg.locator("details.legend dl dt").count() >= 6
        pg.screenshot(path=str(shots(tmp_path) / f"matrix-{width}.png"))
        assert pg.evaluate(NESTED_SCROLLERS) == []
        wide = pg.evaluate("document.scrollingElement.scrollWidth") > width
        if width == 1400:
            assert not wide  # every column fits a laptop screen
            heads = pg.locator("table.matrix thead th.mode").all()
            rights = [h.bounding_box()["x"] + h.bounding_box()["width"] for h in heads]  # type: ignore[index]
            assert max(rights) <= width
            rows = pg.locator("table.matrix tbody tr").all()
            seen = [r for r in rows if r.bounding_box()["y"] + r.bounding_box()["height"] <= height]  # type: ignore
            assert len(seen) >= ROWS_ON_A_LAPTOP, (len(seen), len(rows))
        else:
            assert wide  # too wide for 800 px: the page scrolls sideways
            assert pg.evaluate("document.scrollingElement.scrollHeight") > height
            pg.locator("table.matrix tbody tr").last.locator("td").last.evaluate(
                "e => e.scrollIntoView({block: 'end', inline: 'end'})")
            assert pg.evaluate("window.scrollX") > 0 and pg.evaluate("window.scrollY") > 0
            backend = pg.locator("table.matrix thead th.backend").last.bounding_box()
            mode = pg.locator("table.matrix thead th.mode").last.bounding_box()
            last = pg.locator("table.matrix tbody th.cand").last.bounding_box()
            assert backend is not None and mode is not None and last is not None
            # the header rows at the top of the window, the modes under the backends, the candidates at its left
            assert abs(backend["y"]) <= 2, backend
            assert abs(mode["y"] - (backend["y"] + backend["height"])) <= 2, (mode, backend)
            assert abs(last["x"]) <= 2, last
            pg.screenshot(path=str(shots(tmp_path) / f"matrix-{width}-scrolled.png"))
        labels = pg.locator("table.matrix tbody th.cand .cand-link").all()
        assert len(labels) >= 6
        for label in labels:
            lines = label.evaluate(LINE_ENDS)
            assert all(line[-1] in BREAKS for line in lines[:-1]), lines
    finally:
        ctx.close()


def test_stub_derived_cells_are_striped_and_never_run(served: Served, page: Any) -> None:
    """3.8.0's rocprofiler pcsampling (refused) and periodic_flushing (accepted): the same
    outcome (library_missing, stub-derived); neither runs here, so both are red and
    striped, and periodic_flushing says that the build supports it."""
    page.goto(f"{served.base}/matrix")
    row = page.locator('tr[data-candidate="triton-3.8.0"]')
    refused = row.locator("td.cell", has=page.locator('a[href$="#check-rocprofiler-pcsampling"]'))
    accepted = row.locator("td.cell", has=page.locator('a[href$="#check-rocprofiler-periodic_flushing"]'))
    assert all("Outcome library_missing" in (c.get_attribute("title") or "") for c in (refused, accepted))
    red = background(page.locator(".key .c-cannot_run:not(.is-stub)"))
    assert background(refused) == red and background(accepted) == red
    assert "supported by the build" in accepted.inner_text() and "supported" not in refused.inner_text()
    stripes = "e => getComputedStyle(e).backgroundImage"
    assert "repeating-linear-gradient" in refused.evaluate(stripes) == accepted.evaluate(stripes)


def test_documented_claims_read_as_documented(served: Served, page: Any) -> None:
    page.goto(f"{served.base}/matrix")
    row = page.locator('tr[data-candidate="triton-main"][data-documented="true"]')
    assert row.is_visible() and "documented" in row.locator("th").inner_text().lower()
    cell = row.locator("td.doc").first
    assert "documented" in cell.inner_text().lower()
    assert background(cell) == "rgb(255, 255, 255)"  # outlined, never filled like a measurement
    assert cell.evaluate("e => getComputedStyle(e).borderTopStyle") == "dashed"


def test_the_check_page_colours_the_verdict_alone(served: Served, browser: Any, tmp_path: Path) -> None:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    try:
        pg.goto(f"{served.base}/check?target=triton-3.9.0&backend=rocprofiler&mode=pcsampling")
        word = pg.locator(".verdict-word")
        assert word.inner_text() == "✗ cannot run"
        body = pg.evaluate("getComputedStyle(document.body).color")
        assert word.locator(".verdict").evaluate("e => getComputedStyle(e).color") != body  # in its colour
        for what in (".facts dd.reason", "table.answers td"):
            el = pg.locator(what).first
            assert el.evaluate("e => getComputedStyle(e).color") == body, what  # the rest as plain text
            assert el.evaluate("e => getComputedStyle(e).fontWeight") == "400", what
        assert [a.strip() for a in pg.locator("table.answers .answer").all_inner_texts()] == ["yes", "no", "no"]
        pg.screenshot(path=str(shots(tmp_path) / "check-1400.png"), full_page=True)
    finally:
        ctx.close()


def _said(el: Any) -> tuple[str, str, str]:
    """(the verdict's words, its colour class, its background) of a cell as shown."""
    word = el.locator(".verdict").first.inner_text().strip()
    cls = [c for c in (el.get_attribute("class") or "").split() if c.startswith("c-")]
    return word, " ".join(cls), el.evaluate("e => getComputedStyle(e).backgroundColor")


@pytest.mark.parametrize("name", ["triton-3.8.0", H200])
def test_matrix_environment_page_and_check_say_the_same_verdict(served: Served, browser: Any, name: str) -> None:
    """/matrix, the environment's page and /check, for every cell of one environment: the
    same verdict words and the same colour class (and colour); a stub-derived cell is never
    "runs". (Failed first: /matrix painted stub-derived cells green "accepted" where /check
    said "cannot run it".)"""
    import httpx

    rows = [r for r in httpx.get(f"{served.base}/matrix.json", params={"candidate": name}).json()["rows"]
            if r["status"] == "measured"]
    assert len(rows) == 14
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    try:
        pg.goto(f"{served.base}/matrix")
        matrix: dict[tuple[str, str], tuple[str, str, str]] = {}
        for cell in pg.locator(f'tr[data-candidate="{name}"] td.cell[data-backend]').all():
            said = _said(cell)
            for mode in (cell.get_attribute("data-modes") or "").split():
                matrix[(cell.get_attribute("data-backend") or "", mode)] = said
        pg.goto(f"{served.base}/candidates/{name}")
        env_page = {(tr.get_attribute("data-backend") or "", tr.get_attribute("data-mode") or ""):
                    _said(tr.locator("td.here")) for tr in pg.locator("tr.verdict-row").all()}
        checks = {}
        for r in rows:
            pg.goto(f"{served.base}/check?target={name}&backend={r['backend']}&mode={r['mode']}")
            checks[(r["backend"], r["mode"])] = _said(pg.locator(".verdict-word"))
    finally:
        ctx.close()
    keys = {(r["backend"], r["mode"]) for r in rows}
    assert set(matrix) == keys and set(env_page) == keys and set(checks) == keys
    for r in rows:
        k = (r["backend"], r["mode"])
        assert matrix[k] == env_page[k] == checks[k], (k, matrix[k], env_page[k], checks[k])
        word, cls, _ = matrix[k]
        assert cls == f"c-{r['here']}" and word.endswith({"runs": " runs", "cannot_run": " cannot run",
                                                          "not_enough_evidence": " not enough evidence"}[r["here"]])
        if r["verdict_source"] == "stub":
            assert not word.endswith(" runs"), k
    assert len({c for _, c, _ in matrix.values()}) >= 2  # the environment's cells do not all say one thing
