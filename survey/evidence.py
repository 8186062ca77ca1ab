"""Read the store: the matrix, the mode verdicts, ``check`` and ``diff``.

Everything the table, the CLI and the API say about an environment is derived
here, from stored evidence, in one place.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from db import models as m
from probes import outcomes as O
from survey import exitcodes
from survey.errors import UnknownTarget

MODE_ORDER = {None: 0, "pcsampling": 1, "periodic_flushing": 2, "default": 3, "mma": 4}
BACKEND_ORDER = {b: i for i, b in enumerate(O.BACKENDS)}
REFUSAL_REASONS = {
    "unsupported-mode": "unsupported mode",
    "pcsampling-not-built": "built without rocprofiler-sdk PC sampling support",
}


NO_MODE = "none"  # the label of "no mode given"; `default` is a real instrumentation mode


def mode_label(mode: str | None) -> str:
    return NO_MODE if mode is None else mode


def mode_from_label(label: str | None) -> str | None:
    return None if label in (None, "", NO_MODE, "null") else label


def iso(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.isoformat(timespec="seconds")


def age_text(t: dt.datetime | None, now: dt.datetime | None = None) -> str:
    if t is None:
        return "unknown age"
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    secs = max(0, int((now - t).total_seconds()))
    for unit, n in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if secs >= n:
            k = secs // n
            return f"{k} {unit}{'s' if k != 1 else ''} old"
    return f"{secs} seconds old"


# ----------------------------------------------------------------- verdicts
@dataclass
class ModeVerdict:
    """Does this build accept (backend, mode)? From the live check, else the stub."""

    backend: str
    mode: str | None
    outcome: str  # the live (clean) outcome
    verdict: str  # accepted | refused | absent | unknown
    source: str | None  # live | stub | None
    reason: str
    library: str | None = None
    stub_outcome: str | None = None
    rule: str | None = None
    message: str | None = None
    live_id: int | None = None
    stub_id: int | None = None
    stub_rule: str | None = None


def mode_verdict(live: m.ModeRow, stub: m.ModeRow | None) -> ModeVerdict:
    v = ModeVerdict(live.backend, live.mode, live.outcome, "unknown", None, "", live.library,
                    stub.outcome if stub else None, live.rule, live.message, live.id, stub.id if stub else None,
                    stub.rule if stub else None)
    o = live.outcome
    if o == O.OK:
        v.verdict, v.source, v.reason = "accepted", "live", "proton.start() succeeded"
    elif o == O.UNSUPPORTED_MODE:
        v.verdict, v.source = "refused", "live"
        v.reason = REFUSAL_REASONS.get(live.rule or "", "refused") + f": {live.message}"
    elif o == O.UNKNOWN_BACKEND:
        v.verdict, v.source, v.reason = "absent", "live", f"backend absent: {live.message}"
    elif o == O.LIBRARY_MISSING:
        base = f"`{live.library}` did not load before the mode was looked at"
        if stub is None:
            v.reason = base + " (no stub rerun)"
        elif stub.outcome == O.OK:
            v.verdict, v.source = "accepted", "stub"
            v.reason = base + "; with a stub library proton.start() succeeded"
        elif stub.outcome == O.UNSUPPORTED_MODE:
            v.verdict, v.source = "refused", "stub"
            v.reason = base + "; with a stub library: " + REFUSAL_REASONS.get(stub.rule or "", "refused") + \
                f" ({stub.message})"
        else:
            v.reason = base + f"; with a stub library: {stub.outcome} ({stub.message or stub.signal or ''})"
    elif o == O.NO_GPU:
        v.reason = f"no GPU where it was probed: {live.message}"
    elif o == O.CRASH:
        v.reason = f"the check crashed ({live.signal})"
    elif o == O.TIMEOUT:
        v.reason = "the check hung and was killed at the timeout"
    elif o == O.DISABLED:
        v.reason = "Proton is disabled (TRITON_PROTON_DISABLE)"
    elif o == O.DEVICES_ENV_REJECTED:
        v.reason = live.message or "device-visibility variable rejected"
    else:
        v.reason = f"not recognised: {live.message}"
    return v


def run_verdicts(run: m.Run) -> list[ModeVerdict]:
    live = [r for r in run.modes if r.env == "clean" and not r.stub]
    stubs = {(r.backend, r.mode): r for r in run.modes if r.env == "clean" and r.stub}
    out = [mode_verdict(r, stubs.get((r.backend, r.mode))) for r in live]
    out.sort(key=lambda v: (BACKEND_ORDER.get(v.backend, 99), MODE_ORDER.get(v.mode, 9)))
    return out


# ----------------------------------------------------------------- loading
def _run_query():  # type: ignore[no-untyped-def]
    return select(m.Run).options(
        selectinload(m.Run.modes), selectinload(m.Run.captures), selectinload(m.Run.libraries),
        selectinload(m.Run.candidate), selectinload(m.Run.environment),
    )


def candidates(s: Session) -> list[m.Candidate]:
    return list(s.scalars(select(m.Candidate).order_by(m.Candidate.position, m.Candidate.id)))


def latest_runs(s: Session) -> dict[int, tuple[m.Run | None, m.Run | None]]:
    """candidate id -> (latest complete run, latest run of any status)."""
    out: dict[int, tuple[m.Run | None, m.Run | None]] = {}
    runs = s.scalars(_run_query().order_by(m.Run.id)).all()
    for r in runs:
        complete, last = out.get(r.candidate_id, (None, None))
        if r.status == "complete":
            complete = r
        out[r.candidate_id] = (complete, r)
    return out


def get_candidate(s: Session, name: str) -> m.Candidate:
    c = s.scalar(select(m.Candidate).where(m.Candidate.name == name))
    if c is None:
        raise UnknownTarget(f"no candidate named {name!r} in the store",
                            hint="`survey run` surveys the catalog; `survey table` lists what is stored")
    return c


def get_run(s: Session, run_id: int) -> m.Run:
    r = s.scalar(_run_query().where(m.Run.id == run_id))
    if r is None:
        raise UnknownTarget(f"no run #{run_id} in the store")
    return r


def latest_complete(s: Session, candidate_id: int) -> m.Run | None:
    return s.scalar(
        _run_query().where(m.Run.candidate_id == candidate_id, m.Run.status == "complete")
        .order_by(m.Run.id.desc()).limit(1)
    )


def resolve_ref(s: Session, ref: str) -> m.Run:
    """A run from ``run:12``, ``#12``, ``12`` or a candidate name (its latest complete run)."""
    text = ref.strip()
    for prefix in ("run:", "#"):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    else:
        if not text.isdigit():
            cand = get_candidate(s, ref)
            run = latest_complete(s, cand.id)
            if run is None:
                raise UnknownTarget(f"candidate {ref!r} has no complete run yet")
            return run
    if not text.isdigit():
        raise UnknownTarget(f"{ref!r} is neither a run id nor a candidate name")
    return get_run(s, int(text))


def provenance(run: m.Run) -> dict[str, Any]:
    env = run.environment
    resolved = env.resolved if env else {}
    wheels = [
        f"{i['name']} {i['version']} sha256:{(i.get('sha256') or '?')[:12]}"
        for i in resolved.get("installed", []) if i.get("name") in ("triton", "pytorch-triton-rocm", "pytorch-triton")
    ]
    return {
        "run_id": run.id,
        "date": iso(run.finished_at),
        "source": run.source,
        "host": run.host,
        "probe_version": run.probe_version,
        "image_digest": run.image_digest,
        "resolved": wheels,
    }


def provenance_text(run: m.Run) -> str:
    p = provenance(run)
    what = p["image_digest"] or ", ".join(p["resolved"]) or (f"host {p['host']}" if p["host"] else "")
    date = (p["date"] or "")[:10]
    return f"run #{run.id}, {date}" + (f", {what}" if what else "")


# ----------------------------------------------------------------- matrix
def matrix(
    s: Session,
    *,
    backend: str | None = None,
    mode: str | None = None,
    candidate: str | None = None,
    outcome: str | None = None,
) -> list[dict[str, Any]]:
    """Every candidate x backend x mode with outcome, verdict and provenance.

    Candidates without a complete run give one row with ``status`` unobtainable
    or not_probed (and no outcome), so a filter on outcome leaves them out.
    """
    rows: list[dict[str, Any]] = []
    latest = latest_runs(s)
    mode_filter = mode_from_label(mode) if mode is not None else "__any__"
    for cand in candidates(s):
        if candidate and cand.name != candidate:
            continue
        complete, last = latest.get(cand.id, (None, None))
        base = {"candidate": cand.name, "label": cand.label, "kind": cand.kind}
        if complete is None:
            if outcome or backend or mode is not None:
                continue
            status = last.status if last is not None else "not_probed"
            rows.append({**base, "status": status, "error": last.error if last else None,
                         "date": iso(last.finished_at) if last else None, "run_id": last.id if last else None,
                         "backend": None, "mode": None, "mode_arg": None, "outcome": None, "verdict": None})
            continue
        captures = {(c.backend, c.mode): c for c in complete.captures}
        prov = provenance(complete)
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
                "backend": v.backend,
                "mode": mode_label(v.mode),
                "mode_arg": v.mode,
                "outcome": v.outcome,
                "verdict": v.verdict,
                "verdict_source": v.source,
                "stub_outcome": v.stub_outcome,
                "library": v.library,
                "reason": v.reason,
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


# ----------------------------------------------------------------- docs table
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


NETWORK_MARKERS = ("Could not resolve host", "Name or service not known", "no such host", "Connection refused",
                   "Network is unreachable", "timed out", "Temporary failure in name resolution")


def summarize_error(text: str | None, limit: int = 160) -> str:
    """One line that says why, from a tool's multi-line error output."""
    lines = [ln.strip(" │╰─>×") .strip() for ln in (text or "").splitlines()]
    lines = [ln for ln in lines if ln]
    for marker in NETWORK_MARKERS:
        for ln in lines:
            if marker in ln:
                if len(ln) <= limit:
                    return ln
                end = min(len(ln), ln.index(marker) + len(marker) + limit // 3)
                cut = ln[max(0, end - limit):end]
                return "…" + cut[cut.find(" ") + 1:] + ("…" if end < len(ln) else "")
    for prefix in ("fatal:", "ERROR:", "Error:", "error:"):
        hits = [ln for ln in lines if ln.startswith(prefix) and "subprocess-exited-with-error" not in ln]
        if hits:
            return hits[-1][:limit]
    rest = [ln for ln in lines if not ln.startswith("note:")]
    return (rest[-1] if rest else "")[:limit]


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


def table_rows(s: Session) -> list[dict[str, str]]:
    rows = []
    latest = latest_runs(s)
    for cand in candidates(s):
        complete, last = latest.get(cand.id, (None, None))
        if complete is None:
            if last is None:
                why = "no evidence: not yet probed"
            else:
                what = "unobtainable here" if last.status == "unobtainable" else "the probe failed"
                tried = (iso(last.finished_at) or "?")[:10]
                why = f"no evidence: {what} ({summarize_error(last.error)}), last tried {tried}"
            rows.append({"Source": cand.label, "Triton": "—", "Proton `-b` choices": "—",
                         "`rocprofiler` modes": "—", "GELU capture": "—", "Evidence": why})
            continue
        cli = complete.cli_backends
        rows.append({
            "Source": cand.label,
            "Triton": complete.triton_version or "—",
            "Proton `-b` choices": _tick(cli) if cli else "—",
            "`rocprofiler` modes": modes_phrase(complete),
            "GELU capture": captures_phrase(complete),
            "Evidence": provenance_text(complete),
        })
    return rows


# ----------------------------------------------------------------- check
@dataclass
class CheckResult:
    exit_code: int
    verdict: str  # runs | cannot_run | not_enough_evidence
    reason: str
    fix: str | None
    target: str
    backend: str
    mode: str | None
    run_id: int | None = None
    evidence_date: str | None = None
    evidence_age: str | None = None
    outcome: str | None = None
    details: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _measured_builds(s: Session, keep: Callable[[ModeVerdict], bool], note_stub: bool = False) -> list[str]:
    """Candidates whose latest complete run has a verdict ``keep`` accepts."""
    out = []
    latest = latest_runs(s)
    for cand in candidates(s):
        run = latest.get(cand.id, (None, None))[0]
        for v in run_verdicts(run) if run is not None else []:
            if keep(v):
                stub = ", stub-derived" if note_stub and v.source == "stub" else ""
                out.append(f"{cand.name} (Triton {run.triton_version}{stub})")  # type: ignore[union-attr]
                break
    return out


def _who_has_backend(s: Session, backend: str) -> list[str]:
    return _measured_builds(s, lambda v: v.backend == backend and v.mode is None and v.verdict != "absent")


def _who_accepts(s: Session, backend: str, mode: str | None) -> list[str]:
    return _measured_builds(s, lambda v: v.backend == backend and v.mode == mode and v.verdict == "accepted",
                            note_stub=True)


def check_run(s: Session, run: m.Run, target: str, backend: str, mode: str | None) -> CheckResult:
    """Will (backend, mode) run in the environment of ``run``?"""
    base_mode = mode.split(":", 1)[0] if mode else None
    res = CheckResult(exitcodes.NOT_ENOUGH_EVIDENCE, "not_enough_evidence", "", None, target, backend, mode,
                      run.id, iso(run.finished_at), age_text(run.finished_at))
    if base_mode != mode:
        res.details.append(f"mode options after ':' are not checked; answering for `{base_mode}`")
    verdicts = {(v.backend, v.mode): v for v in run_verdicts(run)}
    v = verdicts.get((backend, base_mode))
    if v is None:
        res.reason = f"the probe did not check backend={backend!r} mode={mode_label(base_mode)!r} here"
        res.fix = "run `survey probe` with a newer probe, or `--only BACKEND:MODE`"
        return res
    res.outcome = v.outcome
    inherited = [r for r in run.modes if r.env == "inherited" and not r.stub and r.backend == backend
                 and r.mode == base_mode]
    libs = {lib.name: lib for lib in run.libraries}
    cannot = exitcodes.CANNOT_RUN
    if inherited and inherited[0].outcome in (O.DISABLED, O.DEVICES_ENV_REJECTED):
        r = inherited[0]
        res.exit_code, res.verdict = cannot, "cannot_run"
        res.reason = f"with the environment's own variables: {r.outcome}: {r.message or 'start() returned None'}"
        res.fix = ("unset TRITON_PROTON_DISABLE" if r.outcome == O.DISABLED else
                   "unset HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES and select devices with ROCR_VISIBLE_DEVICES")
        return res
    if v.verdict == "absent":
        res.exit_code, res.verdict = cannot, "cannot_run"
        res.reason = f"Triton {run.triton_version} has no `{backend}` backend ({v.message})"
        have = _who_has_backend(s, backend)
        res.fix = ("builds with it (measured): " + ", ".join(have)) if have else \
            f"no surveyed build offers `{backend}`"
        return res
    if v.verdict == "refused":
        res.exit_code, res.verdict = cannot, "cannot_run"
        src = " (answer from a stub library: the real library did not load first)" if v.source == "stub" else ""
        res.reason = f"this build refuses `{backend}` with mode `{mode_label(base_mode)}`: {v.reason}{src}"
        acc = _who_accepts(s, backend, base_mode)
        res.fix = ("builds that accept it (measured): " + ", ".join(acc)) if acc else \
            "no surveyed build accepts that mode yet"
        if v.outcome == O.LIBRARY_MISSING and v.library in libs and libs[v.library].fix:
            res.details.append(f"and `{v.library}` did not load: {libs[v.library].fix}")
        return res
    if v.outcome == O.LIBRARY_MISSING:
        res.exit_code, res.verdict = cannot, "cannot_run"
        lib = libs.get(v.library or "")
        res.reason = f"Proton could not load `{v.library}`: {v.message}"
        res.fix = lib.fix if lib and lib.fix else f"provide `{v.library}` on the loader path"
        if v.source == "stub" and v.verdict == "accepted":
            res.details.append("with the library in place this build accepts the mode (stub-derived)")
        return res
    if v.outcome == O.OK:
        cap = next((c for c in run.captures if c.backend == backend and c.mode == base_mode), None)
        if cap is not None and cap.outcome == O.EMPTY_CAPTURE:
            res.reason = ("proton.start() succeeded here, but the GELU capture recorded no kernel "
                          f"({cap.message}); whether your run's capture will hold data is not established")
            res.fix = "check that your kernels give this backend something to record"
            return res
        if cap is not None and cap.outcome != O.OK:
            res.exit_code, res.verdict = cannot, "cannot_run"
            res.reason = f"proton.start() works but the GELU capture did not: {cap.outcome} ({cap.message})"
            res.fix = None
            return res
        res.exit_code, res.verdict = exitcodes.OK, "runs"
        res.reason = "proton.start() succeeded here" + (
            f" and a GELU capture recorded {cap.kernel_count} kernel launches" if cap is not None else "")
        return res
    if v.outcome == O.NO_GPU:
        mode_known = ("the mode is accepted (stub-derived)" if v.verdict == "accepted"
                      else "whether the mode is accepted is unknown")
        res.reason = f"probed where there is no GPU; the backend is present and {mode_known}"
        res.fix = "probe on a GPU host (`survey probe` there, then `survey ingest` the report)"
        return res
    if v.outcome in (O.CRASH, O.TIMEOUT, O.ERROR):
        res.exit_code, res.verdict = cannot, "cannot_run"
        res.reason = f"proton.start(): {v.reason}"
        res.fix = None
        return res
    res.reason = v.reason
    return res


# ----------------------------------------------------------------- diff
def _mode_key(r: m.ModeRow) -> str:
    return f"{r.backend}:{mode_label(r.mode)}" + (" (stub)" if r.stub else "") + \
        (" [inherited env]" if r.env == "inherited" else "")


def diff_runs(a: m.Run, b: m.Run) -> dict[str, Any]:
    def modes(r: m.Run) -> dict[str, str]:
        return {_mode_key(x): x.outcome for x in r.modes}

    def libs(r: m.Run) -> dict[str, str]:
        return {x.name: ("loads" if x.loads else "missing" if x.loads is False else "untested") for x in r.libraries}

    def caps(r: m.Run) -> dict[str, str]:
        return {f"{c.backend}:{mode_label(c.mode)}": f"{c.outcome}" + (
            f" ({c.kernel_count} kernels)" if c.kernel_count is not None else "") for c in r.captures}

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
    return {
        "a": {"run_id": a.id, "candidate": a.candidate.name, "date": iso(a.finished_at)},
        "b": {"run_id": b.id, "candidate": b.candidate.name, "date": iso(b.finished_at)},
        "fields": fields,
        "environment": changes(_flat_env(ea), _flat_env(eb)),
        "modes": changes(modes(a), modes(b)),
        "libraries": changes(libs(a), libs(b)),
        "captures": changes(caps(a), caps(b)),
        "same": not (fields or changes(modes(a), modes(b)) or changes(libs(a), libs(b))
                     or changes(caps(a), caps(b))),
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
