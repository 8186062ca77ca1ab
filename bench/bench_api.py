#!/usr/bin/env python3
"""The service's /matrix.json under load, against datasette serving the same SQLite file;
and what the per-version cache buys /check.json and /candidates.json.

Both servers run as their users start them (``survey serve``; ``datasette serve``
with a canned query that returns the matrix rows: the latest complete run of each
candidate, its clean live checks with their stub rerun and capture, and the
verdict), on loopback, one after the other, and are driven by the same ``wrk``
command. Printed: requests/s and p99 latency of each, and their ratios. The goal
is a ratio (``--goal``, 10x: our requests/s over datasette's; ``--goal-p99``, 20 ms), never a time; the exit
status is 1 when it is not met.

``/check.json`` and ``/candidates.json`` are cached per matrix version too: each is
driven by the same ``wrk`` command, and set against the time the same answer takes
to compute in-process without the cache (median of 20), as a ratio.

    python bench/bench_api.py [--db PATH] [--duration 10] [--connections 32] [--threads 1] [--rounds 1]
                              [--goal 10] [--goal-p99 20] [--output FILE]

Without ``--db`` the store is a temporary SQLite file holding the real probe
reports of tests/fixtures/reports. Needs Debian's ``wrk`` and ``datasette``
(pip) in the same environment as proton-survey.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "tests" / "fixtures" / "reports"
VERSIONS = ("3.6.0", "3.7.1", "3.8.0", "3.9.0")

# The matrix rows of survey.verdicts.matrix, as one SQL query datasette can run (on the schema of
# migration 0010: a run's checks keyed by their place, their messages kept once in ``texts``).
MATRIX_SQL = """
WITH latest AS (
  SELECT candidate_id, MAX(id) AS run_id FROM runs WHERE status = 'complete' GROUP BY candidate_id
)
SELECT c.name AS candidate, c.label, c.kind, 'measured' AS status, r.triton_version,
  m.backend, COALESCE(m.mode, 'none') AS mode, m.mode AS mode_arg, m.outcome,
  CASE
    WHEN m.outcome = 'ok' THEN 'accepted'
    WHEN m.outcome = 'unsupported_mode' THEN 'refused'
    WHEN m.outcome = 'unknown_backend' THEN 'absent'
    WHEN m.outcome = 'library_missing' AND s.outcome = 'ok' THEN 'accepted'
    WHEN m.outcome = 'library_missing' AND s.outcome = 'unsupported_mode' THEN 'refused'
    ELSE 'unknown' END AS verdict,
  CASE
    WHEN m.outcome IN ('ok', 'unsupported_mode', 'unknown_backend') THEN 'live'
    WHEN m.outcome = 'library_missing' AND s.outcome IN ('ok', 'unsupported_mode') THEN 'stub'
  END AS verdict_source,
  s.outcome AS stub_outcome, m.library, m.rule, mt.body AS message,
  cap.outcome AS capture_outcome, cap.kernel_count AS capture_kernel_count, cap.gpu_time_ns AS capture_gpu_time_ns,
  r.id AS run_id, r.finished_at AS date, r.image_digest, '/runs/' || r.id AS evidence
FROM latest l
JOIN runs r ON r.id = l.run_id
JOIN candidates c ON c.id = r.candidate_id
JOIN mode_results m ON m.run_id = r.id AND m.env = 'clean' AND m.stub = 0
LEFT JOIN mode_results s ON s.run_id = r.id AND s.env = 'clean' AND s.stub = 1
  AND s.backend = m.backend AND s.mode IS m.mode
LEFT JOIN capture_results cap ON cap.run_id = r.id AND cap.backend = m.backend AND cap.mode IS m.mode
LEFT JOIN texts mt ON mt.id = m.message_id
ORDER BY c.position, c.id, m.ord
LIMIT :limit
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fill_store(path):
    from db.store import Store
    from survey.evidence.ingest import ingest

    store = Store(f"sqlite:///{path}")
    for pos, v in enumerate(VERSIONS):
        with store.session() as s:
            ingest(s, (FIXTURES / f"cpu-triton-{v}.json").read_bytes(), candidate=f"triton-{v}",
                   label=f"Triton {v}", kind="pip", spec={"pip": f"triton=={v}"}, position=pos, source="ingest",
                   scope="catalog")  # catalog candidates: what /matrix.json publishes
    store.close()


def get(url, headers=None, timeout=10.0):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, dict(r.headers), r.read()


def wait_up(url, proc, log, timeout=60.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}:\n{Path(log).read_text()[-2000:]}")
        try:
            get(url, timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {timeout}s:\n{Path(log).read_text()[-2000:]}")


class Server:
    def __init__(self, name, argv, probe_url, workdir):
        self.name = name
        self.argv = argv
        self.probe_url = probe_url
        self.log = os.path.join(workdir, f"{name}.log")

    def __enter__(self):
        self.logf = open(self.log, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=subprocess.STDOUT, cwd=str(ROOT),
                                     start_new_session=True)
        wait_up(self.probe_url, self.proc, self.log)
        return self

    def __exit__(self, *exc):
        os.killpg(self.proc.pid, signal.SIGTERM)  # the server and any workers it started
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.logf.close()


def parse_duration(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text.strip())
    if not m:
        raise ValueError(f"cannot read wrk duration {text!r}")
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[m.group(2)]


def wrk(url, args, headers=()):
    argv = ["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{args.duration}s", "--latency"]
    for h in headers:
        argv += ["-H", h]
    out = subprocess.run(argv + [url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = parse_duration(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    p50 = parse_duration(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    sock = re.search(r"Socket errors:.*", out)
    return {"rps": rps, "p50_ms": p50, "p99_ms": p99, "non_2xx_3xx": int(errors.group(1)) if errors else 0,
            "socket_errors": sock.group(0) if sock else None, "raw": out}


CACHED = {
    "check": "/check.json?target=triton-3.9.0&backend=rocprofiler&mode=pcsampling",
    "candidates": "/candidates.json",
}


def uncached_ms(db):
    """Milliseconds to compute each CACHED answer without the cache (in-process, median of 20)."""
    from api.candidates import candidate_rows
    from api.check import answer
    from api.formats import json_bytes
    from db.store import Store

    store = Store(f"sqlite:///{db}")
    work = {
        "check": lambda s: json_bytes(answer(s, "triton-3.9.0", "rocprofiler", "pcsampling")),
        "candidates": lambda s: json_bytes({"candidates": candidate_rows(s)}),
    }
    out = {}
    for key, fn in work.items():
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            with store.session() as s:
                fn(s)
            times.append((time.perf_counter() - t0) * 1e3)
        out[key] = statistics.median(times)
    store.close()
    return out


def median_of(results):
    return {
        "rps": statistics.median(r["rps"] for r in results),
        "p50_ms": statistics.median(r["p50_ms"] for r in results),
        "p99_ms": statistics.median(r["p99_ms"] for r in results),
        "non_2xx_3xx": sum(r["non_2xx_3xx"] for r in results),
        "rounds": [{k: v for k, v in r.items() if k != "raw"} for r in results],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", help="an existing SQLite store (default: a temporary one with the fixture reports)")
    ap.add_argument("--duration", type=int, default=10, help="seconds of load per measurement")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="wrk threads")
    ap.add_argument("--rounds", type=int, default=1, help="measurements per server (median is reported)")
    ap.add_argument("--goal", type=float, default=10.0, help="required ratio of our requests/s to datasette's")
    ap.add_argument("--goal-p99", type=float, default=20.0, help="the most our /matrix.json p99 may be (ms)")
    ap.add_argument("--workers", type=int, default=1, help="`survey serve --workers` (processes serving the port)")
    ap.add_argument("--output", help="also write the figures here (JSON)")
    args = ap.parse_args()

    for tool in ("wrk",):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found (apt-get install -y wrk)")
    datasette = shutil.which("datasette", path=os.path.dirname(sys.executable)) or shutil.which("datasette")
    if datasette is None:
        raise SystemExit("datasette not found (pip install datasette)")

    work = tempfile.mkdtemp(prefix="bench-api-")
    try:
        if args.db:
            db = os.path.abspath(args.db)
        else:
            db = os.path.join(work, "survey.db")
            fill_store(db)
        dbname = Path(db).stem
        meta = os.path.join(work, "metadata.json")
        with open(meta, "w") as f:
            json.dump({"databases": {dbname: {"queries": {"matrix": {"sql": MATRIX_SQL}}}}}, f)

        p_ours, p_ds = free_port(), free_port()
        ours_url = f"http://127.0.0.1:{p_ours}/matrix.json"
        ds_url = f"http://127.0.0.1:{p_ds}/{dbname}/matrix.json?_shape=array"
        ours = Server("survey", [sys.executable, "-m", "survey", "serve", "--db", f"sqlite:///{db}",
                                 "--port", str(p_ours), "--workers", str(args.workers)],
                     f"http://127.0.0.1:{p_ours}/healthz", work)

        with ours:  # a page of ours (at most 100 slots); datasette is asked for as many rows
            ours_n = json.loads(get(ours_url)[2])["count"]
        ds_url += f"&limit={ours_n}"
        ds = Server("datasette", [datasette, "serve", db, "-p", str(p_ds), "-m", meta,
                                  "--setting", "max_returned_rows", str(max(1000, ours_n))],
                    f"http://127.0.0.1:{p_ds}/-/versions.json", work)
        with ds:  # the two answer as many rows, or the comparison means nothing
            ds_n = len(json.loads(get(ds_url)[2]))
        if ours_n != ds_n:
            raise SystemExit(f"/matrix.json has {ours_n} rows and datasette's query {ds_n}: not the same answer")

        results = {"ours": [], "ours_304": [], "datasette": [], **{k: [] for k in CACHED}}
        shape = {}
        for _round in range(args.rounds):
            with ours:
                _, headers, body = get(ours_url)
                shape["ours_rows"] = json.loads(body)["count"]
                shape["ours_bytes"] = len(body)
                etag = headers["etag"]
                status = None
                try:
                    get(ours_url, {"If-None-Match": etag})
                except urllib.error.HTTPError as e:
                    status = e.code
                if status != 304:
                    raise SystemExit(f"If-None-Match did not give 304 (got {status})")
                results["ours"].append(wrk(ours_url, args))
                results["ours_304"].append(wrk(ours_url, args, headers=[f"If-None-Match: {etag}"]))
                for key, path in CACHED.items():
                    results[key].append(wrk(f"http://127.0.0.1:{p_ours}{path}", args))
            with ds:
                _, _, body = get(ds_url)
                shape["datasette_rows"] = len(json.loads(body))
                shape["datasette_bytes"] = len(body)
                results["datasette"].append(wrk(ds_url, args))

        fig = {k: median_of(v) for k, v in results.items()}
        compute_ms = uncached_ms(db)
        cache_ratio = {k: fig[k]["rps"] / (1000.0 / compute_ms[k]) for k in CACHED}
        ratio_rps = fig["ours"]["rps"] / fig["datasette"]["rps"]
        ratio_p99 = fig["datasette"]["p99_ms"] / fig["ours"]["p99_ms"]
        report = {
            "load": {"tool": "wrk", "threads": args.threads, "connections": args.connections, "workers": args.workers,
                     "duration_s": args.duration, "rounds": args.rounds, "cpus": os.cpu_count()},
            "urls": {"ours": ours_url, "datasette": ds_url},
            "shape": shape,
            "figures": fig,
            "ratio_rps": ratio_rps,
            "ratio_p99": ratio_p99,
            "goal_rps_ratio": args.goal,
            "goal_p99_ms": args.goal_p99,
            "goal_met": ratio_rps >= args.goal and fig["ours"]["p99_ms"] <= args.goal_p99,
            "uncached_ms": compute_ms,
            "cached_over_uncached_rps": cache_ratio,
        }
        print(f"store: {db} ({shape['ours_rows']} matrix rows; datasette's query: {shape['datasette_rows']} rows)")
        print(f"load: wrk -t{args.threads} -c{args.connections} -d{args.duration}s, {args.rounds} round(s), "
              f"{os.cpu_count()} CPUs (servers and wrk share them); survey serve --workers {args.workers}")
        print(f"{'':34} {'req/s':>10} {'p50 ms':>9} {'p99 ms':>9} {'non-2xx/3xx':>12}")
        for key, label in (("ours", "survey /matrix.json (200)"), ("ours_304", "survey /matrix.json (304)"),
                           ("datasette", "datasette canned query (200)")):
            f = fig[key]
            print(f"{label:34} {f['rps']:>10.0f} {f['p50_ms']:>9.2f} {f['p99_ms']:>9.2f} {f['non_2xx_3xx']:>12}")
        print(f"ratio req/s (survey / datasette): {ratio_rps:.1f}x   ratio p99 (datasette / survey): {ratio_p99:.1f}x")
        for key, path in CACHED.items():
            print(f"survey {path} (200, cached): {fig[key]['rps']:.0f} req/s, p99 {fig[key]['p99_ms']:.2f} ms; "
                  f"computing it without the cache takes {compute_ms[key]:.1f} ms "
                  f"({1000.0 / compute_ms[key]:.0f}/s in-process): {cache_ratio[key]:.1f}x")
        print(f"goal: survey >= {args.goal:.1f}x datasette's req/s (measured {ratio_rps:.1f}x) and p99 <= "
              f"{args.goal_p99:.0f} ms (measured {fig['ours']['p99_ms']:.1f} ms): "
              f"{'met' if report['goal_met'] else 'NOT met'}")
        if args.output:
            with open(args.output, "w") as f:
                json.dump(report, f, indent=1)
        return 0 if report["goal_met"] else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
