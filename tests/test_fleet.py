"""Surveying a fleet (`survey run --ray`, `survey platform`, the catalog's `platforms`).

The `fleet` tests start a real Ray cluster of three nodes on this machine
(``ray.cluster_utils.Cluster``, bound to 127.0.0.1, one CPU each). The nodes advertise
synthetic GPU platforms; the probes run on this CPU, so every report measures this
machine's own platform (``none:x86_64``): the store files each run under the platform
its report measured, and the outcome says the node advertised another. Candidates are
real venvs (``python -m venv``: a Python without Triton is evidence too); the ones
that fail, hang or are lost are small programs standing in for a broken environment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from db.store import Store
from survey.core.errors import CatalogError
from survey.environments import catalog as catalog_mod
from survey.evidence.identity import local_platform
from survey.flows import fleet
from survey.flows.run import ProbeSettings
from tests.conftest import survey_cli, survey_fresh

H200 = "nvidia:sm_90:Simulated H200"  # the head node
MI300X = "amd:gfx942:Simulated MI300X"  # two worker nodes


def venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def wrapper(path: Path, python: Path, on_probe: str) -> Path:
    """A Python that behaves as ``python`` except when the probe runs: then ``on_probe``
    (shell) runs first - a broken or hanging environment."""
    path.write_text(f"#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = probe ]; then\n{on_probe}\n  fi\ndone\n"
                    f"exec {shlex.quote(str(python))} \"$@\"\n")
    path.chmod(0o755)
    return path


def hang_once(marker: Path) -> str:
    """The first probe writes its pid to ``marker`` and hangs (for a day: longer than any
    test, so a survey that ends did not wait for it); later ones run."""
    m = shlex.quote(str(marker))
    return f"    if [ ! -e {m} ]; then echo $$ > {m}.tmp && mv {m}.tmp {m}; exec sleep 86400; fi"


def kill_marked(*markers: Path) -> None:
    """Stop the hanging programs these tests started (by the pid each one wrote)."""
    for marker in markers:
        try:
            pid = int(marker.read_text().strip())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(path: Path, timeout: float) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert time.time() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(0.2)


def catalog(path: Path, entries: list[dict[str, Any]]) -> Path:
    lines = []
    for e in entries:
        lines.append("[[candidate]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in e.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def db_rows(store: Store, sql: str) -> list[tuple]:
    from sqlalchemy import text

    with store.session() as s:
        return [tuple(r) for r in s.execute(text(sql)).all()]


RUNS = ("select c.name, p.key, r.status, r.tries, (select count(*) from reports x where x.run_id = r.id) "
        "from runs r join candidates c on c.id = r.candidate_id left join platforms p on p.id = r.platform_id "
        "order by c.name, p.key, r.id")


# ----------------------------------------------------------------- naming, matching, catalog (no cluster)
@pytest.mark.parametrize("key", [
    "nvidia:sm_90:NVIDIA H200", "none:x86_64", "amd:gfx942:AMD Instinct MI300X", "nvidia:sm_90:Odd_group_abc1",
    "amd:gfx942:100% \u00e9l\u00e8ve \"q\" 'x'",
])
def test_resource_names_round_trip(key: str) -> None:
    name = fleet.resource_name(key)
    assert name.startswith("proton-survey/platform:")
    assert "_group_" not in name  # Ray reads such names as placement-group resources
    assert all(" " <= ch <= "~" for ch in name)
    assert fleet.key_of_resource(name) == key


def test_resource_name_is_the_key_where_it_can_be() -> None:
    assert fleet.resource_name("nvidia:sm_90:NVIDIA H200") == "proton-survey/platform:nvidia:sm_90:NVIDIA H200"
    assert fleet.key_of_resource("CPU") is None
    assert fleet.key_of_resource("proton-survey/platform:") is None
    assert fleet.key_of_resource("proton-survey/platform:%FF") is None  # not UTF-8


def test_platform_from_an_advertised_key() -> None:
    p = fleet.platform_from_key("nvidia:sm_90:NVIDIA H200")
    assert (p.key, p.vendor, p.arch, p.model) == ("nvidia:sm_90:NVIDIA H200", "nvidia", "sm_90", "NVIDIA H200")
    p = fleet.platform_from_key("none:aarch64")
    assert (p.vendor, p.arch, p.model) == ("none", "aarch64", None)
    p = fleet.platform_from_key("sim:b")
    assert (p.key, p.vendor, p.arch) == ("sim:b", "unknown", "b")


def test_plan_matches_keys_and_their_parts() -> None:
    cat = catalog_mod.Catalog.model_validate({"candidate": [
        {"name": "a", "python": "/x", "platforms": ["sm_90", "gfx942", "gfx950"]},
        {"name": "b", "python": "/x", "platforms": ["nvidia", "nvidia:sm_80:NVIDIA A100"]},
        {"name": "c", "python": "/x"},
    ]})
    offered = ["nvidia:sm_90:NVIDIA H200", "nvidia:sm_90:NVIDIA H100", "amd:gfx942:MI300X", "none:x86_64"]
    jobs, missing = fleet.plan(list(enumerate(cat.candidate)), offered, "none:x86_64")
    assert [(j.entry.name, j.platform) for j in jobs] == [
        ("a", "nvidia:sm_90:NVIDIA H100"), ("a", "nvidia:sm_90:NVIDIA H200"), ("a", "amd:gfx942:MI300X"),
        ("b", "nvidia:sm_90:NVIDIA H100"), ("b", "nvidia:sm_90:NVIDIA H200"), ("c", None)]
    assert [(o.row, o.status, o.message) for o in missing] == [
        ("a @ gfx950", "not run", "no node offers gfx950"),
        ("b @ nvidia:sm_80:NVIDIA A100", "not run", "no node offers nvidia:sm_80:NVIDIA A100")]
    assert jobs[-1].row == "c @ none:x86_64"


@pytest.mark.parametrize("value, why", [
    ([], "is empty"), (["sm_90", "sm_90"], "more than once"), ([" sm_90"], "is not a platform"), ([""], "is not"),
    ("sm_90", "valid list"),
])
def test_catalog_platforms_are_checked(tmp_path: Path, value: Any, why: str) -> None:
    path = catalog(tmp_path / "c.toml", [{"name": "a", "python": "/x", "platforms": value}])
    with pytest.raises(CatalogError) as e:
        catalog_mod.load(path)
    assert "candidate 'a', field platforms" in e.value.message and why in e.value.message


def test_survey_platform_prints_this_host_and_its_ray_start_line() -> None:
    key = local_platform().key
    r = survey_cli("platform", "--address", "10.1.2.3:6379")
    assert r.returncode == 0, r
    first, line = r.stdout.strip().splitlines()
    assert first.startswith(f"platform: {key}  (")
    argv = shlex.split(line)
    assert argv[:3] == ["ray", "start", "--address=10.1.2.3:6379"]
    assert argv[3] == "--resources" and json.loads(argv[4]) == {fleet.resource_name(key): 1}
    r = survey_cli("platform", "--head", "--slots", "4", "--json")
    doc = json.loads(r.stdout)
    assert doc["key"] == key and doc["resources"] == {fleet.resource_name(key): 4}
    assert doc["ray_start"][:3] == ["ray", "start", "--head"] and shlex.split(doc["ray_start_line"]) == doc["ray_start"]
    assert survey_cli("platform", "--head", "--address", "h:1").returncode == 64
    assert survey_cli("platform", "--slots", "0").returncode == 64


def test_survey_run_without_ray_probes_only_candidates_for_this_host(tmp_path: Path) -> None:
    py = venv(tmp_path / "v")
    here = local_platform().key
    cat = catalog(tmp_path / "c.toml", [
        {"name": "mine", "python": str(py), "platforms": [here.split(":")[-1]]},
        {"name": "elsewhere", "python": str(py), "platforms": ["gfx950"]},
    ])
    db = f"sqlite:///{tmp_path / 's.db'}"
    r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table")
    assert r.returncode == 0, r
    assert f"elsewhere: not run: its catalog entry names the platforms gfx950, and this host is {here}" in r.stderr
    assert "1 probed" in r.stderr
    with sqlite3.connect(tmp_path / "s.db") as c:
        assert c.execute("select c.name, r.status from runs r join candidates c on c.id = r.candidate_id").fetchall() \
            == [("mine", "complete")]


def test_ray_address_errors(tmp_path: Path) -> None:
    if importlib.util.find_spec("ray") is None:  # not importorskip: that imports Ray here
        pytest.skip("Ray is not installed (the fleet extra)")
    db = f"sqlite:///{tmp_path / 's.db'}"
    # each in an interpreter of its own: importing Ray changes the process that imports it
    # answered by the survey's own connect, before ray.init (which retries such an address for minutes)
    r = survey_fresh("run", "--ray", "127.0.0.1:9", "--db", db, "--no-table")
    assert r.returncode == 69 and "no Ray cluster answers at 127.0.0.1:9" in r.stderr, r
    r = survey_fresh("run", "--ray", "no-port", "--db", db, "--no-table")
    assert r.returncode == 64 and "give auto, HOST:PORT" in r.stderr, r
    r = survey_fresh("run", "--ray", "auto", "--db", db, "--no-table", without=("ray",))
    assert r.returncode == 69 and "--ray needs Ray" in r.stderr and "proton-survey[fleet]" in r.stderr, r


def test_the_cli_imports_ray_only_to_survey_a_fleet(tmp_path: Path) -> None:
    code = ("import sys\nfrom survey.cli import main\nfor argv in (['run', '--help'], ['platform']):\n"
            "    sys.argv = ['survey', *argv]\n    try:\n        main()\n    except SystemExit:\n        pass\n"
            "print('ray imported:', 'ray' in sys.modules, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "--ray" in r.stdout and "ray start" in r.stdout
    assert r.stderr.strip().endswith("ray imported: False"), r.stderr
    assert survey_cli("run", "--ray", "auto", "--aorta-registry", "--db",
                      f"sqlite:///{tmp_path / 's.db'}").returncode == 64


# ----------------------------------------------------------------- a real cluster
@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Head (H200) and two workers (MI300X), one CPU each, on 127.0.0.1."""
    pytest.importorskip("ray")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # bind 127.0.0.1
    import ray
    from ray.cluster_utils import Cluster

    # Ray declares a node dead after health_check_failure_threshold missed checks, one every
    # health_check_period_ms (by default 5 checks 3 s apart, each allowed 10 s): here 5 checks 1 s
    # apart, each still allowed 2 s on a loaded machine, so a node the tests kill is known gone in
    # seconds rather than half a minute.
    fast_health_checks = {"health_check_period_ms": 1000, "health_check_timeout_ms": 2000,
                          "health_check_failure_threshold": 5}
    # No dashboard: nothing here reads it, and its processes cost CPU the other tests need.
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {fleet.resource_name(H200): 1},
                                                      "include_dashboard": False,
                                                      "_system_config": fast_health_checks})
    try:
        c.add_node(num_cpus=1, resources={fleet.resource_name(MI300X): 1})
        c.add_node(num_cpus=1, resources={fleet.resource_name(MI300X): 1})
        c.wait_for_nodes()
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
        os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)


def node_ids(key: str) -> set[str]:
    return fleet.offered_platforms().get(key, set())


@pytest.fixture(scope="module")
def candidates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("candidates")
    plain, other, here = venv(root / "plain"), venv(root / "other"), venv(root / "here")
    broken = wrapper(root / "broken-python", venv(root / "broken"), "    echo 'the probe fell over' >&2; exit 9")
    return {"plain": plain, "other": other, "here": here, "broken": broken, "missing": root / "nothing" / "python"}


def fleet_catalog(path: Path, c: dict[str, Path]) -> Path:
    return catalog(path, [
        {"name": "plain", "python": str(c["plain"]), "platforms": ["sm_90", "gfx942", "gfx950"]},
        {"name": "other", "python": str(c["other"]), "platforms": ["Simulated MI300X"]},
        {"name": "here", "python": str(c["here"])},
        {"name": "broken", "python": str(c["broken"]), "platforms": ["gfx942"]},
        {"name": "missing", "python": str(c["missing"]), "platforms": ["nvidia"]},
    ])


@pytest.mark.fleet
def test_a_fleet_survey_places_stores_and_skips(cluster: Any, candidates: dict[str, Path], store: Store,
                                                 store_url: str, tmp_path: Path) -> None:
    here = local_platform().key
    cat = catalog_mod.load(fleet_catalog(tmp_path / "c.toml", candidates))
    with fleet.connected(cluster.address):
        h200_nodes, mi300x_nodes = node_ids(H200), node_ids(MI300X)
        assert len(h200_nodes) == 1 and len(mi300x_nodes) == 2
        outcomes = fleet.run_fleet(store, list(enumerate(cat.candidate)), settings=ProbeSettings(timeout=30))
    by_row = {o.row: o for o in outcomes}
    assert sorted(by_row) == sorted([
        f"plain @ {H200}", f"plain @ {MI300X}", "plain @ gfx950", f"other @ {MI300X}", f"here @ {here}",
        f"broken @ {MI300X}", f"missing @ {H200}"])
    # each task ran on a node that advertises its platform
    for o in outcomes:
        if o.platform == H200:
            assert o.node_id in h200_nodes, o
        elif o.platform == MI300X:
            assert o.node_id in mi300x_nodes, o
    assert by_row["plain @ gfx950"].status == "not run"
    assert by_row["plain @ gfx950"].message == "no node offers gfx950" and by_row["plain @ gfx950"].run_id is None
    # the reports measured this machine, not the platform their node advertised, and say so
    plain = sorted([by_row[f"plain @ {H200}"], by_row[f"plain @ {MI300X}"]], key=lambda o: o.status)
    assert [o.status for o in plain] == ["probed", "unchanged"]
    assert plain[1].run_id == plain[0].run_id and "was stored by this survey" in plain[1].message
    for o in plain + [by_row[f"other @ {MI300X}"]]:
        assert o.measured == here and o.mismatch
        assert f"the report measured {here}; the node advertised {o.platform}" in o.message
    assert by_row[f"other @ {MI300X}"].status == "probed"
    assert by_row[f"here @ {here}"].status == "probed" and not by_row[f"here @ {here}"].mismatch
    broken = by_row[f"broken @ {MI300X}"]
    assert broken.status == "failed" and "exited with code 9" in broken.message
    missing = by_row[f"missing @ {H200}"]
    assert missing.status == "unobtainable" and "no such file" in missing.message
    # one run per (candidate, platform); failures filed under the platform their node advertised
    assert db_rows(store, RUNS) == [
        ("broken", MI300X, "failed", 1, 0),
        ("here", here, "complete", 1, 1),
        ("missing", H200, "unobtainable", 1, 0),
        ("other", here, "complete", 1, 1),
        ("plain", here, "complete", 1, 1),
    ]
    assert db_rows(store, "select count(*) from platforms where key like '%gfx950%'") == [(0,)]

    # the same survey again, through the CLI: nothing is probed again, a failed probe counts as a
    # retry, an unobtainable candidate is not tried again yet (as `survey run`)
    path = fleet_catalog(tmp_path / "c.toml", candidates)
    r = survey_cli("run", "--ray", cluster.address, "--catalog", str(path), "--db", store_url, "--no-table")
    assert r.returncode == 0, r
    assert "survey: 1 failed, 1 not run, 4 unchanged, 1 unobtainable" in r.stderr, r.stderr
    assert f"note: nodes offering {H200} measured {here}" in r.stderr
    assert f"note: nodes offering {MI300X} measured {here}" in r.stderr
    assert db_rows(store, RUNS) == [
        ("broken", MI300X, "failed", 2, 0),
        ("here", here, "complete", 1, 1),
        ("missing", H200, "unobtainable", 1, 0),
        ("other", here, "complete", 1, 1),
        ("plain", here, "complete", 1, 1),
    ]
    # --force probes everything again; one environment measured twice in one survey is stored once
    r = survey_cli("run", "--ray", cluster.address, "--catalog", str(path), "--db", store_url, "--no-table", "--force")
    assert r.returncode == 0, r
    assert "survey: 1 failed, 1 not run, 3 probed, 1 unchanged, 1 unobtainable" in r.stderr, r.stderr
    assert [row[:3] for row in db_rows(store, RUNS)] == [
        ("broken", MI300X, "failed"), ("here", here, "complete"), ("here", here, "complete"),
        ("missing", H200, "unobtainable"), ("other", here, "complete"), ("other", here, "complete"),
        ("plain", here, "complete"), ("plain", here, "complete")]


def run_in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["outcomes"] = fn()
        except BaseException as e:  # surfaced by the test
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


@pytest.mark.fleet
def test_a_lost_node_is_retried_on_another_of_its_platform(cluster: Any, tmp_path: Path) -> None:
    """The only node of a platform dies while probing; a second one joined meanwhile:
    Ray runs the task again there, and one run is stored."""
    key = "nvidia:sm_80:Simulated A100"
    marker = tmp_path / "hung"
    py = wrapper(tmp_path / "slow-python", venv(tmp_path / "slow"), hang_once(marker))
    cat = catalog_mod.load(catalog(tmp_path / "c.toml", [{"name": "slow", "python": str(py), "platforms": ["sm_80"]}]))
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    first = cluster.add_node(num_cpus=1, resources={fleet.resource_name(key): 1})
    cluster.wait_for_nodes()
    second = None
    try:
        with fleet.connected(cluster.address):
            t, box = run_in_thread(lambda: fleet.run_fleet(store, list(enumerate(cat.candidate)),
                                                           settings=ProbeSettings(timeout=30)))
            wait_for(marker, 60)  # probing on the first node
            second = cluster.add_node(num_cpus=1, resources={fleet.resource_name(key): 1})
            cluster.wait_for_nodes()
            cluster.remove_node(first, allow_graceful=False)
            t.join(240)
            assert not t.is_alive(), "the survey did not end"
        assert "error" not in box, box
        [o] = box["outcomes"]
        assert o.status == "probed" and o.node_id == second.node_id, o
        assert db_rows(store, RUNS) == [("slow", local_platform().key, "complete", 1, 1)]
    finally:
        kill_marked(marker)
        for node in (first, second):
            if node is not None and node in cluster.worker_nodes:
                cluster.remove_node(node)
        store.close()


@pytest.mark.fleet
def test_a_lost_node_with_no_other_of_its_platform_is_not_run(cluster: Any, tmp_path: Path) -> None:
    """The only node of a platform dies while probing: that task is not run, nothing is
    stored for it, the rest of the survey is stored, and the survey ends."""
    key = "amd:gfx90a:Simulated MI250X"
    marker = tmp_path / "hung"
    slow = wrapper(tmp_path / "slow-python", venv(tmp_path / "slow"), hang_once(marker))
    quick = venv(tmp_path / "quick")
    cat = catalog_mod.load(catalog(tmp_path / "c.toml", [
        {"name": "slow", "python": str(slow), "platforms": ["gfx90a"]},
        {"name": "quick", "python": str(quick), "platforms": ["gfx942"]},
    ]))
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    node = cluster.add_node(num_cpus=1, resources={fleet.resource_name(key): 1})
    cluster.wait_for_nodes()
    try:
        with fleet.connected(cluster.address):
            t, box = run_in_thread(lambda: fleet.run_fleet(store, list(enumerate(cat.candidate)),
                                                           settings=ProbeSettings(timeout=30)))
            wait_for(marker, 60)
            cluster.remove_node(node, allow_graceful=False)
            t.join(240)
            assert not t.is_alive(), "the survey did not end"  # nor waited on the day-long hang
        assert "error" not in box, box
        by_name = {o.name: o for o in box["outcomes"]}
        assert by_name["slow"].status == "not run" and by_name["slow"].run_id is None, by_name["slow"]
        assert by_name["slow"].message == f"no node offers {key} any more (its node left the cluster); nothing stored"
        assert by_name["quick"].status == "probed"
        assert db_rows(store, RUNS) == [("quick", local_platform().key, "complete", 1, 1)]
    finally:
        kill_marked(marker)
        store.close()


@pytest.mark.fleet
def test_a_task_past_its_budget_is_cancelled_and_not_stored(cluster: Any, tmp_path: Path) -> None:
    marker = tmp_path / "hung"
    py = wrapper(tmp_path / "stuck-python", venv(tmp_path / "stuck"), hang_once(marker))
    cat = catalog_mod.load(catalog(tmp_path / "c.toml", [{"name": "stuck", "python": str(py),
                                                             "platforms": ["gfx942"]}]))
    store = Store(f"sqlite:///{tmp_path / 's.db'}")

    def on_update(_row: str, msg: str) -> None:
        # The budget counts from the task's start. Its way to the probe can itself take
        # longer than 8 s on a busy machine, so the test holds the driver here, at the
        # start, until the probe hangs: the budget then runs out on a hang, not a slow start.
        if msg.startswith("started on "):
            wait_for(marker, 120)

    try:
        with fleet.connected(cluster.address):
            [o] = fleet.run_fleet(store, list(enumerate(cat.candidate)), settings=ProbeSettings(timeout=30),
                                  budget_s=8, on_update=on_update)
        assert o.status == "not run" and o.message == "no answer within 8 s of starting; cancelled, nothing stored"
        assert marker.exists()  # it hung (for a day), and the survey did not wait
        assert db_rows(store, RUNS) == []
    finally:
        kill_marked(marker)
        store.close()


@pytest.mark.fleet
def test_a_slow_progress_board_is_not_a_lost_one(cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The board is an actor: on a cold, busy machine its worker may take longer to come up
    # than the driver's first ask for its notes. That board is slow, not lost: its notes
    # (and so when each task really started, from which its budget counts) still arrive.
    class SlowToStart(fleet.Board):
        def __init__(self) -> None:
            time.sleep(12)  # the actor's process coming up on a machine with no core to spare
            super().__init__()

    monkeypatch.setattr(fleet, "Board", SlowToStart)
    # the probe waits (at most 120 s) until the driver has said the task started
    release = tmp_path / "started"
    wait = f"    i=0; while [ ! -e {shlex.quote(str(release))} ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done"
    py = wrapper(tmp_path / "waiting-python", venv(tmp_path / "plain"), wait)
    cat = catalog_mod.load(catalog(tmp_path / "c.toml", [{"name": "plain", "python": str(py),
                                                             "platforms": ["gfx942"]}]))
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    updates: list[str] = []
    warnings: list[str] = []

    def on_update(_row: str, msg: str) -> None:
        updates.append(msg)
        if msg.startswith("started on "):
            release.touch()

    try:
        with fleet.connected(cluster.address):
            [o] = fleet.run_fleet(store, list(enumerate(cat.candidate)), settings=ProbeSettings(timeout=30),
                                  on_update=on_update, warn=warnings.append)
        assert [w for w in warnings if "progress board" in w] == []
        assert [u for u in updates if u.startswith("started on ")], updates
        assert o.status == "probed", o
    finally:
        store.close()
