"""The matrix: every (candidate, platform) x backend x mode, in one tidy row each.

Catalog candidates only, unless ``scope="all"``: ad-hoc evidence (targets checked
by path or image, reports ingested under no catalog name) is kept but not
published. A (candidate, platform) without a complete run gives one row with its
status (unobtainable, failed, not_probed) and no outcome.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from survey import errortext, queries
from survey.queries import iso, mode_from_label, mode_label
from survey.verdicts import run_verdicts


def matrix(
    s: Session,
    *,
    backend: str | None = None,
    mode: str | None = None,
    candidate: str | None = None,
    outcome: str | None = None,
    platform: str | None = None,
    scope: str = "catalog",
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    mode_filter = mode_from_label(mode) if mode is not None else "__any__"
    for slot in queries.slots(s, scope, candidate):
        cand = slot.candidate
        if platform and slot.platform_key != platform:
            continue
        base = {"candidate": cand.name, "label": cand.label, "kind": cand.kind, "scope": cand.scope,
                "platform": slot.platform_key, "platform_label": slot.platform_label}
        complete, last = slot.complete, slot.last
        if complete is None:
            if outcome or backend or mode is not None:
                continue
            rows.append({**base, "status": last.status if last is not None else "not_probed",
                         "error": errortext.cause(last.error, cand.spec) if last is not None else None,
                         "date": iso(last.finished_at) if last else None, "run_id": last.id if last else None,
                         "tries": last.tries if last else None,
                         "backend": None, "mode": None, "mode_arg": None, "outcome": None, "verdict": None})
            continue
        captures = {(c.backend, c.mode): c for c in complete.captures}
        prov = queries.provenance(complete)
        for v in run_verdicts(complete):
            if backend and v.backend != backend:
                continue
            if mode_filter != "__any__" and v.mode != mode_filter:
                continue
            if outcome and v.outcome != outcome:
                continue
            cap = captures.get((v.backend, v.mode))
            rows.append({
                **base,
                "status": "measured",
                "triton_version": complete.triton_version,
                "environment": prov["environment"],
                "backend": v.backend,
                "mode": mode_label(v.mode),
                "mode_arg": v.mode,
                "outcome": v.outcome,
                "verdict": v.verdict,
                "verdict_source": v.source,
                "stub_outcome": v.stub_outcome,
                "library": v.library,
                "reason": errortext.normalise(v.reason),
                "capture_outcome": cap.outcome if cap else None,
                "capture_kernel_count": cap.kernel_count if cap else None,
                "capture_gpu_time_ns": cap.gpu_time_ns if cap else None,
                "run_id": complete.id,
                "date": prov["date"],
                "image_digest": prov["image_digest"],
                "evidence": f"/runs/{complete.id}",
                "last_attempt": last.status if last is not None and last.id != complete.id else None,
            })
    return rows
