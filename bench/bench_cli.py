#!/usr/bin/env python3
"""The CLI's wall time per command against its floor, as ratios measured in one run.

The floor is ``python -c pass`` with the same interpreter. Each command runs
``--repeat`` times in a fresh process against one store (the real fixture reports
of tests/fixtures/reports, catalog scope); the median is reported next to its goal
(issue 13), with the top imports (``-X importtime``) of ``survey --help``.

- ``survey --help``                                   goal <= 0.3 s
- ``survey check triton-3.8.0 ... --platform none``   goal <= 0.5 s (answered from stored evidence)
- ``survey table``                                    goal <= 0.5 s
- ``survey run`` of an unchanged catalog              goal <= 1 s   (interpreter candidates already probed,
                                                                     one unobtainable candidate backed off)

    python bench/bench_cli.py [--repeat 5] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SURVEY = [sys.executable, "-m", "survey"]


def timed(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT)
    dt = time.perf_counter() - t0
    if proc.returncode not in ok:
        raise SystemExit(f"failed ({proc.returncode}): {argv}\n{proc.stderr.decode()[-2000:]}")
    return dt


def median(argv: list[str], env: dict[str, str], repeat: int, ok: tuple[int, ...] = (0,)) -> float:
    return statistics.median(timed(argv, env, ok) for _ in range(repeat))


def top_imports(env: dict[str, str], n: int = 8) -> list[tuple[str, float]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import survey.cli"], capture_output=True,
                          env=env, cwd=ROOT, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cum, name = (x.strip() for x in line[len("import time:"):].split("|"))
            if cum.isdigit():
                rows.append((name, int(cum) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--output", default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from db.store import Store
    from survey.ingest import ingest

    work = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    db = f"sqlite:///{work / 'survey.db'}"
    store = Store(db)
    reports = ROOT / "tests" / "fixtures" / "reports"
    for pos, v in enumerate(("3.6.0", "3.7.1", "3.8.0", "3.9.0")):
        with store.session() as s:
            ingest(s, (reports / f"cpu-triton-{v}.json").read_bytes(), candidate=f"triton-{v}",
                   label=f"Triton {v}", kind="pip", spec={"pip": f"triton=={v}"}, position=pos, scope="catalog")
    store.close()
    env = {**os.environ, "SURVEY_DB": db, "COLUMNS": "200"}

    # an unchanged catalog: two interpreters (venvs) and one candidate that cannot be obtained here
    venvs = []
    for i in range(2):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / f"v{i}")], check=True)
        venvs.append(work / f"v{i}" / "bin" / "python")
    catalog = work / "catalog.toml"
    catalog.write_text("".join(f'[[candidate]]\nname = "v{i}"\npython = "{p}"\n' for i, p in enumerate(venvs))
                       + '[[candidate]]\nname = "gone"\npip = "proton-survey-no-such==1.0"\n'
                         'index_url = "http://127.0.0.1:9/simple"\n')
    run = [*SURVEY, "run", "--catalog", str(catalog), "--no-table"]
    first = timed(run, env)  # probes the venvs, records the unobtainable one

    floor = median([sys.executable, "-c", "pass"], env, args.repeat)
    rows = [
        ("survey --help", [*SURVEY, "--help"], 0.3, (0,)),
        ("survey check (stored evidence)", [*SURVEY, "check", "triton-3.8.0", "--backend", "rocprofiler", "--mode",
                                            "pcsampling", "--platform", "none:x86_64"], 0.5, (2,)),
        ("survey table", [*SURVEY, "table"], 0.5, (0,)),
        ("survey run, unchanged catalog", run, 1.0, (0,)),
    ]
    results = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores", "floor_s": round(floor, 4),
               "first_run_s": round(first, 3), "commands": []}
    print(f"floor (python -c pass): {floor:.3f} s   first survey of the bench catalog: {first:.2f} s")
    print(f"{'command':36} {'median (s)':>10} {'x floor':>8} {'goal (s)':>9} {'vs goal':>8}")
    for name, argv, goal, ok in rows:
        t = median(argv, env, args.repeat, ok)
        results["commands"].append({"command": name, "median_s": round(t, 4), "over_floor": round(t / floor, 2),
                                    "goal_s": goal, "over_goal": round(t / goal, 2)})
        print(f"{name:36} {t:10.3f} {t / floor:8.1f} {goal:9.2f} {t / goal:8.2f}")
    results["top_imports_of_survey_cli"] = [{"module": n, "cumulative_s": s} for n, s in top_imports(env)]
    print("top imports of survey.cli:", ", ".join(f"{r['module']} {r['cumulative_s']:.3f}s"
                                                  for r in results["top_imports_of_survey_cli"]))
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
