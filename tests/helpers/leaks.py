"""What a test leaves behind in its process, for the flake hunt (``tests/run.sh --flake-hunt``
loads this plugin: ``-p tests.helpers.leaks``).

A test that changes its process - an environment variable left set, a directory changed to,
``sys.path`` or ``sys.modules`` patched (a module set to None), a signal handler or an ignored
signal, the umask, a thread still running - changes every test that runs after it in the same
xdist worker, and which tests those are depends on the seed. After each test this compares
the process with what it was before the test, and at the end of the run names each test that
changed it and how. It fails nothing by itself (a library may change its process the first
time it is imported, as Ray does): each line is a place to look."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

RUN_DIR = "PROTON_SURVEY_TEST_RUN"
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE, signal.SIGALRM)


def _ignored_and_blocked() -> dict[str, str]:
    """The process's ignored signals and this thread's blocked ones (children inherit both)."""
    out = {}
    for path, keys in ((Path("/proc/self/status"), ("SigIgn",)),
                       (Path(f"/proc/self/task/{threading.get_native_id()}/status"), ("SigBlk",))):
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(":")
                if key in keys:
                    out[key] = value.strip()
        except OSError:
            pass
    return out


def state() -> dict[str, Any]:
    umask = os.umask(0o022)
    os.umask(umask)
    return {
        "environment": {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
        "cwd": os.getcwd(),
        "sys.path": list(sys.path),
        "modules set to None": sorted(k for k, v in sys.modules.items() if v is None),
        "signal handlers": {signal.Signals(s).name: repr(signal.getsignal(s)) for s in SIGNALS},
        "signals ignored, blocked": _ignored_and_blocked(),
        "umask": oct(umask),
        "threads (not daemons)": sorted(t.name for t in threading.enumerate() if not t.daemon),
    }


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = []
    for key, now in after.items():
        was = before.get(key)
        if now == was:
            continue
        if isinstance(now, dict) and isinstance(was, dict):
            diff = {k: (was.get(k), now.get(k)) for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)}
            out.append(f"{key}: " + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in diff.items()))
        else:
            out.append(f"{key}: {was!r} -> {now!r}")
    return out


def _record(line: str) -> None:
    run = os.environ.get(RUN_DIR)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if run:
        with open(Path(run) / f"leaks-{worker}.txt", "a", encoding="utf-8") as f:
            f.write(line + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    before = state()
    yield
    for change in changes(before, state()):
        _record(f"{item.nodeid}: {change}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    run = os.environ.get(RUN_DIR)
    if not run:
        return
    lines = sorted({ln for p in Path(run).glob("leaks-*.txt") for ln in p.read_text(encoding="utf-8").splitlines()})
    terminalreporter.section("what tests left behind in their process (tests/helpers/leaks.py)")
    for line in lines or ["nothing"]:
        terminalreporter.write_line(line)
