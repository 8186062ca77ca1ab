#!/usr/bin/env python3
"""The GELU payload's kernel on a GPU, as ratios measured in one run.

1. Bandwidth: the exact-erf GELU kernel (probes/gelu.py) against a
   device-to-device copy of the same bytes (read N floats, write N floats), at a
   size well past the L2 cache. GELU is elementwise, so the copy is its ceiling;
   the ratio says how close the erf expansion lets it get.
2. Capture overhead: the payload's launch loop timed with a Proton capture
   running (``--backend``, default cupti) over the same loop without one.

    python bench/bench_gelu.py [--size 268435456] [--iters 50] [--backend cupti] [--output FILE]

Needs a GPU, torch and Triton. Imports Proton before torch (see probes/gelu.py).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Proton before torch: importing probes.gelu imports triton.profiler first.
from probes import gelu  # noqa: E402,I001
import triton  # noqa: E402,I001
import triton.profiler as proton  # noqa: E402,I001
import torch  # noqa: E402,I001


def cuda_time(fn, reps):
    """Median milliseconds of fn() over reps, with CUDA events."""
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def loop_seconds(launch, iters):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        launch()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1 << 28, help="elements (float32); default 2^28 = 1 GiB per tensor")
    ap.add_argument("--iters", type=int, default=50, help="launches per timed loop")
    ap.add_argument("--reps", type=int, default=20, help="repetitions for the bandwidth medians")
    ap.add_argument("--loops", type=int, default=9, help="timed loops with and without capture (alternating)")
    ap.add_argument("--backend", default="cupti")
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--output", default=None)
    args = ap.parse_args()

    n = args.size
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    grid = (triton.cdiv(n, args.block),)

    def launch():
        gelu.gelu_kernel[grid](x, y, n, BLOCK=args.block)

    launch()  # compile
    torch.cuda.synchronize()
    ref = torch.nn.functional.gelu(x, approximate="none")
    err = (y - ref).abs().max().item()
    del ref

    bytes_moved = 2 * n * x.element_size()
    for _ in range(3):
        launch()
        y.copy_(x)
    gelu_ms = cuda_time(launch, args.reps)
    copy_ms = cuda_time(lambda: y.copy_(x), args.reps)
    gelu_bw = bytes_moved / (gelu_ms / 1e3) / 1e12
    copy_bw = bytes_moved / (copy_ms / 1e3) / 1e12

    # Capture overhead, measured right: the session's one-off costs (start, the
    # first launches it sees, finalize) apart from the per-launch cost. One
    # session, warmed up; inside it loops alternate between capturing
    # (proton.activate) and not (proton.deactivate), in the same process.
    work = tempfile.mkdtemp(prefix="bench-gelu-")
    plain_before = loop_seconds(launch, args.iters)
    t0 = time.perf_counter()
    session = proton.start(os.path.join(work, "cap"), backend=args.backend)
    start_s = time.perf_counter() - t0
    warm_s = loop_seconds(launch, args.iters)  # the first captured loop: includes the session's warm-up
    plain, captured = [], []
    for _ in range(args.loops):
        proton.deactivate(session)
        plain.append(loop_seconds(launch, args.iters))
        proton.activate(session)
        captured.append(loop_seconds(launch, args.iters))
    t0 = time.perf_counter()
    proton.finalize()
    finalize_s = time.perf_counter() - t0
    plain_s = statistics.median(plain)
    cap_s = statistics.median(captured)

    res = {
        "device": torch.cuda.get_device_name(0),
        "triton": triton.__version__,
        "torch": torch.__version__,
        "size_elements": n,
        "bytes_per_pass": bytes_moved,
        "l2_bytes": getattr(torch.cuda.get_device_properties(0), "L2_cache_size", None),
        "max_abs_err": err,
        "gelu_ms": round(gelu_ms, 4),
        "copy_ms": round(copy_ms, 4),
        "gelu_TBps": round(gelu_bw, 3),
        "copy_TBps": round(copy_bw, 3),
        "gelu_over_copy_bandwidth": round(gelu_bw / copy_bw, 3),
        "backend": args.backend,
        "iters": args.iters,
        "loops": args.loops,
        "loop_s_before_session": round(plain_before, 5),
        "loop_s_without_capture": round(plain_s, 5),
        "loop_s_with_capture": round(cap_s, 5),
        "per_launch_overhead_ratio": round(cap_s / plain_s, 4),
        "per_launch_overhead_us": round((cap_s - plain_s) / args.iters * 1e6, 2),
        "session_start_s": round(start_s, 4),
        "first_captured_loop_s": round(warm_s, 5),
        "session_finalize_s": round(finalize_s, 4),
        "goal_per_launch_overhead_ratio": 1.05,
    }
    print(json.dumps(res, indent=1))
    print(f"per-launch overhead, capturing vs deactivated in one session: {cap_s / plain_s:.4f}x (goal <= 1.05x: "
          f"{'met' if cap_s / plain_s <= 1.05 else 'NOT met'}); one-off: start {start_s * 1e3:.1f} ms, first "
          f"captured loop {warm_s * 1e3:.1f} ms, finalize {finalize_s * 1e3:.1f} ms")
    if args.output:
        with open(args.output, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
