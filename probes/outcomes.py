"""The shared vocabulary: backends, modes and outcomes.

Every layer (probe, store, table, API, ``survey check``) imports these tuples from
here, so there is exactly one list of each.
"""

BACKENDS = ("cupti", "roctracer", "rocprofiler", "instrumentation")

# Modes tried on every backend; ``None`` is "no mode" (Proton's default).
COMMON_MODES = (None, "pcsampling", "periodic_flushing")
# The instrumentation backend's own modes (triton/profiler/mode.py: Default, MMA).
INSTRUMENTATION_MODES = ("default", "mma")

# Outcome of one check (a ``proton.start`` or a GELU capture).
OK = "ok"
UNKNOWN_BACKEND = "unknown_backend"  # the build has no such backend
UNSUPPORTED_MODE = "unsupported_mode"  # the backend exists, the build refuses the mode
LIBRARY_MISSING = "library_missing"  # a shared library Proton dlopens did not load
NO_GPU = "no_gpu"  # nothing to profile on: no GPU / no active driver
DEVICES_ENV_REJECTED = "devices_env_rejected"  # HIP_/CUDA_VISIBLE_DEVICES refused on AMD
DISABLED = "disabled"  # TRITON_PROTON_DISABLE made start() a no-op
CRASH = "crash"  # killed by a signal
TIMEOUT = "timeout"  # killed at the probe's timeout
ERROR = "error"  # not recognised: the raw message is kept, nothing is guessed
UNSTABLE = "unstable"  # repeated attempts of one check disagreed (the counts are kept)
# Capture-only outcomes (the GELU payload).
SELF_CHECK_FAILED = "self_check_failed"  # kernel ran, result wrong (payload exit 1)
HANG_AFTER_CAPTURE = "hang_after_capture"  # capture written, process never exited
EMPTY_CAPTURE = "empty_capture"  # payload passed, Proton wrote a capture with no kernel records

OUTCOMES = (
    OK,
    UNKNOWN_BACKEND,
    UNSUPPORTED_MODE,
    LIBRARY_MISSING,
    NO_GPU,
    DEVICES_ENV_REJECTED,
    DISABLED,
    CRASH,
    TIMEOUT,
    ERROR,
    UNSTABLE,
    SELF_CHECK_FAILED,
    HANG_AFTER_CAPTURE,
    EMPTY_CAPTURE,
)

# Status of one environment fact.
FOUND = "found"
ABSENT = "absent"
FAILED = "failed"
FACT_STATUSES = (FOUND, ABSENT, FAILED)


def mode_grid():
    """Every (backend, mode) pair the probe checks, in report order."""
    pairs = []
    for backend in BACKENDS:
        for mode in COMMON_MODES:
            pairs.append((backend, mode))
        if backend == "instrumentation":
            for mode in INSTRUMENTATION_MODES:
                pairs.append((backend, mode))
    return pairs
