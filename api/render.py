"""Jinja2 pages. Autoescape is on for every template and nothing here marks
evidence safe: all of it (messages, stderr, paths) comes from the environments
that were probed and is shown as text. Every value a page prints also goes
through HTML's rule of ``survey.render.escape`` (control, bidi and invisible
characters shown as escapes) before it is escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, Undefined
from markupsafe import Markup
from markupsafe import escape as html_escape

from probes import outcomes as O
from survey.render import escape
from survey.verdicts import vocabulary

TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")


def q(value: Any) -> str:
    """One URL path segment (a candidate name may hold '/' and ':')."""
    return quote(str(value), safe="")


def qs(**params: Any) -> str:
    """A query string from the given parameters, leaving out empty ones."""
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return ("?" + urlencode(kept)) if kept else ""


def outcome_class(outcome: Any) -> str:
    return f"o-{outcome}" if outcome in O.OUTCOMES else "o-none"


def here_class(cell: Any) -> str:
    """A cell's colour class, by its verdict here (``survey.verdicts.vocabulary.HERE``):
    ``c-runs`` green, ``c-cannot_run`` red, ``c-not_enough_evidence`` grey; the same
    on /matrix, an environment's page and /check."""
    t = vocabulary.term(cell.get("here") if isinstance(cell, dict) else cell)
    return f"c-{t.key}" if t is not None else "c-none"


def here_mark(cell: Any) -> str:
    t = vocabulary.term(cell.get("here") if isinstance(cell, dict) else cell)
    return t.mark if t is not None else "·"


def here_words(cell: Any) -> str:
    t = vocabulary.term(cell.get("here") if isinstance(cell, dict) else cell)
    return t.words if t is not None else "—"


def cell_words(cell: Any) -> str:
    """The cell in words, both facts where they differ (``survey.verdicts.vocabulary.say``)."""
    return vocabulary.say(cell) if isinstance(cell, dict) else ""


def cause_words(cause: Any) -> str:
    return vocabulary.CAUSES.get(cause or "", str(cause or ""))


def build_words(cell: Any) -> str:
    return vocabulary.build_words(cell.get("verdict"), cell.get("verdict_source") or cell.get("source")) or "—"


def diff_text(value: Any) -> str:
    """A value of ``survey diff`` in words (``(none)``, a list joined): never a Python repr."""
    from survey.verdicts.diff import text

    return text(value)


def wbr(text: Any) -> Markup:
    """Escaped text that may break after an underscore (``library_<wbr>missing``)."""
    return Markup(str(html_escape("" if text is None else str(text))).replace("_", "_<wbr>"))


def mode_short(mode: Any) -> Markup:
    """A mode as a column heading: ``no mode``, ``periodic_<wbr>flushing``."""
    return Markup("no mode") if mode is None else wbr(mode)


def day(iso: Any) -> str:
    return str(iso)[:10] if iso else "—"


def mode_text(mode: Any) -> str:
    return "(no mode)" if mode is None else str(mode)


def mode_label(mode: Any) -> str:
    """The mode as a query value: ``none`` for no mode (survey.evidence.queries.mode_label)."""
    return "none" if mode is None else str(mode)


def anchor(backend: Any, mode: Any, env: Any = None, stub: Any = False) -> str:
    """Ids on a run page: ``check-rocprofiler-pcsampling`` for a (backend, mode)
    check (``check-cupti``: no mode), ``mode-rocprofiler-pcsampling-clean-stub``
    for one entry of it."""
    if env is None:
        text = f"check-{backend}" + ("" if mode is None else f"-{mode}")
    else:
        text = f"mode-{backend}-{'-' if mode is None else mode}-{env}" + ("-stub" if stub else "")
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def capture_anchor(backend: Any, mode: Any) -> str:
    """The id of a GELU capture on its run page: ``capture-cupti``, ``capture-cupti-pcsampling``."""
    return "capture" + anchor(backend, mode)[len("check"):]


def pretty(value: Any) -> str:
    """JSON for a <pre> block: a plain string, so autoescape escapes it."""
    return json.dumps(value, indent=1, ensure_ascii=False, sort_keys=False, default=str)


def code_spans(text: Any) -> Markup:
    """Text (a candidate's label, a reason) with its Markdown `code` spans as <code>;
    everything else escaped: ``PyPI `triton` 3.8.0`` reads as it does in the docs."""
    from survey.render.docs_table import inline_html

    return Markup(inline_html("" if text is None else str(text)))  # inline_html escapes all of it


def label(text: Any) -> Markup:
    """A candidate's label as code_spans gives it, that may wrap between its tokens
    (``python:/<wbr>opt/<wbr>venv``) and nowhere else."""
    from survey.render.escape import inline_html

    return Markup(inline_html("" if text is None else str(text), breaks=True))


def yesno(value: Any) -> str:
    return {True: "yes", False: "no", None: "—"}.get(value, str(value))


def shown(value: Any) -> Any:
    """What ``{{ value }}`` prints: text with its control, bidi and invisible
    characters shown (then autoescaped); markup we made ourselves is left alone."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return escape.html_text(value)
    return value


def env(undefined: type[Undefined] = Undefined) -> Environment:
    e = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=undefined,
                    trim_blocks=True, lstrip_blocks=True, auto_reload=False, finalize=shown)
    e.filters.update(q=q, outcome_class=outcome_class, day=day, mode_text=mode_text, mode_label=mode_label,
                     pretty=pretty, yesno=yesno, code=code_spans, label=label, here_class=here_class,
                     here_mark=here_mark, here_words=here_words, cell_words=cell_words, cause_words=cause_words,
                     build_words=build_words, wbr=wbr, mode_short=mode_short, diff_text=diff_text)
    e.globals.update(qs=qs, anchor=anchor, capture_anchor=capture_anchor, OUTCOMES=O.OUTCOMES, BACKENDS=O.BACKENDS,
                     VOCABULARY=vocabulary)
    return e


_env = env()


def page(template: str, context: dict[str, Any]) -> str:
    return _env.get_template(template).render(**context)
