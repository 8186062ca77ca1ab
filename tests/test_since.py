"""Since when: per backend and mode, the first surveyed release where it is
present / accepted / works and the last where it is not, from the real fixture
reports (tests/fixtures/reports), releases ordered by version."""

from __future__ import annotations

import pytest

from db.store import Store
from survey.core.versions import version_key
from survey.evidence.ingest import ingest
from survey.verdicts import since
from tests.conftest import report_bytes


def phrases(store: Store, scope: str = "catalog") -> list[str]:
    with store.session() as s:
        return since.since_lines(since.since_rows(s, scope))


def test_version_order_is_numeric_not_by_name() -> None:
    given = ["3.10.0", "3.9.0", "3.8.0.post1", "3.8.0", "3.8.0rc1", "3.8.0.dev0", "3.6.0+rocm7.2.4", "3.6.0",
             "not a version"]
    assert sorted(given, key=version_key) == [
        "3.6.0", "3.6.0+rocm7.2.4", "3.8.0.dev0", "3.8.0rc1", "3.8.0", "3.8.0.post1", "3.9.0", "3.10.0",
        "not a version"]
    assert version_key("3.8") == version_key("3.8.0")


def test_rocprofiler_since_3_8_and_pcsampling_refused_through_3_9(filled_store: Store) -> None:
    lines = phrases(filled_store)
    assert "`rocprofiler` since 3.8.0 (absent through 3.7.1)" in lines
    assert "`pcsampling` on `rocprofiler`: refused through 3.9.0 (stub-derived)" in lines
    assert "`periodic_flushing` on `rocprofiler`: accepted since 3.8.0 (stub-derived)" in lines
    # measured live on 3.6.0 (refused), through the stub from 3.7.1 on (accepted)
    assert "`periodic_flushing` on `roctracer`: accepted since 3.7.1 (refused through 3.6.0; stub-derived)" in lines
    assert "`cupti` since 3.6.0" in lines
    # no answer anywhere (no GPU on this machine): nothing is said about cupti's pcsampling
    assert not any(line.startswith("`pcsampling` on `cupti`") for line in lines)


def test_releases_are_ordered_by_version_not_by_catalog_name_or_position(store: Store) -> None:
    # catalog order and names run against the versions: the summary must not follow them
    for pos, (name, v) in enumerate([("a-newest", "3.9.0"), ("b", "3.6.0"), ("c", "3.8.0"), ("z-oldest", "3.7.1")]):
        with store.session() as s:
            ingest(s, report_bytes(f"cpu-triton-{v}.json"), candidate=name, label=name, position=pos,
                   scope="catalog")
    with store.session() as s:
        rows = since.since_rows(s)
    row = next(r for r in rows if r["question"] == "present" and r["backend"] == "rocprofiler")
    assert row["releases"] == ["3.6.0", "3.7.1", "3.8.0", "3.9.0"]
    assert (row["first_yes"], row["last_no"]) == ("3.8.0", "3.7.1")
    assert row["phrase"] == "`rocprofiler` since 3.8.0 (absent through 3.7.1)"


def test_only_catalog_candidates_count(filled_store: Store) -> None:
    before = phrases(filled_store)
    with filled_store.session() as s:  # ad-hoc evidence (no catalog name): kept, not published
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="adhoc-h200")
    assert phrases(filled_store) == before
    assert ("`pcsampling` on `cupti`: accepted in 3.6.0 on NVIDIA H200 (sm_90) (not answered in 3.7.1, 3.8.0, 3.9.0: "
            "no GPU or no clean start where probed)") in phrases(filled_store, "all")


def test_a_platform_that_answers_alone_is_named(filled_store: Store) -> None:
    with filled_store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="triton-3.6.0")
    lines = phrases(filled_store)
    assert ("`pcsampling` on `cupti`: accepted in 3.6.0 on NVIDIA H200 (sm_90) (not answered in 3.7.1, 3.8.0, 3.9.0: "
            "no GPU or no clean start where probed)") in lines
    assert ("`cupti` GELU capture: works in 3.6.0 on NVIDIA H200 (sm_90) (not answered in 3.7.1, 3.8.0, 3.9.0: no GPU "
            "or no clean start where probed)") in lines
    # the H200 says nothing else about rocprofiler (absent there): the CPU rows are named as the only evidence
    assert "`pcsampling` on `rocprofiler`: refused through 3.9.0 on no GPU (x86_64) (stub-derived)" in lines
    # both platforms agree that 3.6.0 refuses cupti periodic_flushing: one row, no platform
    assert ("`periodic_flushing` on `cupti`: refused in 3.6.0 (not answered in 3.7.1, 3.8.0, 3.9.0: no GPU or no "
            "clean start where probed)") in lines


# The fixture reports never disagree across platforms about one release, so the
# summariser itself is given answers per platform and release.
def point(yes: bool, stub: bool = False) -> since.Point:
    return since.Point(yes=yes, no=not yes, stub=stub, runs=[1])


LABELS = {"amd:gfx942:MI300X": "MI300X (gfx942)", "none:x86_64": "no GPU (x86_64)"}


def test_platforms_that_disagree_about_a_release_get_a_row_each() -> None:
    points = {"amd:gfx942:MI300X": {"3.8.0": point(True), "3.9.0": point(True)},
              "none:x86_64": {"3.8.0": point(False, stub=True), "3.9.0": point(False, stub=True)}}
    rows = since.summarise("accepted", "rocprofiler", "pcsampling", points, LABELS)
    assert [r["phrase"] for r in rows] == [
        "`pcsampling` on `rocprofiler`: accepted since 3.8.0 on MI300X (gfx942)",
        "`pcsampling` on `rocprofiler`: refused through 3.9.0 on no GPU (x86_64) (stub-derived)",
    ]
    assert [r["platform"] for r in rows] == ["amd:gfx942:MI300X", "none:x86_64"]


def test_platforms_that_agree_share_a_row_and_a_regression_is_told_as_such() -> None:
    points = {"amd:gfx942:MI300X": {"3.8.0": point(True), "3.10.0": point(False)},
              "none:x86_64": {"3.9.0": point(True), "3.7.1": point(False)}}
    (row,) = since.summarise("accepted", "rocprofiler", "periodic_flushing", points, LABELS)
    assert row["platform"] is None and row["releases"] == ["3.7.1", "3.8.0", "3.9.0", "3.10.0"]
    assert row["phrase"] == ("`periodic_flushing` on `rocprofiler`: accepted in 3.8.0, 3.9.0; "
                             "refused in 3.7.1, 3.10.0")


@pytest.mark.parametrize("question, mode, want", [
    ("present", None, "`rocprofiler` since 3.8.0"),
    ("works", "pcsampling", "`rocprofiler` `pcsampling` GELU capture: works since 3.8.0"),
])
def test_one_platform_phrases(question: str, mode: str | None, want: str) -> None:
    points = {"none:x86_64": {"3.8.0": point(True), "3.9.0": point(True)}}
    (row,) = since.summarise(question, "rocprofiler", mode, points, {"none:x86_64": "no GPU (x86_64)"})
    assert row["phrase"] == want
