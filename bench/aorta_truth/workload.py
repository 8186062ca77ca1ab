#!/usr/bin/env python3
"""The `_subprocess` workload of the aorta ground-truth recipes: two small Triton
kernels, one without and one with ``triton.profiler.language`` scopes, launched a
few times and checked.

Run as aorta runs a probe-mode command (here by path; the recipes also run it as
``python -m workload``, through ``run.sh``, a console script and pytest's
``test_workload.py``) (``aorta sweep run --recipe R -- python
workload.py``): under ``mode: cli`` aorta wraps it in ``python -m
triton.profiler.proton ...`` and the command line's session captures it; under
``mode: env`` aorta exports ``AORTA_PROTON_NAME`` / ``_BACKEND`` / ``_MODE`` /
``_CONTEXT`` / ``_DATA`` and this script starts and finalizes the session itself,
passing them to ``proton.start`` as they are. It enables Triton-language scopes
(``enable_semantic("triton")``, Triton 3.6.0; instrumentation refuses them
otherwise) where the build has that call. It ends without ``sys.exit`` on success:
under the command line (which runs it with ``exec``) a SystemExit would skip the
command line's own ``finalize()``. What it did is printed as one JSON line.
"""

import json
import os
import sys

# Proton before torch (libproton configures the GPU tools at import).
import triton.profiler as proton  # noqa: I001
import triton  # noqa: I001
import triton.language as tl  # noqa: I001

try:
    import triton.profiler.language as pl  # noqa: I001
except Exception as exc:  # a build without Proton's language: said below
    pl = None
    PL_ERROR = "%s: %s" % (type(exc).__name__, exc)
else:
    PL_ERROR = None
import torch  # noqa: I001

N = 1 << 20
BLOCK = 1024
ITERS = 5
# Which kernels run: both (the default: one session mixing scoped and unscoped
# kernels), or one of them alone: `--kernels scoped|plain|both` (or WORKLOAD_KERNELS).
KERNELS = os.environ.get("WORKLOAD_KERNELS", "both")


def kernels_asked(argv):
    if "--kernels" in argv[:-1]:
        return argv[argv.index("--kernels") + 1]
    return KERNELS


@triton.jit
def axpy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, 2.0 * x + 1.0, mask=mask)


@triton.jit
def scoped_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pl.enter_scope("load")
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    pl.exit_scope("load")
    pl.enter_scope("compute")
    y = x * x - 3.0
    pl.exit_scope("compute")
    pl.enter_scope("store")
    tl.store(y_ptr + offsets, y, mask=mask)
    pl.exit_scope("store")


def main(kernels=None):
    kernels = kernels or kernels_asked(sys.argv)
    said = {"triton": triton.__version__, "torch": torch.__version__, "language": PL_ERROR or "imported"}
    if pl is not None and hasattr(pl, "enable_semantic"):
        pl.enable_semantic("triton")
        said["enable_semantic"] = "called"
    name = os.environ.get("AORTA_PROTON_NAME")
    if name:  # aorta's mode: env
        kwargs = {"backend": os.environ.get("AORTA_PROTON_BACKEND"), "mode": os.environ.get("AORTA_PROTON_MODE")}
        for key in ("context", "data"):
            value = os.environ.get("AORTA_PROTON_" + key.upper())
            if value:
                kwargs[key] = value
        said["proton.start"] = dict(kwargs, name=name)
        said["session"] = proton.start(name, **kwargs)
    x = torch.randn(N, device="cuda", dtype=torch.float32)
    y1 = torch.empty_like(x)
    y2 = torch.empty_like(x)
    grid = (triton.cdiv(N, BLOCK),)
    plain = kernels in ("both", "plain")
    scoped = kernels in ("both", "scoped") and pl is not None
    said["kernels"] = [k for k, run in (("axpy_kernel", plain), ("scoped_kernel", scoped)) if run]
    for _ in range(ITERS):
        if plain:
            axpy_kernel[grid](x, y1, N, BLOCK=BLOCK)
        if scoped:
            scoped_kernel[grid](x, y2, N, BLOCK=BLOCK)
    torch.cuda.synchronize()
    # Tolerances that allow a fused multiply-add (one rounding) against torch's two.
    ok = True
    if plain:
        ok = bool(torch.allclose(y1, 2.0 * x + 1.0, rtol=1e-5, atol=1e-5))
    if scoped:
        ok = ok and bool(torch.allclose(y2, x * x - 3.0, rtol=1e-5, atol=1e-5))
    said["instrumentation_mode"] = str(getattr(getattr(triton.knobs, "compilation", None), "instrumentation_mode",
                                               "") or "") or None
    if name:
        proton.finalize()
    said["passed"] = ok
    print("workload: " + json.dumps(said, sort_keys=True), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    _rc = main()
    if _rc:
        sys.exit(_rc)
