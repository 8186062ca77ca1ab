"""Code that runs in the probe's child processes, one check per process.

A worker writes its findings as JSON lines to a result file named by the
orchestrator (never to stdout, which the environment under test may litter), one
line per finished section, so whatever was learned before a crash or a hang
survives it.

Import order is load-bearing: ``triton.profiler`` (Proton) is imported before
anything that could initialise a GPU runtime (torch, Triton's driver query).
libproton.so configures rocprofiler-sdk from a constructor at import, and a
runtime initialised first makes rocprofiler-sdk silently skip dispatch tracing.
Keep formatters from reordering the imports below (they are function-local on
purpose).
"""

import json
import os
import sys
import time
import traceback


class Results(object):
    def __init__(self, path):
        self.f = open(path, "a")

    def emit(self, record):
        self.f.write(json.dumps(record, ensure_ascii=True, default=repr) + "\n")
        self.f.flush()
        try:
            os.fsync(self.f.fileno())
        except OSError:
            pass


def _exc(e):
    return {
        "exc_type": type(e).__name__,
        "exc_module": type(e).__module__,
        "message": str(e),
        "traceback_tail": traceback.format_exc().splitlines()[-12:],
    }


def _mapped_stubs():
    """Paths of proton-survey stub libraries mapped into this process."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and "/proton-survey-stubs/" in parts[-1] and parts[-1] not in found:
                    found.append(parts[-1])
    except OSError:
        pass
    return found


# --------------------------------------------------------------------------- inspect


def inspect(args, out):
    """Sections that cannot disturb each other share this one process."""
    sections = args["sections"]
    state = {}  # type: dict
    for name in sections:
        out.emit({"begin": name})
        t0 = time.time()
        try:
            data = SECTIONS[name](args, state)
        except BaseException as e:  # a section must not take the others down
            data = {"status": "failed"}
            data.update(_exc(e))
        data["duration_s"] = round(time.time() - t0, 4)
        out.emit({"section": name, "data": data})


def _section_triton(args, state):
    t0 = time.time()
    import triton  # noqa: F401  (Proton first: see module docstring)
    import triton.profiler  # noqa: F401

    import_s = time.time() - t0
    from triton._C.libproton import proton as libproton

    state["triton"] = triton
    state["libproton"] = libproton
    out = {
        "status": "found",
        "version": getattr(triton, "__version__", None),
        "file": getattr(triton, "__file__", None),
        "import_s": round(import_s, 4),
        "libproton": getattr(libproton, "__file__", None) or _libproton_path(triton),
    }
    if args.get("zygote_import_s") is not None:
        # Forked from the zygote, which did this import (same environment) before the fork.
        out["import_s"] = args["zygote_import_s"]
        out["imported_in"] = "the zygote this worker was forked from"
    return out


def _libproton_path(triton):
    p = os.path.join(os.path.dirname(triton.__file__), "_C", "libproton.so")
    return p if os.path.exists(p) else None


def _need(state, key):
    if key not in state:
        raise RuntimeError("needs the triton section, which did not complete")
    return state[key]


def _section_registry(args, state):
    libproton = _need(state, "libproton")
    fn = getattr(libproton, "get_available_profilers", None)
    if fn is None:
        return {
            "status": "absent",
            "function": "get_available_profilers",
            "profilers": None,
            "note": "triton._C.libproton.proton has no get_available_profilers (this Triton predates the registry)",
        }
    value = fn()
    return {"status": "found", "function": "get_available_profilers", "profilers": [str(x) for x in value]}


def _section_knobs(args, state):
    triton = _need(state, "triton")
    knobs = getattr(triton, "knobs", None)
    proton_knobs = getattr(knobs, "proton", None) if knobs is not None else None
    descriptors = getattr(proton_knobs, "knob_descriptors", None) if proton_knobs is not None else None
    if descriptors is None:
        return {"status": "absent", "knobs": []}
    rows = []
    for attr, desc in descriptors.items():
        key = getattr(desc, "key", None)
        try:
            value = getattr(proton_knobs, attr)
        except Exception as e:  # a knob that cannot be read is still a knob
            value = "<unreadable: %s>" % e
        rows.append(
            {
                "attr": attr,
                "variable": key,
                "value": None if value is None else str(value),
                "from_env": key in os.environ if key else False,
            }
        )
    return {"status": "found", "knobs": rows}


class _ParserCaught(Exception):
    pass


def _section_cli(args, state):
    """The `-b` choices of the `proton` CLI, read off the parser it really builds."""
    import argparse
    import runpy

    _need(state, "triton")
    captured = {}
    original = argparse.ArgumentParser.parse_known_args

    def capture(self, *a, **k):
        captured["parser"] = self
        raise _ParserCaught()

    saved_argv = sys.argv
    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign]
    sys.argv = ["proton", "--help"]
    try:
        try:
            runpy.run_module("triton.profiler.proton", run_name="__main__", alter_sys=False)
        except _ParserCaught:
            pass
        except SystemExit as e:
            return {"status": "failed", "error": "the proton CLI exited (%s) before parsing" % e.code}
    finally:
        argparse.ArgumentParser.parse_known_args = original  # type: ignore[method-assign]
        sys.argv = saved_argv
    parser = captured.get("parser")
    if parser is None:
        return {"status": "failed", "error": "the proton CLI built no argument parser"}
    options = []
    backends = None
    mode_option = False
    for action in parser._actions:
        options.extend(action.option_strings)
        if "-b" in action.option_strings or "--backend" in action.option_strings:
            backends = None if action.choices is None else [str(c) for c in action.choices]
        if "-m" in action.option_strings or "--mode" in action.option_strings:
            mode_option = True
    return {
        "status": "found" if backends is not None else "absent",
        "command": "python -m triton.profiler.proton",
        "backends": backends,
        "has_mode_option": mode_option,
        "options": options,
    }


def _section_libraries(args, state):
    import ctypes

    triton = state.get("triton")
    knob_values = {}
    if triton is not None:
        try:
            pk = triton.knobs.proton
            for attr, desc in pk.knob_descriptors.items():
                v = getattr(pk, attr)
                if v is not None:
                    knob_values[desc.key] = str(v)
        except Exception:
            pass
    rows = []
    for spec in args.get("libraries", []):
        name = spec["name"]
        dir_var, file_var = spec.get("override") or (None, None)
        file_name = knob_values.get(file_var) if file_var else None
        file_name = file_name or name
        directory = knob_values.get(dir_var) if dir_var else None
        target = os.path.join(directory, file_name) if directory else file_name
        row = {"name": name, "dlopen": target, "via": dir_var if directory else "loader path"}
        try:
            ctypes.CDLL(target, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
            row["loads"] = True
            row["loaded_path"] = _mapped_path(file_name)
        except OSError as e:
            row["loads"] = False
            row["error"] = str(e)
        rows.append(row)
    return {"status": "found", "results": rows}


def _mapped_path(file_name):
    base = file_name.split(".so", 1)[0]
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[-1]).startswith(base + ".so"):
                    return parts[-1]
    except OSError:
        pass
    return None


def _section_torch(args, state):
    """torch's versions, from a real import - after triton.profiler (Proton first),
    and last in this process, so no library look-up above saw what torch loads."""
    _need(state, "triton")
    t0 = time.time()
    try:
        import torch  # noqa: F401  (after triton.profiler: see module docstring)
    except ImportError as e:
        return {"status": "absent", "error": "%s: %s" % (type(e).__name__, e)}
    version = getattr(torch, "version", None)
    return {
        "status": "found",
        "version": getattr(torch, "__version__", None),
        "cuda": getattr(version, "cuda", None),
        "hip": getattr(version, "hip", None),
        "import_s": round(time.time() - t0, 4),
        "after": "triton.profiler",
    }


SECTIONS = {
    "triton": _section_triton,
    "registry": _section_registry,
    "knobs": _section_knobs,
    "cli": _section_cli,
    "libraries": _section_libraries,
    "torch": _section_torch,
}


# --------------------------------------------------------------------------- start


def start(args, out):
    """One proton.start(backend, mode) in a process of its own."""
    out.emit({"phase": "importing"})
    t0 = time.time()
    # Proton before anything that may initialise a GPU runtime (module docstring).
    import triton.profiler as proton

    out.emit({"phase": "imported", "import_s": round(time.time() - t0, 4)})
    disabled = None
    try:
        import triton

        disabled = bool(triton.knobs.proton.disable)
    except Exception:
        pass
    kwargs = {"backend": args["backend"]}
    if args.get("mode") is not None:
        kwargs["mode"] = args["mode"]
    t1 = time.time()
    try:
        session = proton.start(args["name"], **kwargs)
    except BaseException as e:
        rec = {"status": "raised", "start_s": round(time.time() - t1, 4), "proton_disabled": disabled}
        rec.update(_exc(e))
        rec["stubs_mapped"] = _mapped_stubs()
        out.emit(rec)
        return
    rec = {
        "status": "started",
        "session": session,
        "start_s": round(time.time() - t1, 4),
        "proton_disabled": disabled,
        "stubs_mapped": _mapped_stubs(),
    }
    try:
        proton.finalize()
    except BaseException as e:
        rec["finalize_error"] = _exc(e)
    out.emit(rec)


def main(argv):
    kind, args_json = argv[0], argv[1]
    with open(args_json) as f:
        args = json.load(f)
    out = Results(args["result"])
    if kind == "inspect":
        inspect(args, out)
    elif kind == "start":
        start(args, out)
    else:
        raise SystemExit("unknown worker kind %r" % kind)
    out.emit({"done": True})
    return 0
