"""A fork server for the ``proton.start`` checks (and the inspect worker).

Importing ``triton.profiler`` is most of what a check costs, and every clean
check would do the same import under the same environment. The zygote does it
once, then forks one child per check: each check still runs in a process of its
own, in its own session and process group, with its own environment, files and
timeout - it just does not pay for the import again.

It only forks while it is single-threaded (a library that started threads at
import makes fork unsafe); otherwise it says so and the orchestrator falls back
to one fresh interpreter per check. A child never runs under an environment
its zygote was not started with: the loader reads LD_LIBRARY_PATH (and
LD_PRELOAD) when a process starts, not after a fork. So the stub reruns fork
from zygotes of their own, each started with the rerun's whole environment, and
inherited-environment checks (an inherited LD_PRELOAD) are never forked.
"""

import json
import os
import select
import sys
import threading
import time

# What a fresh ``worker`` interpreter has imported before Triton (the worker
# itself, standard library only), imported here so no child compiles it again.
from . import worker  # noqa: F401


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _status(ws):
    if os.WIFSIGNALED(ws):
        return -os.WTERMSIG(ws)
    if os.WIFEXITED(ws):
        return os.WEXITSTATUS(ws)
    return None


def serve(req_fd, resp_fd):
    """Runs in the zygote process: import, then fork one child per request."""
    resp = os.fdopen(resp_fd, "w", buffering=1)

    def send(msg):
        resp.write(json.dumps(msg) + "\n")
        resp.flush()

    t0 = time.time()
    try:
        # Proton before anything that may initialise a GPU runtime (worker.py).
        import triton.profiler  # noqa: F401
    except BaseException as e:
        send({"ready": False, "error": "%s: %s" % (type(e).__name__, e)})
        return 1
    n = _threads()
    if n != 1:
        send({"ready": False, "error": "the process has %d threads after importing triton.profiler; "
                                        "forking it would not be safe" % n})
        return 1
    send({"ready": True, "import_s": round(time.time() - t0, 4)})

    children = {}  # type: dict
    buf = b""
    eof = False
    while not eof or children:
        if not eof:
            r, _, _ = select.select([req_fd], [], [], 0.005)
            if r:
                chunk = os.read(req_fd, 65536)
                if not chunk:
                    eof = True
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    req = json.loads(line.decode("utf-8"))
                    pid = _fork_check(req, req_fd, resp_fd)
                    children[pid] = req["id"]
                    send({"id": req["id"], "pid": pid})
        else:
            time.sleep(0.005)
        while children:
            try:
                pid, ws = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            rid = children.pop(pid, None)
            if rid is not None:
                send({"id": rid, "exit_code": _status(ws)})
    return 0


def _fork_check(req, req_fd, resp_fd):
    pid = os.fork()
    if pid:
        return pid
    # ---- child: becomes the check's own process
    code = 0
    try:
        os.setsid()
        os.close(req_fd)
        os.close(resp_fd)
        d = req["dir"]
        os.chdir(d)
        out = os.open(os.path.join(d, "stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(os.path.join(d, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # The zygote was started with this very environment (see the module's
        # docstring): left where exec put it. Rewriting it (clear + update) would
        # move its strings to the heap, and a check whose outcome depends on the
        # process's memory (undefined behaviour: 3.7.x's periodic_flushing, which
        # crashes in a fresh interpreter) would measure something else.
        if os.environ != req["env"]:
            os.environ.clear()
            os.environ.update(req["env"])
        from . import worker

        with open(req["args"]) as f:
            args = json.load(f)
        res = worker.Results(args["result"])
        if req.get("kind") == "inspect":
            worker.inspect(args, res)
        else:
            worker.start(args, res)
        res.emit({"done": True})
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    _exit_like_a_process(code)


def _exit_like_a_process(code):
    """Leave the way a process does - Python's atexit handlers, then the C
    library's exit (its atexit list, static destructors) - without unwinding into
    the zygote's frames. A check that hangs or crashes on the way out is part of
    what we measure."""
    import atexit

    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    try:
        import ctypes

        ctypes.CDLL(None).exit(code)
    finally:
        os._exit(code)


def main(argv):
    rc = serve(int(argv[0]), int(argv[1]))
    # Every check has been reaped and reported: nothing of the zygote's own
    # teardown (Triton's atexit handlers, module finalisation) is measured, so
    # it leaves without it.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(rc)
