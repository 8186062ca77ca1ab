"""``survey run --ray``: survey a fleet, each (candidate, platform) on a node that offers it.

**How a node says what it is.** ``survey platform`` on the node detects its platform
the way the probe does (``survey.evidence.identity.local_platform()``) and prints the
``ray start`` line that advertises it as a Ray custom resource named

    proton-survey/platform:<platform key>

(``proton-survey/platform:nvidia:sm_90:NVIDIA H200``). The key is written as it is,
except that ``%`` and characters outside printable ASCII are percent-encoded (their
UTF-8 bytes) and ``_group_`` is written ``%5Fgroup_``: Ray reads resource names
containing ``_group_`` as placement-group resources. The amount is how many probes
the node runs at once (each also takes one CPU).

**Where a candidate runs.** The catalog's ``platforms`` values (a key, or one of its
':'-separated parts) are matched against the platforms the live nodes advertise;
each platform matched is one Ray task that requires that platform's resource, so Ray
places it only on nodes offering it. A value no node matches is reported "not run:
no node offers X", and nothing is stored for it. A candidate without ``platforms``
is probed where the survey runs: in the driver, as ``survey run`` does.

**What a node does** (:func:`probe_here`): obtain the candidate with its own
launcher; when the environment it obtained was already probed on this node's
platform by this probe version (the driver passes the stored identities of that
candidate per platform), answer :class:`Unchanged`; otherwise probe it and return
the report with its origin (:class:`Probed`), or the typed failure
(:class:`Failure`: ``Unobtainable``, ``ProbeFailed``, ...) with its message. A node
never opens the store: it needs our package and Ray, nothing else.

**What the driver does.** It stores each report in its own transaction as it
arrives, under the platform the *report* measured (the probe's own detection), never
the one the node advertised; where the two differ the outcome says so. A failure has
no report: it is recorded under the platform the node advertised. The same
environment measured on the same platform twice in one survey (two nodes that
advertise different platforms but measure the same one) is stored once.

**Lost nodes.** A task whose node dies is retried by Ray (``max_retries``) on another
node offering the same platform. When no live node offers it any more, the task is
cancelled and reported "not run"; so is a task that does not answer within its
budget (the launcher's own timeouts plus a margin). Nothing is stored for a task that
returned no result: no run is half-stored, and the survey always ends.

Ray is imported only here and only when a fleet is surveyed.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from db import widths
from survey.core.errors import (
    FleetUnavailable,
    InvalidReport,
    StoreUnusable,
    SurveyError,
    TargetError,
    Unobtainable,
    UsageProblem,
)
from survey.environments.catalog import Entry, platform_matches
from survey.evidence.identity import PlatformId

RESOURCE_PREFIX = "proton-survey/platform:"
MAX_KEY = 300  # the store's platform key column
MAX_RETRIES = 2  # Ray retries of a task whose worker or node died
OBTAIN_BUDGET_S = {"python": 300.0, "pip": 2400.0, "image": 2400.0}
MARGIN_S = 120.0
CONNECT_TIMEOUT_S = 60.0
# The progress board (an actor) is lost when it fails or says nothing for this long; its
# first answer waits for its process to come up, seconds or more on a busy machine.
BOARD_SILENCE_S = 120.0
NOT_RUN = "not run"


# ----------------------------------------------------------------- naming
def resource_name(key: str) -> str:
    """The Ray custom resource that advertises the platform ``key``."""
    out = []
    for ch in key:
        if ch == "%" or not (" " <= ch <= "~"):
            out.append("".join(f"%{b:02X}" for b in ch.encode()))
        else:
            out.append(ch)
    return RESOURCE_PREFIX + "".join(out).replace("_group_", "%5Fgroup_")


def key_of_resource(name: str) -> str | None:
    """The platform key a resource advertises; None for any other resource."""
    if not name.startswith(RESOURCE_PREFIX):
        return None
    try:
        key = urllib.parse.unquote(name[len(RESOURCE_PREFIX):], errors="strict")
    except UnicodeDecodeError:
        return None
    return key or None


def key_problem(key: str) -> str | None:
    if len(key) > MAX_KEY:
        return f"longer than {MAX_KEY} characters"
    if any(ord(c) < 32 for c in key):
        return "holds control characters"
    if not key.split(":")[0]:
        return "has no vendor part"
    return None


def platform_from_key(key: str) -> PlatformId:
    """The platform a node advertised (``vendor:arch:model`` or ``none:arch``), as
    the store files a failure under it: nothing but what the key says."""
    parts = key.split(":")
    vendor = parts[0] if parts[0] in ("nvidia", "amd", "none") else "unknown"
    arch = parts[1] if len(parts) > 1 and parts[1] not in ("", "unknown-arch", "unknown") else None
    model = ":".join(parts[2:]) if parts[0] != "none" and len(parts) > 2 else None
    if model in ("", "unknown-model"):
        model = None
    return PlatformId(key, vendor[:widths.VENDOR], model[:widths.MODEL] if model else None,
                      arch[:widths.ARCH] if arch else None,
                      {"note": "the platform the Ray node advertised (no report was produced to measure it)"})


def ray_start_argv(key: str, *, address: str | None = None, head: bool = False, slots: int = 1) -> list[str]:
    """The ``ray start`` command that makes this node offer platform ``key``."""
    argv = ["ray", "start"]
    argv.append("--head" if head else f"--address={address or 'HEAD_ADDRESS:6379'}")
    argv += ["--resources", json.dumps({resource_name(key): slots}, ensure_ascii=False)]
    return argv


# ----------------------------------------------------------------- on the node
@dataclass(frozen=True)
class Node:
    node_id: str | None  # Ray's node id; None outside Ray
    host: str
    platform: str  # the platform this node measures (identity.local_platform())

    @property
    def label(self) -> str:
        return f"{self.host} ({self.node_id[:8]})" if self.node_id else self.host


@dataclass(frozen=True)
class Probed:
    raw: bytes  # the report, origin attached
    node: Node


@dataclass(frozen=True)
class Unchanged:
    identity: str  # the environment's identity, already stored on node.platform
    node: Node


@dataclass(frozen=True)
class Failure:
    status: str  # unobtainable | failed
    error: str  # the error's type: Unobtainable, ProbeFailed, NotAPython, ...
    message: str
    hint: str | None
    node: Node
    recorded: bool = True  # False: not a fact about the candidate (nothing is stored)

    @property
    def text(self) -> str:
        return self.message + (f"\n{self.hint}" if self.hint else "")


Result = Probed | Unchanged | Failure


def this_node() -> Node:
    from survey.evidence import identity

    node_id = None
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        node_id = ray.get_runtime_context().get_node_id()
    return Node(node_id, socket.gethostname(), identity.local_platform().key)


def probe_here(
    entry: Entry,
    settings: Any,  # survey.flows.run.ProbeSettings
    known: dict[str, list[str]],
    *,
    engine: str | None = None,
    pull: str = "missing",
    say: Callable[[str], None] = lambda _m: None,
) -> Result:
    """Obtain and probe one candidate on this machine; ``known`` maps a platform key
    to the environment identities already stored for this candidate there."""
    from survey.environments import probe as probe_run
    from survey.environments.targets import make_launcher
    from survey.evidence import identity

    node = this_node()
    try:
        launcher = make_launcher(entry, engine=engine, pull=pull)
    except SurveyError as e:
        return Failure("failed", type(e).__name__, e.message, e.hint, node, recorded=False)
    say(f"obtaining {launcher.describe()}")
    try:
        resolved = launcher.obtain()
    except TargetError as e:
        return Failure("unobtainable", type(e).__name__, e.message, e.hint, node)
    if resolved.identity in known.get(node.platform, ()):
        return Unchanged(resolved.identity, node)
    s = settings.for_entry(entry)
    say("probing")
    args = probe_run.probe_args(s.timeout, captures=s.captures, auto_capture=s.auto_capture, repeats=s.repeats)
    try:
        raw, _has_triton = launcher.probe(resolved, args, probe_run.overall_timeout(s.timeout))
    except TargetError as e:
        return Failure("unobtainable" if isinstance(e, Unobtainable) else "failed", type(e).__name__, e.message,
                       e.hint, node)
    return Probed(identity.attach_origin(raw, resolved.origin()), node)


def _remote_probe(entry: Entry, settings: Any, known: dict[str, list[str]], engine: str | None, pull: str,
                  row: str, board: Any) -> Result:
    """The Ray task: :func:`probe_here` on whichever node Ray placed it."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()

    def say(msg: str) -> None:
        if board is not None:
            try:
                board.say.remote(row, node_id, socket.gethostname(), msg)
            except Exception:  # progress only: a lost message changes nothing stored
                pass

    say("started")
    return probe_here(entry, settings, known, engine=engine, pull=pull, say=say)


class Board:
    """A Ray actor on the driver's node collecting what the tasks are doing."""

    def __init__(self) -> None:
        self._notes: list[tuple[str, str, str, str]] = []

    def say(self, row: str, node_id: str, host: str, msg: str) -> None:
        self._notes.append((row, node_id, host, msg))

    def take(self) -> list[tuple[str, str, str, str]]:
        notes, self._notes = self._notes, []
        return notes


# ----------------------------------------------------------------- the cluster
def _check_reachable(address: str) -> None:
    """A quick TCP check, so that a wrong address is an error in seconds: ray.init
    retries an address nobody answers at for minutes."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UsageProblem(f"--ray {address!r}: give auto, HOST:PORT (the head's GCS, usually port 6379) "
                         "or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as e:
        raise FleetUnavailable(f"no Ray cluster answers at {address}: {e.strerror or e}",
                               hint="start the head with `ray start --head` (docs/fleet.md)")


class _Quiet(logging.Filter):
    """ray.init runs in a thread of its own (so that it can be given up on): Ray's
    note that it set no SIGTERM handler there is expected, not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


@contextmanager
def connected(address: str) -> Iterator[None]:
    """Connected to the Ray cluster at ``address`` (``auto``: the one this machine
    belongs to) for the duration; disconnected afterwards if we connected."""
    try:
        import ray
    except ImportError:
        raise FleetUnavailable("--ray needs Ray on this machine", hint="pip install 'proton-survey[fleet]'")
    if ray.is_initialized():
        yield
        return
    _check_reachable(address)
    failure: list[BaseException] = []

    def init() -> None:
        quiet = _Quiet()
        worker_log = logging.getLogger("ray._private.worker")
        worker_log.addFilter(quiet)
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except BaseException as e:  # reported below, in the caller's thread
            failure.append(e)
        finally:
            worker_log.removeFilter(quiet)

    t = threading.Thread(target=init, name="ray-init", daemon=True)
    t.start()
    t.join(CONNECT_TIMEOUT_S)
    if t.is_alive():
        raise FleetUnavailable(f"no Ray cluster answered at {address} within {CONNECT_TIMEOUT_S:.0f} s")
    if failure:
        e = failure[0]
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise FleetUnavailable(f"cannot connect to a Ray cluster at {address}: {first}",
                               hint="start one with `ray start --head`, or name its head with --ray HOST:6379")
    try:
        yield
    finally:
        ray.shutdown()


def offered_platforms(warn: Callable[[str], None] = lambda _m: None) -> dict[str, set[str]]:
    """Platform key -> ids of the live nodes that advertise it."""
    import ray

    out: dict[str, set[str]] = {}
    nodes: Callable[[], list[dict[str, Any]]] = ray.nodes
    for n in nodes():
        if not n.get("Alive"):
            continue
        for res in n.get("Resources", {}):
            key = key_of_resource(res)
            if key is None:
                if res.startswith(RESOURCE_PREFIX):
                    warn(f"node {n['NodeID'][:8]} advertises {res!r}, which names no platform; ignored")
                continue
            problem = key_problem(key)
            if problem:
                warn(f"node {n['NodeID'][:8]} advertises platform {key[:80]!r}, which {problem}; ignored")
                continue
            out.setdefault(key, set()).add(n["NodeID"])
    return out


# ----------------------------------------------------------------- the driver
@dataclass
class Job:
    row: str  # "<candidate> @ <platform>", the progress row
    position: int
    entry: Entry
    platform: str | None  # the advertised platform it goes to; None: where the survey runs


@dataclass
class FleetOutcome:
    row: str
    name: str
    platform: str  # where it was sent: the advertised platform (the driver's own for local jobs), or the value
    status: str  # probed | unchanged | unobtainable | failed | not run
    run_id: int | None
    message: str
    duration_s: float = 0.0
    node: str | None = None  # the node that answered: host (node id)
    measured: str | None = None  # the platform the node or its report measured
    node_id: str | None = None  # Ray's id of that node

    @property
    def mismatch(self) -> bool:
        return self.measured is not None and self.measured != self.platform


def plan(entries: list[tuple[int, Entry]], offered: Iterable[str], here: str | None
         ) -> tuple[list[Job], list[FleetOutcome]]:
    """One job per (candidate, offered platform it names); "not run" for every
    platform value no node offers. ``here``: the driver's platform, for candidates
    that name none."""
    keys = sorted(offered)
    jobs: list[Job] = []
    missing: list[FleetOutcome] = []
    for position, entry in entries:
        if entry.platforms is None:
            jobs.append(Job(f"{entry.name} @ {here or 'here'}", position, entry, None))
            continue
        matched: list[str] = []
        for value in entry.platforms:
            hits = [k for k in keys if platform_matches(value, k)]
            if not hits:
                missing.append(FleetOutcome(f"{entry.name} @ {value}", entry.name, value, NOT_RUN, None,
                                            f"no node offers {value}"))
            matched += [k for k in hits if k not in matched]
        jobs += [Job(f"{entry.name} @ {k}", position, entry, k) for k in matched]
    return jobs, missing


def stored_identities(s: Any, name: str) -> dict[str, list[str]]:
    """Platform key -> environment identities with a complete run of ``name`` by this probe version."""
    from sqlalchemy import select

    from db import models as m
    from probes import PROBE_VERSION

    rows = s.execute(
        select(m.Platform.key, m.Environment.identity)
        .select_from(m.Run)
        .join(m.Candidate, m.Run.candidate_id == m.Candidate.id)
        .join(m.Environment, m.Run.environment_id == m.Environment.id)
        .join(m.Platform, m.Run.platform_id == m.Platform.id)
        .where(m.Candidate.name == name, m.Run.status == "complete", m.Run.probe_version == PROBE_VERSION)
    ).all()
    out: dict[str, list[str]] = {}
    for key, ident in rows:
        if ident not in out.setdefault(key, []):
            out[key].append(ident)
    return out


def task_budget(entry: Entry, settings: Any) -> float:
    from survey.environments import probe as probe_run

    return OBTAIN_BUDGET_S.get(entry.kind, 2400.0) + probe_run.overall_timeout(settings.timeout) + MARGIN_S


@dataclass
class _Driver:
    store: Any
    settings: Any
    here: PlatformId | None
    on_update: Callable[[str, str], None]
    on_done: Callable[[FleetOutcome], None]
    stored_now: dict[tuple[str, str, str], int] = field(default_factory=dict)
    outcomes: list[FleetOutcome] = field(default_factory=list)
    t0: dict[str, float] = field(default_factory=dict)

    finished: set[str] = field(default_factory=set)

    def done(self, o: FleetOutcome) -> None:
        o.duration_s = time.monotonic() - self.t0.get(o.row, time.monotonic())
        self.finished.add(o.row)
        self.outcomes.append(o)
        self.on_done(o)

    def update(self, row: str, msg: str) -> None:
        """Progress of a row still running (a late message never overwrites an outcome)."""
        if row not in self.finished:
            self.on_update(row, msg)

    def backed_off(self, job: Job) -> bool:
        """Unobtainable on this platform a short while ago: not tried again yet (as ``survey run``)."""
        from survey.core import errortext
        from survey.evidence import queries
        from survey.evidence.queries import backed_off

        if self.settings.force:
            return False
        last = backed_off(self.store, job.entry.name, self.advertised(job), self.settings.retry_after_s)
        if last is None:
            return False
        ago = queries.age_text(last.last_tried_at or last.finished_at).replace(" old", " ago")
        self.done(FleetOutcome(job.row, job.entry.name, self.advertised(job), "unobtainable", last.id,
                               f"not retried (last tried {ago}; --retry-unobtainable tries now): "
                               f"{errortext.cause(last.error, job.entry.spec())}"))
        return True

    def advertised(self, job: Job) -> str:
        if job.platform is not None:
            return job.platform
        assert self.here is not None
        return self.here.key

    def settle(self, job: Job, result: Result) -> None:
        """Store what one task returned, in one transaction."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            self.done(self._settle(job, result))
        except SQLAlchemyError as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise StoreUnusable(f"storing {job.row} failed: {first[:300]}",
                                hint="runs stored before it are whole; the next survey resumes")

    def _settle(self, job: Job, result: Result) -> FleetOutcome:
        from probes import PROBE_VERSION
        from survey.core import errortext
        from survey.evidence import identity
        from survey.evidence.ingest import find_unchanged, ingest, record_failure, validate

        e = job.entry
        where = self.advertised(job)
        node = result.node

        def outcome(status: str, run_id: int | None, message: str, measured: str | None) -> FleetOutcome:
            if measured is not None and measured != where:
                message += f" [the report measured {measured}; the node advertised {where}]" \
                    if isinstance(result, Probed) else f" [the node measures {measured}; it advertised {where}]"
            return FleetOutcome(job.row, e.name, where, status, run_id, message, node=node.label, measured=measured,
                                node_id=node.node_id)

        if isinstance(result, Failure):
            if not result.recorded:
                return outcome("failed", None, result.message, None)
            platform = self.here if job.platform is None and self.here is not None else platform_from_key(where)
            with self.store.session() as s:
                run_id, new = record_failure(s, e.name, label=e.display_label, kind=e.kind, spec=e.spec(),
                                             position=job.position, error=result.text, platform=platform,
                                             status=result.status, scope="catalog")
            summary = errortext.cause(result.text, e.spec())
            return outcome(result.status, run_id, summary if new else f"{summary} (again; run #{run_id})",
                           node.platform)
        if isinstance(result, Unchanged):
            with self.store.session() as s:
                prior = find_unchanged(s, e.name, result.identity, PROBE_VERSION, node.platform)
                prior_id = prior.id if prior is not None else None
            return outcome("unchanged", prior_id, f"unchanged since run #{prior_id}" if prior_id else "unchanged",
                           node.platform)
        try:
            report, _data, _digest = validate(result.raw)
        except InvalidReport as err:
            return outcome("failed", None, f"the report from {node.label} is not valid: {err.message}", None)
        measured = identity.platform_of(report).key
        env = identity.environment_of(report).identity
        slot = (e.name, measured, env)
        if slot in self.stored_now:
            run_id = self.stored_now[slot]
            return outcome("unchanged", run_id, f"the same environment on {measured} was stored by this survey "
                                                f"as run #{run_id}; not stored again", measured)
        with self.store.session() as s:
            prior = None if self.settings.force else find_unchanged(s, e.name, env, PROBE_VERSION, measured)
            if prior is not None:
                self.stored_now[slot] = prior.id
                return outcome("unchanged", prior.id, f"unchanged since run #{prior.id}", measured)
            self.update(job.row, "storing")
            try:
                res = ingest(s, result.raw, candidate=e.name, label=e.display_label, kind=e.kind, spec=e.spec(),
                             position=job.position, source="fleet", scope="catalog",
                             unless_unchanged=not self.settings.force)
            except InvalidReport as err:
                return outcome("failed", None, f"not stored: {err.message}", measured)
        self.stored_now[slot] = res.run_id
        if res.created:
            return outcome("probed", res.run_id, f"stored (from {node.label})", measured)
        return outcome("unchanged", res.run_id, f"identical report already stored as run #{res.run_id}", measured)


def run_fleet(
    store: Any,
    entries: list[tuple[int, Entry]],
    *,
    settings: Any,
    jobs: int = 2,
    engine: str | None = None,
    pull: str = "missing",
    on_plan: Callable[[list[str]], None] = lambda _rows: None,
    on_update: Callable[[str, str], None] = lambda _r, _m: None,
    on_done: Callable[[FleetOutcome], None] = lambda _o: None,
    warn: Callable[[str], None] = lambda _m: None,
    poll_s: float = 0.5,
    grace_s: float = 5.0,
    watch_s: float = 2.0,
    budget_s: float | None = None,
) -> list[FleetOutcome]:
    """Survey ``entries`` across the connected Ray cluster (see :func:`connected`);
    returns one outcome per (candidate, platform), in the order they ended."""
    import ray
    from ray.exceptions import GetTimeoutError, RayError, RayTaskError, TaskCancelledError

    from survey.evidence import identity

    offered = offered_platforms(warn)
    here = identity.local_platform() if any(e.platforms is None for _, e in entries) else None
    todo, missing = plan(entries, offered, here.key if here else None)
    on_plan([j.row for j in todo] + [o.row for o in missing])
    d = _Driver(store, settings, here, on_update, on_done)
    for o in missing:
        d.done(o)
    todo = [j for j in todo if not d.backed_off(j)]
    if not todo:
        return d.outcomes
    known: dict[str, dict[str, list[str]]] = {}
    if not settings.force:
        with store.session() as s:
            for j in todo:
                if j.entry.name not in known:
                    known[j.entry.name] = stored_identities(s, j.entry.name)

    remote_jobs = [j for j in todo if j.platform is not None]
    local_jobs = [j for j in todo if j.platform is None]
    board: Any = None
    if remote_jobs:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        try:  # next to the driver, where it can be (a Ray Client driver has no node of its own)
            strategy: Any = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        except Exception:
            strategy = "DEFAULT"
        board = ray.remote(Board).options(num_cpus=0, max_restarts=0, scheduling_strategy=strategy).remote()
    task = ray.remote(_remote_probe)
    refs: dict[Any, Job] = {}
    now = time.monotonic()
    for j in remote_jobs:
        assert j.platform is not None
        d.t0[j.row] = now
        on_update(j.row, f"waiting for a node that offers {j.platform}")
        ref = task.options(num_cpus=1, resources={resource_name(j.platform): 1}, max_retries=MAX_RETRIES,
                           retry_exceptions=False, name=f"survey {j.row}"[:200]).remote(
            j.entry, settings, known.get(j.entry.name, {}), engine, pull, j.row, board)
        refs[ref] = j
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="survey-local")
    futs: dict[Future[Result], Job] = {}
    for j in local_jobs:
        d.t0[j.row] = now

        def say(msg: str, row: str = j.row) -> None:
            d.update(row, msg)

        futs[pool.submit(probe_here, j.entry, settings, known.get(j.entry.name, {}), engine=engine, pull=pull,
                         say=say)] = j

    started: dict[str, float] = {}  # row -> when its current attempt started (the board says)
    orphaned: dict[str, float] = {}  # row -> since when no live node offers its platform
    board_ok = board is not None
    taking: Any = None  # the board's answer asked for and not yet read
    asked = 0.0
    last_watch = 0.0

    def cancel(ref: Any) -> None:
        try:
            ray.cancel(ref, force=True)
        except Exception:  # already finished, or its node is gone: nothing more to stop
            pass

    def not_run(ref: Any, job: Job, why: str) -> None:
        refs.pop(ref, None)
        cancel(ref)
        d.done(FleetOutcome(job.row, job.entry.name, d.advertised(job), NOT_RUN, None, why))

    try:
        while refs or futs:
            ready: list[Any] = []
            if refs:
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=poll_s)
                if ready:
                    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
            else:
                futures_wait(list(futs), timeout=poll_s, return_when=FIRST_COMPLETED)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    result = ray.get(ref, timeout=60)
                except GetTimeoutError:
                    d.done(FleetOutcome(job.row, job.entry.name, d.advertised(job), NOT_RUN, None,
                                        "its result could not be fetched within 60 s"))
                    continue
                except TaskCancelledError:
                    d.done(FleetOutcome(job.row, job.entry.name, d.advertised(job), NOT_RUN, None, "cancelled"))
                    continue
                except RayTaskError as e:  # our own code failed on the node: nothing to store
                    first = (str(e.cause if e.cause is not None else e).strip().splitlines() or ["?"])[-1]
                    d.done(FleetOutcome(job.row, job.entry.name, d.advertised(job), "failed", None,
                                        f"the task failed on its node: {first[:300]}"))
                    continue
                except RayError as e:  # the node or worker was lost, retries used up
                    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                    d.done(FleetOutcome(job.row, job.entry.name, d.advertised(job), NOT_RUN, None,
                                        f"its node was lost: {type(e).__name__}: {first[:200]}"))
                    continue
                d.settle(job, result)
            for fut in [f for f in futs if f.done()]:
                job = futs.pop(fut)
                try:
                    local = fut.result()
                except Exception as e:  # as a task's failure on a node: reported, nothing stored
                    first = (str(e).strip().splitlines() or [""])[-1]
                    d.done(FleetOutcome(job.row, job.entry.name, d.advertised(job), "failed", None,
                                        f"the probe failed here: {type(e).__name__}: {first[:300]}"))
                    continue
                d.settle(job, local)
            now = time.monotonic()
            if board_ok and refs:
                # Asked without waiting: an actor whose process is still coming up (a cold, busy
                # machine) answers late, and is slow, not lost. Lost: it failed, or said nothing
                # for BOARD_SILENCE_S.
                notes = []
                if taking is None:
                    taking, asked = board.take.remote(), now
                if ray.wait([taking], timeout=0)[0]:
                    try:
                        notes = ray.get(taking)
                    except Exception:
                        board_ok = False
                    taking = None
                elif now - asked > BOARD_SILENCE_S:
                    board_ok = False
                if not board_ok:
                    warn("lost the progress board; tasks not yet started count as started now")
                    for j in refs.values():
                        started.setdefault(j.row, now)
                for row, _node_id, host, msg in notes:
                    if msg == "started":
                        started[row] = now
                    d.update(row, f"{msg} on {host}")
            if refs and now - last_watch >= watch_s:
                last_watch = now
                alive = offered_platforms()
                for ref, job in list(refs.items()):
                    assert job.platform is not None
                    if job.platform not in alive:
                        since = orphaned.setdefault(job.row, now)
                        if now - since >= grace_s:
                            not_run(ref, job, f"no node offers {job.platform} any more (its node left the "
                                              "cluster); nothing stored")
                        continue
                    orphaned.pop(job.row, None)
                    budget = budget_s if budget_s is not None else task_budget(job.entry, settings)
                    if job.row in started and now - started[job.row] > budget:
                        not_run(ref, job, f"no answer within {budget:.0f} s of starting; cancelled, nothing stored")
    finally:
        for ref in refs:
            cancel(ref)
        pool.shutdown(wait=False, cancel_futures=True)
        if board is not None:
            try:
                ray.kill(board)
            except Exception:
                pass
    return d.outcomes
