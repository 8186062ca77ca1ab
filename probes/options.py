"""Proton's options past backend and mode, each measured by a capture of its own.

aorta 0.3.0's ``proton`` collector (``aorta/instrumentation/proton/_options.py`` and
``__init__.py``) hands Proton, besides the backend:

- ``context`` (shadow | python) and ``data`` (tree | trace): ``--context`` and
  ``--data`` of Proton's command line (``mode: cli``), or ``AORTA_PROTON_CONTEXT``
  / ``AORTA_PROTON_DATA`` for a payload that calls ``proton.start`` itself
  (``mode: env``). Triton 3.6.0 passes both to ``libproton.start`` from
  ``proton.start`` and from its command line (``profile.py start``, ``proton.py
  run_profiling``); its argparse takes only those values (``choices``), and
  libproton refuses others ("Unknown context source: ", "Unknown data: ").
- Proton's mode, rendered from ``instrumentation_mode`` (default | mma |
  pcsampling) and ``granularity`` as ``NAME[:granularity=G]`` (``mode_argument``),
  only with ``backend: instrumentation``: ``--mode`` on the command line, or
  ``AORTA_PROTON_MODE``. In Triton 3.6.0 ``proton.start`` hands it to
  ``InstrumentationHook`` (``hooks/instrumentation.py _interpret_mode``: names
  other than default and mma raise "Unknown mode: ...", an option without ``=``
  "Malformed instrumentation option: ...", a granularity outside
  ``mode.granularities`` "Unknown granularity: ..."), and the kernels compile with
  it (``add_convert_proton_to_protongpu``), which is where a granularity the
  compiler does not take fails. Triton 3.6.0's command line parses ``--mode`` but
  never passes it to ``start`` (``run_profiling``).
- the launch itself (``mode: cli``): ``python -m triton.profiler.proton -n NAME
  [-b BACKEND] --context C --data D [--mode M] script.py``; its ``-b`` takes only
  the backends argparse lists (``choices``).

aorta 0.3.0 passes no ``hook`` (its validator refuses the key) and no output format
(the command line's ``finalize()`` writes the data's default format).

What each check varies is measured where it acts: a capture of the GELU payload
(``probes/capture.py``) per option value, in its own process with the capture
timeout, run only for backends whose plain ``proton.start`` worked in this
environment (a backend that does not start cannot say anything about its options).
The ``cli`` check with ``--mode mma`` reads the mode the command line's session
really compiles with (``triton.knobs.compilation.instrumentation_mode``). The
``kernels`` check runs, for instrumentation, the scoped kernel and an unscoped one
in every iteration of one session, as a workload with both kinds of kernel does,
once in the backend's default mode and once in mma.
"""

from . import records

CONTEXTS = ("python",)  # besides Proton's default, shadow
DATA = ("trace",)  # besides Proton's default, tree
# aorta 0.3.0 _options.py GRANULARITIES; the same nine names as Triton 3.6.0's
# profiler/mode.py ``granularities``.
GRANULARITIES = ("cta", "warp", "warp_2", "warp_4", "warp_8", "warp_group", "warp_group_2", "warp_group_4",
                 "warp_group_8")
# instrumentation_mode values that reach the granularity (pcsampling is refused by
# name, which the grid's own (instrumentation, pcsampling) check measures).
INSTRUMENTATION_MODES = ("default", "mma")
# A mode the command line is given, to see whether its session uses it.
CLI_MODE = "mma"
# The session modes the kernel-shape checks run in (None: the backend's default).
SHAPE_MODES = (None, "mma")
# The shapes of an instrumentation workload's kernels: only scoped ones, only
# unscoped ones, both in one session.
KERNEL_SHAPES = ("scoped", "plain", "mixed")
# Launches per option capture: each says whether the option works and what it
# records, not what it costs (an instrumentation trace holds an event per scope,
# warp and launch: 2.5 million events, 690 MB, for 50 launches of the payload).
ITERS = 5


def started(entries):
    """Backends whose plain proton.start worked here (clean, live, no mode; for
    instrumentation its own default mode counts too)."""
    out = []
    for e in entries:
        if e["env"] != "clean" or e["stub"] or e["outcome"] != "ok":
            continue
        if e["mode"] is None or (e["backend"] == "instrumentation" and e["mode"] == "default"):
            if e["backend"] not in out:
                out.append(e["backend"])
    return out


def plan(backends):
    """(option, value, capture keyword arguments) for every check, in report order."""
    checks = []  # type: list
    for b in backends:
        for c in CONTEXTS:
            checks.append(("context", c, {"backend": b, "mode": None, "context": c}))
        for d in DATA:
            checks.append(("data", d, {"backend": b, "mode": None, "data": d}))
        checks.append(("cli", None, {"backend": b, "mode": None, "attach": "cli"}))
    if "instrumentation" in backends:
        for name in INSTRUMENTATION_MODES:
            for g in GRANULARITIES:
                mode = "%s:granularity=%s" % (name, g)
                checks.append(("mode", mode, {"backend": "instrumentation", "mode": mode}))
        checks.append(("cli", CLI_MODE, {"backend": "instrumentation", "mode": CLI_MODE, "attach": "cli"}))
        # Each shape of workload apart (on the H200, Triton 3.6.0 captured the scoped
        # kernel alone, recorded nothing of the unscoped one alone, and died of
        # SIGFPE where one session launched both), in the default mode and in mma.
        for session_mode in SHAPE_MODES:
            for shape in KERNEL_SHAPES:
                checks.append(("kernels", shape, {"backend": "instrumentation", "mode": session_mode,
                                                  "kernel": shape}))
    return checks


def run(probe, pool, entries):
    """Every option check of the backends that started, each a capture of its own
    (submitted to ``pool``), as option_result records in plan order."""
    from . import capture

    futures = []
    for option, value, kwargs in plan(started(entries)):
        futures.append((option, value, pool.submit(capture.run_capture, probe,
                                                   iters=min(ITERS, probe.opts.capture_iters), **kwargs)))
    return [records.make("option_result", option=o, value=v, capture=f.result()) for o, v, f in futures]
