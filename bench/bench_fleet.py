"""`survey run --ray` on a local Ray cluster against the same work done sequentially.

    .venv/bin/python bench/bench_fleet.py [--python PY ...] [--candidates N] [--repeat R] [--output FILE]

N candidates x 3 simulated platforms: a Ray cluster of three nodes on this machine
(``ray.cluster_utils.Cluster``, 127.0.0.1, ``--cpus-per-node`` CPUs each), each node
advertising one synthetic platform; every candidate's catalog entry names all three,
so the survey is 3N probes. The candidates are the interpreters given with
``--python`` (e.g. the cached Triton venvs) or N fresh ``python -m venv`` ones.

Sequential: the same 3N (candidate, platform) jobs, one after another in this
process, through the same code (``fleet.probe_here`` then the driver's storing), into
a fresh store, before the cluster starts. Fleet: ``fleet.run_fleet`` into another
fresh store. Both use ``--force`` settings, so all 3N probes run (the store would
otherwise skip environments it already holds). The cluster's start is reported
apart. The figure is the ratio sequential / fleet of the median wall times, measured
in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PLATFORMS = ["nvidia:sm_90:Simulated H200", "amd:gfx942:Simulated MI300X", "nvidia:sm_80:Simulated A100"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", action="append", default=[], help="a candidate interpreter (repeatable)")
    ap.add_argument("--candidates", type=int, default=4, help="fresh venvs when no --python is given")
    ap.add_argument("--cpus-per-node", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0, help="the probe's per-check timeout")
    ap.add_argument("--output", help="write the figures here (JSON)")
    a = ap.parse_args()

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # bind 127.0.0.1
    from db.store import Store
    from survey.environments.catalog import Catalog
    from survey.flows import fleet
    from survey.flows.run import ProbeSettings

    load0 = list(os.getloadavg())  # the machine may be shared: say how busy it was
    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    pythons = list(a.python)
    if not pythons:
        for i in range(a.candidates):
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / f"v{i}")], check=True)
            pythons.append(str(tmp / f"v{i}" / "bin" / "python"))
    cat = Catalog.model_validate({"candidate": [
        {"name": f"c{i}", "python": py, "platforms": [k.split(":")[1] for k in PLATFORMS]}
        for i, py in enumerate(pythons)]})
    entries = list(enumerate(cat.candidate))
    settings = ProbeSettings(timeout=a.timeout, force=True)
    jobs, _ = fleet.plan(entries, PLATFORMS, None)
    assert len(jobs) == 3 * len(pythons)

    # warm-up: the stub libraries are compiled once per host and cached
    fleet.probe_here(entries[0][1], settings, {})

    def sequential(n: int) -> tuple[float, dict[str, int]]:
        store = Store(f"sqlite:///{tmp / f'seq{n}.db'}")
        d = fleet._Driver(store, settings, None, lambda _r, _m: None, lambda _o: None)
        t0 = time.perf_counter()
        for j in jobs:
            d.settle(j, fleet.probe_here(j.entry, settings, {}))
        wall = time.perf_counter() - t0
        store.close()
        return wall, tally(d.outcomes)

    def tally(outcomes: list) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in outcomes:
            out[o.status] = out.get(o.status, 0) + 1
        return out

    seq = [sequential(n) for n in range(a.repeat)]
    print(f"sequential: {[round(w, 2) for w, _ in seq]} s  {seq[0][1]}", flush=True)

    import ray
    from ray.cluster_utils import Cluster

    t0 = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": a.cpus_per_node, "resources": {fleet.resource_name(PLATFORMS[0]): a.cpus_per_node}})
    for key in PLATFORMS[1:]:
        cluster.add_node(num_cpus=a.cpus_per_node, resources={fleet.resource_name(key): a.cpus_per_node})
    cluster.wait_for_nodes()
    start_s = time.perf_counter() - t0
    print(f"cluster of 3 nodes up in {start_s:.1f} s", flush=True)
    par = []
    try:
        with fleet.connected(cluster.address):
            for n in range(a.repeat):
                store = Store(f"sqlite:///{tmp / f'fleet{n}.db'}")
                t0 = time.perf_counter()
                outcomes = fleet.run_fleet(store, entries, settings=settings)
                par.append((time.perf_counter() - t0, tally(outcomes)))
                store.close()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    print(f"fleet:      {[round(w, 2) for w, _ in par]} s  {par[0][1]}", flush=True)

    seq_s = statistics.median(w for w, _ in seq)
    par_s = statistics.median(w for w, _ in par)
    doc = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
                 "ray": ray.__version__, "loadavg_at_start": load0, "loadavg_at_end": list(os.getloadavg())},
        "candidates": pythons, "platforms": PLATFORMS, "probes": len(jobs), "cpus_per_node": a.cpus_per_node,
        "repeat": a.repeat, "cluster_start_s": round(start_s, 2),
        "sequential_s": [round(w, 3) for w, _ in seq], "fleet_s": [round(w, 3) for w, _ in par],
        "sequential_outcomes": seq[0][1], "fleet_outcomes": par[0][1],
        "median_sequential_s": round(seq_s, 3), "median_fleet_s": round(par_s, 3),
        "ratio_sequential_over_fleet": round(seq_s / par_s, 3),
    }
    print(f"{len(pythons)} candidates x 3 platforms = {len(jobs)} probes: sequential {seq_s:.2f} s, "
          f"fleet {par_s:.2f} s -> {seq_s / par_s:.2f}x", flush=True)
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
