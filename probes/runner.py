"""Run one child process: its own process group, a timeout, bounded output.

Output goes to files, not pipes, so a child that forks a lingering grandchild
cannot block us; the whole process group is killed at the timeout and again on
exit, so nothing outlives its check. Output is decoded with backslash escapes,
so bytes that are not UTF-8 are kept visible and the report stays valid JSON.
"""

import os
import signal
import subprocess
import tempfile
import threading
import time

TAIL_LINES = 20
TAIL_BYTES = 4000

LIVE = set()  # type: set[int]  # the process groups of the children running now (probes/lifeline.py stops them)


def decode(data):
    text = data.decode("utf-8", "backslashreplace")
    return text.replace("\x00", "\\x00")


def tail(data, lines=TAIL_LINES, limit=TAIL_BYTES):
    text = decode(data)
    rows = text.splitlines()[-lines:]
    out = "\n".join(rows)
    return out[-limit:]


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _read_tail(f, limit=TAIL_BYTES * 4):
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - limit))
    return f.read(), size


def _feed(pipe, data):
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        try:
            pipe.close()
        except (BrokenPipeError, OSError, ValueError):
            pass


class Counter(object):
    """Counts the interpreters a probe run starts (reported, and benchmarked)."""

    def __init__(self):
        self.n = 0

    def add(self):
        self.n += 1


def run(argv, env, timeout, cwd=None, counter=None, stdin_data=None, on_timeout=None, keep_stdout=False,
        on_start=None):
    """Run ``argv``; returns a dict with exit code, timing and output tails
    (and all of stdout as bytes under ``stdout`` with ``keep_stdout``).

    ``on_timeout`` is called (before the kill) when the timeout is reached, so a
    caller can harvest what the child left behind. ``on_start`` is called with the
    child's pid (the id of its process group) once it runs.
    """
    with tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        t0 = time.time()
        if counter is not None:
            counter.add()
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                stdout=fout,
                stderr=ferr,
                start_new_session=True,
            )
        except OSError as e:
            return {
                "argv": list(argv),
                "exit_code": None,
                "timed_out": False,
                "duration_s": 0.0,
                "stdout_tail": "",
                "stderr_tail": "",
                "spawn_error": "%s: %s" % (type(e).__name__, e),
            }
        timed_out = False
        feeder = None
        LIVE.add(proc.pid)
        if on_start is not None:
            on_start(proc.pid)
        try:
            if stdin_data is not None and proc.stdin is not None:
                # From a thread: a child that never reads its stdin (more than a pipe
                # holds) must not keep us from its timeout.
                feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin_data), daemon=True)
                feeder.start()
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            if on_timeout is not None:
                try:
                    on_timeout()
                except Exception:
                    pass
            _kill_group(proc.pid)
            proc.wait()
        finally:
            # Reap anything the child left in its group.
            _kill_group(proc.pid)
            LIVE.discard(proc.pid)
            if feeder is not None:
                feeder.join(5)  # the group is gone: the write fails at once
        duration = time.time() - t0
        out, out_size = _read_tail(fout)
        err, err_size = _read_tail(ferr)
        if keep_stdout:
            fout.seek(0)
            full = fout.read()
    res = {
        "argv": list(argv),
        "exit_code": proc.returncode,
        "timed_out": timed_out,
        "duration_s": round(duration, 4),
        "stdout_tail": tail(out),
        "stderr_tail": tail(err),
        "stdout_bytes": out_size,
        "stderr_bytes": err_size,
        "stderr_recent": decode(err),  # the last TAIL_BYTES*4 bytes, for what came before the tail
    }
    if keep_stdout:
        res["stdout"] = full
        res["stderr"] = decode(err)
    return res
