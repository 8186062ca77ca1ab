"""Shared fixtures and helpers. Tiers: plain tests are fast (seconds, no network); tests
marked ``integration`` build real venvs from PyPI triton wheels (cached in
SURVEY_CACHE), ``podman`` ones need the test images, ``browser`` ones chromium.

Tests run in parallel (pytest-xdist, ``-n``; tests/run.sh) and in random order
(pytest-randomly). What the processes of one run share lives in the run directory
(``$PROTON_SURVEY_TEST_RUN``, made by the controlling process): one PostgreSQL server,
started by the first worker that needs it under a file lock and stopped when the run
ends. The tests of a tier that holds one big thing of its own per process (a Ray
cluster, chromium, the podman images) run in one worker, as one unit; tests that need
what tests/run.sh prepares in the background are handed out once it is ready
(tests/helpers/scheduling.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from db.store import Store
from tests.helpers import scheduling
from tests.pgserver import PgServer, find_bindir, not_installed_reason

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
REPORTS = FIXTURES / "reports"


# The instant the ``clock`` fixture fixes: after every report in tests/fixtures/reports.
FIXED_NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)


class Clock:
    """The product's clock (survey/core/clock.py), fixed: ``now`` until moved."""

    def __init__(self, now: dt.datetime):
        self.now = now

    def advance(self, **delta: float) -> dt.datetime:
        """Move it forward (``advance(seconds=90)``, ``advance(days=2)``); returns the new now."""
        self.now += dt.timedelta(**delta)
        return self.now


@pytest.fixture
def clock() -> Iterator[Clock]:
    """Fix the product's clock at FIXED_NOW for the test (every thread of this process;
    not a ``survey`` subprocess): what a test compares must not depend on when it ran."""
    from survey.core import clock as product_clock

    fixed = Clock(FIXED_NOW)
    with product_clock.source(lambda: fixed.now):
        yield fixed


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log record, DEBUG up (for :func:`no_traceback`)."""
    caplog.set_level(logging.DEBUG)
    yield caplog


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing was logged at ERROR or with a traceback."""
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR or "Traceback" in r.getMessage()]
    assert not bad, [(r.name, r.getMessage()) for r in bad]


# --------------------------------------------------------------------------- clients of the service
@pytest.fixture
def portal() -> Iterator[Any]:
    """An anyio portal: sync calls into async clients (tests/helpers/api.py)."""
    import anyio.from_thread

    with anyio.from_thread.start_blocking_portal() as p:
        yield p


@pytest.fixture
def make_client(portal: Any) -> Iterator[Any]:
    """``make_client(store, **create_app_options)``: a client of a new app over ``store``."""
    from api.app import create_app
    from tests.helpers.api import Client

    clients: list[Client] = []

    def make(store: Store, **kw: Any) -> Client:
        c = Client(portal, create_app(store, **kw))
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def client(filled_store: Store, make_client: Any) -> Any:
    """A client of the service over ``filled_store``, uploads allowed with TOKEN."""
    from tests.helpers.api import TOKEN

    return make_client(filled_store, token=TOKEN)


def wait_until_serving(proc: Any, base: str, log: Path, timeout: float = 90) -> None:
    """Wait until the ``survey serve`` process ``proc`` answers ``base``/healthz; fail, with
    its log, when it exits first or never answers within ``timeout`` s."""
    import time

    import httpx

    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def report_bytes(name: str) -> bytes:
    """A real probe report from tests/fixtures/reports (see its README)."""
    return (REPORTS / name).read_bytes()


def report_variant(name: str, prefix: str, started: str, flip: str | None = None) -> bytes:
    """A fixture report as another run: its own times, in the environment ``prefix``; with
    ``flip``, the first clean live check of that backend gets another outcome."""
    from probes import outcomes as O

    d = json.loads(report_bytes(name))
    d["probe"]["started_at"] = d["probe"]["finished_at"] = started
    d["environment"]["python"]["prefix"] = prefix
    d["environment"]["python"]["executable"] = prefix + "/bin/python"
    if flip is not None:
        live = next(r for r in d["modes"] if r["backend"] == flip and r["env"] == "clean" and not r["stub"])
        live["outcome"] = O.CRASH if live["outcome"] != O.CRASH else O.TIMEOUT
    return json.dumps(d).encode()


RUN_DIR = "PROTON_SURVEY_TEST_RUN"
# the tiers whose tests must not run at once: each test holds its tier's lock (_one_at_a_time)
ONE_WORKER = ("fleet", "browser", "podman")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and RUN_DIR not in os.environ:  # the controlling process
        os.environ[RUN_DIR] = tempfile.mkdtemp(prefix="proton-survey-tests-")
        config.stash[_own_run_dir] = os.environ[RUN_DIR]


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(_own_run_dir, None)
    if run is None:
        return
    state = Path(run) / "pg.json"
    try:
        if state.exists():
            PgServer.attach(json.loads(state.read_text())).stop()
    finally:
        shutil.rmtree(run, ignore_errors=True)
        os.environ.pop(RUN_DIR, None)


_own_run_dir = pytest.StashKey[str]()


@pytest.fixture(autouse=True)
def _one_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test of a tier in ONE_WORKER holds that tier's run-wide lock while it runs, so two
    never run at once in different workers (the podman tests watch every container of
    theirs; two Ray clusters compete for the cores). A lock, not xdist's ``loadgroup``:
    pytest 9 builds a node id from ``_id``, and xdist 3.8 still writes the group into
    ``_nodeid``, so its groups are never formed."""
    tiers = sorted(t for t in ONE_WORKER if request.node.get_closest_marker(t) is not None)
    if not tiers or RUN_DIR not in os.environ:
        yield
        return
    with contextlib.ExitStack() as held:
        for tier in tiers:
            held.enter_context(run_lock(tier))
        yield


@contextlib.contextmanager
def run_lock(name: str) -> Iterator[Path]:
    """An exclusive lock named ``name`` among the processes of this test run; yields the
    run directory."""
    run = Path(os.environ[RUN_DIR])
    with open(run / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield run


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    """The run's one real PostgreSQL server (tests/pgserver.py), started by whichever
    process needs it first and stopped when the run ends; skips when PostgreSQL is not
    installed (tests/run.sh installs it). Each test makes databases of its own in it
    (``pg_url``, ``new_database``): never change the server itself (an outage test starts
    its own)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(not_installed_reason())
    with run_lock("pg") as run:
        state = run / "pg.json"
        if state.exists():
            return PgServer.attach(json.loads(state.read_text()))
        server = PgServer(bindir)
        try:
            server.start()
        except BaseException:
            server.stop()
            raise
        tmp = state.with_suffix(".tmp")
        tmp.write_text(json.dumps(server.state()))
        tmp.replace(state)
        return server


@pytest.fixture
def own_pg() -> Iterator[PgServer]:
    """A PostgreSQL server of this test's own, for a test that stops and starts it
    (the run's ``pg_server`` is shared: never stop that one)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(not_installed_reason())
    server = PgServer(bindir)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh PostgreSQL database holding the current schema."""
    name = pg_server.new_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that uses a store runs on SQLite; one marked ``both_stores`` (what the database
    itself decides: transactions, locking, types, constraints, NUL, time zones, ordering,
    migrations, opening) runs on PostgreSQL too."""
    if "store_url" not in metafunc.fixturenames:
        return
    if any("store_url" in str(mark.args[0]) for mark in metafunc.definition.iter_markers("parametrize")):
        return  # the test names its stores itself
    both = metafunc.definition.get_closest_marker("both_stores") is not None
    metafunc.parametrize("store_url", ["sqlite", "postgresql"] if both else ["sqlite"], indirect=True)


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store's URL: SQLite, or PostgreSQL for tests marked ``both_stores``."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'survey.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty SQLite store at the current schema, made once per process: a test's new
    store is a copy of it, as a PostgreSQL one is a database made from the server's migrated
    template (tests/pgserver.py). Making one runs every migration, 0.2-0.4 s of CPU, and
    several hundred tests start from a new store. The migrations themselves are tested on
    stores of their own (tests/test_db.py, tests/test_store_versions.py)."""
    path = tmp_path_factory.mktemp("template") / "survey.db"
    Store(f"sqlite:///{path}").close()
    assert not path.with_name(path.name + "-wal").exists()  # all of it in the one file
    return path


@pytest.fixture
def new_sqlite_store(sqlite_template: Path) -> Callable[[Path], Store]:
    """Makes a new SQLite store at a path: a copy of the migrated template, opened."""
    def make(path: Path) -> Store:
        shutil.copyfile(sqlite_template, path)
        return Store(f"sqlite:///{path}")
    return make


@pytest.fixture
def store(store_url: str, request: pytest.FixtureRequest) -> Iterator[Store]:
    sqlite = store_url.startswith("sqlite:///")
    s = request.getfixturevalue("new_sqlite_store")(Path(store_url.removeprefix("sqlite:///"))) if sqlite \
        else Store(store_url)
    yield s
    s.close()


@pytest.fixture
def filled_store(store: Store) -> Store:
    """The four real CPU reports, stored as four candidates in release order."""
    from survey.evidence.ingest import ingest

    for pos, v in enumerate(("3.6.0", "3.7.1", "3.8.0", "3.9.0")):
        with store.session() as s:
            ingest(s, report_bytes(f"cpu-triton-{v}.json"), candidate=f"triton-{v}", label=f"Triton {v}",
                   kind="pip", spec={"pip": f"triton=={v}"}, position=pos, source="ingest",
                   scope="catalog")
    return store


# The candidate that ``h200_store`` holds.
H200 = "h200.triton-3.6.0"


@pytest.fixture
def h200_store(store: Store) -> Store:
    """The real H200 report (tests/fixtures/reports/README.md) as H200: live ok checks and GELU captures."""
    from survey.evidence.ingest import ingest

    with store.session() as s:
        ingest(s, report_bytes("h200-triton-3.6.0.json"), candidate=H200, label="Triton 3.6.0 on an H200",
               kind="python", source="ingest", scope="catalog")
    return store


@pytest.fixture(scope="session")
def images() -> Iterator[list[str]]:
    """The podman tier's test images (tests/helpers/images.py): build (or reuse) them with
    .ci/build-images; skip only if podman cannot run here at all."""
    with pytest.MonkeyPatch.context() as mp:
        if not os.environ.get("CONTAINERS_CONF"):
            mp.setenv("CONTAINERS_CONF", str(ROOT / ".ci" / "containers.conf"))
        proc = subprocess.run([str(ROOT / ".ci" / "build-images")], capture_output=True, text=True, timeout=1800)
        if proc.returncode == 69:
            pytest.skip(f"podman cannot run here: {proc.stderr.strip()[-500:]}")
        if proc.returncode != 0:
            pytest.fail(f".ci/build-images failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        yield proc.stdout.split()


@pytest.fixture
def static_server(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], str]]]:
    """A plain static server (``python -m http.server`` on 127.0.0.1) for the directory
    ``site``, not yet made: yields ``(site, start)``; ``start()`` serves it and returns its URL."""
    import socket
    import sys
    import time

    import httpx

    site = tmp_path / "site"
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> str:
        p = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                              "--directory", str(site)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield site, start
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the unprivileged child (``unprivileged``, tests/helpers/store.py) can
    reach (pytest's tmp_path is root's 0700)."""
    d = Path(tempfile.mkdtemp(prefix="proton-survey-ro-"))
    os.chmod(d, 0o755)
    yield d
    for p in [d, *d.rglob("*")]:
        if p.is_dir():
            os.chmod(p, 0o755)
    shutil.rmtree(d)


class CliResult:
    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr

    def __repr__(self) -> str:
        return f"CliResult({self.returncode}, stdout={self.stdout[-500:]!r}, stderr={self.stderr[-500:]!r})"


def survey_cli(*args: str) -> CliResult:
    """Run ``survey ARGS`` in this process (the real ``survey.cli.main``, exit code
    included) - a subprocess costs a second of imports per call."""
    import contextlib
    import io
    import sys

    from survey import cli

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["survey", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv
    return CliResult(code, out.getvalue(), err.getvalue())


def survey_fresh(*args: str, without: tuple[str, ...] = ()) -> Any:
    """Run ``survey ARGS`` in an interpreter of its own (a ``subprocess.CompletedProcess``,
    text): for a command that would change the test process for the tests after it (importing
    Ray does), or one run where the packages ``without`` cannot be imported from its first line,
    as where they are not installed. Patching them away in this process instead breaks what
    imported them already, depending on which tests ran first."""
    import subprocess
    import sys

    block = "".join(f"sys.modules[{name!r}] = None; " for name in without)
    code = f"import sys; {block}sys.argv[0] = 'survey'; from survey import cli; cli.main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=120)


def processes_with(text: str) -> list[str]:
    """The processes whose environment holds ``text`` (e.g. a path only a test's
    environment names): what a test checks is gone, not waited for."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and text.encode() in Path(f"/proc/{entry}/environ").read_bytes():
                found.append(entry)
        except OSError:
            pass
    return found


# The order in which xdist hands out the tests (tests/helpers/scheduling.py hands them out in
# this order, a unit at a time): the longest first, each on a worker of its own at once
# instead of wherever the shuffle put it (one that started late made the whole run wait for
# it); then the tiers that run as one unit and the tests that wait for tests/run.sh's
# background jobs (passed over until their job has ended); the many short tests last, so the
# workers end together. tests/run.sh prints the durations.
LONGEST_FIRST = ("test_schemathesis.py::test_reads_without_the_token",
                 "test_schemathesis.py::test_uploads_with_the_token",
                 "test_schemathesis.py::test_uploads_without_the_token",
                 "test_recipe_links.py::test_aorta_s_own_code_and_the_declared_model_agree")
EARLY_TIERS = ("fleet", "podman", "browser", "integration")


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        where = item.nodeid.split("[", 1)[0]
        longest = next((i for i, name in enumerate(LONGEST_FIRST) if where.endswith(name)), None)
        if longest is not None:
            return longest
        tier = next((i for i, t in enumerate(EARLY_TIERS) if item.get_closest_marker(t) is not None), None)
        return len(LONGEST_FIRST) + (len(EARLY_TIERS) if tier is None else tier)

    items.sort(key=rank)  # stable: within a rank, the shuffled order
    if hasattr(config, "workerinput") and RUN_DIR in os.environ:
        scheduling.write_units(Path(os.environ[RUN_DIR]), items, ONE_WORKER)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """tests/run.sh's ``--dist loadgroup``: scheduled by tests/helpers/scheduling.py."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return scheduling.TierScheduling(config, log, run_dir=Path(os.environ[RUN_DIR]))


def pytest_runtest_setup(item: pytest.Item) -> None:
    scheduling.wait_for_jobs(item)  # the images or venvs that tests/run.sh is still making
