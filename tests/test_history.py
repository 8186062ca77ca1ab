"""One matrix cell over time: /history (survey.verdicts.history)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from db.store import Store
from survey.evidence.identity import PlatformId
from survey.evidence.ingest import ingest, record_failure
from tests.conftest import report_bytes
from tests.helpers.api import Text, assert_error

CPU = "none:x86_64"


def three_runs(store: Store) -> list[int]:
    """One candidate surveyed as Triton 3.7.1, then 3.8.0, then an attempt that failed."""
    ids = []
    for name in ("cpu-triton-3.7.1.json", "cpu-triton-3.8.0.json"):
        with store.session() as s:
            ids.append(ingest(s, report_bytes(name), candidate="t", source="upload").run_id)
    with store.session() as s:
        run_id, _ = record_failure(s, "t", label="t", kind="pip", spec={"pip": "triton"}, position=0,
                                   error="no network: pypi.org unreachable", scope="catalog",
                                   platform=PlatformId(CPU, "none", None, "x86_64", {}))
    return [*ids, run_id]


@pytest.mark.both_stores
def test_a_cells_runs_newest_first_with_the_change_marked(store: Store, make_client: Any) -> None:
    old, new, failed = three_runs(store)
    c = make_client(store)
    body = c.get("/history.json?candidate=t&backend=rocprofiler").json()
    assert [r["run_id"] for r in body["runs"]] == [failed, new, old] and body["total"] == 3
    f, n, o = body["runs"]
    # what the fixtures recorded: rocprofiler is not a backend of 3.7.1; 3.8.0 has it, its library absent here
    assert (o["outcome"], o["verdict"], o["triton_version"], o["changed"]) == ("unknown_backend", "absent", "3.7.1",
                                                                               False)
    assert (n["outcome"], n["triton_version"], n["changed"]) == ("library_missing", "3.8.0", True)
    assert n["verdict"] != "absent" and n["library"] == "librocprofiler-sdk.so"
    assert f["status"] == "unobtainable" and f["outcome"] is None and f["changed"] is None
    assert "no network" in f["error"] and f["tries"] == 1
    assert body["changes"] == 1 and body["mode"] == "none" and body["platform"] is None
    same = c.get("/history.json?candidate=t&backend=instrumentation&mode=mma").json()
    assert same["changes"] == 0 and [r["outcome"] for r in same["runs"][1:]] == ["no_gpu", "no_gpu"]


def test_every_format_and_page(store: Store, make_client: Any) -> None:
    ids = three_runs(store)
    c = make_client(store)
    seen, url = [], "/history.json?candidate=t&backend=cupti&mode=pcsampling&_size=2"
    while url:
        r = c.get(url)
        body = r.json()
        assert len(body["runs"]) <= 2
        seen += [x["run_id"] for x in body["runs"]]
        url = body["next_url"]
    assert seen == ids[::-1]
    csv_text = c.get("/history.csv?candidate=t&backend=cupti&mode=pcsampling").text
    assert csv_text.splitlines()[0].startswith("run_id,date,status,platform") and len(csv_text.splitlines()) == 4
    md = c.get("/history.md?candidate=t&backend=cupti").text
    assert md.split("|")[1].strip() == "run_id" and "nan" not in md and "None" not in md  # no Python value leaks
    page = Text(c.get("/history?candidate=t&backend=rocprofiler").text).text
    assert "the answer changed 1 time" in page and "changed" in page and "unknown_backend" in page
    assert c.get(f"/history.json?candidate=t&backend=cupti&platform={CPU}").json()["total"] == 3


def test_bad_questions_are_clear_errors(store: Store, make_client: Any) -> None:
    three_runs(store)
    c = make_client(store)
    assert_error(c.get("/history.json?candidate=nope&backend=cupti"), 404, "not_found", "candidate")
    assert_error(c.get("/history.json?candidate=t&backend=nvtx"), 422, "invalid_input", "backend")
    assert_error(c.get("/history.json?candidate=t&backend=cupti&mode=fast"), 422, "invalid_input", "mode")
    err = assert_error(c.get("/history.json?candidate=t&backend=cupti&platform=amd:gfx942"), 404, "not_found",
                       "platform")
    assert CPU in err["message"]
    assert_error(c.get("/history.json?backend=cupti"), 422, "invalid_input", "candidate")
    form = c.get("/history")  # the bare page is a form of choices, not free text
    assert form.status_code == 200 and "<input" not in form.text
    assert '<option>t</option>' in form.text and '<option>rocprofiler</option>' in form.text


def test_the_matrix_links_each_cell_to_its_history(store: Store, make_client: Any) -> None:
    three_runs(store)
    c = make_client(store)
    cells = [x for x in Text(c.get("/matrix?scope=all").text).cells if "empty" not in x["class"]]
    links = [h for x in cells for h in x["hrefs"] if h.startswith("/history?")]
    assert len(links) == len(c.get("/matrix.json?scope=all").json()["rows"])
    for link in links[:5]:
        assert c.get(link).status_code == 200


def test_survey_history_prints_the_same_cell(store: Store) -> None:
    from survey.core import exitcodes
    from tests.conftest import survey_cli

    old, new, failed = three_runs(store)
    res = survey_cli("history", "t", "--backend", "rocprofiler", "--format", "json", "--db", store.url)
    assert res.returncode == 0, res.stderr
    body = json.loads(res.stdout)
    assert [r["run_id"] for r in body["runs"]] == [failed, new, old] and body["changes"] == 1
    assert [r["changed"] for r in body["runs"]] == [None, True, False]
    table = survey_cli("history", "t", "--backend", "rocprofiler", "--db", store.url)
    assert f"#{new} (changed)" in table.stdout and "unknown_backend" in table.stdout
    csv_out = survey_cli("history", "t", "-b", "cupti", "-m", "pcsampling", "-f", "csv", "--db", store.url).stdout
    assert csv_out.splitlines()[0].startswith("run_id,date,status") and "nan" not in csv_out
    typo = survey_cli("history", "t", "--backend", "rocprofiler", "--mode", "pcsamplng", "--db", store.url)
    assert typo.returncode == exitcodes.USAGE and "did you mean 'pcsampling'" in typo.stderr
    missing = survey_cli("history", "nope", "--backend", "cupti", "--db", store.url)
    assert missing.returncode == exitcodes.INPUT and "no candidate named 'nope'" in missing.stderr
