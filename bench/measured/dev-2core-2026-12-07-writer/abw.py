"""Uploads by 8 clients: the code of this checkout (the store's writer process) against the
code before, with one and two server processes, alternating on one store. The server's CPU
per upload counts its whole process tree (workers and writer).

    OLD=/path/to/a/checkout/of/the/code/before python abw.py ROUNDS RUNS [STORE_URL]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NEW = str(Path(__file__).resolve().parents[3])
sys.path[:0] = [NEW, NEW + "/bench"]
import bench_scale as b  # noqa: E402


def tree_cpu(pid: int) -> float:
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                f = Path(f"/proc/{p}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(f[11]) + int(f[12])
                todo += [int(c) for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
        except FileNotFoundError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def busy() -> float:
    v = list(map(int, Path("/proc/stat").read_text().splitlines()[0].split()[1:]))
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def one(root: str, workers: int, url: str, work: Path, tpls: list[str], first: int, n: int) -> dict[str, Any]:
    env = {**os.environ, "SURVEY_TOKEN": b.TOKEN, "PYTHONPATH": root}
    port = b.free_port()
    more = ["--workers", str(workers)] if workers > 1 else []
    with (work / "serve.log").open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "survey", "serve", "--db", url, "--port", str(port), *more],
                                env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            b.request(base + "/healthz", timeout=2)
            break
        except OSError:
            time.sleep(0.2)
    b.uploads(base, tpls, 10000, first, 50)
    b0, c0, m0, t0 = busy(), tree_cpu(proc.pid), time.process_time(), time.perf_counter()
    rate = b.uploads(base, tpls, 10000, first + 50, n)
    t1, b1, c1, m1 = time.perf_counter(), busy(), tree_cpu(proc.pid), time.process_time()
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    r = {"code": Path(root).name, "workers": workers, "rate": round(rate, 1),
         "server_cpu_ms": round((c1 - c0) / n * 1e3, 2), "client_cpu_ms": round((m1 - m0) / n * 1e3, 2),
         "busy_cores": round((b1 - b0) / (t1 - t0), 2), "load": Path("/proc/loadavg").read_text().split()[0]}
    print(json.dumps(r), flush=True)
    return r


def main() -> None:
    rounds, runs = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    work = Path(tempfile.mkdtemp())
    url = sys.argv[3] if len(sys.argv) > 3 else f"sqlite:///{work}/survey.db"
    b.fill(url, runs, 0, 500)
    tpls = b.templates()
    first, n = runs + 1, 400
    for _ in range(rounds):
        for root in (NEW, os.environ["OLD"]):
            for w in (1, 2):
                one(root, w, url, work, tpls, first, n)
                first += n + 50


if __name__ == "__main__":
    main()
