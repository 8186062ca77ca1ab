"""One hierarchy for everything a user can get wrong or a target can refuse.

Each error carries the exit code the CLI uses and, where there is one, a hint
that names the fix. Nothing raising these has written anything to the store.
"""

from __future__ import annotations

from survey.core import exitcodes


class SurveyError(Exception):
    exit_code = exitcodes.FAILURE

    def __init__(self, message: str, *, hint: str | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.field = field


# ---- usage -----------------------------------------------------------------
class UsageProblem(SurveyError):
    """A command line that names no valid choice (a backend, a mode, a format)."""

    exit_code = exitcodes.USAGE


def choose(value: str, choices: tuple[str, ...] | list[str], what: str) -> str:
    """``value`` if it is one of ``choices``, else a usage error that suggests the nearest."""
    if value in choices:
        return value
    import difflib

    near = difflib.get_close_matches(value, list(choices), n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise UsageProblem(f"unknown {what} {value!r}; {hint}one of {', '.join(choices)}", field=what)


# ---- bad input -------------------------------------------------------------
class InputError(SurveyError):
    exit_code = exitcodes.INPUT


class InvalidReport(InputError):
    """A probe report that is not JSON or does not match the schema."""


class CatalogError(InputError):
    pass


class RecipeError(InputError):
    pass


class EnvironmentsError(InputError):
    """An aorta environments sidecar or plugin payload that aorta would refuse."""


class UnknownTarget(InputError):
    pass


class StoreUnusable(InputError):
    """The database URL or schema cannot be used."""


# ---- the target cannot be probed ------------------------------------------
class TargetError(SurveyError):
    pass


class NotAPython(TargetError):
    exit_code = exitcodes.NOT_A_PYTHON


class ProbeFailed(TargetError):
    """The probe itself hung, died or printed no report."""

    exit_code = exitcodes.PROBE_FAILED


class Unobtainable(TargetError):
    """A candidate could not be obtained here (pip, pull, build failed)."""

    exit_code = exitcodes.UNOBTAINABLE


class EngineUnavailable(TargetError):
    """No container engine installed or running."""

    exit_code = exitcodes.ENGINE_UNAVAILABLE


class ImageNotFound(TargetError):
    exit_code = exitcodes.UNOBTAINABLE


# ---- the fleet ---------------------------------------------------------------
class FleetUnavailable(SurveyError):
    """``survey run --ray``: Ray is not installed, or no Ray cluster answers at the address."""

    exit_code = exitcodes.ENGINE_UNAVAILABLE
