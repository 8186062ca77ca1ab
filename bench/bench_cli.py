#!/usr/bin/env python3
"""The CLI's wall time against its floor, as ratios measured in one run.

The floor is ``python -c pass`` with the same interpreter. Each command runs
``--repeat`` times in a fresh process against one store (the real fixture reports
of tests/fixtures/reports, catalog scope); the median is reported next to its goal,
with the time the libraries a table needs take to import on their own (what the
command cannot go below) and the top imports (``-X importtime``) of each command.

- ``survey --help``   goal <= 0.3 s (loads Typer and Rich, not SQLAlchemy or pandas)
- ``survey table``    goal <= 0.5 s (reads the store, prints the docs table)

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
COMMANDS = [("survey --help", ["--help"], 0.3), ("survey table", ["table"], 0.5)]
LIBRARIES = "import typer._adapters, rich.console, sqlalchemy.orm, sqlalchemy.dialects.sqlite"
LIBRARIES_SHOWN = "Typer with its pydantic adapters, Rich, SQLAlchemy's ORM and SQLite dialect"


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {argv}\n{proc.stderr.decode()[-2000:]}")
    return dt


def median(argv: list[str], env: dict[str, str], repeat: int) -> float:
    return statistics.median(timed(argv, env) for _ in range(repeat))


def top_imports(env: dict[str, str], args: list[str], n: int = 8) -> list[tuple[str, float]]:
    """The top-level imports of ``survey ARGS`` by cumulative time."""
    cmd = [sys.executable, "-X", "importtime", "-m", "survey", *args]
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

    floor = median([sys.executable, "-c", "pass"], env, args.repeat)
    libraries = median([sys.executable, "-c", LIBRARIES], env, args.repeat)
    results: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores", "floor_s": round(floor, 4),
        "libraries_floor_s": round(libraries, 4), "load_average": os.getloadavg(), "commands": []}
    print(f"floor (python -c pass): {floor:.3f} s   the libraries a table loads ({LIBRARIES_SHOWN}): "
          f"{libraries:.3f} s")
    print(f"{'command':16} {'median (s)':>10} {'x floor':>8} {'goal (s)':>9} {'vs goal':>8}")
    commands, tops = [], []
    for name, argv, goal in COMMANDS:
        t = median([*SURVEY, *argv], env, args.repeat)
        imports = top_imports(env, argv)
        tops.append(f"top imports of `{name}`: " + ", ".join(f"{m} {s:.3f}s" for m, s in imports))
        commands.append({"command": name, "median_s": round(t, 4), "over_floor": round(t / floor, 2),
                         "goal_s": goal, "over_goal": round(t / goal, 2),
                         "top_imports": [{"module": m, "cumulative_s": s} for m, s in imports]})
        print(f"{name:16} {t:10.3f} {t / floor:8.1f} {goal:9.2f} {t / goal:8.2f}")
    print("\n".join(tops))
    results["commands"] = commands
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
