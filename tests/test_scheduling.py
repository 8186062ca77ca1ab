"""How tests/run.sh's one pytest run hands out the tests (tests/helpers/scheduling.py).

The scheduler is driven here as xdist drives it (add the workers, their collection,
schedule, then a report per finished test); the workers are stand-ins that record what
they were sent — the environment the scheduler runs in, not the scheduler's answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.helpers.scheduling import PREPARING, UNITS, TierScheduling

COLLECTION = ["t.py::longest", "t.py::podman_a", "t.py::fleet_a", "t.py::podman_b", "t.py::fleet_b",
              "t.py::plain_1", "t.py::plain_2", "t.py::plain_3", "t.py::plain_4"]
UNIT_OF = {"t.py::fleet_a": ("tier:fleet", []), "t.py::fleet_b": ("tier:fleet", []),
           "t.py::podman_a": ("tier:podman", ["images"]), "t.py::podman_b": ("tier:podman", ["images"])}


class Worker:
    """What the scheduler uses of one of xdist's workers."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[str] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += [COLLECTION[i] for i in indices]

    def shutdown(self) -> None:
        self.shutting_down = True


def _config(workers: int) -> Any:
    options = {"numprocesses": workers, "tx": [f"{workers}*popen"], "dist": "loadgroup", "loadscopereorder": True}
    return SimpleNamespace(option=SimpleNamespace(**options), getvalue=options.get,
                           getoption=lambda name, default=None: options.get(name, default))


@pytest.fixture
def scheduled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TierScheduling, list[Worker], Path]:
    run, preparing = tmp_path / "run", tmp_path / "preparing"
    run.mkdir()
    preparing.mkdir()
    monkeypatch.setenv(PREPARING, str(preparing))
    units = {t: {"unit": UNIT_OF.get(t, (t, []))[0], "needs": UNIT_OF.get(t, (t, []))[1]} for t in COLLECTION}
    (run / UNITS).write_text(json.dumps(units))
    sched = TierScheduling(_config(2), run_dir=run)
    workers = [Worker("gw0"), Worker("gw1")]
    for w in workers:
        sched.add_node(w)  # type: ignore[arg-type]
        sched.add_node_collection(w, COLLECTION)  # type: ignore[arg-type]
    sched.schedule()
    return sched, workers, preparing


def _finish(sched: TierScheduling, worker: Worker, test: str) -> None:
    sched.mark_test_complete(worker, COLLECTION.index(test))  # type: ignore[arg-type]


def test_a_tier_goes_to_one_worker_whole_and_the_order_is_the_collections(scheduled: Any) -> None:
    sched, (gw0, gw1), _ = scheduled
    assert gw0.sent[0] == "t.py::longest"  # the first of the collection, not the largest unit
    assert {"t.py::fleet_a", "t.py::fleet_b"} <= set(gw1.sent)
    assert "t.py::fleet_a" not in gw0.sent and "t.py::fleet_b" not in gw0.sent


def test_a_test_waits_in_the_queue_until_its_job_has_ended(scheduled: Any) -> None:
    sched, (gw0, gw1), preparing = scheduled
    assert not [t for t in gw0.sent + gw1.sent if "podman" in t]  # passed over: the images are not made yet
    _finish(sched, gw0, gw0.sent[0])
    assert not [t for t in gw0.sent + gw1.sent if "podman" in t]
    (preparing / "images.rc").write_text("0\n")  # tests/run.sh's job ended
    _finish(sched, gw0, gw0.sent[1])
    assert gw0.sent[-2:] == ["t.py::podman_a", "t.py::podman_b"]  # handed out at once, ahead of the rest


def _pending(sched: TierScheduling, worker: Worker) -> list[str]:
    return [t for unit in sched.assigned_work[worker].values() for t, done in unit.items() if not done]  # type: ignore[index]


def test_with_nothing_else_left_a_waiting_test_is_handed_out(scheduled: Any) -> None:
    # the images are never made here: once the rest is done, the podman tests are handed out
    # all the same (they wait for the job in their setup), so no run stalls with work queued
    sched, workers, _ = scheduled
    while busy := [w for w in workers if _pending(sched, w)]:
        _finish(sched, busy[0], _pending(sched, busy[0])[0])
    assert sorted(workers[0].sent + workers[1].sent) == sorted(COLLECTION)
