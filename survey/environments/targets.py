"""Targets: how the user named an environment, turned into one.

One resolver for the CLI and the API alike. A target is, in this order:

1. a catalog entry's name (published evidence, scope catalog);
2. a candidate already in the store (a target checked or ingested before);
3. an interpreter: a path (``./venv/bin/python``, ``~/x/python``) or a name on
   PATH (``python3``). Its candidate is named by the environment's *prefix*
   (``python:/path/to/venv``), so a venv is never its base interpreter;
4. an image reference. A short name is qualified as the engine does it: a local
   image whose tag ends with it, else Docker's rule (``ubuntu`` ->
   ``docker.io/library/ubuntu:latest``).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from survey.core.errors import UnknownTarget, did_you_mean
from survey.environments.catalog import Catalog, Entry
from survey.environments.launchers import Launcher
from survey.environments.launchers.pip import PipLauncher
from survey.environments.launchers.python import PythonLauncher, interpreter_path, is_venv
from survey.evidence import queries
from survey.evidence.identity import Resolved


@dataclass
class Target:
    text: str  # as the user typed it
    how: str  # catalog | stored | interpreter | image
    name: str | None  # the candidate name; None until obtained (interpreters, images)
    label: str | None = None
    kind: str = "python"
    spec: dict[str, Any] = field(default_factory=dict)
    position: int | None = None
    scope: str | None = None  # catalog for catalog entries; None keeps / makes adhoc
    launcher: Launcher | None = None
    captures: tuple[str, ...] = ()

    def name_for(self, resolved: Resolved) -> str:
        """The candidate name once the environment is known."""
        if self.name is not None:
            return self.name
        if self.how == "interpreter":
            return f"python:{resolved.resolved.get('prefix') or resolved.python}"
        return f"image:{qualify_image(self.text, resolved.resolved.get('repo_tags') or [])}"


def make_launcher(entry: Entry, *, engine: str | None = None, pull: str = "missing") -> Launcher:
    """The launcher of a catalog entry: an interpreter, a venv from pip, or an image."""
    if entry.kind == "pip":
        return PipLauncher(
            entry.requirements, index_url=entry.index_url, extra_index_urls=entry.extra_index_urls,
            pre=entry.pre, python=entry.interpreter,
        )
    if entry.kind == "python":
        assert entry.python
        return PythonLauncher(entry.python)
    from survey.environments.launchers.image import ImageLauncher  # asks the container engine: on first use

    assert entry.image
    return ImageLauncher(entry.image, engine=engine, pull=pull, python=entry.interpreter)


_BIN_PYTHON = re.compile(r"(^|/)bin/python[0-9.]*$")


def looks_like_path(text: str) -> bool:
    """A file path rather than an image reference: it starts with ``.``, ``/`` or ``~``,
    or holds a ``/`` and exists, or its first part is a directory here, or it ends in
    ``bin/python`` (``venv/bin/python``, there or not: never an image to pull)."""
    if text.startswith((".", "/", "~")):
        return True
    if os.sep not in text or any(c in text for c in ":@"):
        return False
    return os.path.exists(text) or os.path.isdir(text.split(os.sep, 1)[0]) or bool(_BIN_PYTHON.search(text))


def looks_like_image(text: str) -> bool:
    return any(c in text for c in "/:@") and not looks_like_path(text)


def qualify_image(ref: str, repo_tags: list[str] | None = None) -> str:
    """A fully qualified image reference, as the engine would resolve ``ref``."""
    name, digest = (ref.split("@", 1) + [""])[:2]
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and not digest:
        name += ":latest"
    for tag in repo_tags or []:
        if tag == name or tag.endswith("/" + name):
            return tag
    first = name.split("/", 1)[0]
    if "/" not in name or not ("." in first or ":" in first or first == "localhost"):
        name = "docker.io/" + (name if "/" in name else "library/" + name)
    return name + (f"@{digest}" if digest else "")


def resolve(s: Session, text: str, catalog: Catalog, *, engine: str | None = None,
            pull: str = "missing") -> Target:
    entry = catalog.get(text)
    if entry is not None:
        return Target(text, "catalog", entry.name, entry.display_label, entry.kind, entry.spec(),
                      catalog.names().index(text), "catalog", make_launcher(entry, engine=engine, pull=pull),
                      tuple(entry.captures))
    stored = queries.find_candidate(s, text)  # one indexed look-up (a store of 100,000 runs has 10,000)
    if stored is not None:
        launcher = _launcher_for_stored(stored.kind, stored.spec or {}, engine, pull)
        return Target(text, "stored", stored.name, stored.label, stored.kind, stored.spec or {}, None, None, launcher)
    how = kind_of(s, text, catalog)
    if how == "interpreter":
        path = interpreter_path(text)
        return Target(text, "interpreter", None, None, "python", {"python": path}, None, None, PythonLauncher(path))
    from survey.environments.launchers.image import ImageLauncher

    return Target(text, "image", None, None, "image", {"image": text}, None, None,
                  ImageLauncher(text, engine=engine, pull=pull))


def kind_of(s: Session, text: str, catalog: Catalog) -> str:
    """What ``text`` names, without obtaining anything: ``catalog``, ``stored``,
    ``interpreter`` or ``image``; a name that is none of them is UnknownTarget, which
    suggests the catalog entry or stored candidate it was likely meant to be."""
    if catalog.get(text) is not None:
        return "catalog"
    if queries.find_candidate(s, text) is not None:
        return "stored"
    if looks_like_path(text) or (os.sep not in text and ":" not in text and (shutil.which(text) or is_venv(text))):
        return "interpreter"
    if looks_like_image(text):
        return "image"
    near = did_you_mean(text, [*catalog.names(), *(c.name for c in queries.candidates(s))])
    raise UnknownTarget(
        f"{text!r} is not a catalog entry, a stored candidate, an interpreter (a path or a name on PATH) "
        "or an image reference" + (f"; {near.strip()}" if near else ""),
        hint=f"catalog entries: {', '.join(catalog.names())}", field="target",
    )


def stored_candidate(s: Session, text: str) -> str | None:
    """The stored candidate ``text`` names, without obtaining anything: a candidate
    name; an interpreter, as its environment's directory (``python:PREFIX``, the name
    an interpreter is stored under) or its ``PREFIX/bin/python``, or as it was spelled
    when stored; or an image reference."""
    cands = queries.candidates(s)
    names = [c.name for c in cands]
    wanted = [text, f"python:{text}", f"image:{text}", f"image:{qualify_image(text)}"]
    if looks_like_path(text):
        path = interpreter_path(text)
        wanted += [f"python:{path}"]
        if _BIN_PYTHON.search(path):  # PREFIX/bin/python -> PREFIX
            wanted.append(f"python:{os.path.dirname(os.path.dirname(path))}")
    for w in wanted:
        if w in names:
            return w
    spelled = {text, interpreter_path(text)} if looks_like_path(text) else {text}
    for c in cands:
        if c.kind == "python" and (c.spec or {}).get("python") in spelled:
            return c.name
    return None


def _launcher_for_stored(kind: str, spec: dict[str, Any], engine: str | None, pull: str) -> Launcher | None:
    """A way to obtain a stored ad-hoc candidate again, where its spec says how
    (with the baseline variables an aorta environment's spec keeps, and the
    interpreter inside an image)."""
    env = spec.get("env") if isinstance(spec.get("env"), dict) else None
    if kind == "python" and isinstance(spec.get("python"), str):
        from survey.environments.launchers.python import PythonLauncher

        return PythonLauncher(spec["python"], env=env)
    if kind == "image" and isinstance(spec.get("image"), str):
        from survey.environments.launchers.image import ImageLauncher

        interpreter = spec.get("interpreter") if isinstance(spec.get("interpreter"), str) else None
        return ImageLauncher(spec["image"], engine=engine, pull=pull, python=interpreter, env=env)
    return None
