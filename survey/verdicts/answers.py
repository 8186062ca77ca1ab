"""Yes, no or no answer: what one run says about a backend, a mode, its libraries
and a capture. ``survey check`` (and ``/check``), the "since" summary and the
documented claims ask these questions of the stored evidence, so each is answered
once, here, in one :class:`Answer`:

- ``backend_present``: does the build have the backend? Its profiler registry
  (``libproton.get_available_profilers()``, Triton >= 3.8.0) where it was read,
  else the proton CLI's ``-b`` choices, else ``proton.start`` itself (every check
  of the backend refused it as unknown: no; one got past the backend: yes).
- ``mode_accepted``: does the build accept the mode? (the verdict: live, else
  from the stub-library rerun; not applicable where the backend is absent)
- ``library_loads``: do the shared libraries Proton loads for the backend load?
  (which soname, and the fix)
- ``works``: did a GELU capture with it succeed? (``ok``; a capture that failed
  or recorded nothing is a no; one that could not run here, or none at all, is
  no answer: a refused mode is ``mode_accepted``'s no, not this one's)

Each question reads the checks as published (``survey.verdicts.stability``): a check
seen unstable in any run of the environment answers nothing, neither yes nor
no, so an unstable check never moves a "since" line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from db import models as m
from probes import outcomes as O
from survey.verdicts.modes import Acceptance, ModeVerdict, published_checks, published_verdicts

Word = Literal["yes", "no", "unknown", "not_applicable"]
YES: Literal["yes"] = "yes"
NO: Literal["no"] = "no"
UNKNOWN: Literal["unknown"] = "unknown"
NOT_APPLICABLE: Literal["not_applicable"] = "not_applicable"
# A capture outcome that says nothing about the build: it could not run here.
_NO_ANSWER_CAPTURES = (O.NO_GPU, O.DISABLED, O.DEVICES_ENV_REJECTED, O.UNSTABLE)


@dataclass(frozen=True)
class Answer:
    """One answer to one question, and how it is known."""

    answer: Annotated[Word, Field(description="yes, no, unknown (this evidence does not say), or not_applicable")]
    basis: Annotated[str, Field(description="how we know")]
    source: Annotated[str | None, Field(
        description="registry | cli | live | stub | libraries | capture (null: nothing answered)")] = None
    library: Annotated[str | None, Field(description="the soname, for library_loads")] = None
    fix: Annotated[str | None, Field(description="what to do about a no, where it is known")] = None

    @property
    def known(self) -> bool:
        """A yes or a no."""
        return self.answer in (YES, NO)

    @property
    def stub(self) -> bool:
        """Answered through a stub library, not live."""
        return self.source == "stub"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdicts_of(run: m.Run, backend: str) -> list[ModeVerdict]:
    return [v for v in published_verdicts(run) if v.backend == backend]


def backend_present(run: m.Run, backend: str) -> Answer:
    if run.profilers is not None:
        ok = backend in run.profilers
        return Answer(YES if ok else NO, f"libproton.get_available_profilers() {'lists' if ok else 'lacks'} it",
                      "registry")
    if run.cli_backends is not None:
        ok = backend in run.cli_backends
        return Answer(YES if ok else NO, f"the proton CLI's -b choices {'list' if ok else 'lack'} it", "cli")
    vs = verdicts_of(run, backend)
    if vs and all(v.verdict == Acceptance.ABSENT for v in vs):
        return Answer(NO, f"proton.start: {vs[0].message}", "live")
    if vs and all(v.verdict == Acceptance.ABSENT or v.outcome == O.UNSTABLE for v in vs):
        return Answer(UNKNOWN, "unstable: what is left settled says absent")  # decided by neither
    if vs:
        return Answer(YES, "proton.start got past the backend", "live")
    return Answer(UNKNOWN, "neither the registry nor the CLI choices were read")


def verdict_of(run: m.Run, backend: str, mode: str | None) -> ModeVerdict | None:
    return published_checks(run).get((backend, mode))


def mode_accepted(v: ModeVerdict | None) -> Answer:
    """The verdict of one (backend, mode) check (``verdict_of``) as an answer."""
    if v is None:
        return Answer(UNKNOWN, "not checked by the probe")
    if v.verdict == Acceptance.ACCEPTED:
        return Answer(YES, v.reason, v.source)
    if v.verdict == Acceptance.REFUSED:
        return Answer(NO, v.reason, v.source)
    if v.verdict == Acceptance.ABSENT:
        return Answer(NOT_APPLICABLE, "the backend is absent")
    return Answer(UNKNOWN, v.reason, v.source)


def library_loads(run: m.Run, backend: str, v: ModeVerdict | None) -> Answer:
    libs = [lib for lib in run.libraries if backend in (lib.backends or [])]
    missing = [lib for lib in libs if lib.loads is False]
    if v is not None and v.outcome == O.LIBRARY_MISSING and v.library:
        row = next((lib for lib in run.libraries if lib.name == v.library), None)
        return Answer(NO, f"Proton could not load `{v.library}`: {v.message}", "live", v.library,
                      (row.fix if row is not None and row.fix else f"provide `{v.library}` on the loader path"))
    if missing:
        lib = missing[0]
        return Answer(NO, f"`{lib.name}` does not load: {lib.error}", "libraries", lib.name, lib.fix)
    if libs and all(lib.loads for lib in libs):
        return Answer(YES, ", ".join(f"`{lib.name}` loads" for lib in libs), "libraries")
    if not libs:
        return Answer(NOT_APPLICABLE, "libproton.so names no library for this backend")
    return Answer(UNKNOWN, "the library look-up did not complete")


def works(run: m.Run, backend: str, mode: str | None) -> Answer:
    v = verdict_of(run, backend, mode)
    if v is not None and v.outcome == O.UNSTABLE:
        return Answer(UNKNOWN, "unstable")  # a capture ran only in the runs where start() happened to work
    cap = next((c for c in run.captures if c.backend == backend and c.mode == mode), None)
    if cap is None:
        return Answer(UNKNOWN, "no capture")
    if cap.outcome == O.OK:
        return Answer(YES, f"capture ok ({cap.kernel_count} launches)" if cap.kernel_count is not None
                      else "capture ok", "capture")
    if cap.outcome in _NO_ANSWER_CAPTURES:
        return Answer(UNKNOWN, cap.outcome.replace("_", " "), "capture")
    return Answer(NO, cap.outcome.replace("_", " "), "capture")


class Question(StrEnum):
    """What :func:`ask` asks of a run about (backend, mode)."""

    PRESENT = "present"  # does the build have the backend?
    ACCEPTED = "accepted"  # does it accept the mode?
    WORKS = "works"  # does a capture with it work?


def ask(run: m.Run, question: Question, backend: str, mode: str | None) -> Answer:
    """``present``, ``accepted`` or ``works`` of (backend, mode) in ``run``."""
    if question == Question.PRESENT:
        return backend_present(run, backend)
    if question == Question.ACCEPTED:
        return mode_accepted(verdict_of(run, backend, mode))
    if question == Question.WORKS:
        return works(run, backend, mode)
    raise ValueError(f"unknown question {question!r}")
