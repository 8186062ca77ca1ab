"""The service against its own OpenAPI document, with schemathesis.

Every operation of ``/openapi.json`` gets cases generated from the document -
valid and invalid ones, from the examples, coverage, fuzzing and (where the
document links operations) stateful phases - and every built-in check runs on
every answer: no server error; status, content type, headers and body as
documented; invalid input refused with 4xx; valid input never refused (no
parameter the schema allows that the API rejects); authentication not ignored;
undeclared methods answered 405 with ``Allow``; a run a 201 names can be read.

It runs schemathesis's own engine (its Python API; the ``parametrize`` pytest
integration does not run under pytest 9) on the app over the filled store (the
real reports of tests/fixtures/reports), in three parts:

- reads: every ``GET`` operation, without the token;
- uploads with the token: ``POST /runs`` and the operations its answers link
  to (the run, its report, its candidate), fuzzing and stateful, so the reports
  it stores are read back through every format;
- uploads without the token: ``POST /runs`` answers 401, whatever the body.

Each part runs once: reads and uploads on PostgreSQL, which refuses more than SQLite
does (NUL in any text, integers past 64 bits), so a value the app forgets to check
becomes a server error there; uploads without the token never reach the store and run on
SQLite.

The ``/matrix`` filters are left out of the upload part on purpose: their
``candidate`` enum is the stored names as the document had them when it was
loaded, and uploads add names.

Bounded: generation is deterministic (the same cases each run) with at most
:data:`EXAMPLES` fuzzed cases per operation; each part asserts that it sent at least its
:data:`MIN_CASES`, so at least 10,000 cases in all whatever parts run and in whatever order.
Marked ``schemathesis``: tests/run.sh runs it in the full tier, not with --fast.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events

from api.app import create_app
from db import models as m
from db.store import Store

pytestmark = pytest.mark.schemathesis

TOKEN = "schemathesis-token"
EXAMPLES = {"reads": 160, "uploads": 70, "uploads without the token": 100}
# what EXAMPLES yields (deterministic generation): reads 5,987, uploads about 3,250 (its stateful part
# follows the store's answers), without the token 2,559
MIN_CASES = {"reads": 5_600, "uploads": 3_000, "uploads without the token": 2_400}  # 11,000 in all
ON_POSTGRESQL = pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)


@dataclass
class Outcome:
    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    operations: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def fuzz(store: Store, part: str, *, token: bool, select: Any) -> Outcome:
    config: dict[str, Any] = {
        "generation": {"max-examples": EXAMPLES[part], "mode": "all", "deterministic": True, "database": "none"},
        "checks": {"enabled": True},  # every built-in check
        "suppress-health-check": ["all"],
        "workers": 1,
        # Only the upload part includes operations that the document links (POST /runs -> the stored run).
        "phases": {"stateful": {"enabled": part == "uploads"}},
    }
    if token:
        config["headers"] = {"Authorization": f"Bearer {TOKEN}"}
    app = create_app(store, token=TOKEN)
    schema = select(schemathesis.openapi.from_asgi("/openapi.json", app, config=SchemathesisConfig.from_dict(config)))
    out = Outcome()
    started = time.monotonic()
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            rec = event.recorder
            out.operations.add(rec.label)
            for interaction in rec.interactions.values():
                out.cases += 1
                if interaction.response is not None:
                    out.statuses[interaction.response.status_code] += 1
            for case_id, checks in rec.checks.items():
                for check in checks:
                    if check.status.name != "FAILURE":
                        continue
                    info = check.failure_info
                    response = rec.interactions[case_id].response if case_id in rec.interactions else None
                    answer = response.content[:500] if response is not None else None
                    out.failures.append(f"{rec.label} {check.name}: {info.failure.title if info else ''}\n"
                                        f"{info.failure if info else ''}\n{info.code_sample if info else ''}\n"
                                        f"answer: {answer!r}")
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            err = getattr(event, "value", None) or getattr(event, "exception", None)
            out.errors.append(f"{getattr(event, 'label', '')}: {err!r}")
    print(f"schemathesis {part}: {out.cases} cases on {len(out.operations)} operations in "
          f"{time.monotonic() - started:.0f} s, "
          f"statuses {dict(sorted(out.statuses.items()))}")
    return out


def assert_clean(part: str, out: Outcome) -> None:
    assert out.cases >= MIN_CASES[part], out.cases  # the document still yields the cases it did
    assert not out.errors, "\n".join(out.errors[:10])  # an exception escaped the app: a server error
    assert not out.failures, f"{len(out.failures)} failed checks; the first:\n" + "\n\n".join(out.failures[:5])
    assert not [s for s in out.statuses if s >= 500]


@ON_POSTGRESQL
def test_reads_without_the_token(filled_store: Store) -> None:
    out = fuzz(filled_store, "reads", token=False, select=lambda s: s.include(method="GET"))
    assert_clean("reads", out)
    assert len(out.operations) >= 20 and out.statuses[200] > 0 and out.statuses[422] > 0


@ON_POSTGRESQL
def test_uploads_with_the_token(filled_store: Store) -> None:
    out = fuzz(filled_store, "uploads", token=True,
               select=lambda s: s.include(path_regex=r"^/(runs|candidates/)"))
    assert_clean("uploads", out)
    assert out.statuses[201] > 0 and out.statuses[422] > 0  # reports stored, bad ones refused
    with filled_store.session() as s:  # the stored ones are there
        assert s.query(m.Run).count() > 4


def test_uploads_without_the_token(filled_store: Store) -> None:
    out = fuzz(filled_store, "uploads without the token", token=False, select=lambda s: s.include(method="POST"))
    assert_clean("uploads without the token", out)
    assert set(out.statuses) <= {401, 405} and out.statuses[401] > 0

