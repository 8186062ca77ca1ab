"""The terminal view of a check's answer (:class:`survey.verdicts.verdict.CheckResult`):
a head line in the verdict's colour, then the reason, the fix, the three answers,
the notes and the evidence. The JSON view is the model itself (``as_dict``)."""

from __future__ import annotations

from survey.evidence import queries
from survey.render.escape import rich_markup
from survey.verdicts import vocabulary
from survey.verdicts.verdict import CheckResult

ELSEWHERE = ("white", "cannot tell here")  # an exit code of its own (7: cannot be obtained here)


def head(result: CheckResult, target: str, backend: str, mode: str | None) -> str:
    """The first line, in Rich markup (the evidence text escaped)."""
    t = vocabulary.term(result.verdict) if result.exit_code == result.verdict.exit_code else None
    color, words = (t.terminal, f"{t.mark} {t.words}") if t is not None else ELSEWHERE  # every surface's words
    cause = vocabulary.CAUSES.get(result.cause or "", result.cause or "")
    return (f"[bold {color}]{words}[/]: {rich_markup(target)} with backend={backend} "
            f"mode={rich_markup(queries.mode_label(mode))}" + (f" ({cause})" if cause else ""))


def lines(result: CheckResult) -> list[str]:
    """The lines under the head, as plain text (print them without markup)."""
    out = [f"  reason: {result.reason}"] + ([f"  fix: {result.fix}"] if result.fix else [])
    for q, a in (("backend present", result.backend_present), ("mode accepted", result.mode_accepted),
                 ("library loads", result.library_loads)):
        src = f" [{a.source}]" if a.source else ""
        out.append(f"  {q}: {a.answer}{src} - {a.basis}")
    out += [f"  note: {d}" for d in result.details]
    if result.run_id:
        out.append(f"  evidence: run #{result.run_id} ({result.candidate}, {result.platform}), "
                   f"{result.evidence_date} ({result.evidence_age})")
    return out
