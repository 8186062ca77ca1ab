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
from survey.verdicts.modes import Acceptance


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


QUESTIONS = _questions()


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
    said = []
    for slot in queries.slots(s, scope) if slots is None else slots:
        run = slot.complete
        if run is None or not run.triton_version:
            continue
        said.append(Said(run.triton_version, slot.platform_key or "unrecorded", slot.platform_label, run.id,
                         answers_of(run)))
    return rows_of(said)


@dataclass(frozen=True)
class Said:
    """What one slot's latest complete run answers: its release, platform, run, and
    :func:`answers_of` it (kept with the slot's cells: ``survey.verdicts.facts``)."""

    version: str
    platform: str
    platform_label: str
    run_id: int
    answers: str


# One letter per question of QUESTIONS, for what a run answers: "." nothing to say, "y" yes,
# "n" no, "u" measured and not answered; upper case when answered through a stub library.
NOTHING = "."


def answers_of(run: m.Run) -> str:
    """The run's answer to each question of :data:`QUESTIONS`, a letter each."""
    out = []
    for question, backend, mode in QUESTIONS:
        a = _answer(run, question, backend, mode)
        if a is None:
            out.append(NOTHING)
            continue
        letter = "y" if a.answer == answers.YES else "n" if a.answer == answers.NO else "u"
        out.append(letter.upper() if a.stub else letter)
    return "".join(out)


def rows_of(said: list[Said]) -> list[dict[str, Any]]:
    """:func:`since_rows` from what each slot said."""
    labels = {x.platform: x.platform_label for x in said}
    # Slots that say the same of one release on one platform are counted once, with their runs' ids.
    together: dict[tuple[str, str, str], list[int]] = {}  # (answers, platform key, release) -> run ids
    for x in said:
        together.setdefault((x.answers, x.platform, x.version), []).append(x.run_id)
    rows: list[dict[str, Any]] = []
    for i, (question, backend, mode) in enumerate(QUESTIONS):
        points: dict[str, dict[str, Point]] = {}  # platform -> version -> point
        for (code, pkey, version), ids in together.items():
            letter = code[i]
            if letter == NOTHING:
                continue
            p = points.setdefault(pkey, {}).setdefault(version, Point())
            p.open |= letter in "uU"
            p.yes |= letter in "yY"
            p.no |= letter in "nN"
            p.stub |= letter.isupper()
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
