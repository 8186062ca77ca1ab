"""Badges: one matrix cell as an SVG and as a shields.io endpoint document."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from db.store import Store
from tests.conftest import report_bytes
from tests.helpers.api import assert_error


def test_a_cell_as_svg_and_shields_json(filled_store: Store, make_client: Any) -> None:
    c = make_client(filled_store)
    j = c.get("/badge/triton-3.8.0/rocprofiler/pcsampling.json").json()
    said = "cannot run: mode refused by the build (stub-derived)"  # the words of /matrix and survey check
    assert j == {"schemaVersion": 1, "label": "rocprofiler pcsampling", "message": said, "color": "critical"}
    assert c.get("/badge/triton-3.7.1/rocprofiler/none.json").json()["message"] == \
        "cannot run: no such backend in the build"
    # the build supports periodic_flushing (through the stub), but it does not run here: both are said
    assert c.get("/badge/triton-3.8.0/rocprofiler/periodic_flushing.json").json() == {
        "schemaVersion": 1, "label": "rocprofiler periodic_flushing", "color": "critical",
        "message": "cannot run: runtime library missing here; supported by the build (stub-derived)"}
    r = c.get("/badge/triton-3.8.0/rocprofiler/pcsampling.svg")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    svg = ElementTree.fromstring(r.content)  # well-formed, no script
    assert svg.tag.endswith("svg") and b"<script" not in r.content
    assert f"rocprofiler pcsampling: {said}" in r.text
    assert c.get("/badge/triton-3.8.0/rocprofiler/pcsampling.svg",
                 headers={"If-None-Match": r.headers["etag"]}).status_code == 304


def test_platforms_that_disagree_say_so(filled_store: Store, make_client: Any) -> None:
    from survey.evidence.ingest import ingest

    with filled_store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="triton-3.6.0")
    c = make_client(filled_store)
    assert c.get("/badge/triton-3.6.0/cupti/none.json").json()["message"] == "differs by platform"
    one = c.get("/badge/triton-3.6.0/cupti/none.json", params={"platform": "nvidia:sm_90:NVIDIA H200"}).json()
    assert one["message"] == "runs" and one["color"] == "success"


def test_bad_badges_are_clear_errors(filled_store: Store, make_client: Any) -> None:
    c = make_client(filled_store)
    assert_error(c.get("/badge/nope/cupti/none.json"), 404, "not_found", "candidate")
    assert_error(c.get("/badge/triton-3.8.0/nvtx/none.json"), 422, "invalid_input", "backend")
    assert_error(c.get("/badge/triton-3.8.0/cupti/fast.json"), 422, "invalid_input", "mode")
    assert_error(c.get("/badge/triton-3.8.0/cupti.json"), 404, "not_found")
    page = c.get("/badge/nope/cupti/none.svg")  # the error as a page, like every bare path
    assert page.status_code == 404 and "no candidate named" in page.text and "nope" in page.text
