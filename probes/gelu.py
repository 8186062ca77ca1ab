#!/usr/bin/env python3
"""Exact-erf GELU in Triton, launched in a loop and captured by Proton.

    python gelu.py [--size N] [--iters K] [--backend B] [--backend-mode M]

Exit codes: 0 pass; 1 the self-check failed; 2 this environment cannot run it
(no GPU, backend absent, mode refused, library will not load, device-visibility
variable rejected), each with its own message naming the fix. Anything else is
re-raised with its traceback, never explained away.

With no --backend the kernel runs and is checked, and nothing is captured: that
confirms the payload itself is sound on the Triton at hand.

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


def classify_start_error(result, exc, backend, mode):
    """Classify what proton.start raised with the probe's own classifier
    (probes/classify.py: one set of rules, each citing Triton's source); anything
    it does not recognise is re-raised, never explained away."""
    text = str(exc)
    nvidia = any(re.match(r"nvidia\d+$", n) for n in _dev_entries())
    cls = classify.classify_message(text, nvidia)
    if cls["outcome"] == outcomes.ERROR:
        raise exc
    what = {
        outcomes.LIBRARY_MISSING: "Proton could not start: %s" % text,
        outcomes.UNSUPPORTED_MODE: "Proton refused backend=%r with mode=%r: %s" % (backend, mode, text),
        outcomes.UNKNOWN_BACKEND: "Proton does not know backend %r: %s" % (backend, text),
        outcomes.NO_GPU: "no GPU: %s" % text,
    }.get(cls["outcome"], text)
    cannot_run(result, cls["outcome"], what, classify.FIXES.get(cls["outcome"], ""), rule=cls["rule"])


def _dev_entries():
    try:
        return os.listdir("/dev")
    except OSError:
        return []


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=4194304)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--backend", default=None)
    p.add_argument("--backend-mode", default=None)
    p.add_argument("--name", default="gelu", help="Proton session name (the .hatchet path without suffix)")
    p.add_argument("--block", type=int, default=1024)
    p.add_argument("--result", default=None, help="write a JSON summary here (for proton-survey)")
    p.add_argument("--no-self-check", action="store_true")
    args = p.parse_args(argv)
    result = Result(args.result)
    result.update(size=args.size, iters=args.iters, backend=args.backend, mode=args.backend_mode)

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
    say("size=%d iters=%d triton=%s torch=%s" % (args.size, args.iters, triton.__version__, torch.__version__))
    result.update(device=torch.cuda.get_device_name(0), target=str(target), torch=torch.__version__)

    x = torch.randn(args.size, device=device, dtype=torch.float32)
    y = torch.empty_like(x)
    grid = (triton.cdiv(args.size, args.block),)
    if args.backend != "instrumentation":
        gelu_kernel[grid](x, y, args.size, BLOCK=args.block)  # compile outside the capture
        torch.cuda.synchronize()
    # (The instrumentation backend instruments kernels as they compile, so there
    # the kernel compiles inside the session, on its first launch.)

    session = None
    if args.backend is not None:
        kwargs = {"backend": args.backend}
        if args.backend_mode:
            kwargs["mode"] = args.backend_mode
        try:
            session = proton.start(args.name, **kwargs)
        except Exception as exc:  # classified, or re-raised
            classify_start_error(result, exc, args.backend, args.backend_mode)
        if session is None:
            cannot_run(result, outcomes.DISABLED, "proton.start() returned None: profiling is disabled",
                       classify.FIXES[outcomes.DISABLED])
        result.update(phase="capturing", session=session)

    t0 = time.perf_counter()
    for _ in range(args.iters):
        gelu_kernel[grid](x, y, args.size, BLOCK=args.block)
    torch.cuda.synchronize()
    loop_s = time.perf_counter() - t0

    if session is not None:
        proton.finalize()
        result.update(phase="finalized", artifact=args.name + ".hatchet")
        say("capture written to %s.hatchet" % args.name)
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
    sys.exit(main())
