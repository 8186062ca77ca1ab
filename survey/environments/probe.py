"""Ship the probe into a target interpreter on stdin and collect its report.

The same path serves an interpreter on this host, a fresh venv and a container
(the launcher supplies the command prefix: ``[python]`` or
``[podman, run, --rm, -i, ..., image, python3]``).

The probe answers with one typed JSON result (``probes/cli.py``): a report, what
``resolve`` found, or an error of a known kind, which :func:`read_result` maps to
our typed errors (``survey.core.errors``): ``unsupported_python`` is
:class:`NotAPython`, ``missing_triton`` is a report of an environment without
Triton (evidence, stored like any other), anything else :class:`ProbeFailed`. A
probe that printed no result (it hung, was killed, died) is :class:`ProbeFailed`
with its stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes import bundle as probe_bundle
from probes import cli as probe_cli
from probes import lifeline, runner
from probes import stubs as probe_stubs
from survey.core import paths as cache
from survey.core.errors import NotAPython, ProbeFailed

BOOTSTRAP = probe_cli.BOOTSTRAP


@dataclass
class BundleOutput:
    exit_code: int | None
    stdout: bytes
    stderr: str
    timed_out: bool
    duration_s: float


_bundle_lock = threading.Lock()
_bundle_cache: dict[str, bytes] = {}


def prebuilt_stubs() -> Path | None:
    """Stub libraries compiled once on this host (for this host's architecture),
    cached by the hash of their sources. None when there is no compiler here."""
    src = Path(probe_bundle.package_dir()) / "stubs"
    h = hashlib.sha256()
    for name in probe_stubs.SOURCES:
        h.update((src / name).read_bytes())
    out = cache.root() / "stubs" / h.hexdigest()[:16]
    if all((out / s).exists() for s, _ in probe_stubs.STUBS):
        return out
    cc = probe_stubs.find_compiler(dict(os.environ))
    if cc is None:
        return None
    tmp = Path(tempfile.mkdtemp(prefix="stubs-", dir=cache.root()))
    built, _errors = probe_stubs.compile_stubs(str(src), str(tmp), cc)
    if len(built) != len(probe_stubs.STUBS):
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, out)
    except OSError:  # another process won the race
        pass
    return out if out.exists() else None


def bundle_bytes(with_stubs: bool = True) -> bytes:
    key = "stubs" if with_stubs else "plain"
    with _bundle_lock:
        if key not in _bundle_cache:
            pre = prebuilt_stubs() if with_stubs else None
            _bundle_cache[key] = probe_bundle.build(str(pre) if pre else None)
        return _bundle_cache[key]


_running_lock = threading.Lock()
_running: set[int] = set()  # the process groups of the probes running now


STOP_WAIT_S = 30.0  # the longest stop_all waits for what it killed to be gone


def _state(pid: int) -> bytes | None:
    """The process's state letter (``R``, ``S``, ``T`` stopped, ``Z`` zombie, ...); None when
    it is gone, or when there is no /proc to ask."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Is ``pid`` still running (a zombie is not: it only waits to be reaped)?"""
    if os.path.isdir("/proc"):
        return _state(pid) not in (None, b"Z", b"X")
    try:  # no /proc here: the signal's answer
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def _signal(pid: int, sig: int) -> None:
    """``sig`` to the process and to its group (a check leads a session of its own)."""
    for send in (os.killpg, os.kill):
        try:
            send(pid, sig)
        except OSError:
            pass


def _until(done: Callable[[], bool]) -> None:
    waited = threading.Event()
    for _ in range(int(STOP_WAIT_S / 0.01)):
        if done():
            return
        waited.wait(0.01)


def stop_all() -> None:
    """Kill every probe running now, with the checks it started (``survey run``
    interrupted), and return once they are gone: their callers then see a killed probe,
    and nothing of theirs outlives the command.

    A probe starts checks while others run, each in a session of its own: listing what
    runs below it and then killing it would miss a check forked in between, which init
    then adopts, outside every group killed. So each process is stopped first (SIGSTOP),
    and what runs below the stopped ones listed again until nothing new turns up; then
    all of them are killed. (SIGSTOP and SIGKILL are delivered, not obeyed on the spot: a
    loaded machine acts on them when it next runs the process, so each step waits for it.)"""
    with _running_lock:
        groups = list(_running)
    found: list[int] = []
    for pgid in groups:
        _signal(pgid, signal.SIGSTOP)
        found.append(pgid)
    while True:
        _until(lambda: all(_state(pid) not in (b"R", b"S", b"D") for pid in found))  # stopped, or gone
        new = [pid for pgid in groups for pid in lifeline.descendants(pgid) if pid not in found]
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
            found.append(pid)
    for pid in found:
        _signal(pid, signal.SIGKILL)
    _until(lambda: not any(_alive(pid) for pid in found))


def run_bundle(
    prefix: Sequence[str],
    args: Sequence[str],
    timeout: float,
    *,
    env: dict[str, str] | None = None,
    on_timeout: Callable[[], None] | None = None,
    with_stubs: bool = True,
) -> BundleOutput:
    """Run ``prefix -c BOOTSTRAP <args>`` with the bundle on stdin."""

    argv = [*prefix, "-c", BOOTSTRAP, *args]
    started: list[int] = []

    def on_start(pid: int) -> None:
        started.append(pid)
        with _running_lock:
            _running.add(pid)

    try:
        res = runner.run(argv, env, timeout, stdin_data=bundle_bytes(with_stubs), on_timeout=on_timeout,
                         keep_stdout=True, on_start=on_start)
    finally:
        with _running_lock:
            _running.difference_update(started)
    if res.get("spawn_error"):
        raise NotAPython(f"cannot run {prefix[0]}: {res['spawn_error'].split(': ', 1)[-1]}")
    return BundleOutput(res["exit_code"], res["stdout"], res["stderr"], res["timed_out"], res["duration_s"])


def _tail(text: str, n: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def probe_args(
    timeout: float,
    captures: Sequence[str] = (),
    auto_capture: bool = True,
    only: Sequence[str] = (),
    jobs: int | None = None,
    stubs: bool = True,
    capture_size: int | None = None,
    capture_iters: int | None = None,
    repeats: int | None = None,
) -> list[str]:
    args = ["probe", "--timeout", str(timeout), "--exit-with-parent"]
    if repeats is not None:
        args += ["--repeats", str(repeats)]
    for c in captures:
        args += ["--capture", c]
    if not auto_capture:
        args.append("--no-auto-capture")
    for o in only:
        args += ["--only", o]
    if jobs:
        args += ["--jobs", str(jobs)]
    if not stubs:
        args.append("--no-stubs")
    if capture_size:
        args += ["--capture-size", str(capture_size)]
    if capture_iters:
        args += ["--capture-iters", str(capture_iters)]
    return args


def overall_timeout(check_timeout: float) -> float:
    """The whole probe: generous (checks run in parallel, captures compile kernels)."""
    return max(120.0, check_timeout * 8 + 600)


RESULTS = ("report", "resolved", "error")
MISSING_TRITON, UNSUPPORTED_PYTHON = "missing_triton", "unsupported_python"


def read_result(out: BundleOutput, what: str) -> dict[str, Any]:
    """The probe's typed result (``{"result": "report" | "resolved", ...}``, or a
    ``missing_triton`` error, which carries its report). Raises the typed error
    of any other error, and :class:`ProbeFailed` when the probe printed no result."""
    tail = _tail(out.stderr) or None
    if out.timed_out:
        raise ProbeFailed(f"the probe in {what} did not finish within its overall timeout and was killed", hint=tail)
    code = out.exit_code
    if code is not None and code < 0:
        raise ProbeFailed(f"the probe in {what} was killed by {signal.Signals(-code).name}", hint=tail)
    try:
        doc = json.loads(out.stdout)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("result") not in RESULTS:
        said = "printed no result" if not out.stdout.strip() else "printed something that is not its result"
        raise ProbeFailed(f"the probe in {what} exited with code {code} and {said}", hint=tail)
    if doc["result"] != "error" or doc.get("kind") == MISSING_TRITON:
        return doc
    kind, message = str(doc.get("kind")), str(doc.get("message") or "")
    if kind == UNSUPPORTED_PYTHON:
        raise NotAPython(f"{what}: {message}")
    raise ProbeFailed(f"the probe in {what} failed ({kind}): {message}",
                      hint="\n".join(str(x) for x in doc.get("traceback") or []) or tail)


def collect_report(out: BundleOutput, what: str) -> tuple[bytes, bool]:
    """The report bytes, and whether Triton was found. Raises for everything else."""
    doc = read_result(out, what)
    report = doc.get("report")
    if not isinstance(report, dict) or "schema_version" not in report:
        raise ProbeFailed(f"the probe in {what} answered {doc['result']!r} without a probe report")
    raw = (json.dumps(report, indent=1, ensure_ascii=True) + "\n").encode()  # as the probe wrote it
    return raw, doc["result"] == "report"


def resolved_of(out: BundleOutput, what: str) -> dict[str, Any]:
    """What the probe's ``resolve`` found (the distributions installed, the Python)."""
    doc = read_result(out, what)
    found = doc.get("resolved")
    if doc["result"] != "resolved" or not isinstance(found, dict):
        raise ProbeFailed(f"the probe in {what} answered {doc['result']!r}, not what it found installed")
    return found
