"""Since when: per backend and mode, the first surveyed release where it is
present, accepted or works, and the last where it is not.

Computed from the stored evidence of catalog candidates only (what the docs
publish), each (candidate, platform)'s latest complete run, with releases
ordered by version (3.10.0 after 3.9.0), never by name. Where two platforms
disagree about one release the summary is given per platform; otherwise one row
covers every platform measured. Answers taken through a stub library are marked
stub-derived. A check published unstable (``survey.verdicts.stability``: its attempts or
its environment's runs disagreed) is neither accepted nor refused, present nor
absent: it answers nothing, so re-probing an unchanged environment never moves
a line.

``since_rows`` returns plain dicts (the ``/since.json`` rows); ``phrase`` is the
sentence the docs table prints under the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from db import models as m
from probes import outcomes as O
from survey.core.versions import version_key
from survey.evidence import queries
from survey.evidence.queries import mode_label
from survey.verdicts import answers
from survey.verdicts.answers import Question
from survey.verdicts.modes import Acceptance, published_verdicts


@dataclass
class Point:
    """One release on one platform: its answers (several environments may carry it)."""

    yes: bool = False
    no: bool = False
    open: bool = False  # measured, not answered there (no GPU, a crash, not a clean start)
    stub: bool = False
    runs: list[int] = field(default_factory=list)


def _questions() -> list[tuple[Question, str, str | None]]:
    """(question, backend, mode) in table order: presence per backend, then each
    named mode accepted, then each capture working."""
    out: list[tuple[Question, str, str | None]] = []
    for b in O.BACKENDS:
        out.append((Question.PRESENT, b, None))
        named = [md for md in O.COMMON_MODES if md] + (list(O.INSTRUMENTATION_MODES) if b == "instrumentation" else [])
        out.extend((Question.ACCEPTED, b, md) for md in named)
        out.extend((Question.WORKS, b, md) for md in (None, *named))
    return out


# A question's words for its yes and its no.
_WORDS: dict[str, tuple[str, str]] = {
    Question.PRESENT: ("present", Acceptance.ABSENT),
    Question.ACCEPTED: (Acceptance.ACCEPTED, Acceptance.REFUSED),
    Question.WORKS: ("works", "no working capture"),
}


def _subject(question: str, backend: str, mode: str | None) -> str:
    if question == Question.PRESENT:
        return f"`{backend}`"
    if question == Question.ACCEPTED:
        return f"`{mode}` on `{backend}`"
    return f"`{backend}` GELU capture" if mode is None else f"`{backend}` `{mode}` GELU capture"


def _versions(vs: list[str]) -> str:
    return ", ".join(vs)


def phrase_of(row: dict[str, Any]) -> str:
    """The row as one sentence: "`rocprofiler` since 3.8.0 (absent through 3.7.1)"."""
    q = row["question"]
    yes_w, no_w = _WORDS[q]
    first, last_no = row["first_yes"], row["last_no"]
    yes, no, order = row["yes"], row["no"], row["releases"]
    extras = []
    if len(order) == 1:
        body = f"{yes_w if yes else no_w} in {order[0]}" if (yes or no) else f"environments disagree in {order[0]}"
        if not row.get("unanswered"):
            extras.append("no other release measured")
    elif yes and no and order.index(last_no) > order.index(first):
        body = f"{yes_w} in {_versions(yes)}; {no_w} in {_versions(no)}"
    elif yes:
        body = f"since {first}" if q == Question.PRESENT else f"{yes_w} since {first}"
        if no:
            extras.append(f"{no_w} through {last_no}")
    else:
        body = f"{no_w} through {last_no}"
    if row["mixed"] and len(order) > 1:
        extras.append(f"environments disagree in {_versions(row['mixed'])}")
    where = row["platform_label"] if row["platform"] is not None else row.get("measured_on")
    if where:
        body += f" on {where}"
    if row.get("unanswered"):
        extras.append(f"not answered in {_versions(row['unanswered'])}: no GPU or no clean start where probed")
    if row["stub_derived"]:
        extras.append("stub-derived")
    sep = " " if q == Question.PRESENT else ": "
    text = f"{_subject(q, row['backend'], row['mode_arg'])}{sep}{body}"
    return text + (f" ({'; '.join(extras)})" if extras else "")


def since_rows(s: Session, scope: str = "catalog", slots: list[queries.Slot] | None = None) -> list[dict[str, Any]]:
    """One row per (question, backend, mode[, platform]) that any release answers.

    Keys: question (present | accepted | works), backend, mode (label: ``none``
    for no mode), mode_arg, platform (key, or None: the same on every platform
    measured), platform_label, releases (versions that answered, in version
    order), yes, no, mixed (environments of one release disagreeing), first_yes,
    last_no, stub_derived, runs (the run ids used), phrase. ``slots``: the scope's
    slots when the caller read them already (with their checks).
    """
    runs = []  # (version, platform key, platform label, run)
    for slot in queries.slots(s, scope) if slots is None else slots:
        run = slot.complete
        if run is None or not run.triton_version:
            continue
        runs.append((run.triton_version, slot.platform_key or "unrecorded", slot.platform_label, run))
    labels = {k: lab for _, k, lab, _ in runs}
    # Runs that say the same (the same registry, choices, published checks and captures) get
    # the same answers: each question is asked once per such group, not once per run, and
    # counted once per group, platform and release (with the runs' ids), not once per run.
    seen: dict[tuple[Any, ...], int] = {}
    first_of: dict[int, m.Run] = {}  # group -> its first run: the one asked
    together: dict[tuple[int, str, str], list[int]] = {}  # (group, platform key, release) -> run ids
    for version, pkey, _lab, run in runs:
        g = seen.setdefault(_says(run), len(seen))
        first_of.setdefault(g, run)
        together.setdefault((g, pkey, version), []).append(run.id)
    rows: list[dict[str, Any]] = []
    for question, backend, mode in _questions():
        points: dict[str, dict[str, Point]] = {}  # platform -> version -> point
        asked: dict[int, answers.Answer | None] = {}  # group -> its answer to this question
        for (g, pkey, version), ids in together.items():
            if g not in asked:
                asked[g] = _answer(first_of[g], question, backend, mode)
            a = asked[g]
            if a is None:
                continue
            p = points.setdefault(pkey, {}).setdefault(version, Point())
            p.open |= not a.known
            p.yes |= a.answer == answers.YES
            p.no |= a.answer == answers.NO
            p.stub |= a.stub
            p.runs += ids
        rows += summarise(question, backend, mode, points, labels)
    return rows


def _answer(run: m.Run, question: str, backend: str, mode: str | None) -> answers.Answer | None:
    """What ``run`` answers, or None where it has nothing to say: a mode of an absent backend
    (the presence row says so), or a check the probe did not make."""
    if question == Question.ACCEPTED and answers.backend_present(run, backend).answer == answers.NO:
        return None
    a = answers.ask(run, Question(question), backend, mode)
    if not a.known and a.basis == "not checked by the probe":
        return None
    return a


def _says(run: m.Run) -> tuple[Any, ...]:
    """Everything of ``run`` that :func:`survey.verdicts.answers.ask` reads."""
    return (tuple(run.profilers) if run.profilers is not None else None,
            tuple(run.cli_backends) if run.cli_backends is not None else None,
            tuple((v.backend, v.mode, v.outcome, v.verdict, v.source, v.reason, v.library, v.stub_outcome, v.message)
                  for v in published_verdicts(run)),
            tuple((c.backend, c.mode, c.outcome, c.kernel_count) for c in run.captures))


def summarise(question: str, backend: str, mode: str | None, points: dict[str, dict[str, Point]],
              labels: dict[str, str]) -> list[dict[str, Any]]:
    """The rows of one question from its answers per platform and release: one
    row for every platform, unless two platforms answer one release differently
    (then one row per platform). ``labels``: every platform of the evidence."""
    if not any(p.yes or p.no for per in points.values() for p in per.values()):
        return []
    # platforms disagree when one says yes and another no about the same release
    merged: dict[str, Point] = {}
    for per in points.values():
        for version, p in per.items():
            mp = merged.setdefault(version, Point())
            mp.yes |= p.yes and not p.no
            mp.no |= p.no and not p.yes
    disagree = any(p.yes and p.no for p in merged.values())
    groups: list[tuple[str | None, dict[str, Point]]] = (
        [(k, points[k]) for k in sorted(points)] if disagree else [(None, _merge(points))])
    rows = []
    for gkey, per in groups:
        row = _row(question, backend, mode, gkey, labels.get(gkey or "", gkey or ""), per)
        answering = [k for k, pv in points.items() if any(p.yes or p.no for p in pv.values())]
        if gkey is None and len(labels) > 1 and len(answering) == 1:
            row["measured_on"] = labels.get(answering[0], answering[0])
        row["phrase"] = phrase_of(row)
        rows.append(row)
    return rows


def _merge(points: dict[str, dict[str, Point]]) -> dict[str, Point]:
    out: dict[str, Point] = {}
    for per in points.values():
        for version, p in per.items():
            mp = out.setdefault(version, Point())
            mp.yes |= p.yes
            mp.no |= p.no
            mp.open |= p.open
            mp.stub |= p.stub
            mp.runs += p.runs
    return out


def _row(question: str, backend: str, mode: str | None, pkey: str | None, plabel: str,
         per: dict[str, Point]) -> dict[str, Any]:
    unanswered = sorted((v for v in per if not (per[v].yes or per[v].no)), key=version_key)
    per = {v: p for v, p in per.items() if p.yes or p.no}
    order = sorted(per, key=version_key)
    yes = [v for v in order if per[v].yes and not per[v].no]
    no = [v for v in order if per[v].no and not per[v].yes]
    mixed = [v for v in order if per[v].yes and per[v].no]
    decisive = [per[v] for v in yes + no]
    return {
        "question": question, "backend": backend, "mode": mode_label(mode), "mode_arg": mode,
        "platform": pkey, "platform_label": plabel if pkey is not None else None,
        "releases": order, "yes": yes, "no": no, "mixed": mixed,
        "first_yes": yes[0] if yes else None, "last_no": no[-1] if no else None,
        "stub_derived": any(p.stub for p in decisive),
        "runs": sorted({r for v in order for r in per[v].runs}),
        "measured_on": None,
        "unanswered": unanswered,
    }


def since_lines(rows: list[dict[str, Any]]) -> list[str]:
    return [r["phrase"] for r in rows if r["yes"] or r["no"]]
