"""Evidence that holds still: an environment whose checks are undefined behaviour
(Triton 3.7.x's `periodic_flushing` without a GPU: crash on one attempt,
`library_missing` on the next) publishes the same table, Since section and
verdict however often it is re-probed (survey.stability).

The environments are interpreters (venvs) that see a fake triton whose
`proton.start` steps through outcomes counted in a file (tests/envs.py): the same
sequence on every machine, so these tests cannot pass or fail by chance.
Integration tier: the real Triton 3.7.1, surveyed twice.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from probes import facts
from probes import outcomes as O
from tests.conftest import survey_cli
from tests.envs import fake_interpreter, fake_triton

# What the fakes do, as 3.7.x does on a host without a GPU: CUPTI finds no driver,
# roctracer's library is not there (a stub rerun says the mode is accepted),
# `pcsampling` is refused, no rocprofiler backend.
BASE = {"cupti": "no-gpu", "roctracer": "no-lib", "roctracer:pcsampling": "refuse", "rocprofiler": "unknown",
        "instrumentation": "unknown"}
PAGE = ("# Proton\n\nintro\n\n<!-- proton-survey:availability:start -->\n"
        "<!-- proton-survey:availability:end -->\n\nend\n")
COLUMNS = "+roctracer"


@pytest.fixture(autouse=True)
def no_controlled_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks run once, clean: no variable of this machine adds an inherited grid."""
    for name in list(os.environ):
        if facts.is_controlled(name):
            monkeypatch.delenv(name)


def interpreter(tmp_path: Path, name: str, version: str, behaviour: dict[str, str],
                registry: list[str] | None = None) -> Path:
    fake = fake_triton(tmp_path / f"{name}-site", {**BASE, **behaviour}, version=version, dist=True,
                       registry=registry)
    return fake_interpreter(tmp_path / f"{name}-venv", fake)


def catalog(tmp_path: Path, entries: dict[str, tuple[str, Path]]) -> Path:
    path = tmp_path / "catalog.toml"
    path.write_text("".join(f'[[candidate]]\nname = "{name}"\nlabel = "{label}"\npython = "{python}"\n\n'
                            for name, (label, python) in entries.items()))
    return path


def since_section(page: Path) -> str:
    text = page.read_text()
    return text[text.index("**Since**"):text.index("<!-- proton-survey:availability:end -->")]


def run(db: str, cat: Path, *extra: str) -> None:
    r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table", "--jobs", "2", *extra)
    assert r.returncode == 0 and "failed" not in r.stderr, r


def check_json(db: str, cat: Path, name: str, backend: str, mode: str) -> tuple[int, dict]:
    r = survey_cli("check", name, "--backend", backend, "--mode", mode, "--catalog", str(cat), "--db", db, "--json")
    return r.returncode, json.loads(r.stdout)


def test_ten_forced_surveys_of_an_unchanged_catalog_publish_the_same_table(tmp_path: Path) -> None:
    cat = catalog(tmp_path, {
        # crash, then `library_missing`, then crash ...
        "fake-370": ("Fake 3.7.0", interpreter(tmp_path, "370", "3.7.0",
                                                {"roctracer:periodic_flushing": "seq:segv,no-lib"})),
        # the lucky first attempt: `library_missing` once, then five crashes
        "fake-371": ("Fake 3.7.1", interpreter(tmp_path, "371", "3.7.1", {
            "roctracer:periodic_flushing": "seq:no-lib,segv,segv,segv,segv,segv"},
            registry=["cupti", "roctracer", "instrumentation"])),
    })
    db = f"sqlite:///{tmp_path / 's.db'}"
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    since = None
    for i in range(10):
        run(db, cat, "--force")
        if i == 0:
            w = survey_cli("table", "--write", str(page), "--columns", COLUMNS, "--db", db)
            assert w.returncode == 0, w
            since = since_section(page)
            continue
        r = survey_cli("table", "--check", str(page), "--columns", COLUMNS, "--db", db)
        assert r.returncode == 0, f"survey run --force #{i + 1} changed the table:\n{r.stdout}"
        assert survey_cli("table", "--write", str(page), "--columns", COLUMNS, "--db", db).returncode == 0
        assert since_section(page) == since
    text = page.read_text()
    # the unstable cell says so, with no count in the table (they change with every run)
    for label in ("Fake 3.7.0", "Fake 3.7.1"):
        [row] = [ln for ln in text.splitlines() if ln.startswith(f"| {label} ")]
        assert "`periodic_flushing`: unstable across attempts" in row, row
    assert not re.search(r"(crash|library_missing) x\d", text)
    # an unstable check is neither accepted nor refused: no Since line for it
    assert "`pcsampling` on `roctracer`: refused through 3.7.1" in since
    assert "`periodic_flushing` on `roctracer`" not in since
    # the counts are where they are read: `survey check` (every run of the environment) ...
    code, ans = check_json(db, cat, "fake-370", "roctracer", "periodic_flushing")
    assert code == 2 and ans["cause"] == "unstable", ans
    assert "over 10 runs of this environment (crash x30, library_missing x30)" in ans["reason"]
    code, ans = check_json(db, cat, "fake-371", "roctracer", "periodic_flushing")
    assert code == 2 and "(crash x50, library_missing x10)" in ans["reason"], ans
    # ... and `survey history` (each run's own attempts)
    h = survey_cli("history", "fake-371", "--backend", "roctracer", "--mode", "periodic_flushing", "--format", "json",
                   "--db", db)
    runs = json.loads(h.stdout)["runs"]
    assert len(runs) == 10 and json.loads(h.stdout)["changes"] == 0
    assert {(r["outcome"], r["attempts"], r["published"]) for r in runs} == \
        {(O.UNSTABLE, "crash x5, library_missing x1", O.UNSTABLE)}
    # two runs of the unchanged environment: no difference; two environments: said in words
    h = survey_cli("history", "fake-370", "--backend", "roctracer", "--mode", "periodic_flushing", "--format", "json",
                   "--db", db)
    oldest = json.loads(h.stdout)["runs"][-1]["run_id"]
    d = survey_cli("diff", f"run:{oldest}", "fake-370", "--db", db)
    assert d.returncode == 0 and "no differences" in d.stdout, d
    d = survey_cli("diff", "fake-370", "fake-371", "--db", db)
    assert d.returncode == 1 and "registry (get_available_profilers): not read -> cupti, roctracer, instrumentation" \
        in d.stdout, d
    assert "None" not in d.stdout and "['" not in d.stdout


def test_runs_that_disagree_make_a_check_unstable_for_good(tmp_path: Path) -> None:
    """Each run's attempts agree, the runs do not: `library_missing` twice (and a
    stub rerun: accepted), then six crashes, then `library_missing` twice again.
    Published unstable from the second run on, however the later runs go."""
    python = interpreter(tmp_path, "370", "3.7.0", {
        "roctracer:periodic_flushing": "seq:no-lib,no-lib,segv,segv,segv,segv,segv,segv"})
    cat = catalog(tmp_path, {"fake-370": ("Fake 3.7.0", python)})
    db = f"sqlite:///{tmp_path / 's.db'}"
    run(db, cat)
    first = survey_cli("table", "--columns", COLUMNS, "--db", db).stdout
    stub_ran = "`periodic_flushing` on `roctracer`: accepted in 3.7.0" in first
    tables = []
    for _ in range(3):
        run(db, cat, "--force")
        tables.append(survey_cli("table", "--columns", COLUMNS, "--db", db).stdout)
    assert tables[0] == tables[1] == tables[2]
    assert "`periodic_flushing`: unstable across attempts" in tables[0]
    assert "`periodic_flushing` on `roctracer`" not in tables[0]
    if stub_ran:  # a compiler here built the stubs: the lucky first run had published an answer
        assert tables[0] != first
    h = json.loads(survey_cli("history", "fake-370", "--backend", "roctracer", "--mode", "periodic_flushing",
                              "--format", "json", "--db", db).stdout)["runs"]
    assert [(r["outcome"], r["attempts"]) for r in h] == [
        (O.CRASH, "crash x6"), (O.LIBRARY_MISSING, "library_missing x2"), (O.CRASH, "crash x6"),
        (O.LIBRARY_MISSING, "library_missing x2")]
    assert {r["published"] for r in h} == {O.UNSTABLE}
    code, ans = check_json(db, cat, "fake-370", "roctracer", "periodic_flushing")
    assert code == 2 and ans["cause"] == "unstable" and "over 4 runs" in ans["reason"], ans
    assert "(crash x12, library_missing x4)" in ans["reason"]


@pytest.mark.integration
def test_real_371_surveyed_twice_moves_only_towards_unstable(tmp_path: Path) -> None:
    """Real 3.7.1's `periodic_flushing` start is undefined behaviour: a survey's attempts may
    all crash, or all fail otherwise, by chance (its cells then say "crashed" or
    "unrecognised error"; on this machine about half the surveys do), and a survey that sees
    them disagree makes them "unstable across attempts" for good. So a second survey of the
    unchanged environment leaves the table as it was, but for that one move, which the rule
    allows and nothing else."""
    cat = tmp_path / "catalog.toml"
    cat.write_text('[[candidate]]\nname = "triton-3.7.1"\nlabel = "Triton 3.7.1"\npip = "triton==3.7.1"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    tables = []
    for _survey in range(2):
        run(db, cat, "--force")
        r = survey_cli("table", "--columns", "+roctracer,+cupti", "--db", db)
        assert r.returncode == 0, r
        tables.append(r.stdout)
    first, second = tables
    cell = re.compile(r"`periodic_flushing`: ([^|;²]*?)(?= ²| \||;)")
    before, after = cell.findall(first), cell.findall(second)
    assert len(before) == len(after) == 2, (first, second)  # roctracer's and cupti's
    for was, now in zip(before, after, strict=True):
        assert now in (was, "unstable across attempts"), (was, now)  # the one move the rule allows
    assert cell.sub("`periodic_flushing`: …", second) == cell.sub("`periodic_flushing`: …", first)
    d = survey_cli("diff", "run:1", "run:2", "--db", db)
    assert d.returncode == 0 and "None" not in d.stdout, d
