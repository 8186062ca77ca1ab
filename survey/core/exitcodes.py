"""Exit codes of the ``survey`` CLI, in one place.

2 follows aorta's payloads: "this environment cannot run it". Usage errors use
64 (EX_USAGE) rather than click's 2, so 2 keeps that one meaning.
"""

OK = 0  # it worked; `survey check`: it will run
FAILURE = 1  # e.g. `survey table --check`: the docs table no longer matches the evidence
CANNOT_RUN = 2  # `survey check`: this environment cannot run it
NOT_ENOUGH_EVIDENCE = 3  # `survey check`: the evidence does not answer the question
NOT_A_PYTHON = 4  # `survey probe --python PATH`: PATH is not a (usable) Python >= 3.8
NO_TRITON = 5  # the Python has no Triton (a report is still written)
PROBE_FAILED = 6  # the probe hung, died or printed no report
UNOBTAINABLE = 7  # the candidate could not be obtained here (pip, pull, build)
CONDITIONAL = 8  # `survey check --recipe`: a profile is left only on a stated condition on the workload (measured)
USAGE = 64  # EX_USAGE: an unknown command, option, backend, mode or format (with "did you mean")
INPUT = 65  # EX_DATAERR: invalid report, catalog, recipe or unknown target
ENGINE_UNAVAILABLE = 69  # EX_UNAVAILABLE: no container engine; `run --ray`: no Ray or cluster; an extra missing
IO_ERROR = 74  # EX_IOERR: the store's file cannot be read or written (an I/O error, no permission)
