#!/usr/bin/env python3
"""The CLI's wall time per command against its floor, as ratios measured in one run.

The floor is ``python -c pass`` with the same interpreter. Each command runs
``--repeat`` times in a fresh process against one store (the real fixture reports
of tests/fixtures/reports, catalog scope); the median is reported next to its goal
(issue 13), both replayed (``survey.replay``: nothing the answer read has changed) and
computed (``SURVEY_CLI_CACHE=0``: the first call after a change), with the top imports
(``-X importtime``) of ``survey --help`` and of a computed ``survey table``, and the
time the libraries a computed answer needs take to import on their own (its floor).

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


LIBRARIES = "import typer._adapters, rich.console, sqlalchemy.orm, sqlalchemy.dialects.sqlite"
LIBRARIES_SHOWN = "Typer with its pydantic adapters, Rich, SQLAlchemy's ORM and SQLite dialect"


def top_imports(env: dict[str, str], n: int = 8, argv: list[str] | None = None) -> list[tuple[str, float]]:
    """The top-level imports by cumulative time (of ``import survey.cli``, or of running ``argv``)."""
    cmd = [sys.executable, "-X", "importtime", *(argv or ["-c", "import survey.cli"])]
    proc = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cum, name = (x for x in line[len("import time:"):].split("|"))
            top = name.startswith(" ") and not name.startswith("  ")  # imported by the program, not by a module
            cum, name = cum.strip(), name.strip()
            if cum.isdigit() and top:
                rows.append((name, int(cum) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--output", default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from db.store import Store
    from survey.evidence.ingest import ingest

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
    # What a computed answer cannot go below: the libraries the command needs, imported and nothing else
    libraries = median([sys.executable, "-c", LIBRARIES], env, args.repeat)
    rows = [
        ("survey --help", [*SURVEY, "--help"], 0.3, (0,), True),
        ("survey check (stored evidence)", [*SURVEY, "check", "triton-3.8.0", "--backend", "rocprofiler", "--mode",
                                            "pcsampling", "--platform", "none:x86_64"], 0.5, (2,), True),
        ("survey table", [*SURVEY, "table"], 0.5, (0,), True),
        ("survey run, unchanged catalog", run, 1.0, (0,), False),  # never replayed: it reads the catalog's targets
    ]
    computed_env = {**env, "SURVEY_CLI_CACHE": "0"}  # every call computed, as the first one after a change
    results = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores", "floor_s": round(floor, 4),
               "libraries_floor_s": round(libraries, 4), "first_run_s": round(first, 3),
               "load_average": os.getloadavg(), "commands": []}
    print(f"floor (python -c pass): {floor:.3f} s   libraries a computed answer loads ({LIBRARIES_SHOWN}): "
          f"{libraries:.3f} s   first survey of the bench catalog: {first:.2f} s")
    print(f"{'command':36} {'how':>9} {'median (s)':>10} {'x floor':>8} {'goal (s)':>9} {'vs goal':>8}")
    for name, argv, goal, ok, replayable in rows:
        ways = (("replayed", env), ("computed", computed_env)) if replayable else (("computed", env),)
        for how, cmd_env in ways:
            if how == "replayed":
                timed(argv, cmd_env, ok)  # keeps the answer (a replayable command)
            t = median(argv, cmd_env, args.repeat, ok)
            results["commands"].append({"command": name, "how": how, "median_s": round(t, 4),
                                        "over_floor": round(t / floor, 2), "goal_s": goal,
                                        "over_goal": round(t / goal, 2)})
            print(f"{name:36} {how:>9} {t:10.3f} {t / floor:8.1f} {goal:9.2f} {t / goal:8.2f}")
    results["top_imports_of_survey_cli"] = [{"module": n, "cumulative_s": s} for n, s in top_imports(env)]
    print("top imports of survey.cli:", ", ".join(f"{r['module']} {r['cumulative_s']:.3f}s"
                                                  for r in results["top_imports_of_survey_cli"]))
    table = [*SURVEY, "table"]
    results["top_imports_of_survey_table_computed"] = [
        {"module": n, "cumulative_s": s} for n, s in top_imports(computed_env, argv=table[1:])]
    print("top imports of a computed `survey table`:", ", ".join(
        f"{r['module']} {r['cumulative_s']:.3f}s" for r in results["top_imports_of_survey_table_computed"]))
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
