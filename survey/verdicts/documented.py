"""Documented evidence: what a source says about a build, kept as data.

Like browser-compat-data, each claim lives in a YAML file under
``survey/data/documented/`` (one file per subject): the candidate it is about, the
backend and mode, what is claimed (present, absent, accepted, refused, works),
the source it comes from (a URL, a commit or a date, a short quote) and who added
it when. A claim without a source is refused when the files are loaded.

Claims are shown apart from the measurements, marked "documented, not
measured", and never merged with them; where a stored measurement of the same
candidate answers the same question differently, the claim is flagged as a
conflict (``assess``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sqlalchemy.orm import Session

from probes import outcomes as O
from survey.core.errors import InputError
from survey.core.names import CATALOG_PATTERN, MAX_NAME
from survey.evidence import queries
from survey.evidence.queries import mode_label
from survey.verdicts import answers

DEFAULT_DIR = Path(__file__).parents[1] / "data" / "documented"
MODES = tuple(md for md in (*O.COMMON_MODES, *O.INSTRUMENTATION_MODES) if md)


class DocumentedError(InputError):
    """A documented-evidence file that cannot be used (exit 65)."""


class Source(BaseModel):
    """Where a claim comes from. ``commit`` or ``date`` pins what was read."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(pattern=r"^https://[^\s]+$", max_length=500)
    title: str = Field(min_length=1, max_length=120, description="how the docs name the source")
    quote: str = Field(min_length=1, max_length=400, description="the words that make the claim, verbatim")
    repository: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{7,40}$")
    path: str | None = None
    date: dt.date | None = None

    @model_validator(mode="after")
    def pinned(self) -> Source:
        if self.commit is None and self.date is None:
            raise ValueError("a source needs a commit or a date")
        return self


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=CATALOG_PATTERN, max_length=100)
    candidate: str = Field(pattern=CATALOG_PATTERN, max_length=MAX_NAME)
    backend: Literal["cupti", "roctracer", "rocprofiler", "instrumentation"]
    mode: str | None = Field(default=None, description="omitted: no mode (or, for present/absent, the backend)")
    claim: Literal["present", "absent", "accepted", "refused", "works"]
    platform: str | None = Field(default=None, description="only on this platform: a vendor (amd, nvidia) or "
                                                             "part of a platform key (gfx942)")
    note: str | None = Field(default=None, max_length=400)
    sources: list[Source] = Field(min_length=1)
    added_by: str = Field(min_length=1, max_length=120)
    added: dt.date

    @model_validator(mode="after")
    def coherent(self) -> Claim:
        if self.mode is not None and self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; one of {', '.join(MODES)} (omit it for no mode)")
        if self.claim in ("present", "absent") and self.mode is not None:
            raise ValueError(f"a claim that the backend is {self.claim} takes no mode")
        return self


class Documented(BaseModel):
    """One claim and the file it came from."""

    claim: Claim
    file: str


def _message(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"{loc + ': ' if loc else ''}{msg}{more}"


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_file(path: Path) -> list[Documented]:
    where = _display(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DocumentedError(f"{where}: no such file")
    except UnicodeDecodeError:
        raise DocumentedError(f"{where}: not UTF-8 text")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise DocumentedError(f"{where}: not valid YAML{line}: {getattr(e, 'problem', None) or e}")
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise DocumentedError(f"{where}: needs a top-level `claims:` list")
    out = []
    for i, raw in enumerate(data["claims"], 1):
        name = f"claim {raw.get('id')!r}" if isinstance(raw, dict) and raw.get("id") else f"claim #{i}"
        if not isinstance(raw, dict):
            raise DocumentedError(f"{where}: {name} is not a mapping")
        if not raw.get("sources"):
            raise DocumentedError(f"{where}: {name} has no source; each claim needs at least one "
                                  "(url, title, quote, and a commit or a date)")
        try:
            out.append(Documented(claim=Claim.model_validate(raw), file=where))
        except ValidationError as e:
            raise DocumentedError(f"{where}: {name}: {_message(e)}")
    return out


def load(path: str | Path | None = None) -> list[Documented]:
    """Every claim of a file, or of every ``*.yaml`` of a directory (default: the
    packaged ``survey/data/documented/``). Ids are unique across the files."""
    p = Path(path) if path is not None else DEFAULT_DIR
    if p.is_dir():
        files = sorted(p.glob("*.yaml"))
    elif p.exists():
        files = [p]
    else:
        raise DocumentedError(f"{_display(p)}: no such file or directory")
    out: list[Documented] = []
    seen: dict[str, str] = {}
    for f in files:
        for d in load_file(f):
            if d.claim.id in seen:
                raise DocumentedError(f"{d.file}: claim {d.claim.id!r} is also in {seen[d.claim.id]}; ids are unique")
            seen[d.claim.id] = d.file
            out.append(d)
    return out


def _on_platform(claim: Claim, slot: queries.Slot) -> bool:
    if claim.platform is None:
        return True
    p = slot.platform
    if p is None:
        return False
    return claim.platform in (p.vendor, p.key) or claim.platform in p.key.split(":")


@dataclass(frozen=True)
class Measured:
    holds: bool | None  # None: the measurement does not answer the claim's question
    seen: str = ""  # what was measured, in words
    stub: bool = False  # answered through a stub library


def _measured(claim: Claim, run: Any) -> Measured:
    """Whether the measurement (``survey.verdicts.answers``) holds the claim."""
    if claim.claim in ("present", "absent"):
        a = answers.backend_present(run, claim.backend)
        if not a.known:
            return Measured(None)
        return Measured((a.answer == answers.YES) == (claim.claim == "present"),
                        "backend present" if a.answer == answers.YES else "backend absent")
    acc = answers.mode_accepted(answers.verdict_of(run, claim.backend, claim.mode))
    accepted = {answers.YES: True, answers.NO: False, answers.NOT_APPLICABLE: False}.get(acc.answer)
    seen = {answers.YES: "accepted", answers.NO: "refused", answers.NOT_APPLICABLE: "backend absent"}.get(acc.answer)
    if claim.claim == "works":
        w = answers.works(run, claim.backend, claim.mode)
        if w.known:
            return Measured(w.answer == answers.YES, w.basis)
        if accepted is False:  # refused or absent: it cannot work there
            return Measured(False, seen or "", acc.stub)
        return Measured(None)
    if accepted is None:
        return Measured(None)
    return Measured(accepted == (claim.claim == "accepted"), seen or "", acc.stub)


def subject(claim: Claim) -> str:
    """"`pcsampling` on `rocprofiler` accepted", "`rocprofiler` present"."""
    if claim.claim in ("present", "absent"):
        return f"`{claim.backend}` {claim.claim}"
    what = f"`{claim.mode}` on `{claim.backend}`" if claim.mode else f"`{claim.backend}` (no mode)"
    return f"{what} {'works (GELU capture)' if claim.claim == 'works' else claim.claim}"


def assess(s: Session, documented: list[Documented]) -> list[dict[str, Any]]:
    """Each claim with what the store measured about it: ``status`` is
    not_measured, agrees or conflicts (any measurement that disagrees is a
    conflict); ``measured`` lists each (candidate, platform)'s latest complete run
    that answers the question. Plain dicts: the rows of the API's documented
    evidence. Only the slots of the candidates the claims are about are read (one
    query each), whatever the size of the store."""
    if not documented:
        return []
    names = sorted({d.claim.candidate for d in documented})
    labels = {c.name: c.label for c in (queries.find_candidate(s, n) for n in names) if c is not None}
    by_candidate: dict[str, list[queries.Slot]] = {}
    for name in labels:  # the claims' candidates' slots only
        by_candidate[name] = queries.slots(s, "all", name)
    rows = []
    for d in documented:
        c = d.claim
        measured = []
        for slot in by_candidate.get(c.candidate, []):
            if slot.complete is None or not _on_platform(c, slot):
                continue
            a = _measured(c, slot.complete)
            if a.holds is None:
                continue
            measured.append({"run_id": slot.complete.id, "platform": slot.platform_key,
                             "platform_label": slot.platform_label, "holds": a.holds,
                             "seen": a.seen, "stub_derived": a.stub})
        status = ("not_measured" if not measured else
                  "conflicts" if any(not x["holds"] for x in measured) else "agrees")
        rows.append({
            "id": c.id, "candidate": c.candidate, "label": labels.get(c.candidate, c.candidate),
            "backend": c.backend, "mode": mode_label(c.mode), "mode_arg": c.mode, "claim": c.claim,
            "platform": c.platform, "note": c.note,
            "sources": [src.model_dump(mode="json", exclude_none=True) for src in c.sources],
            "added_by": c.added_by, "added": c.added.isoformat(), "file": d.file,
            "status": status, "measured": measured, "subject": subject(c),
        })
    return rows
