"""What changed between two runs (of one candidate, or of two).

Checks are compared as published (``survey.verdicts.stability``): each pooled over every
complete run of its environment, platform and probe version, so two runs of one
unchanged environment never differ because one of them was lucky (``survey
history`` shows what each run's own attempts said). ``text`` is how a value is
printed: never a Python ``None`` or a list's repr.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import object_session

from db import models as m
from probes import outcomes as O
from survey.evidence.queries import iso, mode_label
from survey.verdicts import stability, vocabulary
from survey.verdicts.cells import run_cells


def text(value: Any) -> str:
    """A diff value in words: ``(none)`` for a missing one, a list joined with commas."""
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return ", ".join(text(v) for v in value) if value else "(empty)"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {text(v)}" for k, v in value.items()) if value else "(empty)"
    return str(value)


def _mode_key(r: m.ModeRow | stability.PublishedRow) -> str:
    return f"{r.backend}:{mode_label(r.mode)}" + (" (stub)" if r.stub else "") + \
        (" [inherited env]" if r.env == "inherited" else "")


def _unstable(r: m.Run) -> set[tuple[str, str | None, str]]:
    """(backend, mode, env) of the run's live checks published unstable: a stub rerun
    or a capture behind one ran only in the runs where it happened to fail or work."""
    return {(x.backend, x.mode, x.env) for x in stability.published_rows(r) if not x.stub and x.outcome == O.UNSTABLE}


def _verdicts(a: m.Run, b: m.Run) -> list[dict[str, Any]]:
    """Each (backend, mode) whose verdict here differs between the runs, in the words
    /matrix says it with (``survey.verdicts.vocabulary``); ``a_here``/``b_here`` give
    its colour."""
    s = object_session(a)
    assert s is not None, "a run read from the store"
    cells = run_cells(s, [a, b] if a.id != b.id else [a])

    def said(r: m.Run) -> dict[str, tuple[str, str]]:
        return {f"{c['backend']}:{c['mode']}": (vocabulary.say(c), c["here"]) for c in cells[r.id]}

    x, y = said(a), said(b)
    out = []
    for key in sorted(set(x) | set(y)):
        va, vb = x.get(key), y.get(key)
        if va != vb:
            out.append({"key": key, "a": va[0] if va else None, "b": vb[0] if vb else None,
                        "a_here": va[1] if va else None, "b_here": vb[1] if vb else None})
    return out


def diff_runs(a: m.Run, b: m.Run) -> dict[str, Any]:
    def modes(r: m.Run) -> dict[str, str]:
        shaky = _unstable(r)
        return {_mode_key(x): x.outcome for x in stability.published_rows(r)
                if not (x.stub and (x.backend, x.mode, x.env) in shaky)}

    def libs(r: m.Run) -> dict[str, str]:
        return {x.name: ("loads" if x.loads else "missing" if x.loads is False else "untested") for x in r.libraries}

    def caps(r: m.Run) -> dict[str, str]:
        shaky = _unstable(r)
        return {f"{c.backend}:{mode_label(c.mode)}": f"{c.outcome}" + (
            f" ({c.kernel_count} kernels)" if c.kernel_count is not None else "") for c in r.captures
            if (c.backend, c.mode, "clean") not in shaky}

    def changes(x: dict[str, Any], y: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": k, "a": x.get(k), "b": y.get(k)} for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]

    fields = {}
    for f in ("triton_version", "image_digest", "probe_version"):
        if getattr(a, f) != getattr(b, f):
            fields[f] = {"a": getattr(a, f), "b": getattr(b, f)}
    if (a.profilers or None) != (b.profilers or None):
        fields["profilers"] = {"a": a.profilers, "b": b.profilers}
    if (a.cli_backends or None) != (b.cli_backends or None):
        fields["cli_backends"] = {"a": a.cli_backends, "b": b.cli_backends}
    ea = a.environment.resolved if a.environment else {}
    eb = b.environment.resolved if b.environment else {}
    sections = {
        "verdicts": _verdicts(a, b),
        "environment": changes(_flat_env(ea), _flat_env(eb)),
        "modes": changes(modes(a), modes(b)),
        "libraries": changes(libs(a), libs(b)),
        "captures": changes(caps(a), caps(b)),
    }
    return {
        "a": {"run_id": a.id, "candidate": a.candidate.name, "date": iso(a.finished_at)},
        "b": {"run_id": b.id, "candidate": b.candidate.name, "date": iso(b.finished_at)},
        "fields": fields,
        **sections,
        "same": not (fields or any(sections[k] for k in ("verdicts", "modes", "libraries", "captures"))),
    }


def _flat_env(resolved: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in resolved.get("installed", []) or resolved.get("distributions", []) or []:
        if isinstance(i, dict) and i.get("name"):
            out[i["name"]] = i.get("version")
    for k in ("image", "digest", "python"):
        if k in resolved:
            out[k] = resolved[k] if not isinstance(resolved[k], (dict, list)) else json.dumps(resolved[k])
    return out
