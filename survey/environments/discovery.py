"""Families in the catalog: one candidate per concrete build, found when the survey runs.

A catalog entry may name a family instead of a pin::

    [[candidate]]
    name = "triton"                 # members are named triton-3.10.0, ...
    label = "PyPI `triton` {version}"
    pip = "triton"                  # a project name (extras allowed), no version
    versions = ">=3.6"              # PEP 440 range; pre = true admits pre-releases
    index_url = "https://..."       # optional: else $PIP_INDEX_URL, else PyPI (extra_index_urls too)

    [[candidate]]
    name = "rocm-pytorch-latest"    # members: rocm-pytorch-latest-<12 hex digits of the digest>
    image = "docker.io/rocm/pytorch:latest"
    track = "digest"

:func:`expand` turns each family into ordinary entries, one per concrete build:

- a **pip family** asks each index's simple API (PEP 691 JSON, or the PEP 503 HTML
  page; ``file://`` indexes are read from disk) for the project's files and keeps
  every version in ``versions`` that has a file pip would install here: a wheel whose
  tags this interpreter (or the entry's ``interpreter``) accepts and whose
  ``Requires-Python`` admits it, or a source distribution. Yanked files are left out
  (pip installs them only when pinned by hand). Each version becomes
  ``pip = "triton==3.10.0"`` with the family's index settings;
- an **image family** asks the container engine where the tag points now: it pulls the
  tag (unless ``--pull never``, or the reference is ``localhost/...``, podman's name for
  images built here that no registry serves), reads the digest, and becomes
  ``image = "repo@sha256:..."``, so the candidate is that digest for good. Digests the
  tag pointed to before stay in the store with their evidence.

Members keep the family's ``interpreter``, ``captures`` and ``platforms``, carry
``discovered_from`` (the family's name) and sit at the family's place in the catalog.
A catalog entry of the same name as a member wins (a pin keeps its own label). A
member already stored is skipped by ``survey run`` as any unchanged candidate is: its
venv is reused without a resolver call, its digest is known.

A family whose index or engine cannot be asked is recorded *unobtainable* under the
family's name with the real error (and, as any unobtainable candidate, asked again
after 6 hours, or with ``--retry-unobtainable``); the members stored before are
surveyed again all the same. The family's own row is published only while it fails:
the next discovery that works files it away as ad hoc (its history stays).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit
from urllib.request import url2pathname

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags, generic_tags, platform_tags, sys_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from survey.core.errors import ImageNotFound, TargetError, Unobtainable

if TYPE_CHECKING:
    from db.store import Store
    from survey.environments.catalog import Entry

PYPI = "https://pypi.org/simple/"
INDEX_ENV = "PIP_INDEX_URL"
TRACK_MODES = ("digest",)
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
TIMEOUT_S = 30.0
MAX_PAGE_BYTES = 64 * 1024 * 1024
SDIST_SUFFIXES = (".tar.gz", ".zip")
SHORT_DIGEST = 12


# ------------------------------------------------------------------ the catalog's side
def family_problem(entry: Entry) -> str | None:
    """What is wrong with a family entry (None: nothing), in the catalog's words."""
    if entry.versions is not None:
        if entry.track is not None:
            return "versions is for pip families, track for image families: not both"
        if entry.pip is None:
            return "versions names the releases of a `pip` project: this entry has no pip"
        if not isinstance(entry.pip, str):
            return "a family's pip is one project name (its releases are chosen by versions), not a list"
        try:
            req = Requirement(entry.pip)
        except InvalidRequirement as e:
            return f"pip = {entry.pip!r} is not a project name: {e}"
        if req.specifier or req.url or req.marker:
            return (f"pip = {entry.pip!r}: a family's pip is a bare project name; put the range in versions "
                    f"(versions = \"{req.specifier or '>=0'}\")")
        try:
            SpecifierSet(entry.versions)
        except InvalidSpecifier as e:
            return f"versions = {entry.versions!r} is not a PEP 440 version range (e.g. \">=3.6\"): {e}"
        return None
    if entry.track not in TRACK_MODES:
        return f"track = {entry.track!r}: the one way to track an image is \"digest\""
    if entry.image is None:
        return "track = \"digest\" follows an image tag: this entry has no image"
    if "@" in entry.image:
        return f"image = {entry.image!r} is pinned by digest already; track follows a tag (repo:tag)"
    return None


def member_name(family: str, version: str) -> str:
    """``triton`` + ``3.10.0`` -> ``triton-3.10.0`` (a local version's ``+`` becomes ``_``)."""
    return f"{family}-{re.sub(r'[^A-Za-z0-9._-]', '_', version)}"


def _label(entry: Entry, placeholder: str, value: str, default: str) -> str:
    if entry.label and placeholder in entry.label:
        return entry.label.replace(placeholder, value)
    return f"{entry.label or entry.name} {default}"


def family_label(entry: Entry) -> str:
    """How the family itself is named where it is shown (while its discovery fails)."""
    if entry.versions is not None:
        return _label(entry, "{version}", entry.versions or "(every release)", f"({entry.versions or 'every release'})")
    return _label(entry, "{digest}", f"(where {entry.image} points)", f"(where {entry.image} points)")


def _member(entry: Entry, **changes: Any) -> Entry:
    data = entry.model_dump(exclude_none=True)
    for key in ("versions", "track", "pip", "image"):
        data.pop(key, None)
    data.update(discovered_from=entry.name, **changes)
    return type(entry).model_validate(data)


# ------------------------------------------------------------------ pip families: the index
@dataclass
class IndexFile:
    filename: str
    url: str
    yanked: bool = False
    requires_python: str | None = None


def mask(url: str) -> str:
    """``url`` as it may be shown: a password in it replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[tuple[dict[str, str | None], list[str]]] = []
        self._open: tuple[dict[str, str | None], list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open = (dict(attrs), [])
            self.files.append(self._open)

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._open = None


def parse_project_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """The files of a PEP 691 JSON or PEP 503 HTML project page."""
    if content_type.split(";")[0].strip() == JSON_TYPE or body.lstrip().startswith(b"{"):
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise Unobtainable(f"{mask(page_url)} answered JSON that does not parse: {e}")
        if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
            raise Unobtainable(f"{mask(page_url)} answered JSON that is not a simple-API project page (no files)")
        out = []
        for f in doc["files"]:
            if not isinstance(f, dict) or not isinstance(f.get("filename"), str):
                continue
            rp = f.get("requires-python")
            out.append(IndexFile(f["filename"], urljoin(page_url, str(f.get("url") or "")),
                                 bool(f.get("yanked")), rp if isinstance(rp, str) else None))
        return out
    parser = _Anchors()
    try:
        parser.feed(body.decode("utf-8", "replace"))
    except Exception as e:  # html.parser raises only on pathological input
        raise Unobtainable(f"{mask(page_url)} answered HTML that does not parse: {e}")
    out = []
    for attrs, text in parser.files:
        href = attrs.get("href") or ""
        if not href:
            continue
        url = urljoin(page_url, href)
        name = "".join(text).strip() or unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        out.append(IndexFile(name, url, "data-yanked" in attrs, attrs.get("data-requires-python")))
    return out


def fetch_project(index_url: str, project: str, *, timeout: float = TIMEOUT_S) -> list[IndexFile] | None:
    """The files ``index_url`` lists for ``project``; None when it has no such project
    (404); raises Unobtainable with the real error when it cannot be read."""
    base = index_url if index_url.endswith("/") else index_url + "/"
    page = urljoin(base, f"{canonicalize_name(project)}/")
    scheme = urlsplit(page).scheme
    if scheme == "file":
        directory = Path(url2pathname(urlsplit(page).path))
        for name, ctype in (("index.json", JSON_TYPE), ("index.html", "text/html")):
            if (directory / name).is_file():
                try:
                    return parse_project_page((directory / name).read_bytes(), ctype, (directory / name).as_uri())
                except OSError as e:
                    raise Unobtainable(f"cannot read the index page {directory / name}: {e.strerror or e}")
        if not Path(url2pathname(urlsplit(base).path)).is_dir():
            raise Unobtainable(f"the index {index_url} is not a directory here")
        return None
    if scheme not in ("http", "https"):
        raise Unobtainable(f"the index {mask(index_url)} is neither http(s) nor file: cannot ask it")
    import httpx

    try:
        with httpx.Client(timeout=timeout, follow_redirects=True, headers={"Accept": ACCEPT},
                          transport=httpx.HTTPTransport(retries=2)) as client, \
                client.stream("GET", page) as r:
            if r.status_code == 404:
                return None
            if r.status_code != 200:
                raise Unobtainable(f"the index answered {r.status_code} {r.reason_phrase} for {mask(page)}")
            chunks: list[bytes] = []
            size = 0
            for chunk in r.iter_bytes():
                size += len(chunk)
                if size > MAX_PAGE_BYTES:
                    raise Unobtainable(f"{mask(page)} is larger than {MAX_PAGE_BYTES // (1024 * 1024)} MiB: "
                                       "not a project page")
                chunks.append(chunk)
            return parse_project_page(b"".join(chunks), r.headers.get("content-type", ""), str(r.url))
    except httpx.HTTPError as e:
        raise Unobtainable(f"could not read {mask(page)}: {type(e).__name__}: {mask(str(e)) or 'no detail'}")


@dataclass
class Target:
    """The Python a member's venv will be built with: its version and the wheel tags it accepts."""

    version: str
    tags: frozenset[Tag]


def target_python(interpreter: str | None) -> Target:
    """This interpreter's, or ``interpreter``'s (asked in a child process; the venv is
    built on this machine, so the platform tags are this machine's)."""
    if interpreter is None or os.path.realpath(interpreter) == os.path.realpath(sys.executable):
        return Target(".".join(map(str, sys.version_info[:3])), frozenset(sys_tags()))
    code = "import json, sys; print(json.dumps([sys.implementation.name, list(sys.version_info[:3])]))"
    try:
        proc = subprocess.run([interpreter, "-c", code], capture_output=True, text=True, timeout=60)
        impl, ver = json.loads(proc.stdout)
        major, minor, micro = (int(x) for x in ver)
    except (OSError, subprocess.TimeoutExpired, ValueError, TypeError) as e:
        raise Unobtainable(f"cannot ask the interpreter {interpreter} which wheels it takes: {e}")
    plats = list(platform_tags())
    if impl == "cpython":
        tags = [*cpython_tags((major, minor), platforms=plats),
                *compatible_tags((major, minor), f"cp{major}{minor}", plats)]
    else:
        tags = [*generic_tags(platforms=plats), *compatible_tags((major, minor), platforms=plats)]
    return Target(f"{major}.{minor}.{micro}", frozenset(tags))


@dataclass
class Found:
    """What one pip family's indexes hold now."""

    versions: list[Version]
    notes: list[str] = field(default_factory=list)  # versions in range that were left out, and why


def installable_versions(files: list[IndexFile], project: str, spec: SpecifierSet, pre: bool,
                         target: Target) -> Found:
    """The versions in ``spec`` with a file pip would install for ``target``, oldest first."""
    want = canonicalize_name(project)
    allow_pre = pre or bool(spec.prereleases)  # PEP 440: only when asked, or when the range names one
    ok: set[Version] = set()
    why: dict[Version, set[str]] = {}
    for f in files:
        try:
            if f.filename.endswith(".whl"):
                name, version, _build, tags = parse_wheel_filename(f.filename)
            elif f.filename.endswith(SDIST_SUFFIXES):
                name, version = parse_sdist_filename(f.filename)
                tags = None
            else:
                continue
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
        if name != want or not spec.contains(version, prereleases=allow_pre):
            continue
        if f.yanked:
            why.setdefault(version, set()).add("yanked")
            continue
        if f.requires_python:
            try:
                if not SpecifierSet(f.requires_python).contains(target.version, prereleases=True):
                    why.setdefault(version, set()).add(f"needs Python {f.requires_python}")
                    continue
            except InvalidSpecifier:
                pass  # pip ignores a Requires-Python it cannot read
        if tags is not None and not (tags & target.tags):
            why.setdefault(version, set()).add(f"no wheel for this Python ({target.version}) and platform")
            continue
        ok.add(version)
    notes = [f"{v}: left out ({'; '.join(sorted(r))})" for v, r in sorted(why.items()) if v not in ok]
    return Found(sorted(ok), notes)


def indexes(entry: Entry) -> list[str]:
    return [entry.index_url or os.environ.get(INDEX_ENV) or PYPI, *entry.extra_index_urls]


def discover_pip(entry: Entry, *, fetch: Callable[[str, str], list[IndexFile] | None] = fetch_project) -> tuple[
        list[Entry], list[str]]:
    """One entry per release of the family that pip would install here, oldest first,
    and notes on what was left out. Raises Unobtainable when an index cannot be read."""
    assert entry.versions is not None and isinstance(entry.pip, str)
    req = Requirement(entry.pip)
    files: list[IndexFile] = []
    answered = []
    for url in indexes(entry):
        got = fetch(url, req.name)
        if got is not None:
            answered.append(url)
            files += got
    if not answered:
        raise Unobtainable(f"no index has a project named {req.name!r} "
                           f"(asked {', '.join(mask(u) for u in indexes(entry))})")
    found = installable_versions(files, req.name, SpecifierSet(entry.versions), entry.pre,
                                 target_python(entry.interpreter))
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    members = [_member(entry, name=member_name(entry.name, str(v)), pip=f"{req.name}{extras}=={v}",
                       label=_label(entry, "{version}", str(v), str(v))) for v in found.versions]
    return members, found.notes


# ------------------------------------------------------------------ image families: the engine
def _registry(reference: str) -> str:
    first = reference.split("/", 1)[0]
    return first if "/" in reference and ("." in first or ":" in first or first == "localhost") else "docker.io"


def _repository(reference: str) -> str:
    """``repo:tag`` -> ``repo`` (a port in the registry's name is kept)."""
    last_slash = reference.rfind("/")
    colon = reference.rfind(":")
    return reference[:colon] if colon > last_slash else reference


def discover_image(entry: Entry, *, engine: str | None, pull: str) -> list[Entry]:
    """The one entry for the digest the family's tag points to now. Raises TargetError
    (EngineUnavailable, ImageNotFound, Unobtainable) with the engine's own words."""
    from survey.environments.launchers import image as image_mod

    assert entry.image is not None
    name, _version = image_mod.choose_engine(engine)
    ref = entry.image
    if pull != "never" and _registry(ref) != "localhost":
        try:
            proc = subprocess.run([name, "pull", ref], capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            raise Unobtainable(f"{name} pull {ref} did not finish within 1800s")
        if proc.returncode != 0:
            err = image_mod._errors(proc.stderr) or f"exit {proc.returncode}"
            cls = ImageNotFound if image_mod.NOT_FOUND_TEXT.search(err) and "connect" not in err \
                else Unobtainable
            raise cls(f"{name} pull {ref} failed:\n{err}")
    try:
        proc = subprocess.run([name, "image", "inspect", ref], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise Unobtainable(f"{name} did not answer `image inspect {ref}` within 120s")
    if proc.returncode != 0:
        raise ImageNotFound(f"{ref}: {name} has no such image: {image_mod._errors(proc.stderr)}",
                                      hint="pull it, or build it here")
    try:
        data = json.loads(proc.stdout)
        info = data[0] if isinstance(data, list) else data
        assert isinstance(info, dict)
    except (ValueError, IndexError, AssertionError):
        raise Unobtainable(f"{name} image inspect {ref} printed no image: {proc.stdout[:300]!r}")
    repo = _repository(ref)
    digest = info.get("Digest") or None
    if not digest:
        ours = [d for d in info.get("RepoDigests") or [] if isinstance(d, str) and d.startswith(repo + "@")]
        any_digest = [d for d in info.get("RepoDigests") or [] if isinstance(d, str) and "@" in d]
        digest = (ours or any_digest or [""])[0].split("@", 1)[-1] or None
    if not digest or not re.fullmatch(r"sha256:[0-9a-f]{64}", str(digest)):
        raise Unobtainable(f"{ref}: {name} reports no manifest digest for it (got {digest!r}); "
                           "a tag is tracked by its digest")
    short = str(digest).split(":", 1)[1][:SHORT_DIGEST]
    return [_member(entry, name=f"{entry.name}-{short}", image=f"{repo}@{digest}",
                    label=_label(entry, "{digest}", f"sha256:{short}", f"(sha256:{short})"))]


# ------------------------------------------------------------------ the survey's side
@dataclass
class Expansion:
    family: str
    members: list[str]  # what the survey gets from it this time
    new: list[str]  # members not stored before
    error: str | None = None  # why it could not be asked (recorded unobtainable)
    backed_off: bool = False  # not asked: it failed less than the retry interval ago
    notes: list[str] = field(default_factory=list)


def discover(entry: Entry, *, engine: str | None = None, pull: str = "missing") -> tuple[list[Entry], list[str]]:
    """The family's members now, and notes; raises TargetError when it cannot be asked."""
    if entry.versions is not None:
        return discover_pip(entry)
    return discover_image(entry, engine=engine, pull=pull), []


def wanted(entry: Entry, only: list[str] | None, pinned: set[str]) -> bool:
    """Does ``--only`` select (members of) this family? Its name does, and so does any
    ``NAME-...`` that no catalog entry holds (a member, perhaps still to be found)."""
    if not only:
        return True
    return entry.name in only or any(o.startswith(entry.name + "-") and o not in pinned for o in only)


def stored_members(store: Store, family: str) -> list[Entry]:
    """The members of ``family`` discovered by earlier surveys, in the order they were stored."""
    from survey.environments.catalog import Entry as EntryModel
    from survey.evidence.queries import candidates

    out = []
    with store.session() as s:
        for c in candidates(s, "catalog"):
            spec = c.spec or {}
            if isinstance(spec, dict) and spec.get("discovered_from") == family and c.kind != "ingested":
                try:
                    out.append(EntryModel.model_validate(spec))
                except ValueError:
                    continue
    return out


def expand(store: Store, entries: list[tuple[int, Entry]], *, only: list[str] | None = None,
           engine: str | None = None, pull: str = "missing", force: bool = False, retry_after_s: float = 0.0,
           say: Callable[[str], None] = lambda _m: None) -> tuple[list[tuple[int, Entry]], list[Expansion]]:
    """The catalog's entries with every family replaced by its members (at the family's
    position; a catalog entry of a member's name wins). A family that cannot be asked is
    recorded unobtainable and stands for the members stored before."""
    from sqlalchemy import select

    from db import models as m
    from survey.core import errortext
    from survey.evidence import identity, queries
    from survey.evidence.ingest import record_failure, upsert_candidate
    from survey.evidence.queries import backed_off

    pinned = {e.name for _, e in entries if not e.family}
    out: list[tuple[int, Entry]] = []
    report: list[Expansion] = []
    taken = set(pinned)
    platform = identity.local_platform()
    for position, entry in entries:
        if not entry.family:
            out.append((position, entry))
            continue
        if not wanted(entry, only, pinned):
            continue
        with store.session() as s:
            failing = s.scalar(select(m.Candidate.scope).where(m.Candidate.name == entry.name)) == "catalog"
            known = set(s.scalars(select(m.Candidate.name)))
        exp = Expansion(entry.name, [], [])
        last = None if force or not failing else backed_off(store, entry.name, platform.key, retry_after_s)
        members: list[Entry] = []
        if last is not None:
            exp.backed_off = True
            exp.error = last.error
            ago = queries.age_text(last.last_tried_at or last.finished_at).replace(" old", " ago")
            say(f"{entry.name}: not asked again yet (last tried {ago}; --retry-unobtainable asks now): "
                f"{errortext.cause(last.error, entry.spec())}")
        else:
            try:
                members, exp.notes = discover(entry, engine=engine, pull=pull)
            except TargetError as e:
                exp.error = e.message + (f"\n{e.hint}" if e.hint else "")
                with store.session() as s:
                    run_id, new = record_failure(s, entry.name, label=family_label(entry), kind=entry.kind,
                                                 spec=entry.spec(), position=position, error=exp.error,
                                                 platform=platform, status="unobtainable", scope="catalog")
                say(f"{entry.name}: unobtainable{'' if new else f' (again; run #{run_id})'}: "
                    f"{errortext.cause(exp.error, entry.spec())}")
            else:
                if failing:  # asked successfully: the family's failure row leaves the published table
                    with store.session() as s:
                        upsert_candidate(s, entry.name, label=None, kind=entry.kind, scope="adhoc")
                        s.commit()
        if exp.error is not None:
            members = stored_members(store, entry.name)
        for member in members:
            if member.name in taken:
                continue
            taken.add(member.name)
            out.append((position, member))
            exp.members.append(member.name)
            if member.name not in known:
                exp.new.append(member.name)
        if exp.new:
            say(f"{entry.name}: new: {', '.join(exp.new)}")
        report.append(exp)
    return out, report
