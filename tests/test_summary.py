"""The stored cells (survey.verdicts.summary) are what the runs say: after every kind of
write - one report, a batch, a second run of the same environment that makes a check
unstable, a failure, a report already stored - each slot's stored cells equal the cells
worked out from its runs, and the stamp is current. A write the summary did not see
(another program moving the matrix version), or a new derivation, makes the stamp stale:
the answers are then worked out from the runs, the same as before, until a rebuild."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from db import models as m
from db.store import Store
from probes import outcomes as O
from survey.evidence import identity
from survey.evidence.ingest import Filing, identify, ingest, ingest_many, record_failure
from survey.render import docs_table
from survey.verdicts import cells as cells_mod
from survey.verdicts import facts as facts_mod
from survey.verdicts import matrix as matrix_mod
from survey.verdicts import summary
from tests.conftest import report_bytes, survey_cli
from tests.conftest import report_variant as variant
from tests.helpers.summary import NAMES, assert_kept, facts_worked_out, kept, worked_out

pytestmark = pytest.mark.both_stores

def test_every_kind_of_write_keeps_the_stored_cells_equal_to_the_runs(store: Store) -> None:
    with store.session() as s:  # one report at a time
        for i, name in enumerate(NAMES):
            ingest(s, report_bytes(name), candidate=f"c{i}", label=f"C{i}", position=i, scope="catalog")
    assert_kept(store)
    with store.session() as s:  # the same environment again, one check disagreeing: now unstable
        ingest(s, variant("cpu-triton-3.9.0.json", "/venvs/v39", "2026-12-02T18:21:31+00:00"), candidate="c3",
               scope="catalog")
    with store.session() as s:
        ingest(s, variant("cpu-triton-3.9.0.json", "/venvs/v39", "2026-12-02T19:00:00+00:00", flip="cupti"),
               candidate="c3", scope="catalog")
    assert_kept(store)
    with store.session() as s:
        rows = [r for r in matrix_mod.matrix(s, candidate="c3") if r["backend"] == "cupti" and r["mode"] == "none"]
    assert [r["outcome"] for r in rows] == [O.UNSTABLE]  # the second run's disagreement, kept
    with store.session() as s:  # one environment under two names: a disagreement under one changes both
        ingest(s, variant(NAMES[2], "/venvs/twin", "2026-12-02T10:00:00+00:00"), candidate="twin-a", scope="catalog")
        ingest(s, variant(NAMES[2], "/venvs/twin", "2026-12-02T11:00:00+00:00"), candidate="twin-b", scope="catalog")
    assert_kept(store)
    with store.session() as s:
        ingest(s, variant(NAMES[2], "/venvs/twin", "2026-12-02T12:00:00+00:00", flip="cupti"), candidate="twin-a",
               scope="catalog")
    assert_kept(store)
    with store.session() as s:
        rows = [r for r in matrix_mod.matrix(s, candidate="twin-b") if r["backend"] == "cupti" and r["mode"] == "none"]
    assert [r["outcome"] for r in rows] == [O.UNSTABLE]
    with store.session() as s:  # a batch: new candidates and new runs of stored ones
        items = [(identify(variant(NAMES[i % 4], f"/venvs/b{i % 3}", f"2026-12-03T0{i}:00:00+00:00")),
                  Filing(f"c{i % 6}", f"C{i % 6}", position=i % 6, scope="catalog")) for i in range(8)]
        ingest_many(s, items, batch=3)
    assert_kept(store)
    with store.session() as s:  # a batch where a run that disagrees is followed by its slot's next run
        ingest(s, variant(NAMES[1], "/venvs/tw2", "2026-12-04T01:00:00+00:00"), candidate="twin-c", scope="catalog")
        ingest_many(s, [
            (identify(variant(NAMES[1], "/venvs/tw2", "2026-12-04T02:00:00+00:00", flip="cupti")),
             Filing("z", "Z", position=9, scope="catalog")),
            (identify(variant(NAMES[1], "/venvs/elsewhere", "2026-12-04T03:00:00+00:00")),
             Filing("z", "Z", position=9, scope="catalog"))])
    assert_kept(store)
    with store.session() as s:
        rows = [r for r in matrix_mod.matrix(s, candidate="twin-c") if r["backend"] == "cupti" and r["mode"] == "none"]
    assert [r["outcome"] for r in rows] == [O.UNSTABLE]
    with store.session() as s:  # a failure, and a report already stored
        record_failure(s, "c1", label="C1", kind="pip", spec=None, position=1, error="no such wheel",
                       platform=identity.PlatformId("none:x86_64", "none", None, "x86_64", {}))
        ingest(s, report_bytes(NAMES[0]), candidate="c0", scope="catalog")
    assert_kept(store)


def test_a_write_the_summary_did_not_see_makes_it_stale_and_the_answers_stay_the_same(store: Store) -> None:
    with store.session() as s:
        for i, name in enumerate(NAMES):
            ingest(s, report_bytes(name), candidate=f"c{i}", label=f"C{i}", position=i, scope="catalog")
        ingest(s, variant(NAMES[3], "/venvs/x", "2026-12-03T00:00:00+00:00", flip="cupti"), candidate="c3",
               scope="catalog")
        record_failure(s, "gone", label="Gone", kind="pip", spec={"pip": ["triton==9.9.9"]}, position=7,
                       error="no such wheel", platform=identity.PlatformId("none:x86_64", "none", None, "x86_64", {}))
    with store.session() as s:
        assert summary.current(s)
        stored_rows = matrix_mod.matrix(s, scope="all")
        filtered = matrix_mod.page(s, 0, 2, backend="cupti", outcome=O.NO_GPU)
        table = docs_table.markdown(s, "all", ["source", "platform", "triton", "choices", *O.BACKENDS, "capture",
                                               "evidence"])
    with store.engine.begin() as conn:  # as another program writing the store would
        conn.execute(text("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS VARCHAR(20)) "
                          "WHERE key = 'matrix_version'"))
    cells_mod._CELLS.clear()
    with store.session() as s:
        assert not summary.current(s)
        assert matrix_mod.matrix(s, scope="all") == stored_rows
        assert matrix_mod.page(s, 0, 2, backend="cupti", outcome=O.NO_GPU) == filtered
        assert docs_table.markdown(s, "all", ["source", "platform", "triton", "choices", *O.BACKENDS, "capture",
                                              "evidence"]) == table
    with store.session() as s:  # a write now leaves it stale: it never claims more than it saw
        ingest(s, variant(NAMES[0], "/venvs/y", "2026-12-03T01:00:00+00:00"), candidate="c9", scope="catalog")
    with store.session() as s:
        assert not summary.current(s)
        assert summary.rebuild(s) == 6
    assert_kept(store)
    with store.session() as s:
        assert summary.rebuild(s) == 0  # current: nothing to do


def test_a_new_derivation_makes_every_stored_stamp_stale(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    with store.session() as s:
        ingest(s, report_bytes(NAMES[0]), candidate="c0", scope="catalog")
    with store.session() as s:
        assert summary.current(s)
    monkeypatch.setattr(summary, "RULES", summary.RULES + "-next")
    with store.session() as s:
        assert not summary.current(s)
        assert summary.rebuild(s) == 1
    assert_kept(store)


def test_a_filtered_page_counts_and_pages_the_slots_with_a_matching_row(store: Store) -> None:
    with store.session() as s:
        for i, name in enumerate(NAMES):
            ingest(s, report_bytes(name), candidate=f"c{i}", label=f"C{i}", position=i, scope="catalog")
    with store.session() as s:
        every = matrix_mod.matrix(s, outcome=O.NO_GPU)
        slots = list(dict.fromkeys((r["candidate"], r["platform"]) for r in every))
        assert len(slots) == 4 and {r["outcome"] for r in every} == {O.NO_GPU}  # the four CPU reports
        first, total = matrix_mod.page(s, 0, 3, outcome=O.NO_GPU)
        rest, total2 = matrix_mod.page(s, 3, 3, outcome=O.NO_GPU)
    assert total == total2 == 4
    assert first + rest == every


def test_rows_are_copies_a_caller_may_change(store: Store) -> None:
    with store.session() as s:
        ingest(s, report_bytes(NAMES[0]), candidate="c0", scope="catalog")
    with store.session() as s:
        rows = matrix_mod.matrix(s)
        mine = copy.deepcopy(rows)
        rows[0]["outcome"] = "changed"
    with store.session() as s:
        assert matrix_mod.matrix(s) == mine


def test_a_store_without_cells_gets_them_from_the_next_command_that_writes(store: Store, tmp_path: Any) -> None:
    with store.session() as s:
        for i, name in enumerate(NAMES[:3]):
            ingest(s, report_bytes(name), candidate=f"c{i}", label=f"C{i}", position=i, scope="catalog")
    with store.engine.begin() as conn:  # as a store migrated from before the cells holds them: none, no stamp
        conn.execute(text("DELETE FROM cells"))
        conn.execute(text("DELETE FROM meta WHERE key = 'cells_stamp'"))
    with store.session() as s:
        assert not summary.current(s)
    report = tmp_path / "r.json"
    report.write_bytes(report_bytes(NAMES[3]))
    r = survey_cli("ingest", str(report), "--candidate", "c3", "--new", "--db", store.url)
    assert r.returncode == 0, r
    assert_kept(store)  # every slot's cells, the earlier ones too


def test_two_stores_in_one_process_never_share_worked_out_cells(tmp_path: Path) -> None:
    """Two stores with the same runs (the same reports as runs 1 and 2 of one environment,
    the second disagreeing, so run 1's slot is worked out again when run 2 is written) under
    other run ids: each store keeps the cells of its own runs.
    (Failed first, when a check was named by its row id: the second store kept the first's
    check ids, from the process's cache of worked-out cells, keyed by report and run ids
    alone, which the two stores shared. A check is named by its place in its run now, the
    same in both stores; the cache stays keyed by store.)"""
    first, second = Store(f"sqlite:///{tmp_path / 'a.db'}"), Store(f"sqlite:///{tmp_path / 'b.db'}")
    with second.session() as s:  # the second store's run ids start further on
        ingest(s, report_bytes(NAMES[0]), candidate="other", scope="catalog")
    one = variant(NAMES[3], "/venvs/x", "2026-12-03T00:00:00+00:00")
    two = variant(NAMES[3], "/venvs/x", "2026-12-03T01:00:00+00:00", flip="cupti")
    runs = []
    for store in (first, second):
        with store.session() as s:
            a = ingest(s, one, candidate="c1", scope="catalog").run_id
        with store.session() as s:
            runs.append((a, ingest(s, two, candidate="c2", scope="catalog").run_id))
    assert runs[0] != runs[1]
    for store in (first, second):
        assert_kept(store)
    # the same cells in both (the second's first slot is "other"), checks named by their places
    cells = [[c for _, c in sorted(kept(store).items())] for store in (first, second)]
    assert cells[0] == cells[1][1:] and any(c["live_id"] for slot in cells[0] for c in slot)


def test_slots_with_the_same_checks_share_one_read_of_them(store: Store) -> None:
    """A slot's facts are kept as two texts, its checks (in ``texts``) and the rest, so a docs table reads
    each distinct checks text once however many slots hold it (27,000 slots of a store of
    100,000 runs held 7): four candidates of one report are four slots that share one read,
    and what is read is what was worked out."""
    for i in range(4):
        with store.session() as s:
            ingest(s, variant("cpu-triton-3.8.0.json", f"/venvs/same-{i}", f"2026-10-0{i + 1}T00:00:00+00:00"),
                   candidate=f"same-{i}", label=f"same {i}", position=i, scope="catalog")
    facts = facts_worked_out(store)
    with store.session() as s:
        stored = summary.stored_facts(s, facts)
    assert stored == facts and len(stored) == 4
    assert len({id(f.check_rows) for f in stored.values()}) == 1
    assert len({f.run_id for f in stored.values()}) == 4
    # ... and the store keeps the checks text once, named by the four rows (as a column of every
    # row it was 52 MB of the 100,000-run store's docs table, read for 7 distinct texts)
    with store.engine.connect() as conn:
        kept_rows = conn.execute(text("SELECT f.checks_id, t.body, f.facts FROM slot_facts f "
                                      "JOIN texts t ON t.id = f.checks_id")).all()
    assert len(kept_rows) == 4 and len({r[0] for r in kept_rows}) == 1
    one_checks, _rest = next(iter(facts.values())).parts()
    assert kept_rows[0][1] == one_checks and all(one_checks not in r[2] for r in kept_rows)
    one = next(iter(facts.values()))
    assert facts_mod.Facts.from_parts(*one.parts()) == one


def test_slots_whose_cells_say_the_same_share_them_and_their_rows_stay_apart(store: Store) -> None:
    """A read builds each distinct stored cell once (the 380,016 cells of the scale
    benchmark's 100,000 runs say 41 things): four candidates of one report share their
    cells, which are what was worked out, and a row changed by its reader changes no other."""
    for i in range(4):
        with store.session() as s:
            ingest(s, variant("cpu-triton-3.8.0.json", f"/venvs/same-{i}", f"2026-10-0{i + 1}T00:00:00+00:00"),
                   candidate=f"same-{i}", label=f"same {i}", position=i, scope="catalog")
    stored = kept(store)
    assert stored == worked_out(store) and len(stored) == 4
    lists = list(stored.values())
    assert all(a is b for other in lists[1:] for a, b in zip(lists[0], other, strict=True))
    with store.session() as s:
        rows = matrix_mod.matrix(s)
        mine = copy.deepcopy(rows)
        for r in rows[: len(rows) // 4]:
            r["outcome"] = r["reason"] = "changed"
        assert rows[len(rows) // 4:] == mine[len(rows) // 4:]


def test_runs_with_the_same_checks_derive_them_once_and_keep_their_own_measurements(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of unchanged environments say the same checks: what those derive is worked out
    for the first run written and taken from the memo for the others (summary._DERIVED),
    while each run's capture measurements (kernels, GPU time: new at every run on a GPU)
    stay its own, and every stored cell and fact is what the runs say."""
    summary._DERIVED.clear()
    derived: list[int] = []
    work_out = cells_mod._cells_of
    monkeypatch.setattr(cells_mod, "_cells_of", lambda run: derived.append(run.id) or work_out(run))
    for i in range(3):
        d = json.loads(variant("h200-sm90-triton-3.6.0.json", f"/venvs/gpu-{i}", f"2026-10-0{i + 1}T00:00:00+00:00"))
        for c in d["captures"]:
            if c["outcome"] == O.OK:
                c["kernel_count"], c["gpu_time_ns"] = 50 + i, 1000.0 * (i + 1)
        with store.session() as s:
            ingest(s, json.dumps(d).encode(), candidate=f"gpu-{i}", label=f"GPU {i}", position=i, scope="catalog")
    assert len(derived) == 1  # the first run's checks only
    stored = kept(store)
    monkeypatch.setattr(cells_mod, "_cells_of", work_out)
    assert_kept(store)
    with store.session() as s:
        names = {sid: s.get(m.Candidate, s.get(m.Slot, sid).candidate_id).name  # type: ignore[union-attr]
                 for sid in stored}
    times = {names[sid]: {(c["mode_arg"], c["capture_kernel_count"], c["capture_gpu_time_ns"])
                          for c in cells if c["backend"] == "cupti"} for sid, cells in stored.items()}
    assert times == {f"gpu-{i}": {(None, 50 + i, 1000.0 * (i + 1)), ("pcsampling", 50 + i, 1000.0 * (i + 1)),
                                  ("periodic_flushing", None, None)} for i in range(3)}  # (it made no capture)


def test_a_run_whose_environment_disagrees_is_not_given_what_agreeing_runs_derived(store: Store) -> None:
    """The memo's key holds the environment's pool: the same checks in an environment whose
    runs disagree publish ``unstable``, not what the same checks derived where all agreed."""
    summary._DERIVED.clear()
    name = "cpu-triton-3.9.0.json"
    with store.session() as s:  # the checks, agreeing, in an environment of their own: memorised
        ingest(s, variant(name, "/venvs/calm", "2026-11-01T00:00:00+00:00"), candidate="calm", scope="catalog")
    with store.session() as s:  # the same checks where another run disagreed first
        ingest(s, variant(name, "/venvs/torn", "2026-11-02T00:00:00+00:00", flip="cupti"), candidate="torn",
               scope="catalog")
    with store.session() as s:
        ingest(s, variant(name, "/venvs/torn", "2026-11-03T00:00:00+00:00"), candidate="torn", scope="catalog")
    assert len(summary._DERIVED) >= 2
    assert_kept(store)
    with store.session() as s:
        outcomes = {c: [r["outcome"] for r in matrix_mod.matrix(s, candidate=c)
                        if r["backend"] == "cupti" and r["mode"] == "none"] for c in ("calm", "torn")}
    assert outcomes["torn"] == [O.UNSTABLE] and outcomes["calm"] != [O.UNSTABLE]


def test_an_environment_probed_again_and_again_is_worked_out_once(store: Store,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of one environment that agree pool into a growing number of runs: that number is
    not part of what their checks derive (only an unstable check's reason counts runs), so a
    nightly survey of an unchanged environment works its checks out once."""
    summary._DERIVED.clear()
    derived: list[int] = []
    work_out = cells_mod._cells_of
    monkeypatch.setattr(cells_mod, "_cells_of", lambda run: derived.append(run.id) or work_out(run))
    for night in range(4):
        with store.session() as s:
            ingest(s, variant("cpu-triton-3.8.0.json", "/venvs/nightly", f"2026-11-0{night + 1}T02:00:00+00:00"),
                   candidate="nightly", label="Nightly", scope="catalog")
    assert len(derived) == 1
    monkeypatch.setattr(cells_mod, "_cells_of", work_out)
    assert_kept(store)


def test_an_unstable_check_counts_the_runs_of_its_own_environment(store: Store) -> None:
    """Two environments whose latest runs say the same checks, each unstable over its own
    runs: what the reason counts is each environment's (the memo's key holds an unstable
    check's runs and attempts)."""
    summary._DERIVED.clear()
    name = "cpu-triton-3.9.0.json"
    for prefix, disagreeing in (("/venvs/twice", 1), ("/venvs/thrice", 2)):
        for i in range(disagreeing + 1):
            flip = "cupti" if i < disagreeing else None
            with store.session() as s:
                ingest(s, variant(name, prefix, f"2026-11-1{i}T00:00:00+00:00", flip=flip),
                       candidate=prefix.rsplit("/", 1)[1], scope="catalog")
    assert_kept(store)
    with store.session() as s:
        reasons = {c: [r["reason"] for r in matrix_mod.matrix(s, candidate=c)
                       if r["backend"] == "cupti" and r["mode"] == "none"] for c in ("twice", "thrice")}
    assert len(reasons["twice"]) == len(reasons["thrice"]) == 1
    assert "over 2 runs" in reasons["twice"][0] and "over 3 runs" in reasons["thrice"][0], reasons
