"""Run the GELU payload under Proton in its own process and harvest the capture.

What a capture *recorded* is read from the profile Proton wrote, in the format it
writes (``records.RECORDED``):

- a tree (``data="tree"``, ``<name>.hatchet``): JSON ``[root, device_info]``, nodes
  ``{"frame": {"name"}, "metrics", "children"}``. The tracing backends put one node
  per kernel carrying ``time (ns)`` and ``count`` (KernelMetric), PC sampling adds
  ``num_samples`` and the stall reasons (PCSamplingMetric); the instrumentation
  backend puts, under the kernel's node, one node per ``proton.language`` scope
  carrying ``cycles`` and ``normalized_cycles`` (CycleMetric). The metric names are
  Triton's: third_party/proton/csrc/include/Data/Metric.h (``VALUE_NAMES``), written
  by TreeData.cpp ``buildHatchetJson``.
- a trace (``data="trace"``, ``<name>.chrome_trace``): Chrome traces,
  ``{"displayTimeUnit", "traceEvents": [...]}``, one JSON object per line (one per
  stream: TraceData.cpp ``dumpKernelMetricTrace``). A tracing backend writes one
  complete event per kernel launch, ``cat`` "kernel"; instrumentation writes one
  event per scope record per warp, named by the scope, ``cat`` the kernel's name,
  ``dur`` in cycles over ``args["Frequency (MHz)"]`` (TraceWriter.cpp
  ``StreamChromeTraceWriter::writeKernel``).

A capture is ``empty_capture`` only when the payload ran what the backend measures
and the profile records none of it: kernels for the tracing backends, scopes for
instrumentation. Where the payload could not give the backend what it measures (a
build without ``triton.profiler.language``), the capture is ``error`` with the
payload's raw reason, not "empty".
"""

import hashlib
import json
import os
import pkgutil
import re
import sys
import zipfile

from . import classify, records, runner
from . import outcomes as O

ARTIFACT_EMBED_LIMIT = 2 * 1024 * 1024  # bytes of the profile kept inside the report
PROFILE_STEM = "profile"  # the session name: Proton adds the format's suffix
# Metric.h CycleMetric VALUE_NAMES (those TreeData.cpp writes into a tree: cycles,
# normalized_cycles; the others where a build writes them).
CYCLE_METRICS = ("cycles", "normalized_cycles", "start_cycle", "end_cycle")
PC_SAMPLES = "num_samples"  # Metric.h PCSamplingMetric
KERNEL_TIME = "time (ns)"  # Metric.h KernelMetric
FORMATS = ((".hatchet", "hatchet"), (".chrome_trace", "chrome_trace"))


def parse_hatchet(data):
    """Kernel count, total GPU time and top kernel from a Proton tree (.hatchet).

    The tree is ``[root, device_info]``; nodes are ``{"frame": {"name"}, "metrics",
    "children"}``. A kernel is a node carrying ``time (ns)`` with no timed child.
    """
    db = json.loads(data)
    root = db[0] if isinstance(db, list) and db else db
    kernels = {}  # type: dict

    def timed(node):
        return isinstance(node, dict) and KERNEL_TIME in (node.get("metrics") or {})

    def walk(node):
        children = node.get("children") or []
        if timed(node) and not any(timed(c) or _has_timed_descendant(c) for c in children):
            m = node["metrics"]
            name = (node.get("frame") or {}).get("name", "?")
            k = kernels.setdefault(name, {"count": 0, "time_ns": 0.0})
            k["count"] += int(m.get("count", 0) or 0)
            k["time_ns"] += float(m.get(KERNEL_TIME, 0) or 0)
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
        if KERNEL_TIME in (c.get("metrics") or {}) or _has_timed_descendant(c):
            return True
    return False


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def recorded_in_tree(db, files=None, fmt="hatchet"):
    """What a Proton tree records (records.RECORDED): its kernels, launches, scopes
    with cycle metrics, PC samples, and every metric name on a node below the root."""
    root = db[0] if isinstance(db, list) and db else db
    if not isinstance(root, dict):
        raise ValueError("a Proton tree is [root, device_info]; the root is %s" % type(root).__name__)
    legacy = parse_hatchet(json.dumps(db))
    scopes = []
    names = set()  # type: set
    cycle_names = set()
    samples = None
    nodes = 0

    def walk(node, parent):
        nonlocal samples, nodes
        if not isinstance(node, dict):
            return
        metrics = node.get("metrics") or {}
        name = (node.get("frame") or {}).get("name", "?")
        if parent is not None and metrics:
            nodes += 1
            names.update(str(k) for k in metrics)
            found = [k for k in CYCLE_METRICS if k in metrics]
            if found:
                cycle_names.update(found)
                scopes.append({"kernel": parent, "name": name, "cycles": _number(metrics.get("cycles")),
                               "normalized_cycles": _number(metrics.get("normalized_cycles"))})
            if PC_SAMPLES in metrics:
                samples = (samples or 0) + int(_number(metrics[PC_SAMPLES]) or 0)
        for child in node.get("children") or []:
            walk(child, name)

    walk(root, None)
    return records.make(
        "recorded", format=fmt, files=files or [], kernels=[k["name"] for k in legacy["kernels"]],
        launches=legacy["kernel_count"], scopes=scopes, cycle_metrics=sorted(cycle_names), pc_samples=samples,
        trace_events=None, metric_names=sorted(names), nodes=nodes, parse_error=None)


TRACE_FREQUENCY = "Frequency (MHz)"  # TraceWriter.cpp: on every instrumentation (cycle) event


def load_trace(text):
    """The events of a Chrome trace file: one JSON object, or one per line."""
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = [json.loads(line) for line in text.splitlines() if line.strip()]
    events = []  # type: list
    for doc in docs:
        got = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if not isinstance(got, list):
            raise ValueError("a Chrome trace holds a traceEvents list")
        events.extend(got)
    return events


def recorded_in_trace(events, files=None):
    """What a Chrome trace records: kernel launches (events of cat "kernel") and
    instrumentation scopes (events carrying a frequency: cycles = dur x MHz,
    summed per kernel and scope)."""
    if isinstance(events, dict):
        events = events.get("traceEvents")
    if not isinstance(events, list):
        raise ValueError("a Chrome trace holds a traceEvents list")
    kernels = set()  # type: set
    launches = 0
    scopes = {}  # type: dict
    metric_names = set()  # type: set
    nodes = 0
    for e in events:
        if not isinstance(e, dict):
            continue
        args = e.get("args") or {}
        metric_names.update(str(k) for k in args)
        if "dur" not in e:
            continue
        nodes += 1
        if TRACE_FREQUENCY in args:
            key = (str(e.get("cat", "?")), str(e.get("name", "?")))
            cycles = (_number(e.get("dur")) or 0.0) * (_number(args.get(TRACE_FREQUENCY)) or 0.0)
            scopes[key] = scopes.get(key, 0.0) + cycles
        elif e.get("cat") == "kernel":
            kernels.add(str(e.get("name", "?")))
            launches += 1
    return records.make(
        "recorded", format="chrome_trace", files=files or [], kernels=sorted(kernels), launches=launches,
        scopes=[{"kernel": k, "name": n, "cycles": c, "normalized_cycles": None}
                for (k, n), c in sorted(scopes.items())],
        cycle_metrics=["cycles"] if scopes else [], pc_samples=None, trace_events=len(events),
        metric_names=sorted(metric_names), nodes=nodes, parse_error=None)


def nothing_recorded(files, fmt, why):
    return records.make("recorded", format=fmt, files=files, kernels=[], launches=None, scopes=[],
                        cycle_metrics=[], pc_samples=None, trace_events=None, metric_names=[], nodes=0,
                        parse_error=why)


def profile_files(stem):
    """The files a session named ``stem`` left: ``stem`` plus any suffix."""
    d, base = os.path.split(stem)
    try:
        names = sorted(n for n in os.listdir(d or ".") if n.startswith(base + "."))
    except OSError:
        return []
    return [os.path.join(d, n) for n in names]


def harvest(stem):
    """The profile a session named ``stem`` wrote: size, hash, parsed metrics and what
    it recorded, the bytes if small; None when Proton wrote nothing."""
    paths = profile_files(stem)
    if not paths:
        return None
    files = [{"name": os.path.basename(p), "bytes": os.path.getsize(p)} for p in paths]
    path, fmt = paths[0], None
    for suffix, name in FORMATS:
        hit = [p for p in paths if p.endswith(suffix)]
        if hit:
            path, fmt = hit[0], name
            break
    with open(path, "rb") as f:
        data = f.read()
    art = {
        "file": os.path.basename(path),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "kept": len(data) <= ARTIFACT_EMBED_LIMIT,
        "content": data.decode("utf-8", "backslashreplace") if len(data) <= ARTIFACT_EMBED_LIMIT else None,
        "path": path,
    }
    text = data.decode("utf-8", "replace")
    del data
    try:
        if fmt == "chrome_trace":
            art["metrics"] = None
            art["recorded"] = recorded_in_trace(load_trace(text), files)
        else:
            art["metrics"] = parse_hatchet(text)
            art["recorded"] = recorded_in_tree(json.loads(text), files, fmt or "unknown")
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        art["metrics"] = None
        art["parse_error"] = "%s: %s" % (type(e).__name__, e)
        art["recorded"] = nothing_recorded(files, fmt, art["parse_error"])
    return art


def _payload_script(d):
    # A real file, not a zip member: @triton.jit reads the kernel's source.
    script = os.path.join(d, "gelu.py")
    with open(script, "wb") as f:
        f.write(pkgutil.get_data("probes", "gelu.py") or b"")
    return script


def expected_records(backend, kernel, asked=None):
    """What the profile should record, given the kernel the payload ran ("scoped",
    "mixed", "plain", or None when it reported nothing) and the one it was asked
    for: scopes for the scoped kernel (alone or beside the plain one), kernels for
    the plain one, None where the payload could not give the instrumentation
    backend the scoped kernel it was to run (nothing it measures was run). The
    plain kernel asked for under instrumentation expects its kernel: whatever the
    profile records of it counts (run_capture), nothing recorded is said."""
    if kernel is None:
        kernel = "scoped" if backend == "instrumentation" else "plain"
    if kernel in ("scoped", "mixed"):
        return "scopes"
    if backend == "instrumentation" and asked != "plain":
        return None
    return "kernels"


def run_capture(probe, backend, mode, env_kind="clean", context=None, data=None, attach="start", iters=None,
                kernel=None):
    """One capture in a process of its own: the payload starting the session itself
    (``attach="start"``: proton.start(backend, mode, context, data)), or run under
    Proton's command line (``attach="cli"``: python -m triton.profiler.proton -b
    backend [--mode mode] [--context] [--data] gelu.py), as aorta's ``mode: cli``
    launches a script."""
    d = probe._next("capture")
    stem = os.path.join(d, PROFILE_STEM)
    result_path = os.path.join(d, "gelu-result.json")
    script = _payload_script(d)
    iters = probe.opts.capture_iters if iters is None else iters
    payload = [script, "--size", str(probe.opts.capture_size), "--iters", str(iters), "--result", result_path]
    if attach == "cli":
        argv = [sys.executable, "-m", "triton.profiler.proton", "-n", stem]
        if backend is not None:
            argv += ["-b", backend]
        if mode is not None:
            argv += ["--mode", mode]
        if context is not None:
            argv += ["--context", context]
        if data is not None:
            argv += ["--data", data]
        argv += payload + ["--kernel", "scoped" if backend == "instrumentation" else "plain"]
    else:
        argv = [sys.executable] + payload + ["--name", stem] + (["--kernel", kernel] if kernel else [])
        if backend is not None:
            argv += ["--backend", backend]
        if mode is not None:
            argv += ["--backend-mode", mode]
        if context is not None:
            argv += ["--context", context]
        if data is not None:
            argv += ["--data", data]
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
    artifact = harvest(stem)
    if artifact is not None and probe.opts.keep_artifacts_dir:
        os.makedirs(probe.opts.keep_artifacts_dir, exist_ok=True)
        label = "-".join(str(x) for x in (attach, backend, mode or "default", context or "shadow", data or "tree"))
        dest = os.path.join(probe.opts.keep_artifacts_dir, "gelu-%s-%s" % (
            "".join(c if c.isalnum() or c in "-_.=" else "_" for c in label), artifact["file"]))
        with open(dest, "wb") as f, open(artifact["path"], "rb") as src:
            f.write(src.read())
        artifact["saved_to"] = dest
    if artifact is not None:
        del artifact["path"]
    recorded = artifact.pop("recorded") if artifact is not None else None
    code = proc["exit_code"]
    scopes = res.get("scopes")
    expected = expected_records(backend, res.get("kernel"), kernel)
    rule = None
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
        elif expected is None:
            outcome = O.ERROR  # the payload could not give this backend what it measures
            res["message"] = ("the payload could not give %s what it measures (kernels with proton.language "
                              "scopes) on this build: %s" % (backend, (scopes or {}).get("error")))
        elif artifact is None or recorded is None or recorded["parse_error"]:
            outcome = O.ERROR  # the payload passed but left no readable capture
            res.setdefault("message", "the payload passed but Proton left no readable profile (%s)" % (
                (artifact or {}).get("parse_error") or "no file"))
        elif expected == "scopes" and not recorded["scopes"]:
            outcome = O.EMPTY_CAPTURE
            res.setdefault("message", "the payload's scoped kernel (%s) compiled and ran %s times in the session, "
                                      "and Proton wrote %s, but it records no scope" % (
                                          ", ".join((scopes or {}).get("names") or []),
                                          res.get("launches_in_session"), artifact["file"]))
        elif expected == "kernels" and not (recorded["launches"] or recorded["kernels"] or recorded["scopes"]):
            outcome = O.EMPTY_CAPTURE
            res.setdefault("message", "the payload passed and Proton wrote %s, but it records no kernel" % (
                artifact["file"]))
        else:
            outcome = O.OK
    elif code == 1 and res.get("outcome") == "self_check_failed":
        outcome = O.SELF_CHECK_FAILED
    elif code == 2 and res.get("outcome") in O.OUTCOMES:
        outcome = res["outcome"]
        rule = res.get("rule")
    else:
        outcome = O.ERROR  # a traceback: kept raw below
        if attach == "cli" and not res:
            # Proton's command line failed before the payload ran: what it raised is
            # classified with the same rules as proton.start's errors.
            line = _error_message(proc)
            cls = classify.classify_message(line or "", bool(probe.facts.get("gpu", {}).get("nvidia_devices")))
            if cls["outcome"] != O.ERROR:
                outcome, rule = cls["outcome"], cls["rule"]
    metrics = (artifact or {}).get("metrics") or {}
    return records.make(
        "capture",
        backend=backend,
        mode=mode,
        env=env_kind,
        argv=argv,
        outcome=outcome,
        exit_code=code,
        signal=classify.signal_name(-code) if code is not None and code < 0 else None,
        message=res.get("message") or _error_message(proc),
        fix=res.get("fix"),
        max_abs_err=res.get("max_abs_err"),
        loop_s=res.get("loop_s"),
        size=probe.opts.capture_size,
        iters=iters,
        device=res.get("device"),
        duration_s=proc["duration_s"],
        timed_out=proc["timed_out"],
        stdout_tail=proc["stdout_tail"],
        stderr_tail=proc["stderr_tail"],
        artifact=artifact,
        kernel_count=metrics.get("kernel_count"),
        gpu_time_ns=metrics.get("gpu_time_ns"),
        top_kernel=metrics.get("top_kernel"),
        top_kernel_time_ns=metrics.get("top_kernel_time_ns"),
        attach=attach,
        context=context,
        data=data,
        rule=rule,
        kernel=res.get("kernel"),
        scopes=scopes,
        session_mode=res.get("session_mode"),
        launches_in_session=res.get("launches_in_session"),
        expected=expected,
        recorded=recorded,
    )


def _last_error_line(text):
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else None


# A compiler diagnostic (MLIR's ``LOCATION: error: TEXT``), printed before the
# Python exception that only says a pass failed.
_DIAGNOSTIC = re.compile(r": error: ")


def _error_message(proc):
    """The last line of the process's stderr (or stdout), raw; where that is an
    exception that only says a compiler pass failed, with the first compiler
    diagnostic printed before it."""
    line = _last_error_line(proc["stderr_tail"]) or _last_error_line(proc["stdout_tail"])
    if line and "PassManager::run failed" in line:
        diagnostics = [ln.strip() for ln in (proc.get("stderr_recent") or "").splitlines()
                       if _DIAGNOSTIC.search(ln)]
        if diagnostics:
            line = "%s [%s]" % (line, diagnostics[0])
    return line
