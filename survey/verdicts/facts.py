"""What the docs table and its Since section read of a slot: its facts.

A slot's facts are drawn from its latest complete run: the Triton it measured (version
and distribution), the proton CLI's ``-b`` choices, its published checks in the fields
a table cell reads (with each check's verdict here and its cause), its GELU captures,
the provenance of its environment's first run (what a row's footnote cites), and its
answer to each Since question (``survey.verdicts.since.answers_of``).

``survey.verdicts.summary`` keeps them (the ``slot_facts`` table) in the transaction
that keeps the slot's cells, under the same stamp, so a docs table of 10,000 rows reads
10,000 small rows instead of every slot's runs, checks and captures. :func:`facts_of`
works them out from a run and its cells: the same function for the stored facts and,
while they are not current, for a table worked out from the runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from db import models as m
from survey.evidence import queries
from survey.verdicts import stability
from survey.verdicts.modes import Acceptance
from survey.verdicts.since import answers_of
from survey.verdicts.verdict import Cause, Verdict

_ACCEPTANCE = {str(a): a for a in Acceptance}
_HERE = {str(v): v for v in Verdict}
_CAUSE = {str(c): c for c in Cause}


@dataclass(frozen=True)
class Check:
    """One published check, as a table cell reads it (``survey.verdicts.modes.ModeVerdict``'s
    fields of that name, and the verdict here)."""

    backend: str
    mode: str | None
    verdict: Acceptance
    outcome: str
    source: str | None
    library: str | None
    rule: str | None
    stub_rule: str | None
    here: Verdict
    cause: Cause | None


@dataclass(frozen=True)
class Capture:
    backend: str | None
    mode: str | None
    outcome: str
    kernel_count: int | None


@dataclass(frozen=True)
class Facts:
    """A slot's facts. Each backend's checks are kept as their own JSON text, read when a
    column shows that backend (:meth:`checks`): a table of 30,000 slots holds one string per
    backend and slot, not ten small objects per check."""

    run_id: int
    triton_version: str | None
    triton_distribution: str | None
    cli_backends: list[str] | None
    check_rows: dict[str, str]  # backend -> a JSON list of its checks: Check's fields after the backend
    capture_rows: list[list[Any]]  # Capture's fields in order
    first_run: int  # the environment's first run under this candidate, and what a footnote says of it
    first_date: str | None
    first_what: str
    answers: str  # survey.verdicts.since.answers_of

    def checks(self, backend: str) -> list[Check]:
        """The published checks of one backend, in their order."""
        rows = self.check_rows.get(backend)
        return [Check(backend, md, _ACCEPTANCE[v], o, src, lib, rule, srule, _HERE[h],
                      _CAUSE[c] if c is not None else None)
                for md, v, o, src, lib, rule, srule, h, c in json.loads(rows)] if rows else []

    def captures(self) -> list[Capture]:
        return [Capture(*c) for c in self.capture_rows]

    def parts(self) -> tuple[str, str]:
        """Two texts of JSON: the checks, then the rest. Slots of a store share a few check
        texts (7 among 27,000 slots of 100,000 runs): the store keeps each once
        (``survey.verdicts.summary``) and :meth:`from_parts` reads each once."""
        return _json(self.check_rows), _json(
            [self.run_id, self.triton_version, self.triton_distribution, self.cli_backends, self.capture_rows,
             self.first_run, self.first_date, self.first_what, self.answers])

    @classmethod
    def from_parts(cls, checks_text: str, rest: str, read: dict[str, dict[str, str]] | None = None) -> Facts:
        """The facts :meth:`parts` wrote. ``read``: check texts already read (text ->
        its rows), shared by the facts it gives (no caller changes them), and added to."""
        checks = read.get(checks_text) if read is not None else None
        if checks is None:
            checks = json.loads(checks_text)
            if read is not None:
                read[checks_text] = checks
        run_id, version, distribution, backends, captures, first_run, first_date, first_what, answers = \
            json.loads(rest)
        return cls(run_id, version, distribution, backends, checks, captures, first_run, first_date, first_what,
                   answers)


def provenance_what(run: m.Run) -> str:
    """What a footnote names a run's environment by: its image digest, else its Triton
    wheels, else its host (``survey.evidence.queries.provenance``'s fields)."""
    return run.image_digest or ", ".join(queries.triton_wheels(run.environment)) or (
        f"host {run.host}" if run.host else "")


def facts_of(run: m.Run, cells: list[dict[str, Any]], answers: str | None = None,
             captures: list[list[Any]] | None = None) -> Facts:
    """The facts of a slot whose latest complete run is ``run``, with its cells
    (``survey.verdicts.cells.run_cells``; their verdicts are the run's published ones).
    ``answers`` (:func:`answers_of`) and ``captures`` (:func:`capture_rows`), where the
    caller has them already: then the run's checks and captures are not read."""
    first = stability.first_run(run)
    env = run.environment
    return Facts(
        run.id, run.triton_version, env.triton_distribution if env is not None else None,
        list(run.cli_backends) if run.cli_backends is not None else None,
        _by_backend(cells),
        capture_rows(run.captures) if captures is None else captures,
        first.id, queries.iso(first.finished_at), provenance_what(first),
        answers_of(run) if answers is None else answers)


def capture_rows(captures: Iterable[Any]) -> list[list[Any]]:
    """A run's captures (rows, or the dicts ``survey.evidence.ingest`` writes them from) as
    :attr:`Facts.capture_rows` keeps them."""
    return [[c.backend, c.mode, c.outcome, c.kernel_count] if not isinstance(c, dict) else
            [c["backend"], c["mode"], c["outcome"], c["kernel_count"]] for c in captures]


def _by_backend(cells: list[dict[str, Any]]) -> dict[str, str]:
    rows: dict[str, list[list[Any]]] = {}
    for c in cells:
        rows.setdefault(c["backend"], []).append([
            c["mode_arg"], str(c["verdict"]), c["outcome"], c["verdict_source"], c["library"], c["rule"],
            c["stub_rule"], str(c["here"]), str(c["cause"]) if c["cause"] is not None else None])
    return {b: _json(r) for b, r in rows.items()}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
