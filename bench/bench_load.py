#!/usr/bin/env python3
"""The service under load, as figures next to their goals, measured in one run.

1. Writes: 8 writers x 50 uploads, each creating a new candidate, against `survey serve`
   (uvicorn) on a fresh SQLite store: p50/p99 of one upload, statuses, stored rows.
2. Reads on a 2,000-run store: `/candidates.json`, `/check.json` and `/matrix.json`
   (its default page, and its largest), warm (one request first, timed: the uncached
   answer), 8 connections with `wrk --latency`: p99 against the goal of 50 ms, and each
   response's size.

    python bench/bench_load.py [--runs 2000] [--seconds 5] [--output FILE]

Needs wrk (Debian's) for the reads. Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(db: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SURVEY_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "survey", "serve", "--db", db, "--port", str(port)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    for _ in range(300):
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"survey serve did not start: {log.read_text()[-2000:]}")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def fill(db: str, runs: int) -> float:
    from db.store import Store
    from survey.evidence.ingest import ingest

    store = Store(db)
    base = [json.loads((ROOT / "tests/fixtures/reports" / f"cpu-triton-{v}.json").read_bytes())
            for v in ("3.6.0", "3.7.1", "3.8.0", "3.9.0")]
    t0 = time.perf_counter()
    for i in range(runs):
        data = base[i % 4]
        data["probe"]["finished_at"] = f"2026-11-{1 + i % 28:02d}T{(i // 28) % 24:02d}:{i % 60:02d}:00+00:00"
        with store.session() as s:
            ingest(s, json.dumps(data), candidate=f"c{i // 4:04d}", kind="pip", scope="catalog")
    store.close()
    return time.perf_counter() - t0


def writes(base: str, writers: int = 8, each: int = 50) -> dict[str, object]:
    report = json.loads((ROOT / "tests/fixtures/reports/cpu-triton-3.8.0.json").read_bytes())

    def writer(w: int) -> list[tuple[int, float]]:
        out = []
        with httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            for i in range(each):
                report["probe"]["finished_at"] = f"2026-12-01T{w:02d}:{i // 60:02d}:{i % 60:02d}+00:00"
                raw = json.dumps(report).encode()
                t0 = time.perf_counter()
                r = c.post("/runs", params={"candidate": f"w{w}-{i}"}, content=raw,
                           headers={"Content-Type": "application/json"})
                out.append((r.status_code, time.perf_counter() - t0))
        return out

    with ThreadPoolExecutor(writers) as pool:
        results = [x for part in pool.map(writer, range(writers)) for x in part]
    lat = [t for _, t in results]
    codes: dict[int, int] = {}
    for c, _ in results:
        codes[c] = codes.get(c, 0) + 1
    return {"uploads": len(results), "statuses": codes, "p50_ms": round(statistics.median(lat) * 1e3, 1),
            "p99_ms": round(pct(lat, 99) * 1e3, 1)}


def after_ingest(base: str, path: str, times: int = 5) -> float:
    """The median time of the first answer after one new report is uploaded (the
    matrix version moves, so nothing cached answers it)."""
    report = json.loads((ROOT / "tests/fixtures/reports/cpu-triton-3.9.0.json").read_bytes())
    took = []
    with httpx.Client(base_url=base, timeout=60) as c:
        for i in range(times):
            report["probe"]["finished_at"] = f"2026-12-02T{i:02d}:00:00.{time.time_ns()}+00:00"
            r = c.post("/runs", params={"candidate": f"c{i:04d}"}, content=json.dumps(report).encode(),
                       headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            assert r.status_code == 201, r.text
            t0 = time.perf_counter()
            c.get(path)
            took.append(time.perf_counter() - t0)
    return round(statistics.median(took) * 1e3, 1)


def wrk_p99(url: str, seconds: int) -> dict[str, object]:
    t0 = time.perf_counter()
    httpx.get(url, timeout=60)  # the first answer after the server started (uncached), then warm
    first_ms = (time.perf_counter() - t0) * 1e3
    out = subprocess.run(["wrk", "-t1", "-c8", f"-d{seconds}s", "--latency", url], capture_output=True,
                         text=True).stdout
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)] if m else float("nan")
    return {"p99_ms": round(p99, 1), "req_s": float(rps.group(1)) if rps else None,
            "bytes": len(httpx.get(url, timeout=60).content), "first_ms": round(first_ms, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--output", default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-load-"))
    res: dict[str, object] = {"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
                              "load_before": os.getloadavg()[0]}

    port = free_port()
    server = serve(f"sqlite:///{work / 'w.db'}", port, work / "w.log")
    try:
        res["writes"] = writes(f"http://127.0.0.1:{port}")
    finally:
        server.terminate()
        server.wait()
    print("writes (8 writers x 50 new candidates):", json.dumps(res["writes"]))

    db = f"sqlite:///{work / 'r.db'}"
    res["fill_s"] = round(fill(db, args.runs), 1)
    port = free_port()
    server = serve(db, port, work / "r.log")
    reads = {}
    try:
        base = f"http://127.0.0.1:{port}"
        for name, path in (("/candidates.json", "/candidates.json"),
                           ("/check.json", "/check.json?target=c0002&backend=rocprofiler&mode=pcsampling"),
                           ("/matrix.json", "/matrix.json"),
                           ("/matrix.json?_size=1000", "/matrix.json?_size=1000")):
            reads[name] = wrk_p99(base + path, args.seconds)
            reads[name]["after_ingest_ms"] = after_ingest(base, path)
            r = reads[name]
            print(f"{name:24} p99 {r['p99_ms']:8.1f} ms (goal 50: {r['p99_ms'] / 50:.2f}x)  "
                  f"{r['req_s']} req/s  {r['bytes']:,} bytes  first (uncached) {r['first_ms']:.0f} ms  "
                  f"first after an ingest {r['after_ingest_ms']:.0f} ms (goal 100: {r['after_ingest_ms'] / 100:.2f}x)  "
                  f"[{args.runs}-run store, warm, 8 connections]")
    finally:
        server.terminate()
        server.wait()
    res["reads"] = reads
    res["runs"] = args.runs
    res["load_after"] = os.getloadavg()[0]
    if args.output:
        Path(args.output).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
