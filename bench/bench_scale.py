#!/usr/bin/env python3
"""A store of N runs, on SQLite and PostgreSQL: how long the first answers take,
how fast reports go in, how much memory the service holds, how big the store is.

The store is filled by its own generator, built from the real reports of
tests/fixtures/reports: varied copies (each with its own times, host and prefix),
K = N/10 candidates of the catalog's scope (ten runs each, so an environment has
several runs and the stability rule pools them), platforms rotating (three GPU
models for reports that record one, three machines for those that know only the
host's). Then, on that store:

- ingest rate: the first ``--single`` reports one transaction each
  (``survey.evidence.ingest.ingest``), the rest in batches (``ingest_many``: parse ->
  identify -> write, one matrix-version move per batch); the batches timed from their
  files, each batch a directory read as ``survey ingest DIR`` reads one
  (``survey.flows.filing.read_reports``: in a process per core, from 400 reports): the
  generator's own time (about 0.5 ms a report) and the files' writing are not counted;
- ``survey serve``: the first ``/matrix.json`` page after the start (cold), the
  first filtered pages (``backend=``, ``platform=``, ``candidate=``), one upload,
  then the first page and a filtered one again (the cache is void: a new version);
- uploads: ``--uploads`` new reports through ``POST /runs`` by 8 clients at once
  (with ``--workers N``, as many again to ``survey serve --workers N``);
- the server's RSS (``VmRSS`` and peak ``VmHWM`` from /proc), its processes summed (the writer process too);
- ``survey table`` (the docs table, and ``--format json``) and ``survey check``;
- the store's size per run.

    python bench/bench_scale.py [--runs 1000,10000] [--stores sqlite,postgresql] [--single 200]
                                [--uploads 400] [--workers 2] [--output DIR]

Times are single requests, wall clock, on whatever machine runs it: the figures
are for bench/README.md with the machine's load beside them, never asserted.
PostgreSQL is Debian's (tests/pgserver.py starts a throwaway server on 127.0.0.1).
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import json
import os
import platform as _platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "tests" / "fixtures" / "reports"
SURVEY = [sys.executable, "-m", "survey"]  # the checkout this file is in (ROOT), whatever is installed
TOKEN = "bench-scale-token"
GPU_PLATFORMS = (("nvidia:sm_90:NVIDIA H200", "NVIDIA H200", "sm_90"),
                 ("nvidia:sm_90:NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "sm_90"),
                 ("nvidia:sm_80:NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "sm_80"))
MACHINES = ("x86_64", "aarch64", "ppc64le")
BASE_TIME = 1_790_000_000  # 2026-09-21: the generated runs' times count up from here


# ------------------------------------------------------------------ generator
def templates() -> list[str]:
    return [p.read_text() for p in sorted(FIXTURES.glob("*.json"))]


def candidate_name(k: int) -> str:
    return f"scale-{k:05d}"


def variant(tpls: list[str], i: int, n: int) -> tuple[str, bytes]:
    """Run ``i`` of a store of ``n``: (its candidate's name, its report)."""
    k_count = max(1, n // 10)
    k, j = i % k_count, i // k_count
    d = json.loads(tpls[k % len(tpls)])
    name = candidate_name(k)
    rot = (k + j) % 3
    t0 = BASE_TIME + i * 7
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t0))
    d["probe"]["started_at"] = iso
    d["probe"]["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t0 + 2))
    env = d["environment"]
    env["platform"]["hostname"] = f"host-{rot}"
    env["python"]["prefix"] = f"/venvs/{name}-v{j // 4}"  # a new environment every fourth copy
    env["python"]["executable"] = f"/venvs/{name}-v{j // 4}/bin/python"
    if d.get("platform"):
        key, model, arch = GPU_PLATFORMS[rot]
        d["platform"].update(key=key, model=model, arch=arch)
        for dev in d["platform"].get("devices") or []:
            dev.update(model=model, arch=arch)
    else:
        env["platform"]["machine"] = MACHINES[rot]
    return name, json.dumps(d).encode()


# ------------------------------------------------------------------ stores
class Postgres:
    def __init__(self) -> None:
        from tests.pgserver import PgServer, find_bindir

        bindir = find_bindir()
        if bindir is None:
            raise SystemExit("PostgreSQL is not installed (tests/run.sh installs Debian's postgresql)")
        self.server = PgServer(bindir).start()

    def new(self) -> str:
        return self.server.url(self.server.new_database(migrated=False))

    def size(self, url: str) -> int:
        from sqlalchemy import create_engine, text

        engine = create_engine(url)
        with engine.connect() as conn:
            size = int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar() or 0)
        engine.dispose()
        return size

    def stop(self) -> None:
        self.server.stop()


def fill(url: str, n: int, single: int, batch: int) -> dict[str, Any]:
    """The store at ``url`` with ``n`` generated runs; the ingest rates."""
    from db.store import Store
    from survey.evidence import ingest as ingest_mod
    from survey.evidence.ingest import ingest

    try:  # as `survey ingest` and the service store reports: each write keeps the stored cells
        importlib.import_module("survey.verdicts.summary")
    except ImportError:  # a checkout from before them
        pass
    try:  # as the `survey` command runs (survey/core/collector.py)
        importlib.import_module("survey.core.collector").tune()
    except ImportError:  # a checkout from before it
        pass
    tpls = templates()
    store = Store(url)
    single = min(single, n)
    single_s = 0.0  # the rates count the product's work only: not the generator's (variant, ~0.5 ms a report)
    for i in range(single):
        name, raw = variant(tpls, i, n)
        t0 = time.perf_counter()
        with store.session() as s:
            ingest(s, raw, candidate=name, label=name, position=i % max(1, n // 10), scope="catalog")
        single_s += time.perf_counter() - t0
    if not hasattr(ingest_mod, "ingest_many"):  # a checkout without bulk ingest: one transaction each
        t0 = time.perf_counter()
        for i in range(single, n):
            name, raw = variant(tpls, i, n)
            with store.session() as s:
                ingest(s, raw, candidate=name, label=name, position=i % max(1, n // 10), scope="catalog")
        store.close()
        return {"single_reports": n, "single_per_s": round(n / (single_s + time.perf_counter() - t0), 1),
                "bulk_reports": 0, "bulk_per_s": None, "fill_s": round(single_s + time.perf_counter() - t0, 1)}
    Filing, identify, ingest_many = ingest_mod.Filing, ingest_mod.identify, ingest_mod.ingest_many
    try:  # as `survey ingest DIR` reads a directory of reports (in processes of their own, where it does)
        read_reports = importlib.import_module("survey.flows.filing").read_reports
    except (ImportError, AttributeError):
        read_reports = None
    bulk_s = 0.0
    done = single
    with store.session() as s, tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        folder = Path(tmp)
        while done < n:
            made = [(i, *variant(tpls, i, n)) for i in range(done, min(n, done + batch))]
            for old in folder.iterdir():
                old.unlink()
            for i, _name, raw in made:
                (folder / f"{i:07d}.json").write_bytes(raw)
            t0 = time.perf_counter()  # from the files, as `survey ingest DIR` reads them
            if read_reports is not None:
                idents = read_reports([folder], 1 << 24)[1]
            else:
                idents = [identify((folder / f"{i:07d}.json").read_bytes(), exact=True) for i, _name, _raw in made]
            items = [(ident, Filing(name, name, position=i % max(1, n // 10), scope="catalog"))
                     for ident, (i, name, _raw) in zip(idents, made, strict=True)]
            ingest_many(s, items, batch=batch)
            bulk_s += time.perf_counter() - t0
            done += len(items)
    store.close()
    return {"single_reports": single, "single_per_s": round(single / single_s, 1) if single else None,
            "bulk_reports": n - single, "bulk_per_s": round((n - single) / bulk_s, 1) if n > single else None,
            "fill_s": round(single_s + bulk_s, 1)}


def sqlite_size(path: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path.stat().st_size


# ------------------------------------------------------------------ service
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(url: str, data: bytes | None = None, timeout: float = 300.0) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"} if data is not None else {}
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def timed(url: str, data: bytes | None = None) -> float:
    t0 = time.perf_counter()
    status, body = request(url, data)
    ms = (time.perf_counter() - t0) * 1e3
    if status >= 400:
        raise SystemExit(f"{url}: HTTP {status}: {body[:300]!r}")
    return round(ms, 1)


def rss_mb(pid: int) -> dict[str, Any]:
    """VmRSS and VmHWM of the server: its process and every process under it (the store's
    writer process, multiprocessing's resource tracker, workers), summed, and each one's
    VmRSS by its name (``/proc/PID/comm``). A sum of peaks bounds the peak of the sum."""
    out: dict[str, Any] = {"VmRSS": 0.0, "VmHWM": 0.0, "by_process": {}}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text().splitlines()
            name = Path(f"/proc/{p}/comm").read_text().strip()
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                mb = round(int(value.split()[0]) / 1024, 1)
                out[key] = round(out[key] + mb, 1)
                if key == "VmRSS":
                    out["by_process"][f"{name} {p}"] = mb
    return out


class Serve:
    def __init__(self, url: str, workdir: Path, workers: int = 1):
        self.url, self.port, self.log, self.workers = url, free_port(), workdir / "serve.log", workers

    def __enter__(self) -> Serve:
        self.logf = open(self.log, "wb")
        env = {**os.environ, "SURVEY_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
        more = ["--workers", str(self.workers)] if self.workers > 1 else []
        self.proc = subprocess.Popen([*SURVEY, "serve", "--db", self.url, "--port", str(self.port), *more], env=env,
                                     stdout=self.logf, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"survey serve exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                request(self.base + "/healthz", timeout=2)
                return self
            except OSError:
                time.sleep(0.2)
        raise SystemExit("survey serve did not answer in 120 s")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: Any) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.logf.close()


def uploads(base: str, tpls: list[str], n: int, first: int, count: int, clients: int = 8) -> float:
    """``count`` new reports through POST /runs by ``clients`` threads; reports per second."""
    bodies = [variant(tpls, i, n) for i in range(first, first + count)]
    errors: list[str] = []
    lock = threading.Lock()
    todo = iter(bodies)

    def work() -> None:
        while True:
            with lock:
                item = next(todo, None)
            if item is None:
                return
            name, raw = item
            status, body = request(f"{base}/runs?candidate={name}", raw)
            if status not in (200, 201):
                errors.append(f"{status} {body[:200]!r}")

    threads = [threading.Thread(target=work) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{len(errors)} uploads failed, the first: {errors[0]}")
    return round(count / elapsed, 1)


def service(url: str, n: int, workdir: Path, upload_count: int) -> dict[str, Any]:
    tpls = templates()
    out: dict[str, Any] = {}
    some = candidate_name(min(3, max(1, n // 10) - 1))
    filtered = {"backend": "/matrix.json?backend=cupti", "platform": "/matrix.json?platform=none:aarch64",
                "candidate": f"/matrix.json?candidate={some}", "outcome": "/matrix.json?outcome=ok",
                "verdict": "/matrix.json?verdict=refused"}
    with Serve(url, workdir) as srv:
        out["rss_mb_start"] = rss_mb(srv.proc.pid)
        out["first_page_ms"] = timed(srv.base + "/matrix.json")
        out["first_page_again_ms"] = timed(srv.base + "/matrix.json")
        out["filtered_first_ms"] = {k: timed(srv.base + path) for k, path in filtered.items()}
        out["html_first_ms"] = timed(srv.base + "/matrix")
        out["md_first_ms"] = timed(srv.base + "/matrix.md")
        name, raw = variant(tpls, n, n)
        out["upload_one_ms"] = timed(f"{srv.base}/runs?candidate={name}", raw)
        out["after_upload_first_page_ms"] = timed(srv.base + "/matrix.json")
        out["after_upload_filtered_ms"] = {k: timed(srv.base + path) for k, path in filtered.items()}
        if upload_count:
            out["uploads"] = upload_count
            out["upload_per_s_8_clients"] = uploads(srv.base, tpls, n, n + 1, upload_count)
            out["after_uploads_first_page_ms"] = timed(srv.base + "/matrix.json")
        out["rss_mb_end"] = rss_mb(srv.proc.pid)
    return out


def uploads_by_workers(url: str, n: int, workdir: Path, first: int, count: int, workers: int) -> dict[str, Any]:
    """``count`` more uploads by 8 clients to a server of ``workers`` processes."""
    with Serve(url, workdir, workers) as srv:
        return {f"upload_per_s_8_clients_{workers}_workers": uploads(srv.base, templates(), n, first, count)}


def cli(url: str, n: int) -> dict[str, Any]:
    def run(*argv: str) -> float:
        t0 = time.perf_counter()
        proc = subprocess.run([*SURVEY, *argv, "--db", url], capture_output=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        seconds = time.perf_counter() - t0
        if proc.returncode not in (0, 2, 3):  # check: 2 no, 3 not enough evidence
            raise SystemExit(f"survey {' '.join(argv)}: exit {proc.returncode}: {proc.stderr[-1000:]!r}")
        return round(seconds, 2)

    name = candidate_name(1 % max(1, n // 10))
    return {
        "table_s": run("table"),
        "table_json_s": run("table", "--format", "json"),
        "check_s": run("check", name, "--backend", "roctracer", "--platform", "x86_64"),
    }


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="1000,10000", help="store sizes, comma separated")
    ap.add_argument("--stores", default="sqlite,postgresql")
    ap.add_argument("--single", type=int, default=200, help="reports ingested one transaction each")
    ap.add_argument("--batch", type=int, default=500, help="reports per bulk transaction")
    ap.add_argument("--uploads", type=int, default=400, help="reports uploaded by 8 clients")
    ap.add_argument("--workers", type=int, default=0,
                    help="then as many uploads again to `survey serve --workers N` (0: not measured)")
    ap.add_argument("--output", type=Path, help="write the results as JSON into this directory")
    args = ap.parse_args()
    # Bytecode for every module, as an installed package has it: where PYTHONDONTWRITEBYTECODE is
    # set, each `survey` run below would otherwise compile the changed sources again (0.1-0.2 s).
    for pkg in ("api", "db", "probes", "survey"):
        compileall.compile_dir(ROOT / pkg, quiet=1)
    sizes = [int(x) for x in args.runs.split(",") if x]
    kinds = [x for x in args.stores.split(",") if x]
    results: list[dict[str, Any]] = []
    pg = Postgres() if "postgresql" in kinds else None
    try:
        for kind in kinds:
            for n in sizes:
                with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
                    work = Path(tmp)
                    url = pg.new() if kind == "postgresql" and pg is not None else f"sqlite:///{work / 'survey.db'}"
                    row: dict[str, Any] = {"store": kind, "runs": n, "load_before": load()}
                    row.update(fill(url, n, args.single, args.batch))
                    size = sqlite_size(work / "survey.db") if kind == "sqlite" else pg.size(url)  # type: ignore
                    row["store_mb"] = round(size / 2**20, 1)
                    row["kb_per_run"] = round(size / 1024 / n, 1)
                    row.update(service(url, n, work, args.uploads))
                    if args.workers > 1 and args.uploads:
                        row.update(uploads_by_workers(url, n, work, n + 1 + args.uploads, args.uploads, args.workers))
                    row.update(cli(url, n))
                    row["load_after"] = load()
                    results.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        if pg is not None:
            pg.stop()
    if args.output:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "bench_scale.json").write_text(json.dumps(results, indent=1) + "\n")
        (args.output / "host.txt").write_text(
            f"{_platform.node()} {_platform.machine()} {os.cpu_count()} cores, python {_platform.python_version()}, "
            f"load after: {load()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
