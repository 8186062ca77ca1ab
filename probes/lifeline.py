"""The probe ends with the process that started it.

`survey run` starts the probe in a session of its own and reads its report from a file,
so a host killed outright (SIGKILL, the OOM killer: no handler runs) would leave the
probe and its checks running to their timeouts. With ``--exit-with-parent`` the probe
watches its parent: once it is gone (the probe was handed to another process), the
probe kills every process it started, each check's process group included, and exits.
Off by default: a probe run by hand (`nohup ... &`) must outlive its shell.
"""

import os
import signal
import sys
import threading
import time

from . import runner

INTERVAL_S = 0.2
EXIT_ORPHANED = 75  # EX_TEMPFAIL: nobody is left to read the report


def _children_of():
    """pid -> its children, from /proc (empty where there is no /proc)."""
    kids = {}  # type: dict[int, list[int]]
    try:
        entries = os.listdir("/proc")
    except OSError:
        return kids
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        try:
            ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        except (IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(pid):
    """Every process below ``pid`` (Linux /proc; none elsewhere), whatever session each is
    in: a check's own process group does not hold what it started in another."""
    kids = _children_of()
    out, todo = [], [pid]
    while todo:
        below = kids.get(todo.pop(), [])
        out += below
        todo += below
    return out


def stop_everything():
    """Kill every process this one started: its descendants, and each check's group
    (where a check's own children may have been handed to init)."""
    for pid in descendants(os.getpid()):
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for pgid in list(runner.LIVE):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


def _watch(parent):
    while True:
        time.sleep(INTERVAL_S)
        if os.getppid() != parent:
            stop_everything()
            try:
                sys.stderr.write("proton-survey probe: the process that started it is gone; stopped\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os._exit(EXIT_ORPHANED)


def watch_parent():
    """Start watching (a daemon thread). A probe whose parent is already init (it was
    started that way) has nobody to outlive: nothing is watched."""
    parent = os.getppid()
    if parent <= 1:
        return None
    t = threading.Thread(target=_watch, args=(parent,), name="lifeline", daemon=True)
    t.start()
    return t
