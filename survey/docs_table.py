"""The docs Availability table: one row per (candidate, platform), each cell a
phrase in the reference page's words, derived from the evidence."""

from __future__ import annotations

from sqlalchemy.orm import Session

from db import models as m
from probes import outcomes as O
from survey import errortext, queries
from survey.queries import iso
from survey.verdicts import BACKEND_ORDER, MODE_ORDER, REFUSAL_REASONS, run_verdicts

TABLE_COLUMNS = ["Source", "Triton", "Proton `-b` choices", "`rocprofiler` modes", "GELU capture", "Evidence"]


def _tick(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _modes_list(ms: list[str | None]) -> str:
    names = [("no mode" if x is None else f"`{x}`") for x in ms]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def modes_phrase(run: m.Run, backend: str = "rocprofiler") -> str:
    """The reference page's "`rocprofiler` modes" cell, phrased from what was measured."""
    verdicts = [v for v in run_verdicts(run) if v.backend == backend and v.mode in (None, "pcsampling",
                                                                                      "periodic_flushing")]
    if not verdicts:
        return "not measured"
    if all(v.verdict == "absent" for v in verdicts):
        return "backend absent"
    parts = []
    acc_live = [v.mode for v in verdicts if v.verdict == "accepted" and v.source == "live"]
    ref_live = [v for v in verdicts if v.verdict == "refused" and v.source == "live"]
    if acc_live:
        parts.append(f"{_modes_list(acc_live)} accepted")
    if ref_live:
        parts.append("; ".join(f"`{v.mode}` refused ({REFUSAL_REASONS.get(v.rule or '', 'refused')})"
                               for v in ref_live))
    libs = sorted({v.library for v in verdicts if v.outcome == O.LIBRARY_MISSING and v.library})
    if libs:
        stubbed = [v for v in verdicts if v.outcome == O.LIBRARY_MISSING and v.source == "stub"]
        text = f"{_tick(libs)} did not load first, so no live answer"
        if stubbed:
            acc = [v.mode for v in stubbed if v.verdict == "accepted"]
            ref = [v for v in stubbed if v.verdict == "refused"]
            sub = []
            if acc:
                sub.append(f"{_modes_list(acc)} accepted")
            for v in ref:
                sub.append(f"`{v.mode}` refused ({REFUSAL_REASONS.get(v.stub_rule or '', 'refused')})")
            if sub:
                text += "; with a stub library (not a live result): " + ", ".join(sub)
        parts.append(text)
    others = [v for v in verdicts if v.verdict == "unknown" and v.outcome != O.LIBRARY_MISSING]
    for outcome in (O.NO_GPU, O.CRASH, O.TIMEOUT, O.ERROR, O.DISABLED, O.DEVICES_ENV_REJECTED):
        ms = [v.mode for v in others if v.outcome == outcome]
        if ms:
            word = {O.NO_GPU: "unknown (no GPU where probed)", O.CRASH: "crashed", O.TIMEOUT: "hung",
                    O.ERROR: "unrecognised error", O.DISABLED: "disabled",
                    O.DEVICES_ENV_REJECTED: "device variable rejected"}[outcome]
            parts.append(f"{_modes_list(ms)}: {word}")
    return "; ".join(parts)


def captures_phrase(run: m.Run) -> str:
    """The GELU captures of a run: backend, mode, outcome, launches recorded."""
    if not run.captures:
        return "none (no backend started here)"
    parts = []
    for c in sorted(run.captures, key=lambda c: (BACKEND_ORDER.get(c.backend or "", 99), MODE_ORDER.get(c.mode, 9))):
        what = f"`{c.backend}`" + (f" `{c.mode}`" if c.mode else "")
        text = c.outcome.replace("_", " ")
        if c.kernel_count is not None and c.outcome in (O.OK, O.HANG_AFTER_CAPTURE):
            text += f", {c.kernel_count} launches recorded"
        parts.append(f"{what}: {text}")
    return "; ".join(parts)


def provenance_text(run: m.Run) -> str:
    p = queries.provenance(run)
    what = p["image_digest"] or ", ".join(p["resolved"]) or (f"host {p['host']}" if p["host"] else "")
    date = (p["date"] or "")[:10]
    return f"run #{run.id}, {date}" + (f", {what}" if what else "")


def table_rows(s: Session, scope: str = "catalog") -> list[dict[str, str]]:
    """One row per (candidate, platform). A failure shows its cause and the date it
    was first seen: retries of the same failure leave the table as it is."""
    rows = []
    for slot in queries.slots(s, scope):
        cand, complete, last = slot.candidate, slot.complete, slot.last
        base = {"Source": cand.label, "Platform": slot.platform_label if slot.platform is not None else "—"}
        if complete is None:
            if last is None:
                why = "no evidence: not yet probed"
            else:
                what = "unobtainable here" if last.status == "unobtainable" else "the probe failed"
                since = (iso(last.finished_at) or "?")[:10]
                why = f"no evidence: {what} ({errortext.cause(last.error, cand.spec)}), since {since}"
            rows.append({**base, "Triton": "—", "Proton `-b` choices": "—",
                         "`rocprofiler` modes": "—", "GELU capture": "—", "Evidence": why})
            continue
        cli = complete.cli_backends
        rows.append({
            **base,
            "Triton": complete.triton_version or "—",
            "Proton `-b` choices": _tick(cli) if cli else "—",
            "`rocprofiler` modes": modes_phrase(complete),
            "GELU capture": captures_phrase(complete),
            "Evidence": provenance_text(complete),
        })
    return rows


def columns(rows: list[dict[str, str]]) -> list[str]:
    """TABLE_COLUMNS, with a Platform column where the rows span more than one."""
    if len({r["Platform"] for r in rows if r["Platform"] != "—"}) > 1:
        return [TABLE_COLUMNS[0], "Platform", *TABLE_COLUMNS[1:]]
    return list(TABLE_COLUMNS)
