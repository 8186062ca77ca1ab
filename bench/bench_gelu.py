#!/usr/bin/env python3
"""The GELU payload's kernel on a GPU, as ratios measured in one run.

1. Bandwidth: the exact-erf GELU kernel (probes/gelu.py) against a
   device-to-device copy of the same bytes (read N floats, write N floats), at a
   size well past the L2 cache. GELU is elementwise, so the copy is its ceiling;
   the ratio says how close the erf expansion lets it get.
2. Capture overhead in steady state, per size: the median of ``--loops`` launch
   loops captured by one live Proton session (``--backend``, default cupti), with
   no activate/deactivate between them, over the median of the same loops with no
   session (timed before the session starts and again after it is finalized, in
   the same process). The session's one-off costs (start, its first loop,
   finalize) are reported apart.
3. The cost of toggling a live session, apart: ``proton.deactivate`` and
   ``proton.activate`` each make the next launch loop slower, whether capture is
   then off or on; each toggle's next loop is set against the same session's
   steady loops in the same state.

    python bench/bench_gelu.py [--sizes 268435456,4194304] [--iters 50] [--loops 20] [--toggles 5]
                               [--backend cupti] [--output FILE]

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

GOAL_RATIO = 1.05


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


def loops(launch, iters, count):
    return [loop_seconds(launch, iters) for _ in range(count)]


def launcher(n, block):
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    grid = (triton.cdiv(n, block),)

    def launch():
        gelu.gelu_kernel[grid](x, y, n, BLOCK=block)

    launch()  # compile
    torch.cuda.synchronize()
    return x, y, launch


def bandwidth(n, block, reps):
    x, y, launch = launcher(n, block)
    ref = torch.nn.functional.gelu(x, approximate="none")
    err = (y - ref).abs().max().item()
    del ref
    bytes_moved = 2 * n * x.element_size()
    for _ in range(3):
        launch()
        y.copy_(x)
    gelu_ms = cuda_time(launch, reps)
    copy_ms = cuda_time(lambda: y.copy_(x), reps)
    gelu_bw = bytes_moved / (gelu_ms / 1e3) / 1e12
    copy_bw = bytes_moved / (copy_ms / 1e3) / 1e12
    return {
        "size_elements": n,
        "bytes_per_pass": bytes_moved,
        "max_abs_err": err,
        "gelu_ms": round(gelu_ms, 4),
        "copy_ms": round(copy_ms, 4),
        "gelu_TBps": round(gelu_bw, 3),
        "copy_TBps": round(copy_bw, 3),
        "gelu_over_copy_bandwidth": round(gelu_bw / copy_bw, 3),
    }


def steady_overhead(n, block, iters, count, backend, work):
    """Captured loops of one live session (no toggling) against plain loops before
    and after it, in the same process."""
    _x, _y, launch = launcher(n, block)
    loop_seconds(launch, iters)  # warm
    before = loops(launch, iters, count)
    t0 = time.perf_counter()
    proton.start(os.path.join(work, "steady-%d" % n), backend=backend)
    start_s = time.perf_counter() - t0
    first_s = loop_seconds(launch, iters)  # the session's first loop: its warm-up
    captured = loops(launch, iters, count)
    t0 = time.perf_counter()
    proton.finalize()
    finalize_s = time.perf_counter() - t0
    after = loops(launch, iters, count)
    plain_s = statistics.median(before + after)
    cap_s = statistics.median(captured)
    return {
        "size_elements": n,
        "iters": iters,
        "loops": count,
        "loop_s_plain_before": round(statistics.median(before), 6),
        "loop_s_plain_after": round(statistics.median(after), 6),
        "loop_s_plain": round(plain_s, 6),
        "loop_s_captured": round(cap_s, 6),
        "captured_over_plain": round(cap_s / plain_s, 4),
        "per_launch_overhead_us": round((cap_s - plain_s) / iters * 1e6, 2),
        "goal_ratio": GOAL_RATIO,
        "goal_met": cap_s / plain_s <= GOAL_RATIO,
        "session_start_s": round(start_s, 4),
        "first_captured_loop_s": round(first_s, 5),
        "session_finalize_s": round(finalize_s, 4),
    }


def toggle_cost(n, block, iters, toggles, backend, work):
    """What proton.deactivate / proton.activate cost the next launch loop: each
    toggle's next loop against the steady loops after it, in the same state."""
    _x, _y, launch = launcher(n, block)
    session = proton.start(os.path.join(work, "toggle-%d" % n), backend=backend)
    loops(launch, iters, 3)  # past the session's warm-up
    rows = {"deactivate": [], "activate": []}
    for _ in range(toggles):
        for what, fn in (("deactivate", proton.deactivate), ("activate", proton.activate)):
            fn(session)
            first = loop_seconds(launch, iters)
            steady = statistics.median(loops(launch, iters, 3))
            rows[what].append((first, steady))
    proton.finalize()
    out = {"size_elements": n, "iters": iters, "toggles": toggles}
    for what, pairs in rows.items():
        out[what] = {
            "next_loop_s": round(statistics.median(p[0] for p in pairs), 6),
            "steady_loop_s": round(statistics.median(p[1] for p in pairs), 6),
            "cost_s": round(statistics.median(p[0] - p[1] for p in pairs), 5),
        }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="%d,%d" % (1 << 28, 1 << 22),
                    help="elements (float32) per launch for the overhead figures; the first is also the bandwidth size")
    ap.add_argument("--iters", type=int, default=50, help="launches per timed loop")
    ap.add_argument("--reps", type=int, default=20, help="repetitions for the bandwidth medians")
    ap.add_argument("--loops", type=int, default=20, help="timed loops, captured and plain")
    ap.add_argument("--toggles", type=int, default=5, help="deactivate/activate pairs for the toggle cost")
    ap.add_argument("--backend", default="cupti")
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--output", default=None)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    work = tempfile.mkdtemp(prefix="bench-gelu-")

    res = {
        "device": torch.cuda.get_device_name(0),
        "triton": triton.__version__,
        "torch": torch.__version__,
        "backend": args.backend,
        "l2_bytes": getattr(torch.cuda.get_device_properties(0), "L2_cache_size", None),
        "bandwidth": bandwidth(sizes[0], args.block, args.reps),
        "steady_state": [steady_overhead(n, args.block, args.iters, args.loops, args.backend, work) for n in sizes],
        "toggle": [toggle_cost(n, args.block, args.iters, args.toggles, args.backend, work) for n in sizes],
    }
    print(json.dumps(res, indent=1))
    bw = res["bandwidth"]
    print("GELU / device-to-device copy bandwidth at %d floats: %.3fx (%.3f vs %.3f TB/s)" % (
        bw["size_elements"], bw["gelu_over_copy_bandwidth"], bw["gelu_TBps"], bw["copy_TBps"]))
    for s in res["steady_state"]:
        print("%s capture, steady state, %d floats: %d loops of %d launches captured / plain %.4fx (goal <= %.2fx: "
              "%s); one-off: start %.1f ms, first captured loop %.1f ms, finalize %.1f ms" % (
                  args.backend, s["size_elements"], s["loops"], s["iters"], s["captured_over_plain"], GOAL_RATIO,
                  "met" if s["goal_met"] else "NOT met", s["session_start_s"] * 1e3,
                  s["first_captured_loop_s"] * 1e3, s["session_finalize_s"] * 1e3))
    for t in res["toggle"]:
        print("toggling, %d floats: the loop after proton.deactivate +%.1f ms, after proton.activate +%.1f ms "
              "(each against that state's steady loop)" % (
                  t["size_elements"], t["deactivate"]["cost_s"] * 1e3, t["activate"]["cost_s"] * 1e3))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
