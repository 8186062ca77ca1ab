"""The report's records, each declared once (field name -> what it holds).

The probe builds every record through :func:`make`, which refuses a missing or an
unknown field; the host's pydantic models (``survey/report.py``) are held against
these declarations by a test (tests/test_report.py), and the store's row mapping
copies the columns it shares with them. Optional fields (``OPTIONAL``) may be left
out and default to None.
"""

ATTEMPT = (
    ("outcome", "outcome of this attempt"),
    ("rule", "the classifier rule that matched (probes/classify.py), or None"),
    ("signal", "the signal that killed it, e.g. SIGSEGV"),
    ("exc_type", "the exception's type name"),
    ("message", "the exception's message, raw"),
    ("exit_code", "the process's exit code"),
    ("timed_out", "killed at the timeout"),
    ("duration_s", "seconds"),
)

MODE_RESULT = (
    ("backend", "Proton backend"),
    ("mode", "mode passed to proton.start, None for none"),
    ("env", "clean: controlled variables removed; inherited: the environment as given"),
    ("call", "the call, as Python source"),
    ("argv", "the check process's argv"),
    ("stub", "ran with stub libraries standing in for a missing one (never a live result)"),
    ("outcome", "the outcome; `unstable` when repeated attempts disagree"),
    ("rule", "classifier rule of the first attempt"),
    ("library", "the library that did not load (library_missing)"),
    ("signal", "signal of the first attempt"),
    ("exc_type", "exception type of the first attempt"),
    ("message", "exception message of the first attempt, raw"),
    ("exit_code", "exit code of the first attempt"),
    ("timed_out", "the first attempt was killed at the timeout"),
    ("hung_at_exit", "reported a result, then never exited"),
    ("duration_s", "seconds, all attempts"),
    ("last_phase", "the last phase the worker reported"),
    ("stderr_tail", "stderr tail of the first attempt"),
    ("stdout_tail", "stdout tail of the first attempt"),
    ("traceback_tail", "traceback tail of the first attempt"),
    ("overrides", "variables set for a stub rerun"),
    ("stubs_mapped", "stub libraries mapped into the process"),
    ("stub_for", "the library a stub rerun stands in for"),
    ("finalize_error", "proton.finalize() raised this after start() succeeded"),
    ("attempts", "every attempt, when the check ran more than once (every proton.start check runs at least "
                 "twice, more while an attempt crashed, hung, raised an unrecognised error or they disagree)"),
    ("outcome_counts", "outcome -> number of attempts, when the check ran more than once"),
)

PLATFORM = (
    ("key", "identity: vendor:arch:model, or none:<cpu arch>"),
    ("vendor", "nvidia, amd or none"),
    ("model", "device 0's model, e.g. NVIDIA H200"),
    ("arch", "device 0's architecture (sm_90, gfx942), or the CPU's when there is no GPU"),
    ("driver", "kernel driver version"),
    ("runtime", "CUDA version the driver supports, or the ROCm release"),
    ("devices", "every device seen"),
    ("errors", "what could not be read, and why"),
)

ORIGIN = (
    ("kind", "interpreter, pip, image, or reported (a probe run by hand)"),
    ("target", "how the user named it"),
    ("identity", "what identifies the environment (hashed into its identity)"),
    ("interpreter", "executable, prefix, base_prefix, version; env: baseline variables the host side set"),
    ("pip", "requirements, index_url, extra_index_urls, pre, installed wheels"),
    ("image", "reference, id, digest, engine, python; env: baseline variables the host side set"),
    ("host", "the machine the host side ran on"),
    ("recorded_by", "proton-survey version that wrote this origin"),
    ("recorded_at", "when"),
)

OPTIONAL = {
    "mode_result": ("stub_for", "finalize_error", "attempts", "outcome_counts"),
    "origin": ("interpreter", "pip", "image", "host"),
}

RECORDS = {
    "attempt": ATTEMPT,
    "mode_result": MODE_RESULT,
    "platform": PLATFORM,
    "origin": ORIGIN,
}


def fields(record):
    return tuple(name for name, _ in RECORDS[record])


def make(record, **values):
    """A record dict with exactly the declared fields (optional ones default to None)."""
    declared = fields(record)
    unknown = [k for k in values if k not in declared]
    if unknown:
        raise KeyError("%s: undeclared field(s) %s" % (record, ", ".join(sorted(unknown))))
    optional = OPTIONAL.get(record, ())
    missing = [k for k in declared if k not in values and k not in optional]
    if missing:
        raise KeyError("%s: missing field(s) %s" % (record, ", ".join(missing)))
    return dict((k, values.get(k)) for k in declared)
