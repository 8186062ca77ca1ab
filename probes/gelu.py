#!/usr/bin/env python3
"""Exact-erf GELU in Triton, launched in a loop and captured by Proton.

    python gelu.py [--size N] [--iters K] [--backend B] [--backend-mode M]
                   [--context C] [--data D] [--kernel auto|plain|scoped]

Exit codes: 0 pass; 1 the self-check failed; 2 this environment cannot run it
(no GPU, backend absent, mode refused, library will not load, device-visibility
variable rejected), each with its own message naming the fix. Anything else is
re-raised with its traceback, never explained away.

With no --backend the kernel runs and is checked, and nothing is captured: that
confirms the payload itself is sound on the Triton at hand. Run that way under
Proton's own command line (``python -m triton.profiler.proton ... gelu.py``), the
command line's session captures it; the payload then returns normally instead of
raising SystemExit, which would skip the command line's finalize().

Each backend is given what it measures: the plain kernel for the tracing backends
(one timed node per kernel), and for ``instrumentation`` (``--kernel auto``) the
same GELU with ``triton.profiler.language`` scopes around its load, its arithmetic
and its store, which is what instrumentation records cycles for (a kernel without
scopes gives it nothing to record). Triton 3.6.0 instruments only Gluon kernels
unless ``enable_semantic("triton")`` is called first; the payload calls it where
the build has it and records what happened (or the import error, when the build
has no ``triton.profiler.language``) raw in its result.

Needs triton and torch, and the ``probes`` package on sys.path (it classifies Proton's
errors with probes/classify.py, the probe's one classifier).
"""

import argparse
import json
import os
import re
import sys
import time

# Import order is load-bearing: Proton first. libproton.so configures
# rocprofiler-sdk from a constructor at import time, and a GPU runtime that was
# initialised before it (a torch import chain, Triton's driver query) makes
# rocprofiler-sdk silently skip kernel-dispatch tracing. torch comes after.
# Do not let a formatter or linter reorder these imports.
import triton.profiler as proton  # noqa: I001  (must precede torch)
from triton._C.libproton import proton as libproton  # noqa: I001
import triton  # noqa: I001
import triton.language as tl  # noqa: I001

try:  # Proton's language scopes (intra-kernel instrumentation); not in every build
    import triton.profiler.language as pl  # noqa: I001
except Exception as _pl_error:  # recorded raw, never explained away
    pl = None
    PL_IMPORT_ERROR = "%s: %s" % (type(_pl_error).__name__, _pl_error)
else:
    PL_IMPORT_ERROR = None

# The probe's classifier and vocabulary (standard library only; the payload runs
# from the probe bundle, `python probe.zip gelu`, or with probes/ on sys.path).
try:
    from probes import classify, outcomes  # noqa: I001
except ImportError:  # run as a file from the source tree: probes/ is this file's folder
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from probes import classify, outcomes  # noqa: I001

try:
    import torch  # noqa: I001  (after Proton, see above)
except ImportError as _torch_error:  # re-raised in main(): never explained away
    torch = None
    TORCH_IMPORT_ERROR = _torch_error
else:
    TORCH_IMPORT_ERROR = None

TOLERANCE = 1e-6
PRE_REGISTRY_BACKENDS = ("cupti", "roctracer", "instrumentation")  # Triton <= 3.7.1
EXIT_PASS, EXIT_SELF_CHECK, EXIT_ENV = 0, 1, 2


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    # 0.5 * x * (1 + erf(x / sqrt(2))): the exact form, many instructions per element
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offsets, y, mask=mask)


SCOPE_NAMES = ("load", "gelu", "store")


@triton.jit
def gelu_scoped_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # The same GELU, with a proton.language scope around each phase: the
    # instrumentation backend records cycles per scope (SCOPE_NAMES).
    pl.enter_scope("load")
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    pl.exit_scope("load")
    pl.enter_scope("gelu")
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    pl.exit_scope("gelu")
    pl.enter_scope("store")
    tl.store(y_ptr + offsets, y, mask=mask)
    pl.exit_scope("store")


class Result(object):
    def __init__(self, path):
        self.path = path
        self.data = {"phase": "started", "triton": getattr(triton, "__version__", None)}

    def update(self, **kw):
        self.data.update(kw)
        if self.path:
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.data, f)
            os.replace(tmp, self.path)


def say(msg):
    print("gelu: " + msg, flush=True)


def cannot_run(result, outcome, message, fix, rule=None):
    say(message)
    say(fix)
    result.update(outcome=outcome, message=message, fix=fix, rule=rule, exit_code=EXIT_ENV)
    sys.exit(EXIT_ENV)


def available_backends():
    fn = getattr(libproton, "get_available_profilers", None)
    if fn is None:
        return list(PRE_REGISTRY_BACKENDS), False
    return [str(b) for b in fn()], True


def classify_start_error(result, exc, backend, mode, when="start"):
    """Classify what proton.start (or, for ``when="launch"``, the first launch in
    the session, where instrumentation compiles the kernel with its mode) raised,
    with the probe's own classifier (probes/classify.py: one set of rules, each
    citing Triton's source); anything it does not recognise is re-raised, never
    explained away."""
    text = str(exc)
    nvidia = any(re.match(r"nvidia\d+$", n) for n in _dev_entries())
    cls = classify.classify_message(text, nvidia)
    if cls["outcome"] == outcomes.ERROR:
        raise exc
    where = "" if when == "start" else " (at the first launch, as the kernel compiled in the session)"
    what = {
        outcomes.LIBRARY_MISSING: "Proton could not start: %s" % text,
        outcomes.UNSUPPORTED_MODE: "Proton refused backend=%r with mode=%r%s: %s" % (backend, mode, where, text),
        outcomes.UNKNOWN_BACKEND: "Proton does not know backend %r: %s" % (backend, text),
        outcomes.NO_GPU: "no GPU: %s" % text,
    }.get(cls["outcome"], text)
    cannot_run(result, cls["outcome"], what, classify.FIXES.get(cls["outcome"], ""), rule=cls["rule"])


def _dev_entries():
    try:
        return os.listdir("/dev")
    except OSError:
        return []


def prepare_scopes(result):
    """Make the scoped kernel compilable where the build allows it; what happened is
    recorded raw. Returns whether the scoped kernel can be tried at all."""
    scopes = {"kernel": "gelu_scoped_kernel", "names": list(SCOPE_NAMES), "compiled": False,
              "enable_semantic": None, "error": None}
    if pl is None:
        scopes["error"] = "triton.profiler.language does not import: %s" % PL_IMPORT_ERROR
        result.update(scopes=scopes)
        return False
    fn = getattr(pl, "enable_semantic", None)
    if fn is None:
        scopes["enable_semantic"] = "absent"
    else:
        try:
            fn("triton")
            scopes["enable_semantic"] = "called"
        except Exception as exc:  # recorded raw; the launch says whether scopes compile
            scopes["enable_semantic"] = "raised %s: %s" % (type(exc).__name__, exc)
    result.update(scopes=scopes)
    return True


def session_facts():
    """What the running session is, as Triton itself holds it: the instrumentation
    mode it compiles kernels with, and whether Proton's command line owns it."""
    facts = {"session_mode": None, "under_cli": None}
    knobs = getattr(getattr(triton, "knobs", None), "compilation", None)
    if knobs is not None:
        value = getattr(knobs, "instrumentation_mode", None)
        facts["session_mode"] = str(value) if value else None
    try:
        from triton.profiler.flags import flags
    except ImportError:
        pass
    else:
        facts["under_cli"] = bool(getattr(flags, "command_line", False))
    return facts


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=4194304)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--backend", default=None)
    p.add_argument("--backend-mode", default=None)
    p.add_argument("--context", default=None, help="proton.start(context=...) (Proton's default: shadow)")
    p.add_argument("--data", default=None, help="proton.start(data=...) (Proton's default: tree)")
    p.add_argument("--kernel", choices=("auto", "plain", "scoped", "mixed"), default="auto",
                   help="auto: the scoped kernel for instrumentation, the plain one otherwise; mixed: the scoped "
                        "kernel, then the plain one, in every iteration of one session")
    p.add_argument("--name", default="gelu", help="Proton session name (the profile's path without suffix)")
    p.add_argument("--block", type=int, default=1024)
    p.add_argument("--result", default=None, help="write a JSON summary here (for proton-survey)")
    p.add_argument("--no-self-check", action="store_true")
    args = p.parse_args(argv)
    result = Result(args.result)
    kernel_kind = args.kernel
    if kernel_kind == "auto":
        kernel_kind = "scoped" if args.backend == "instrumentation" else "plain"
    result.update(size=args.size, iters=args.iters, backend=args.backend, mode=args.backend_mode,
                  context=args.context, data=args.data, kernel=kernel_kind)

    if args.backend is not None:
        backends, has_registry = available_backends()
        if args.backend not in backends:
            where = "libproton.get_available_profilers()" if has_registry else (
                "the pre-registry backend set (this Triton has no get_available_profilers)")
            cannot_run(result, outcomes.UNKNOWN_BACKEND,
                       "Triton %s cannot offer backend %r (it has %s, from %s)" % (
                           triton.__version__, args.backend, backends, where),
                       "%s; this one has %s" % (classify.FIXES[outcomes.UNKNOWN_BACKEND], ", ".join(backends)))
        if getattr(triton.knobs.proton, "disable", False):
            cannot_run(result, outcomes.DISABLED, "Proton is disabled by TRITON_PROTON_DISABLE",
                       classify.FIXES[outcomes.DISABLED])

    try:
        target = triton.runtime.driver.active.get_current_target()
    except RuntimeError as exc:
        if classify.classify_message(str(exc), False)["outcome"] == outcomes.NO_GPU:
            cannot_run(result, outcomes.NO_GPU, "no GPU: %s" % exc, classify.FIXES[outcomes.NO_GPU])
        raise
    if torch is None:
        raise TORCH_IMPORT_ERROR
    device = "cuda"  # torch spells both CUDA and ROCm devices "cuda"
    say("device=%s target=%s" % (torch.cuda.get_device_name(0), target))
    say("size=%d iters=%d triton=%s torch=%s kernel=%s" % (args.size, args.iters, triton.__version__,
                                                          torch.__version__, kernel_kind))
    result.update(device=torch.cuda.get_device_name(0), target=str(target), torch=torch.__version__)

    kernels = [gelu_kernel]
    if kernel_kind in ("scoped", "mixed"):
        if prepare_scopes(result):
            kernels = [gelu_scoped_kernel] + ([gelu_kernel] if kernel_kind == "mixed" else [])
        else:
            kernel_kind = "plain"  # no scopes on this build (recorded above): the plain kernel still self-checks
            result.update(kernel=kernel_kind)

    x = torch.randn(args.size, device=device, dtype=torch.float32)
    y = torch.empty_like(x)
    grid = (triton.cdiv(args.size, args.block),)
    in_session = 0  # launches a session started here (or the command line's) could record
    compiled_first = args.backend != "instrumentation"
    if compiled_first:
        for kernel in kernels:
            kernel[grid](x, y, args.size, BLOCK=args.block)  # compile outside the capture
        torch.cuda.synchronize()
    # (The instrumentation backend instruments kernels as they compile, so there
    # the kernel compiles inside the session, on its first launch.)

    session = None
    if args.backend is not None:
        kwargs = {"backend": args.backend}
        if args.backend_mode:
            kwargs["mode"] = args.backend_mode
        if args.context:
            kwargs["context"] = args.context
        if args.data:
            kwargs["data"] = args.data
        try:
            session = proton.start(args.name, **kwargs)
        except Exception as exc:  # classified, or re-raised
            classify_start_error(result, exc, args.backend, args.backend_mode)
        if session is None:
            cannot_run(result, outcomes.DISABLED, "proton.start() returned None: profiling is disabled",
                       classify.FIXES[outcomes.DISABLED])
        result.update(phase="capturing", session=session)

    t0 = time.perf_counter()
    for i in range(args.iters):
        for kernel in kernels:
            if i == 0 and not compiled_first:
                try:
                    kernel[grid](x, y, args.size, BLOCK=args.block)
                except Exception as exc:  # the kernel compiled (and was refused) here
                    if session is None:
                        raise
                    classify_start_error(result, exc, args.backend, args.backend_mode, when="launch")
            else:
                kernel[grid](x, y, args.size, BLOCK=args.block)
    torch.cuda.synchronize()
    loop_s = time.perf_counter() - t0
    in_session = args.iters * len(kernels)
    if kernel_kind in ("scoped", "mixed"):
        scopes = dict(result.data["scopes"])
        scopes["compiled"] = True
        result.update(scopes=scopes)
    facts = session_facts()
    if facts["under_cli"] and compiled_first:
        in_session += len(kernels)  # the command line's session was already running when they compiled
    result.update(launches_in_session=in_session, **facts)

    if session is not None:
        proton.finalize()
        result.update(phase="finalized", artifact=args.name)
        say("capture written under %s" % args.name)
    result.update(loop_s=loop_s)

    if args.no_self_check:
        result.update(outcome="ok", exit_code=EXIT_PASS, max_abs_err=None, phase="done")
        return EXIT_PASS
    ref = torch.nn.functional.gelu(x, approximate="none")
    err = (y - ref).abs().max().item()
    say("max_abs_err=%.3g" % err)
    result.update(max_abs_err=err)
    if not (err <= TOLERANCE):  # written so that NaN fails
        say("FAIL: max_abs_err %r exceeds %g" % (err, TOLERANCE))
        result.update(outcome="self_check_failed", exit_code=EXIT_SELF_CHECK, phase="done")
        return EXIT_SELF_CHECK
    say("PASS")
    result.update(outcome="ok", exit_code=EXIT_PASS, phase="done")
    return EXIT_PASS


if __name__ == "__main__":
    # No SystemExit on success: under Proton's command line (which runs this file
    # with exec) it would skip the command line's own finalize().
    _rc = main()
    if _rc:
        sys.exit(_rc)
