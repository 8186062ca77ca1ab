"""How one test run is spread over pytest-xdist's workers (wired in by tests/conftest.py).

Two rules, each a fix of time lost in whole runs of tests/run.sh:

- **A tier that holds one big thing per process runs in one worker, as one unit.** The
  tests marked with a tier of ``ONE_WORKER`` (a Ray cluster, chromium, the podman
  containers) are handed to one worker together, so the module's cluster is started once,
  not once in every worker that drew one of its tests (four starts of 20-86 s each), and no
  worker sits waiting for another's tier lock.
- **A test that needs what tests/run.sh prepares in the background waits in the queue, not
  in a worker.** tests/run.sh builds the podman images and the integration tier's Triton
  venvs while the other tests run, and names the folder where each job writes its exit
  status (``PREPARING``: ``images.rc``, ``venvs.rc``). Such a test is handed out once its
  job has ended; until then the worker gets the next test that needs nothing. So every
  tier runs in one pytest run, and the run ends with the many short tests.

Each worker, as it collects, writes the unit and the needs of every test to the run
directory (:func:`write_units`); the scheduler reads them when it hands out the work. Both
sides compute nothing else: the order is the collection's (tests/conftest.py sorts it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

PREPARING = "PROTON_SURVEY_PREPARING"
# what each prepared thing is for: a test with one of these marks waits for that job
NEEDS = {"podman": "images", "integration": "venvs"}
UNITS = "units.json"


def needs_of(item: pytest.Item) -> list[str]:
    return sorted({job for mark, job in NEEDS.items() if item.get_closest_marker(mark) is not None})


def unit_of(item: pytest.Item, one_worker: tuple[str, ...]) -> str:
    tier = next((t for t in one_worker if item.get_closest_marker(t) is not None), None)
    return f"tier:{tier}" if tier else item.nodeid


def write_units(run_dir: Path, items: list[pytest.Item], one_worker: tuple[str, ...]) -> None:
    """Each worker's collection is the same; each writes it whole, atomically."""
    units = {item.nodeid: {"unit": unit_of(item, one_worker), "needs": needs_of(item)} for item in items}
    tmp = run_dir / f"{UNITS}.{os.getpid()}"
    tmp.write_text(json.dumps(units))
    os.replace(tmp, run_dir / UNITS)


def job_status(job: str) -> str | None:
    """The exit status that tests/run.sh's background job ``job`` wrote; None while it runs.
    When nothing is being prepared (no ``PREPARING``), "0": nothing waits."""
    where = os.environ.get(PREPARING)
    if not where:
        return "0"
    try:
        return (Path(where) / f"{job}.rc").read_text().strip() or None
    except FileNotFoundError:
        return None


def wait_for_jobs(item: pytest.Item) -> None:
    """In the worker: a test handed out before its job ended (only when nothing else was
    left) waits for it; a job that failed fails the test, naming it."""
    for job in needs_of(item):
        while (status := job_status(job)) is None:
            time.sleep(0.5)
        if status != "0":
            pytest.fail(f"preparing the {job} failed (exit {status}); tests/run.sh prints its log at the end",
                        pytrace=False)


class TierScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the units of :func:`write_units` as the scopes, in the
    collection's order, a unit whose job has not ended passed over while others wait."""

    def __init__(self, config: pytest.Config, log: Any = None, *, run_dir: Path) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # keep the collection's order
        self._run_dir = run_dir  # where the workers wrote their units (write_units)
        self._units: dict[str, dict[str, Any]] | None = None
        self._needs: dict[str, set[str]] = {}

    def _read_units(self) -> dict[str, dict[str, Any]]:
        if self._units is None:
            self._units = json.loads((self._run_dir / UNITS).read_text())
        return self._units

    def _split_scope(self, nodeid: str) -> str:
        entry = self._read_units().get(nodeid, {"unit": nodeid, "needs": []})
        self._needs.setdefault(entry["unit"], set()).update(entry["needs"])
        return str(entry["unit"])

    def _assign_work_unit(self, node: Any) -> None:
        ready = next((scope for scope in self.workqueue
                      if all(job_status(job) is not None for job in self._needs.get(scope, ()))), None)
        if ready is not None:
            self.workqueue.move_to_end(ready, last=False)
        super()._assign_work_unit(node)  # the first unit of the queue
