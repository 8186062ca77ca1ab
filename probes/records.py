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

RECORDED = (
    ("format", "hatchet (data=tree), chrome_trace (data=trace), or what else the file was; None: no profile"),
    ("files", "every file the session left: name and bytes"),
    ("kernels", "names of the kernels the profile times (a node with time (ns), or a trace event with dur)"),
    ("launches", "kernel launches it counts (count summed, or timed trace events); None: not readable"),
    ("scopes", "instrumentation scopes: one per node carrying cycle metrics (kernel, name, cycles, "
               "normalized_cycles)"),
    ("cycle_metrics", "the cycle metric names found (cycles, normalized_cycles, ...)"),
    ("pc_samples", "PC samples recorded (num_samples summed); None: no PC-sampling metric"),
    ("trace_events", "events in a Chrome trace; None for a tree"),
    ("metric_names", "every metric name on a node below the root (or in a trace event's args)"),
    ("nodes", "nodes below the root that carry a metric (timed events of a trace)"),
    ("parse_error", "why the profile could not be read; None when it was"),
)

CAPTURE = (
    ("backend", "Proton backend (None: the payload alone, no capture)"),
    ("mode", "mode passed to Proton, None for none"),
    ("env", "clean: controlled variables removed; inherited: the environment as given"),
    ("argv", "the capture process's argv"),
    ("outcome", "the outcome (empty_capture only where the payload ran what the backend measures)"),
    ("exit_code", "the process's exit code"),
    ("signal", "the signal that killed it"),
    ("message", "what went wrong, raw, or the payload's own message"),
    ("fix", "the payload's fix for an environment that cannot run it"),
    ("max_abs_err", "the self-check's largest error against torch's GELU"),
    ("loop_s", "seconds of the launch loop"),
    ("size", "elements per launch"),
    ("iters", "launches in the loop"),
    ("device", "the GPU the payload ran on"),
    ("duration_s", "seconds, the whole process"),
    ("timed_out", "killed at the timeout"),
    ("stdout_tail", "stdout tail"),
    ("stderr_tail", "stderr tail"),
    ("artifact", "the profile file: name, bytes, sha256, content when small, kernel metrics"),
    ("kernel_count", "kernel launches the profile times (count summed over timed kernel nodes)"),
    ("gpu_time_ns", "GPU time of those kernels"),
    ("top_kernel", "the kernel with the most GPU time"),
    ("top_kernel_time_ns", "its GPU time"),
    ("attach", "start: the payload calls proton.start itself; cli: run under python -m triton.profiler.proton"),
    ("context", "proton's context passed (None: Proton's default, shadow)"),
    ("data", "proton's data passed (None: Proton's default, tree)"),
    ("rule", "the classifier rule that matched (probes/classify.py), or None"),
    ("kernel", "the kernel the payload ran: plain, scoped (with triton.profiler.language scopes), or mixed "
               "(the scoped one, then the plain one, each iteration)"),
    ("scopes", "the scoped kernel's setup, raw: names, enable_semantic's answer, compiled, import error"),
    ("session_mode", "the instrumentation mode the session compiled kernels with "
                     "(triton.knobs.compilation.instrumentation_mode), as the payload read it"),
    ("launches_in_session", "launches made while the session could record them"),
    ("expected", "what the profile should record: kernels, scopes, or None (the payload could not give the "
                 "backend what it measures)"),
    ("recorded", "what the profile records (a recorded record), None: no profile"),
)

OPTION_RESULT = (
    ("option", "the option measured: context, data, mode (an instrumentation mode with its options, as aorta "
               "renders it), cli (Proton's command line; value: the --mode it is given), kernels (value mixed: a "
               "scoped and an unscoped kernel in one instrumentation session)"),
    ("value", "its value"),
    ("capture", "the capture that measured it, in a process of its own (a capture record)"),
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
    "recorded": RECORDED,
    "capture": CAPTURE,
    "option_result": OPTION_RESULT,
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
