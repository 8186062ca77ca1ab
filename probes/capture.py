"""Run the GELU payload under Proton in its own process and harvest the capture."""

import hashlib
import json
import os
import pkgutil
import sys
import zipfile

from . import classify, runner
from . import outcomes as O

ARTIFACT_EMBED_LIMIT = 2 * 1024 * 1024  # bytes of .hatchet kept inside the report


def parse_hatchet(data):
    """Kernel count, total GPU time and top kernel from a Proton tree (.hatchet).

    The tree is ``[root, device_info]``; nodes are ``{"frame": {"name"}, "metrics",
    "children"}``. A kernel is a node carrying ``time (ns)`` with no timed child.
    """
    db = json.loads(data)
    root = db[0] if isinstance(db, list) and db else db
    kernels = {}  # type: dict

    def timed(node):
        return isinstance(node, dict) and "time (ns)" in (node.get("metrics") or {})

    def walk(node):
        children = node.get("children") or []
        if timed(node) and not any(timed(c) or _has_timed_descendant(c) for c in children):
            m = node["metrics"]
            name = (node.get("frame") or {}).get("name", "?")
            k = kernels.setdefault(name, {"count": 0, "time_ns": 0.0})
            k["count"] += int(m.get("count", 0) or 0)
            k["time_ns"] += float(m.get("time (ns)", 0) or 0)
        for c in children:
            walk(c)

    walk(root)
    if not kernels:
        return {"kernel_count": 0, "gpu_time_ns": 0.0, "top_kernel": None, "top_kernel_time_ns": None,
                "kernels": []}
    top = max(kernels.items(), key=lambda kv: kv[1]["time_ns"])
    return {
        "kernel_count": sum(k["count"] for k in kernels.values()),
        "gpu_time_ns": sum(k["time_ns"] for k in kernels.values()),
        "top_kernel": top[0],
        "top_kernel_time_ns": top[1]["time_ns"],
        "kernels": [{"name": n, "count": k["count"], "time_ns": k["time_ns"]} for n, k in sorted(kernels.items())],
    }


def _has_timed_descendant(node):
    for c in node.get("children") or []:
        if "time (ns)" in (c.get("metrics") or {}) or _has_timed_descendant(c):
            return True
    return False


def harvest(path):
    """The artifact at ``path``: size, hash, parsed metrics, and the bytes if small."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        data = f.read()
    art = {
        "file": os.path.basename(path),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "kept": len(data) <= ARTIFACT_EMBED_LIMIT,
        "content": data.decode("utf-8", "backslashreplace") if len(data) <= ARTIFACT_EMBED_LIMIT else None,
    }
    try:
        art["metrics"] = parse_hatchet(data.decode("utf-8", "replace"))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        art["metrics"] = None
        art["parse_error"] = "%s: %s" % (type(e).__name__, e)
    return art


def run_capture(probe, backend, mode, env_kind="clean"):
    d = probe._next("capture")
    name = os.path.join(d, "gelu")
    result_path = os.path.join(d, "gelu-result.json")
    # A real file, not a zip member: @triton.jit reads the kernel's source.
    script = os.path.join(d, "gelu.py")
    with open(script, "wb") as f:
        f.write(pkgutil.get_data("probes", "gelu.py") or b"")
    argv = [sys.executable, script, "--size", str(probe.opts.capture_size),
            "--iters", str(probe.opts.capture_iters), "--name", name, "--result", result_path]
    if backend is not None:
        argv += ["--backend", backend]
    if mode is not None:
        argv += ["--backend-mode", mode]
    env = probe.clean_env() if env_kind == "clean" else dict(probe.environ)
    # The payload classifies Proton's errors with probes/classify.py: the bundle
    # (the zip this probe runs from, or the source tree) goes on its path.
    root = probe.bundle if zipfile.is_zipfile(probe.bundle) else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = runner.run(argv, env, probe.opts.capture_timeout, cwd=d, counter=probe.counter)
    try:
        with open(result_path) as f:
            res = json.load(f)
    except (OSError, ValueError):
        res = {}
    artifact = harvest(name + ".hatchet")
    if artifact is not None and probe.opts.keep_artifacts_dir:
        os.makedirs(probe.opts.keep_artifacts_dir, exist_ok=True)
        dest = os.path.join(probe.opts.keep_artifacts_dir, "gelu-%s-%s.hatchet" % (backend, mode or "default"))
        with open(dest, "wb") as f, open(name + ".hatchet", "rb") as src:
            f.write(src.read())
        artifact["saved_to"] = dest
    code = proc["exit_code"]
    if proc["timed_out"]:
        if res.get("phase") in ("finalized", "done") and artifact is not None:
            outcome = O.HANG_AFTER_CAPTURE
        else:
            outcome = O.TIMEOUT
    elif code is not None and code < 0:
        outcome = O.CRASH
    elif code == 0 and res.get("outcome") == "ok":
        if backend is None:
            outcome = O.OK  # no capture was asked for: the kernel ran and passed
        elif artifact is None or artifact.get("metrics") is None:
            outcome = O.ERROR  # the payload passed but left no readable capture
            res.setdefault("message", "the payload passed but Proton left no readable .hatchet (%s)" % (
                (artifact or {}).get("parse_error") or "no file"))
        elif artifact["metrics"]["kernel_count"] == 0:
            outcome = O.EMPTY_CAPTURE
            res.setdefault("message", "the payload passed and Proton wrote %s, but it records no kernel" % (
                artifact["file"]))
        else:
            outcome = O.OK
    elif code == 1 and res.get("outcome") == "self_check_failed":
        outcome = O.SELF_CHECK_FAILED
    elif code == 2 and res.get("outcome") in O.OUTCOMES:
        outcome = res["outcome"]
    else:
        outcome = O.ERROR  # a traceback: kept raw below
    metrics = (artifact or {}).get("metrics") or {}
    return {
        "backend": backend,
        "mode": mode,
        "env": env_kind,
        "argv": argv,
        "outcome": outcome,
        "exit_code": code,
        "signal": classify.signal_name(-code) if code is not None and code < 0 else None,
        "message": res.get("message") or _last_error_line(proc["stderr_tail"]),
        "fix": res.get("fix"),
        "max_abs_err": res.get("max_abs_err"),
        "loop_s": res.get("loop_s"),
        "size": probe.opts.capture_size,
        "iters": probe.opts.capture_iters,
        "device": res.get("device"),
        "duration_s": proc["duration_s"],
        "timed_out": proc["timed_out"],
        "stdout_tail": proc["stdout_tail"],
        "stderr_tail": proc["stderr_tail"],
        "artifact": artifact,
        "kernel_count": metrics.get("kernel_count"),
        "gpu_time_ns": metrics.get("gpu_time_ns"),
        "top_kernel": metrics.get("top_kernel"),
        "top_kernel_time_ns": metrics.get("top_kernel_time_ns"),
    }


def _last_error_line(text):
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else None
