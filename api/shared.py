"""What several resource views share: the names a question's parameters may take (a
backend, a mode label, a stored candidate or platform, a run id) and the 422 that lists
them, a run's summary row, and evidence text cut to a row's size. Views never import
each other (tests/test_structure.py): what two of them need lives here.
"""

from __future__ import annotations

from typing import Any

from api.errors import ApiError
from db import models as m
from db.store import Store
from probes import outcomes as O
from survey.evidence import queries

MODE_LABELS = queries.MODE_LABELS
MAX_ID = queries.MAX_RUN_ID  # the largest id a run can have (32-bit INTEGER columns)
TEXT = 1000  # characters of one evidence text in a matrix or list row
SHOWN_NAMES = 50  # stored names listed in an error


def cut_text(row: dict[str, Any], whole: str | None) -> dict[str, Any]:
    """``row`` with every string over :data:`TEXT` characters cut, saying where it is whole."""
    if not any(isinstance(v, str) and len(v) > TEXT for v in row.values()):
        return row
    out = dict(row)
    for k, v in row.items():
        if isinstance(v, str) and len(v) > TEXT:
            out[k] = v[:TEXT] + f"… [truncated: {len(v) - TEXT:,} more characters" + \
                (f"; whole: {whole}]" if whole else "]")
    return out


def stored_platforms(store: Store) -> list[str]:
    with store.session() as s:
        return queries.platform_keys(s)


def stored_names(store: Store) -> list[str]:
    with store.session() as s:
        return [c.name for c in queries.candidates(s)]


def is_stored(store: Store, name: str) -> bool:
    """Whether a candidate of this name is stored (one indexed look-up, not every name)."""
    with store.session() as s:
        return queries.find_candidate(s, name) is not None


def one_of(what: str, value: str, valid: tuple[str, ...] | list[str]) -> ApiError:
    shown = ", ".join(valid[:SHOWN_NAMES]) + (f" (and {len(valid) - SHOWN_NAMES} more: /candidates)"
                                               if len(valid) > SHOWN_NAMES else "")
    known = f"no stored candidate is named {value!r}" if what == "candidate" else f"unknown {what} {value!r}"
    return ApiError(422, "invalid_input", f"{what}: {known}; one of {shown or '(none stored)'}", field=what)


def backend_and_mode(backend: str, mode: str) -> str | None:
    """The mode asked for (None: no mode), after 422s for a missing or unknown backend
    and an unknown mode (as ``/check`` and ``/history`` take them)."""
    if not backend:
        raise ApiError(422, "invalid_input", "backend: which Proton backend? ?backend=" + "|".join(O.BACKENDS),
                       field="backend")
    if backend not in O.BACKENDS:
        raise one_of("backend", backend, O.BACKENDS)
    if mode and mode not in MODE_LABELS:
        raise one_of("mode", mode, MODE_LABELS)
    return queries.mode_from_label(mode or None)


def run_summary(run: m.Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "url": f"/runs/{run.id}",
        "candidate": run.candidate.name,
        "status": run.status,
        "source": run.source,
        "started_at": queries.iso(run.started_at),
        "finished_at": queries.iso(run.finished_at),
        "host": run.host,
        "probe_version": run.probe_version,
        "schema_version": run.schema_version,
        "report_hash": run.report_hash,
        "triton_version": run.triton_version,
        "image_digest": run.image_digest,
        "profilers": run.profilers,
        "cli_backends": run.cli_backends,
        "error": run.error,
    }
