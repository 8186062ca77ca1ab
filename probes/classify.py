"""Turn what one ``proton.start`` check did into an outcome.

Each rule matches a message template that Triton's own source raises, and names
where that template lives and in which releases it was seen. Anything no rule
matches is ``error`` with the raw message kept: a confident wrong diagnosis costs
more than an honest "not recognised".
"""

import re
import signal

from . import outcomes as O

# (rule id, outcome, compiled pattern, source, seen in releases)
# Patterns are searched in the exception message (str(exc)).
RULES = (
    (
        "unknown-profiler",
        O.UNKNOWN_BACKEND,
        re.compile(r"Unknown profiler: (?P<name>\S+)"),
        "third_party/proton/csrc/lib/Session/Session.cpp makeProfiler()",
        "RuntimeError in 3.6.0-3.7.1; ValueError '[PROTON] Unknown profiler: ...' in 3.8.0, 3.9.0",
    ),
    (
        "unsupported-mode",
        O.UNSUPPORTED_MODE,
        re.compile(r"(?P<profiler>\w+Profiler): unsupported mode: (?P<mode>\S*)"),
        "third_party/proton/csrc/lib/Profiler/<Backend>/<Backend>Profiler.cpp setMode()",
        "ValueError '[PROTON] CuptiProfiler|RoctracerProfiler|RocprofSDKProfiler: unsupported mode: M' in 3.6.0-3.9.0",
    ),
    (
        "unknown-mode",
        O.UNSUPPORTED_MODE,
        re.compile(r"^Unknown mode: (?P<mode>\S+)"),
        "python/triton/profiler/hooks/instrumentation.py (mode parsing of the instrumentation backend): "
        "raise ValueError(f\"Unknown mode: {mode_obj}\")",
        "ValueError 'Unknown mode: pcsampling' for instrumentation in 3.6.0 (measured on an H200); "
        "the same raise is in 3.7.1 and 3.8.0's instrumentation.py",
    ),
    (
        "pcsampling-not-built",
        O.UNSUPPORTED_MODE,
        re.compile(
            r"PC sampling mode requested but rocprofiler-sdk could not configure it: "
            r"Proton was built without rocprofiler-sdk PC sampling support"
        ),
        "third_party/proton/csrc/lib/Profiler/RocprofSDK/RocprofSDKProfiler.cpp + RocprofSDKPCSampling.cpp",
        "RuntimeError in 3.9.0 (PyPI wheel), when the library loads",
    ),
    (
        "granularity-not-warp",
        O.UNSUPPORTED_MODE,
        re.compile(r"Only warp granularity is supported for now"),
        "third_party/proton/csrc/lib/Profiler/Instrumentation/InstrumentationProfiler.cpp (the kernel-exit path: "
        "a mode whose granularity option is present and not GRANULARITY.WARP is refused); the mode string reaches "
        "libproton as written (python/triton/profiler/profile.py _get_mode_str), so 'granularity=warp' is refused too",
        "RuntimeError from libproton.exit_instrumented_op at the first instrumented kernel's exit in 3.6.0 "
        "(measured on an H200: default:granularity=warp, mma:granularity=warp)",
    ),
    (
        "could-not-load",
        O.LIBRARY_MISSING,
        re.compile(r"Could not load `(?P<library>[^`]+)`"),
        "third_party/proton/csrc/include/Driver/Dispatch.h Dispatch::init() (dlopen failed)",
        "RuntimeError in 3.6.0-3.7.1; '[PROTON] Could not load `...`' in 3.8.0, 3.9.0",
    ),
    (
        "no-active-driver",
        O.NO_GPU,
        re.compile(r"0 active drivers \(\[\]\)\. There should only be one\."),
        "python/triton/runtime/driver.py _create_driver()",
        "RuntimeError in 3.6.0-3.9.0 when no CUDA or HIP driver is usable",
    ),
    (
        "devices-env",
        O.DEVICES_ENV_REJECTED,
        re.compile(
            r"Proton does not work when the environment variable (?P<variable>\w+) is set on AMD GPUs"
        ),
        "third_party/proton/proton/profile.py _check_env()",
        "ValueError for roctracer in 3.6.0-3.9.0 and for rocprofiler in 3.8.0, 3.9.0",
    ),
)

# CUPTI's "cannot initialise its connection to the CUDA driver". Only called
# ``no_gpu`` when the environment facts agree (no NVIDIA device node).
CUPTI_NOT_INITIALIZED = (
    "cupti-not-initialized",
    re.compile(r"Failed to execute cupti\w+ with error 15\b"),
    "Dispatch.h Dispatch::check() with CUPTI_ERROR_NOT_INITIALIZED = 15 (cupti_result.h)",
    "RuntimeError 'Failed to execute cuptiSubscribe with error 15' in 3.6.0-3.7.1 on a host without a GPU",
)

# What to do about each outcome, for messages that name the fix (the payload's,
# and the host's defaults). Host-side answers add what the evidence knows
# (which release adds a backend, which build accepts a mode).
FIXES = {
    O.UNKNOWN_BACKEND: "this Triton has no such backend: use a release that has it",
    O.UNSUPPORTED_MODE: "the backend exists on this Triton but this build refuses the mode: use a build that "
                        "accepts it, or another mode",
    O.LIBRARY_MISSING: "a shared library Proton loads did not load: provide it (run `survey probe` here to see "
                       "which versions exist and how to point Proton at one)",
    O.NO_GPU: "run on a machine with a GPU that Triton can use",
    O.DEVICES_ENV_REJECTED: "unset HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES and select devices with "
                            "ROCR_VISIBLE_DEVICES",
    O.DISABLED: "unset TRITON_PROTON_DISABLE",
}

RULE_SOURCES = {r[0]: {"outcome": r[1], "source": r[3], "seen": r[4]} for r in RULES}
RULE_SOURCES[CUPTI_NOT_INITIALIZED[0]] = {
    "outcome": O.NO_GPU,
    "source": CUPTI_NOT_INITIALIZED[2],
    "seen": CUPTI_NOT_INITIALIZED[3],
}


def signal_name(num):
    try:
        return signal.Signals(num).name
    except (ValueError, AttributeError):
        return "SIG%d" % num


def classify_start(result, returncode, timed_out, nvidia_device_present):
    """Classify one start check.

    ``result`` is what the worker wrote before it ended (may be None when it
    died first). Returns a dict with outcome, rule and the extracted fields.
    """
    out = {"outcome": O.ERROR, "rule": None, "library": None, "signal": None}
    if timed_out:
        out["outcome"] = O.TIMEOUT
        out["rule"] = "timeout"
        return out
    if returncode is not None and returncode < 0:
        out["outcome"] = O.CRASH
        out["rule"] = "signal"
        out["signal"] = signal_name(-returncode)
        return out
    if not result:
        # Exited without telling us anything (sys.exit in an import, os._exit ...).
        out["rule"] = "no-result"
        return out
    status = result.get("status")
    if status == "started":
        if result.get("session") is None and result.get("proton_disabled"):
            out["outcome"] = O.DISABLED
            out["rule"] = "start-returned-none"
        elif result.get("finalize_error"):
            # start() accepted the backend and mode; finalize() failed. Keep it
            # visible rather than calling the check ok.
            msg = result["finalize_error"].get("message", "")
            sub = classify_message(msg, nvidia_device_present)
            out.update(sub)
            out["rule"] = "finalize:" + (sub["rule"] or "unrecognised")
        else:
            out["outcome"] = O.OK
            out["rule"] = "started"
        return out
    if status == "raised":
        out.update(classify_message(result.get("message", ""), nvidia_device_present))
        return out
    out["rule"] = "status:" + str(status)
    return out


def classify_message(message, nvidia_device_present):
    for rule_id, outcome, pattern, _source, _seen in RULES:
        m = pattern.search(message or "")
        if m:
            library = m.groupdict().get("library")
            return {"outcome": outcome, "rule": rule_id, "library": library, "signal": None}
    rule_id, pattern, _source, _seen = CUPTI_NOT_INITIALIZED
    if pattern.search(message or "") and not nvidia_device_present:
        return {"outcome": O.NO_GPU, "rule": rule_id, "library": None, "signal": None}
    return {"outcome": O.ERROR, "rule": None, "library": None, "signal": None}
