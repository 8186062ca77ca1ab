"""Documented evidence: claims kept as data with their sources, refused without
one, shown apart from the measurements and flagged when a measurement disagrees."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.store import Store
from survey.evidence.ingest import upsert_candidate
from survey.render import docs_table
from survey.verdicts import documented
from tests.conftest import survey_cli

SOURCE = """\
    sources:
      - url: https://example.org/notes
        title: release notes
        date: 2026-11-30
        quote: "the words that make the claim"
    added_by: a test
    added: 2026-12-03
"""


def claims_file(tmp_path: Path, body: str, name: str = "claims.yaml") -> Path:
    p = tmp_path / name
    p.write_text("claims:\n" + body)
    return p


def claim(cid: str, candidate: str, backend: str, what: str, mode: str | None = None, extra: str = "") -> str:
    text = f"  - id: {cid}\n    candidate: {candidate}\n    backend: {backend}\n    claim: {what}\n"
    if mode:
        text += f"    mode: {mode}\n"
    return text + extra + SOURCE


def test_the_packaged_claims_cite_upstream_exactly() -> None:
    claims = {d.claim.id: d.claim for d in documented.load()}
    assert set(claims) == {"main-rocprofiler-present", "main-rocprofiler-pcsampling-accepted",
                           "main-rocprofiler-periodic-flushing-accepted"}
    for c in claims.values():
        assert c.candidate == "triton-main" and c.backend == "rocprofiler"
        for src in c.sources:
            assert src.url.startswith("https://github.com/triton-lang/triton/") and src.quote
            assert src.commit or src.date
            if src.commit:  # a file at a commit: the URL names that commit and that path
                assert src.url == f"https://github.com/triton-lang/triton/blob/{src.commit}/{src.path}"
    pcs = claims["main-rocprofiler-pcsampling-accepted"]
    assert pcs.mode == "pcsampling" and pcs.claim == "accepted" and pcs.platform == "amd"
    urls = [s.url for s in pcs.sources]
    assert "https://github.com/triton-lang/triton/pull/11040" in urls
    assert any(s.path == "third_party/proton/csrc/lib/Profiler/RocprofSDK/RocprofSDKProfiler.cpp" and
               "\"pcsampling\"" in s.quote for s in pcs.sources)


@pytest.mark.parametrize("body, message", [
    ("  - id: no-source\n    candidate: triton-main\n    backend: rocprofiler\n    claim: present\n"
     "    added_by: a test\n    added: 2026-12-03\n",
     "claim 'no-source' has no source; each claim needs at least one (url, title, quote, and a commit or a date)"),
    ("  - id: empty-sources\n    candidate: triton-main\n    backend: rocprofiler\n    claim: present\n"
     "    sources: []\n    added_by: a test\n    added: 2026-12-03\n",
     "claim 'empty-sources' has no source"),
    (claim("unpinned", "triton-main", "rocprofiler", "present").replace("        date: 2026-11-30\n", ""),
     "claim 'unpinned': sources.0: a source needs a commit or a date"),
    (claim("quoteless", "triton-main", "rocprofiler", "present").replace(
        '        quote: "the words that make the claim"\n', ""), "claim 'quoteless': sources.0.quote: Field required"),
    (claim("moded", "triton-main", "rocprofiler", "present", mode="pcsampling"),
     "claim 'moded': a claim that the backend is present takes no mode"),
    (claim("odd-mode", "triton-main", "rocprofiler", "accepted", mode="sampling"),
     "claim 'odd-mode': unknown mode 'sampling'"),
    ("  - [not, a, mapping]\n", "claim #1 is not a mapping"),
])
def test_a_bad_claim_is_refused_in_one_line_naming_file_and_claim(filled_store: Store, tmp_path: Path, body: str,
                                                                  message: str) -> None:
    f = claims_file(tmp_path, body)
    r = survey_cli("table", "--documented", str(f), "--db", filled_store.url)
    assert r.returncode == 65, r
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"error: {f}: ") and message in first, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_files_that_are_no_claims_list(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("claims:\n  - id: x\n    candidate: [unclosed\n")
    with pytest.raises(documented.DocumentedError, match=r"bad.yaml: not valid YAML \(line \d+\)"):
        documented.load(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(documented.DocumentedError, match="needs a top-level `claims:` list"):
        documented.load(bad)
    with pytest.raises(documented.DocumentedError, match="no such file or directory"):
        documented.load(tmp_path / "missing")
    claims_file(tmp_path, claim("twice", "triton-main", "rocprofiler", "present"), "a.yaml")
    claims_file(tmp_path, claim("twice", "triton-main", "cupti", "present"), "b.yaml")
    bad.unlink()
    with pytest.raises(documented.DocumentedError, match="b.yaml: claim 'twice' is also in .*a.yaml; ids are unique"):
        documented.load(tmp_path)


def test_a_measurement_that_disagrees_is_a_conflict(filled_store: Store, tmp_path: Path) -> None:
    f = claims_file(tmp_path, claim("r38-pcs", "triton-3.8.0", "rocprofiler", "accepted", mode="pcsampling")
                    + claim("r38-present", "triton-3.8.0", "rocprofiler", "present")
                    + claim("r37-absent", "triton-3.7.1", "rocprofiler", "absent")
                    + claim("r39-pf-amd", "triton-3.9.0", "rocprofiler", "accepted", mode="periodic_flushing",
                            extra="    platform: amd\n")
                    + claim("main-pcs", "triton-main", "rocprofiler", "accepted", mode="pcsampling"))
    with filled_store.session() as s:
        rows = {r["id"]: r for r in documented.assess(s, documented.load(f))}
    assert rows["r38-pcs"]["status"] == "conflicts"
    (seen,) = rows["r38-pcs"]["measured"]
    assert seen["holds"] is False and seen["seen"] == "refused" and seen["stub_derived"] is True
    assert rows["r38-present"]["status"] == "agrees" and rows["r37-absent"]["status"] == "agrees"
    assert rows["r39-pf-amd"]["status"] == "not_measured"  # measured only without a GPU: not the claim's platform
    assert rows["main-pcs"]["status"] == "not_measured" and rows["main-pcs"]["measured"] == []

    md = survey_cli("table", "--documented", str(f), "--db", filled_store.url).stdout
    section = md.split("**Documented, not measured**")[1]
    run_id = seen["run_id"]
    assert (f"Triton 3.8.0: `pcsampling` on `rocprofiler` accepted — CONFLICT: measured refused "
            f"(run #{run_id} on no GPU (x86_64), stub-derived)") in section
    assert "Triton 3.8.0: `rocprofiler` present — agrees with the measurement: agrees" in section
    # never merged: the measured cell is the measurement's, and the row points at the conflict
    row = next(ln for ln in md.splitlines() if ln.startswith("| Triton 3.8.0"))
    assert "`periodic_flushing` only — `pcsampling` raises `unsupported mode`" in row
    assert "documented" not in row
    note = int(row.split(" | ")[0].rsplit(" ", 1)[1].translate(str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")))
    notes = md.split("\n\n")[1].splitlines()
    assert notes[note - 1].startswith(f"{note}. run #{run_id}, 2026-12-02")
    assert notes[note - 1].endswith("a measurement here disagrees with a documented claim "
                                    "(see “Documented, not measured”)")


def test_a_row_without_evidence_shows_documented_claims_marked(filled_store: Store) -> None:
    with filled_store.session() as s:
        upsert_candidate(s, "triton-main", label="Upstream `main`", kind="pip", position=10, scope="catalog")
        s.commit()
        table = docs_table.build(s)
    row = next(r for r in table.rows if r["source"].text == "Upstream `main`")
    assert row["rocprofiler"].text == "`pcsampling` and `periodic_flushing` (documented, not measured)"
    assert row["choices"].text == "includes `rocprofiler` (documented, not measured)"
    assert row["rocprofiler"].note == docs_table.DOCUMENTED_NOTE
    md = table.markdown()
    assert "[triton-lang/triton#11040, 2026-07-24][doc-2]: “Add `pcsampling` support to the AMD ROCProfiler backend.”" \
        in md
    assert "[doc-2]: https://github.com/triton-lang/triton/pull/11040" in md.splitlines()
    html = table.html()
    assert '<a href="https://github.com/triton-lang/triton/pull/11040">triton-lang/triton#11040, 2026-07-24</a>' \
        in html
    assert "`" not in html
