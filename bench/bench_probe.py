#!/usr/bin/env python3
"""Probe wall time against its floor, as ratios measured in one run.

The floor is one ``python -c "import triton.profiler"`` in the same environment:
the least any check of Proton can cost. The probe runs every check (facts,
registry, CLI, libraries, 14 ``proton.start`` checks, stub reruns) in processes
of their own; this reports its wall time over the floor, with and without the
zygote, for each ``--jobs`` value, and how many interpreters it started, next to
the goal (the probe at most 3x its floor), with the load average each
figure was measured under (other work on the machine shows up in the ratios).

Every configuration runs one unmeasured probe first: the figures are the steady
state, with the page cache and the probe's stub cache warm. ``--timeline`` also
prints one run's phases (``probe --timeline``): where the time goes.

    python bench/bench_probe.py --python /path/to/venv/bin/python [--jobs 1,2] [--repeat 5] [--timeline]
        [--variant "NAME=PROBE ARGS" ...]

``--variant`` adds rows for the zygote probe with those arguments, measured in the
same way and in the same run (so under the same load): e.g. ``--variant "one
attempt=--min-attempts 1 --repeats 3"`` is the probe as it was before every
``proton.start`` check ran at least twice.

Standard library only (it also runs on machines without proton-survey's deps).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GOAL = 3.0  # the probe (zygote) at most 3x its floor
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from probes import bundle  # noqa: E402


def timed(argv, env=None):
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    dt = time.perf_counter() - t0
    if proc.returncode not in (0, 3):
        raise SystemExit("failed (%s): %s\n%s" % (proc.returncode, argv, proc.stderr.decode()[-2000:]))
    return dt, proc.stdout


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--jobs", default=None, help="comma-separated --jobs values (default: 1 and the cores)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--output", default=None, help="also write the figures as JSON here")
    ap.add_argument("--timeline", action="store_true", help="also print one zygote run's phase timeline")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="also measure the zygote probe with these extra probe arguments (repeatable)")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    jobs = [int(j) for j in args.jobs.split(",")] if args.jobs else sorted({1, 2, cores})
    work = tempfile.mkdtemp(prefix="bench-probe-")
    zp = bundle.write(os.path.join(work, "probe.zip"))

    floor_argv = [args.python, "-c", "import triton.profiler"]
    timed(floor_argv)  # warm the page cache
    floors = [timed(floor_argv)[0] for _ in range(args.repeat)]
    results = {"python": args.python, "cores": cores, "floor_s": round(statistics.median(floors), 4),
               "goal_ratio": GOAL, "floor_load_avg": load(), "runs": []}
    print("floor (python -c 'import triton.profiler'): %.3f s   cores: %d   load average: %s"
          % (statistics.median(floors), cores, load()))
    print("goal: the probe (zygote) at most %.1fx its floor; each row's ratio is over the floor measured"
          % GOAL)
    print("between its own runs (floor, probe, floor, probe, ...), so both saw the same load")
    print("%-6s %-8s %10s %9s %8s %8s %14s %8s   %s" % ("jobs", "zygote", "probe (s)", "floor (s)", "ratio", "goal",
                                                      "interpreters", "forks", "load average (1, 5, 15 min) after"))
    variants = [tuple(v.split("=", 1)) if "=" in v else (v, v) for v in args.variant]
    for j in jobs:
        configs = [(True, None, []), (False, None, [])] + [(True, name, extra.split()) for name, extra in variants]
        for fork, variant, extra in configs:
            argv = [args.python, zp, "probe", "--no-auto-capture", "--jobs", str(j), "-o", os.path.join(work, "r.json")]
            argv += extra
            if not fork:
                argv.append("--no-fork")
            timed(argv)  # unmeasured: page cache and stub cache warm
            times, floors = [], []
            for _ in range(args.repeat):
                floors.append(timed(floor_argv)[0])
                dt, _ = timed(argv)
                times.append(dt)
            with open(os.path.join(work, "r.json")) as f:
                rep = json.load(f)
            med = statistics.median(times)
            floor = statistics.median(floors)
            row = {"jobs": j, "zygote": fork, "probe_s": round(med, 4), "floor_s": round(floor, 4),
                   "ratio": round(med / floor, 2),
                   "interpreters_started": rep["probe"]["interpreters_started"],
                   "forked_checks": rep["probe"].get("forked_checks", 0),
                   "checks": len(rep["modes"]), "load_avg": load()}
            if variant is not None:
                row["variant"], row["probe_args"] = variant, extra
            if fork:
                row["goal_met"] = med / floor <= GOAL
            results["runs"].append(row)
            goal = ("met" if row["goal_met"] else "NOT met") if fork else "-"
            print("%-6d %-8s %10.3f %9.3f %7.2fx %8s %14d %8d   %s%s" % (
                j, "yes" if fork else "no", med, floor, med / floor, goal, row["interpreters_started"],
                row["forked_checks"], row["load_avg"], "  (%s)" % variant if variant else ""))
    if args.timeline:
        argv = [args.python, zp, "probe", "--no-auto-capture", "--jobs", str(jobs[-1]), "--timeline",
                "-o", os.path.join(work, "r.json")]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        print("\ntimeline of one zygote run (--jobs %d; seconds since the probe began), load average %s:"
              % (jobs[-1], load()))
        sys.stdout.write(proc.stderr.decode("utf-8", "replace"))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
