"""Text that came from a probed environment, made inert for each medium it is shown in.

A report's strings (a Triton version, a GPU's name, an error, a library's name)
are whatever the environment wrote. Every renderer passes them through the one
rule of its medium here, so none of it acts:

- every medium: control characters (C0, DEL, C1: ESC, the C1 CSI ``\\x9b``,
  NUL), bidi controls and invisible format characters are shown as escapes
  (``\\x1b``, ``\\u202e``) - the set ``survey.core.names`` refuses in a name -
  except the line breaks and tabs a medium keeps;
- :func:`terminal`: that, with CRLF read as LF (a bare CR would overwrite the line);
  :func:`rich_text` and :func:`rich_markup` also keep Rich from reading the text as
  markup (``[/]``, ``[link=...]``);
- :func:`markdown`: HTML is entities (``&lt;``), the characters that start a link,
  an image, code or emphasis are backslash-escaped, and table cells keep their
  pipes and lines; our own `code` spans (``code=True``) are kept as code spans;
- :func:`link_target`: a URL as the target of a Markdown link or link definition:
  every character outside the URL's own set percent-encoded (spaces, line breaks,
  ``<``, ``>``, quotes, parentheses), so it cannot end the definition or start a
  title, HTML or another line;
- :func:`csv_cell`: a cell a spreadsheet would read as a formula (starting with
  ``=``, ``+``, ``-``, ``@`` or a tab) gets a leading ``'`` (OWASP's advice);
- :func:`html_text`: shown escapes (Jinja's autoescape, which every page uses,
  escapes the markup: ``api.render``);
- :func:`json_text`: JSON keeps the text exactly; the characters a terminal
  would act on are written as ``\\uXXXX``.
"""

from __future__ import annotations

import html as html_mod
import json
import re
from typing import Any

from rich.markup import escape as _rich_escape
from rich.text import Text

from survey.core.names import CONTROL_OR_INVISIBLE

_HAZARD = re.compile(CONTROL_OR_INVISIBLE)
# in JSON text, but a newline: one there is the indentation's (inside a string JSON wrote \n)
_JSON_HAZARD = re.compile(f"(?!\n){CONTROL_OR_INVISIBLE}")


def _shown(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep: str = "") -> str:
    """``text`` with control, bidi and invisible characters shown as escapes, but
    for those in ``keep``."""
    if not _HAZARD.search(text):
        return text
    return _HAZARD.sub(lambda m: m.group() if m.group() in keep else _shown(m.group()), text)


# ------------------------------------------------------------------ terminals
def terminal(text: str) -> str:
    """Text for a terminal: line breaks and tabs, nothing a terminal acts on."""
    return visible(text.replace("\r\n", "\n"), "\n\t")


def rich_text(text: str, style: str = "") -> Text:
    """A Rich ``Text`` (never read as markup) of terminal-safe text."""
    return Text(terminal(text), style=style)


def rich_markup(text: str) -> str:
    """Terminal-safe text to put inside Rich markup: its brackets are not tags."""
    return _rich_escape(terminal(text))


# ------------------------------------------------------------------ Markdown
_CODE = re.compile(r"`([^`]+)`")  # our own code spans: one backtick each side, none inside
_MD_SPECIAL = re.compile(r"([\\`*\[\]])")


def _md_plain(text: str, cell: bool) -> str:
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|") if cell else text


def markdown(text: str, *, cell: bool = False, code: bool = False) -> str:
    """Text as Markdown that shows it and nothing else: no HTML, link, image, emphasis
    or code span of its own. ``cell``: a pipe-table cell (pipes escaped, line breaks
    become spaces). ``code``: the text is ours and its `code` spans are code spans
    (one backtick each side, none inside: anything else is text)."""
    text = text.replace("\r\n", "\n")
    text = visible(text.replace("\n", " "), "") if cell else visible(text, "\n")
    if not code:
        return _md_plain(text, cell)
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out.append(_md_plain(text[pos:m.start()], cell))
        out.append("`" + (m.group(1).replace("|", "\\|") if cell else m.group(1)) + "`")
        pos = m.end()
    out.append(_md_plain(text[pos:], cell))
    return "".join(out)


_URL_SAFE = "/:?#[]@!$&*+,;=%~-._"


def link_target(url: str) -> str:
    """``url`` as a Markdown link target: only URL characters, none that ends it."""
    from urllib.parse import quote

    return quote(url, safe=_URL_SAFE).replace("(", "%28").replace(")", "%29")


def code_spans(text: str) -> list[tuple[str, bool]]:
    """Our `code` span mini-markup as (text, is code) parts, read as :func:`markdown`
    reads it (for a renderer that shows code otherwise: HTML, a terminal)."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in _CODE.finditer(text):
        if m.start() > pos:
            out.append((text[pos:m.start()], False))
        out.append((m.group(1), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


# ------------------------------------------------------------------ CSV
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell: text with shown escapes and no formula; numbers as they are."""
    if not isinstance(value, str):
        return value
    value = visible(value.replace("\r\n", "\n"), "\n\t")
    return "'" + value if value.startswith(FORMULA_START) else value


# ------------------------------------------------------------------ HTML
def html_text(text: str) -> str:
    """Text for an HTML page before it is escaped: shown escapes, line breaks and
    tabs kept (CRLF as LF: a page read in a terminal is a terminal)."""
    return visible(text.replace("\r\n", "\n"), "\n\t")


def html(text: str) -> str:
    """Evidence text as HTML: shown escapes (``html_text``), then every character HTML
    interprets escaped."""
    return html_mod.escape(html_text(text))


def inline_html(text: str, *, breaks: bool = False) -> str:
    """Our words with `code` spans as <code>, the evidence in them shown, never markup.
    ``breaks``: a line may also end after a token's separator (``/``, ``:``, ``_``, ``@``;
    ``.`` and ``-`` before a letter: ``python:/opt/venv/bin/python3``), never inside a
    token or a version."""
    def shown(part: str) -> str:
        out = html(part)
        return _TOKEN_END.sub(lambda m: m.group() + "<wbr>", out) if breaks else out

    return "".join(element("code", shown(part)) if code else shown(part) for part, code in code_spans(text))


# after / : _ @ before anything but another separator; after . - before a letter (3.8.0 stays whole).
# html() has escaped & < > " ' by then, and no entity it writes holds one of these characters.
_TOKEN_END = re.compile(r"([/:_@])(?=[^\s/:_.@-])|([.-])(?=[^\W\d_])")


def element(tag: str, inner: str = "", **attrs: str | int) -> str:
    """``<tag a="v">inner</tag>``: ``inner`` is HTML already (written by these functions);
    attribute values are escaped (``class_`` is ``class``)."""
    said = "".join(f' {k.rstrip("_")}="{html_mod.escape(str(v), quote=True)}"' for k, v in attrs.items())
    return f"<{tag}{said}>{inner}</{tag}>"


# ------------------------------------------------------------------ JSON
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)  # made once, not per call


def json_text(data: Any, *, indent: int | None = None) -> str:
    """``data`` as JSON (compact unless ``indent``): the text kept exactly, with the
    characters a terminal would act on (C1, bidi: JSON escapes only C0) as ``\\uXXXX``."""
    text = _COMPACT.encode(data) if indent is None else json.dumps(data, ensure_ascii=False, indent=indent,
                                                                      default=str)
    if text.isascii() and "\x7f" not in text:  # JSON escaped C0: of the rest only DEL is ASCII (a page: 20 ms -> 0)
        return text
    return _JSON_HAZARD.sub(_json_escape, text)


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"
