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


# Other spellings of a choice, suggested (never taken silently): `--format markdown` -> md.
ALIASES = {"markdown": "md", "htm": "html", "table": "grid", "text": "md", "tsv": "csv"}


def nearest(value: str, choices: tuple[str, ...] | list[str]) -> str | None:
    """The choice ``value`` was most likely meant to be: the same but for case, an
    alias, a choice it begins (``captur`` -> ``capture``) or the closest spelling
    (``cuptii`` -> ``cupti``, ``triton3.8.0`` -> ``triton-3.8.0``); None if none is close."""
    import difflib

    options = [c for c in choices if c]
    folded = {c.lower(): c for c in options}
    low = value.strip().lower()
    if low in folded:
        return folded[low]
    if ALIASES.get(low) in options:
        return ALIASES[low]
    starts = [c for c in options if len(low) >= 3 and c.lower().startswith(low)]
    if len(starts) == 1:
        return starts[0]
    near = difflib.get_close_matches(low, list(folded), n=1, cutoff=0.75)
    return folded[near[0]] if near else None


def did_you_mean(value: str, choices: tuple[str, ...] | list[str]) -> str:
    """``"did you mean 'x'? "`` or ``""``: to put in front of the list of choices."""
    near = nearest(value, choices)
    return f"did you mean {near!r}? " if near is not None else ""


def suggestion(value: object, choices: tuple[str, ...] | list[str]) -> str:
    """``"; did you mean 'x'?"`` or ``""``: to follow a refusal of ``value``."""
    near = nearest(value, choices) if isinstance(value, str) else None
    return f"; did you mean {near!r}?" if near is not None else ""


def choose(value: str, choices: tuple[str, ...] | list[str], what: str, where: str | None = None) -> str:
    """``value`` if it is one of ``choices``, else a usage error that suggests the nearest
    (``where``: what was typed, when ``value`` is a part of it: ``--only cuptii:pcsampling``)."""
    if value in choices:
        return value
    raise UsageProblem(f"{where + ': ' if where else ''}unknown {what} {value!r}; "
                       f"{did_you_mean(value, choices)}one of {', '.join(choices)}", field=what)


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


# ---- optional dependencies ----------------------------------------------------
class ExtraMissing(SurveyError):
    """A feature whose package is an extra that is not installed (the message names the extra)."""

    exit_code = exitcodes.ENGINE_UNAVAILABLE
