"""What changed: one entry per (candidate, platform, backend, mode) whose answer moved.

Runs of a candidate on one platform are compared in the order they were stored, each
complete run with the complete run before it (unobtainable and failed attempts answer
nothing and are passed over, as on ``/history``). A cell's answer is its outcome and
verdict (:mod:`survey.verdicts`); an entry is

- ``changed``: both runs answered and the answer differs (exactly where ``/history``
  marks a run ``changed``);
- ``new``: the run answers a cell the run before did not: every cell of a candidate's
  first run (a newly discovered release, a moved image tag), or a backend or mode a
  rebuilt environment checks for the first time;
- ``removed``: the run before answered the cell and this one does not check it.

Each entry names both runs (``previous_run_id`` is null for a first run) and what each
said; entries come newest first (by the run that changed it, then in matrix order).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from db import models as m
from survey.core import errortext
from survey.evidence.queries import iso, mode_label
from survey.verdicts.modes import BACKEND_ORDER, MODE_ORDER, Acceptance, ModeVerdict, run_verdicts

KINDS = ("changed", "new", "removed")
COLUMNS = ["date", "candidate", "platform", "backend", "mode", "kind", "before_outcome", "before_verdict",
           "after_outcome", "after_verdict", "reason", "previous_run_id", "run_id", "triton_version", "history"]


def _said(v: ModeVerdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"outcome": v.outcome, "verdict": v.verdict, "source": v.source, "reason": errortext.normalise(v.reason)}


def _answer(v: ModeVerdict | None) -> tuple[str, str] | None:
    return None if v is None else (v.outcome, v.verdict)


def history_url(candidate: str, platform: str | None, backend: str, mode: str | None) -> str:
    from urllib.parse import urlencode

    query = {"candidate": candidate, "backend": backend, "mode": mode_label(mode)}
    if platform:
        query["platform"] = platform
    return "/history?" + urlencode(query)


def changes(s: Session, *, scope: str = "catalog", since: dt.datetime | None = None,
            runs: set[int] | None = None) -> list[dict[str, Any]]:
    """Every change in the store (``scope`` catalog: the published candidates; all:
    ad-hoc ones too), newest first; ``since``: only runs stored at or after it; ``runs``:
    only the changes these runs made."""
    q = (select(m.Run).where(m.Run.status == "complete")
         .options(selectinload(m.Run.modes), selectinload(m.Run.candidate), selectinload(m.Run.platform))
         .order_by(m.Run.id))
    if scope == "catalog":
        q = q.join(m.Candidate).where(m.Candidate.scope == "catalog")
    before: dict[tuple[int, int | None], tuple[m.Run, dict[tuple[str, str | None], ModeVerdict]]] = {}
    out: list[dict[str, Any]] = []
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=dt.UTC)
    for run in s.scalars(q):
        cells = {(v.backend, v.mode): v for v in run_verdicts(run)}
        key = (run.candidate_id, run.platform_id)
        prev = before.get(key)
        before[key] = (run, cells)
        if runs is not None and run.id not in runs:
            continue
        finished = run.finished_at if run.finished_at.tzinfo else run.finished_at.replace(tzinfo=dt.UTC)
        if since is not None and finished < since:
            continue
        prev_run, prev_cells = prev if prev is not None else (None, {})
        platform = run.platform.key if run.platform is not None else None
        for cell in sorted(set(cells) | set(prev_cells),
                           key=lambda c: (BACKEND_ORDER.get(c[0], 99), MODE_ORDER.get(c[1], 9), c[0], str(c[1]))):
            a, b = prev_cells.get(cell), cells.get(cell)
            if _answer(a) == _answer(b):
                continue
            kind = "new" if a is None else "removed" if b is None else "changed"
            backend, mode = cell
            out.append({
                "date": iso(run.finished_at), "candidate": run.candidate.name, "label": run.candidate.label,
                "platform": platform, "backend": backend, "mode": mode_label(mode), "kind": kind,
                "before": _said(a), "after": _said(b),
                "previous_run_id": prev_run.id if prev_run is not None else None, "run_id": run.id,
                "previous_date": iso(prev_run.finished_at) if prev_run is not None else None,
                "triton_version": run.triton_version,
                "previous_triton_version": prev_run.triton_version if prev_run is not None else None,
                "report_sha256": run.report_hash,
                "history": history_url(run.candidate.name, platform, backend, mode),
                "evidence": f"/runs/{run.id}",
            })
    out.sort(key=lambda e: -e["run_id"])  # stable: each run's cells keep matrix order
    return out


def row(entry: dict[str, Any]) -> dict[str, Any]:
    """One entry flattened for a table (CSV, Markdown, the terminal)."""
    b, a = entry["before"] or {}, entry["after"] or {}
    return {"date": entry["date"], "candidate": entry["candidate"], "platform": entry["platform"],
            "backend": entry["backend"], "mode": entry["mode"], "kind": entry["kind"],
            "before_outcome": b.get("outcome"), "before_verdict": b.get("verdict"),
            "after_outcome": a.get("outcome"), "after_verdict": a.get("verdict"),
            "reason": a.get("reason") or b.get("reason"), "previous_run_id": entry["previous_run_id"],
            "run_id": entry["run_id"], "triton_version": entry["triton_version"], "history": entry["history"]}


def summary(entry: dict[str, Any]) -> str:
    """``triton-3.10.0 · rocprofiler pcsampling: refused -> accepted`` (new: ``-> accepted``)."""
    def said(x: dict[str, Any] | None) -> str:
        if x is None:
            return "not checked"
        return x["verdict"] if x["verdict"] != Acceptance.UNKNOWN else f"unknown ({x['outcome']})"

    where = f"{entry['candidate']} · {entry['backend']} {entry['mode']}"
    if entry["kind"] == "new":
        return f"{where}: {said(entry['after'])} (new)"
    return f"{where}: {said(entry['before'])} -> {said(entry['after'])}"


_SINCE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2}))?")


def parse_since(text: str) -> dt.datetime:
    """An RFC 3339 date (``2026-12-01``: its midnight, UTC) or date-time
    (``2026-12-01T12:00:00Z``, ``2026-12-01T13:00:00+01:00``), and nothing looser.
    Raises ValueError."""
    m = _SINCE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"not an RFC 3339 date or date-time: {text!r}")
    year, month, day = int(m[1]), int(m[2]), int(m[3])
    if m[4] is None:
        return dt.datetime(year, month, day, tzinfo=dt.UTC)
    hour, minute = int(m[4]), int(m[5])
    second = min(int(m[6]), 59)  # a leap second (60) counts as the second before it
    micro = int((m[7] or ".0")[1:7].ljust(6, "0"))
    zone = dt.UTC
    if m[8] not in ("Z", "z"):
        oh, om = int(m[8][1:3]), int(m[8][4:6])
        if oh > 23 or om > 59:
            raise ValueError(f"not a UTC offset: {m[8]!r}")
        sign = -1 if m[8][0] == "-" else 1
        zone = dt.timezone(sign * dt.timedelta(hours=oh, minutes=om))
    return dt.datetime(year, month, day, hour, minute, second, micro, tzinfo=zone)
