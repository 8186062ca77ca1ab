"""What a name given to the service may hold (``POST /runs?candidate=&label=``):
the one rule of :mod:`survey.core.names`, whose :data:`PATTERN` the OpenAPI document
publishes. :func:`check` answers 422 naming the field and the first offending
character."""

from __future__ import annotations

from api.errors import ApiError
from survey.core.names import PATTERN, RULE, problem

__all__ = ["PATTERN", "RULE", "check"]


def check(value: str | None, field: str, limit: int) -> str | None:
    """``value`` if it is a good name of at most ``limit`` characters, else 422 naming ``field``."""
    if value is None:
        return None
    why = problem(value, field, limit)
    if why is None:
        return value
    raise ApiError(422, "invalid_input", f"{field}: {why}", field=field)
