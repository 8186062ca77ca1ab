"""Yes, no or no answer: what one run says about a backend, a mode and a capture.

The "since" summary and the documented claims ask the same three questions of
the stored evidence, so they are answered once, here:

- ``present``: does the build have the backend? (``proton.start`` did not raise
  an unknown-backend error for some mode)
- ``accepted``: does the build accept the mode? (the verdict: live, else from
  the stub-library rerun)
- ``works``: did a GELU capture with it succeed? (``ok``; a capture that failed
  or recorded nothing is a no; one that could not run here, or none at all, is
  no answer: a refused mode is the ``accepted`` question's no, not this one's)
"""

from __future__ import annotations

from dataclasses import dataclass

from db import models as m
from probes import outcomes as O
from survey.verdicts.modes import ModeVerdict, run_verdicts

# A capture outcome that says nothing about the build: it could not run here.
_NO_ANSWER_CAPTURES = (O.NO_GPU, O.DISABLED, O.DEVICES_ENV_REJECTED, O.UNSTABLE)


@dataclass(frozen=True)
class Answer:
    answer: bool | None  # True yes, False no, None no answer from this run
    stub: bool = False  # answered through a stub library, not live
    detail: str = ""  # what was seen, in words


def verdicts_of(run: m.Run, backend: str) -> list[ModeVerdict]:
    return [v for v in run_verdicts(run) if v.backend == backend]


def present(run: m.Run, backend: str) -> Answer:
    vs = verdicts_of(run, backend)
    if not vs:
        return Answer(None, detail="not checked")
    if all(v.outcome == O.UNKNOWN_BACKEND for v in vs):
        return Answer(False, detail="backend absent")
    return Answer(True, detail="backend present")


def accepted(run: m.Run, backend: str, mode: str | None) -> Answer:
    v = next((v for v in verdicts_of(run, backend) if v.mode == mode), None)
    if v is None:
        return Answer(None, detail="not checked")
    stub = v.source == "stub"
    if v.verdict == "accepted":
        return Answer(True, stub, "accepted")
    if v.verdict == "refused":
        return Answer(False, stub, "refused")
    if v.verdict == "absent":
        return Answer(False, False, "backend absent")
    return Answer(None, detail=v.outcome.replace("_", " "))


def works(run: m.Run, backend: str, mode: str | None) -> Answer:
    cap = next((c for c in run.captures if c.backend == backend and c.mode == mode), None)
    if cap is None:
        return Answer(None, detail="no capture")
    if cap.outcome == O.OK:
        return Answer(True, detail=f"capture ok ({cap.kernel_count} launches)" if cap.kernel_count is not None
                      else "capture ok")
    if cap.outcome in _NO_ANSWER_CAPTURES:
        return Answer(None, detail=cap.outcome.replace("_", " "))
    return Answer(False, detail=cap.outcome.replace("_", " "))


def ask(run: m.Run, question: str, backend: str, mode: str | None) -> Answer:
    if question == "present":
        return present(run, backend)
    if question == "accepted":
        return accepted(run, backend, mode)
    if question == "works":
        return works(run, backend, mode)
    raise ValueError(f"unknown question {question!r}")
