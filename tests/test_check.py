"""`survey check`: exit 0 / 2 / 3 with reason and fix, from real evidence; recipes;
`survey diff`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from survey.aorta import recipe as recipe_mod
from survey.core import exitcodes
from survey.core.errors import RecipeError
from survey.evidence import queries
from survey.evidence.ingest import ingest
from survey.flows import check as survey_check
from survey.verdicts import diff as survey_diff
from tests.conftest import report_bytes, report_variant, survey_cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def gpu_store(filled_store):
    with filled_store.session() as s:
        ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate="h200", label="H200", position=5)
    return filled_store


def check(store, target: str, backend: str, mode: str | None = None) -> survey_check.CheckResult:
    with store.session() as s:
        run = queries.latest_complete(s, queries.get_candidate(s, target).id)
        return survey_check.check_run(s, run, target, backend, mode)


def test_backend_absent_names_the_releases_that_have_it(gpu_store) -> None:
    r = check(gpu_store, "triton-3.7.1", "rocprofiler")
    assert r.exit_code == exitcodes.CANNOT_RUN
    assert "has no `rocprofiler` backend" in r.reason
    assert r.cause == "backend_absent" and r.backend_present.answer == "no"
    assert r.fix == ("builds with it (measured): triton-3.8.0 (Triton 3.8.0, no GPU (x86_64)), "
                     "triton-3.9.0 (Triton 3.9.0, no GPU (x86_64))")


def test_where_else_names_ten_builds_and_counts_the_rest_alike_from_the_cells_and_the_runs(store) -> None:
    """A fix names where else the backend or mode is: the first ten builds, then how many
    more. Asked of a store of 100,000 runs it read the whole matrix (380,000 rows, ten
    seconds) and named 10,000 builds; it reads the stored cells of the slots asked for now,
    and says what the runs say when the cells are not current."""
    from sqlalchemy import text

    from survey.verdicts import summary

    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.6.0.json"), candidate="old", label="old", position=0, scope="catalog")
    for i in range(13):  # thirteen builds with rocprofiler
        with store.session() as s:
            ingest(s, report_variant("cpu-triton-3.8.0.json", f"/venvs/b{i:02}", f"2026-10-{i + 1:02}T00:00:00+00:00"),
                   candidate=f"b{i:02}", label=f"b{i:02}", position=i + 1, scope="catalog")
    answers = []
    for current in (True, False):
        with store.session() as s:
            assert summary.current(s) is current
        answers.append([check(store, "old", "rocprofiler").fix,
                        check(store, "old", "roctracer", "periodic_flushing").fix,
                        check(store, "old", "cupti", "periodic_flushing").fix,
                        check(store, "b00", "rocprofiler", "pcsampling").fix])
        with store.engine.begin() as conn:  # the cells go stale: the answers come from the runs
            conn.execute(text("DELETE FROM meta WHERE key = 'cells_stamp'"))
    assert answers[0] == answers[1]

    def builds(extra: str = "") -> str:
        return ", ".join(f"b{i:02} (Triton 3.8.0, no GPU (x86_64){extra})" for i in range(10)) + ", and 3 more"

    assert answers[0] == [
        "builds with it (measured): " + builds(),
        "builds that accept it (measured): " + builds(", stub-derived"),
        "not answered here for " + builds() + " (not refused: no GPU, or no clean answer, where they were probed); "
        "probe them on a GPU to know",
        "every measured build that has the backend refuses it"]


@pytest.mark.parametrize("registry,cli_backends,present", [
    (["cupti", "roctracer"], None, ["cupti", "roctracer"]),  # the registry answers
    (None, ["cupti"], ["cupti"]),  # else the CLI's -b choices
    (None, None, ["cupti", "roctracer", "instrumentation"]),  # else proton.start itself
])
def test_backend_present_is_one_rule_for_check_since_and_documented(store, registry, cli_backends,
                                                                   present) -> None:
    """``survey check``, the since summary and the documented claims say the same of a
    backend's presence, whichever part of the report answers it."""
    from survey.verdicts import documented, since

    data = json.loads(report_bytes("cpu-triton-3.6.0.json"))
    data["registry"]["profilers"], data["registry"]["cli_backends"] = registry, cli_backends
    with store.session() as s:
        ingest(s, json.dumps(data), candidate="t", label="T", position=0, scope="catalog")
    claims = [documented.Documented(file="x.yaml", claim=documented.Claim.model_validate({
        "id": f"p-{b}", "candidate": "t", "backend": b, "claim": "present", "added_by": "x", "added": "2025-01-01",
        "sources": [{"url": "https://x.invalid", "title": "x", "quote": "x", "date": "2025-01-01"}]}))
        for b in ("cupti", "roctracer", "rocprofiler", "instrumentation")]
    with store.session() as s:
        said = {r["backend"]: r["yes"] == ["3.6.0"] for r in since.since_rows(s) if r["question"] == "present"}
        held = {r["backend"]: r["status"] == "agrees" for r in documented.assess(s, claims)}
    for backend in ("cupti", "roctracer", "rocprofiler", "instrumentation"):
        r = check(store, "t", backend)
        assert r.backend_present.answer == ("yes" if backend in present else "no"), (backend, r.backend_present)
        assert said[backend] == (backend in present) == held[backend], backend


def test_mode_refused_from_the_stub_is_said_to_be_stub_derived(gpu_store) -> None:
    r = check(gpu_store, "triton-3.8.0", "rocprofiler", "pcsampling")
    assert r.exit_code == exitcodes.CANNOT_RUN
    assert "answer from a stub library" in r.reason and "unsupported mode" in r.reason
    assert r.fix == "every measured build that has the backend refuses it"
    assert any("librocprofiler-sdk.so" in d for d in r.details)


def test_library_missing_gives_the_library_fix(gpu_store) -> None:
    r = check(gpu_store, "triton-3.8.0", "rocprofiler", "periodic_flushing")
    assert r.exit_code == exitcodes.CANNOT_RUN
    assert "could not load `librocprofiler-sdk.so`" in r.reason
    assert "with the library in place this build accepts the mode (stub-derived)" in r.details


def test_no_gpu_is_not_enough_evidence(gpu_store) -> None:
    r = check(gpu_store, "triton-3.8.0", "cupti")
    assert r.exit_code == exitcodes.NOT_ENOUGH_EVIDENCE
    assert "no GPU" in r.reason and "survey ingest" in r.fix


def test_gpu_evidence_says_it_runs(gpu_store) -> None:
    r = check(gpu_store, "h200", "cupti", "pcsampling")
    assert r.exit_code == exitcodes.OK
    assert "50 kernel launches" in r.reason
    assert check(gpu_store, "h200", "cupti", "periodic_flushing").exit_code == exitcodes.CANNOT_RUN
    # an empty capture does not prove the backend useless, nor useful
    r = check(gpu_store, "h200", "instrumentation")
    assert r.exit_code == exitcodes.NOT_ENOUGH_EVIDENCE and "recorded no kernel" in r.reason
    # mode options are not checked, the base mode is
    r = check(gpu_store, "h200", "cupti", "pcsampling:interval=100")
    assert r.exit_code == exitcodes.OK and "answering for `pcsampling`" in r.details[0]


def test_crash_is_cannot_run(gpu_store) -> None:
    # 3.7.1's cupti+periodic_flushing is undefined behaviour: whatever it did, it did not start
    r = check(gpu_store, "triton-3.7.1", "cupti", "periodic_flushing")
    assert r.exit_code in (exitcodes.CANNOT_RUN, exitcodes.NOT_ENOUGH_EVIDENCE)
    assert r.live_outcome in ("crash", "error", "no_gpu")


def write_recipe(tmp_path: Path, block: str) -> Path:
    p = tmp_path / "recipe.yaml"
    p.write_text("name: gelu\nproton:\n" + block)
    return p


@pytest.mark.parametrize("block,field", [
    ("  backend: rocprofiler\n  backend_mode: pcsampling\n  instrumentation_mode: default\n", "proton.backend_mode"),
    ("  backend: auto\n  backend_mode: pcsampling\n", "proton.backend"),
    ("  backend_mode: pcsampling\n", "proton.backend"),
    ("  backend: roctracer\n  backend_mode: pcsampling\n", "proton.backend_mode"),
    ("  backend: rocprofiler\n  backend_mode: sometimes\n", "proton.backend_mode"),
    ("  backend: cupti\n  instrumentation_mode: default\n", "proton.instrumentation_mode"),
    ("  backend: nvtx\n", "proton.backend"),
])
def test_recipe_rules(tmp_path: Path, block: str, field: str) -> None:
    with pytest.raises(RecipeError) as e:
        recipe_mod.load_recipe(write_recipe(tmp_path, block))
    assert e.value.field == field


def test_recipe_check_end_to_end(gpu_store, tmp_path: Path) -> None:
    p = write_recipe(tmp_path, "  backend: rocprofiler\n  backend_mode: pcsampling\n")
    ok = recipe_mod.load_recipe(p).cells[0].proton
    assert ok is not None and (ok.backend, ok.mode) == ("rocprofiler", "pcsampling")
    cli = survey_cli("check", "triton-3.9.0", "--recipe", str(p), "--json",
                          "--db", gpu_store.url)
    assert cli.returncode == 2
    [verdict] = json.loads(cli.stdout)  # one per cell; this shape has one
    assert verdict["verdict"] == "cannot_run"
    assert "built without rocprofiler-sdk PC sampling support" in verdict["reason"]
    bad = write_recipe(tmp_path, "  backend: roctracer\n  backend_mode: pcsampling\n")
    cli = survey_cli("check", "triton-3.9.0", "--recipe", str(bad), "--db",
                          gpu_store.url)
    assert cli.returncode == exitcodes.INPUT and "roctracer accepts only" in cli.stderr


def test_cli_exit_codes_and_usage(gpu_store) -> None:
    def run(*args):
        return survey_cli("check", *args, "--db", gpu_store.url)

    r = run("h200", "--backend", "cupti")
    assert r.returncode == 0 and r.stdout.startswith("✓ runs: h200")
    assert re.search(r"\(\d+ (seconds|minutes?|hours?|days?) old\)", r.stdout), r.stdout  # whatever its age today
    assert run("triton-3.7.1", "--backend", "rocprofiler").returncode == 2
    assert run("triton-3.8.0", "--backend", "cupti").returncode == 3
    bogus = run("triton-3.8.0", "--backend", "rocprofilr")
    assert bogus.returncode == exitcodes.USAGE and "did you mean 'rocprofiler'?" in bogus.stderr
    typo = run("triton-3.8.0", "--backend", "rocprofiler", "--mode", "pcsamplng")
    assert typo.returncode == exitcodes.USAGE and "did you mean 'pcsampling'?" in typo.stderr
    assert run("triton-3.8.0", "--backend", "cupti", "--mode", "pcsampling:interval=100").returncode != 64
    assert run("triton-3.8.0").returncode == exitcodes.USAGE  # no --backend: the command line itself
    assert run("--no-such-option").returncode == exitcodes.USAGE


def test_diff_between_candidates_and_runs(gpu_store) -> None:
    with gpu_store.session() as s:
        d = survey_diff.diff_runs(queries.resolve_ref(s, "triton-3.7.1"), queries.resolve_ref(s, "triton-3.8.0"))
        assert d["fields"]["triton_version"] == {"a": "3.7.1", "b": "3.8.0"}
        assert d["fields"]["profilers"]["a"] is None
        changes = {c["key"]: (c["a"], c["b"]) for c in d["modes"]}
        assert changes["rocprofiler:none"] == ("unknown_backend", "library_missing")
        same = survey_diff.diff_runs(queries.resolve_ref(s, "run:3"), queries.resolve_ref(s, "#3"))
        assert same["same"] is True
    cli = survey_cli("diff", "triton-3.8.0", "triton-3.9.0", "--db",
                          gpu_store.url)
    assert cli.returncode == 1 and "3.8.0 -> 3.9.0" in cli.stdout  # they differ: 1, like diff
    assert survey_cli("diff", "run:3", "#3", "--db", gpu_store.url).returncode == 0
    cli = survey_cli("diff", "triton-3.8.0", "nosuch", "--db", gpu_store.url)
    assert cli.returncode == exitcodes.INPUT and "no candidate named 'nosuch'" in cli.stderr


def test_survey_diff_says_verdicts_in_the_matrix_words(gpu_store) -> None:  # type: ignore[no-untyped-def]
    """survey diff starts with what changed in each cell's verdict here, in the words
    /matrix and survey check use. (Failed first: only raw outcomes, `unknown_backend`.)"""
    with gpu_store.session() as s:
        d = survey_diff.diff_runs(queries.resolve_ref(s, "triton-3.7.1"), queries.resolve_ref(s, "triton-3.8.0"))
    verdicts = {c["key"]: (c["a"], c["b"]) for c in d["verdicts"]}
    assert verdicts["rocprofiler:none"] == (
        "cannot run: no such backend in the build",
        "cannot run: runtime library missing here; supported by the build (stub-derived)")
    cli = survey_cli("diff", "triton-3.7.1", "triton-3.8.0", "--db", gpu_store.url)
    assert cli.returncode == 1
    assert cli.stdout.index("verdicts here") < cli.stdout.index("modes")
    row = next(line for line in cli.stdout.splitlines() if "rocprofiler:none" in line)
    assert "cannot run: no such" in row and "cannot run: runtime" in row


def test_a_mistyped_platform_gets_a_did_you_mean(filled_store) -> None:  # type: ignore[no-untyped-def]
    """`--platform x86-64` (for x86_64) names the nearest part of a stored platform.
    (Failed first: only the list of keys.)"""
    r = survey_cli("check", "triton-3.8.0", "--backend", "cupti", "--platform", "x86-64", "--db", filled_store.url)
    assert r.returncode == 3, r
    assert "did you mean 'x86_64'? evidence exists for: none:x86_64" in r.stdout, r.stdout
