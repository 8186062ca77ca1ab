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
    run_id: int
    triton_version: str | None
    triton_distribution: str | None
    cli_backends: tuple[str, ...] | None
    checks: tuple[Check, ...]
    captures: tuple[Capture, ...]
    first_run: int  # the environment's first run under this candidate, and what a footnote says of it
    first_date: str | None
    first_what: str
    answers: str  # survey.verdicts.since.answers_of

    def to_json(self) -> str:
        return json.dumps([
            self.run_id, self.triton_version, self.triton_distribution,
            list(self.cli_backends) if self.cli_backends is not None else None,
            [[c.backend, c.mode, str(c.verdict), c.outcome, c.source, c.library, c.rule, c.stub_rule, str(c.here),
              str(c.cause) if c.cause is not None else None] for c in self.checks],
            [[c.backend, c.mode, c.outcome, c.kernel_count] for c in self.captures],
            self.first_run, self.first_date, self.first_what, self.answers,
        ], ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Facts:
        run_id, version, dist, choices, checks, captures, first, date, what, said = json.loads(text)
        return cls(run_id, version, dist, tuple(choices) if choices is not None else None,
                   tuple(Check(b, md, _ACCEPTANCE[v], o, src, lib, rule, srule, _HERE[h],
                               _CAUSE[c] if c is not None else None)
                         for b, md, v, o, src, lib, rule, srule, h, c in checks),
                   tuple(Capture(*c) for c in captures), first, date, what, said)


def provenance_what(run: m.Run) -> str:
    """What a footnote names a run's environment by: its image digest, else its Triton
    wheels, else its host (``survey.evidence.queries.provenance``'s fields)."""
    return run.image_digest or ", ".join(queries.triton_wheels(run.environment)) or (
        f"host {run.host}" if run.host else "")


def facts_of(run: m.Run, cells: list[dict[str, Any]]) -> Facts:
    """The facts of a slot whose latest complete run is ``run``, with its cells
    (``survey.verdicts.cells.run_cells``; their verdicts are the run's published ones)."""
    first = stability.first_run(run)
    env = run.environment
    return Facts(
        run.id, run.triton_version, env.triton_distribution if env is not None else None,
        tuple(run.cli_backends) if run.cli_backends is not None else None,
        tuple(Check(c["backend"], c["mode_arg"], c["verdict"], c["outcome"], c["verdict_source"], c["library"],
                    c["rule"], c["stub_rule"], c["here"], c["cause"]) for c in cells),
        tuple(Capture(c.backend, c.mode, c.outcome, c.kernel_count) for c in run.captures),
        first.id, queries.iso(first.finished_at), provenance_what(first), answers_of(run))
