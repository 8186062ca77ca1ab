"""The candidate catalog (TOML). ``survey/data/catalog/default.toml`` ships with proton-survey."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from survey.core import names as names_mod
from survey.core.errors import CatalogError
from survey.core.names import CATALOG_PATTERN, MAX_NAME
from survey.core.textfile import read_text

DEFAULT = Path(__file__).parents[1] / "data" / "catalog" / "default.toml"


def platform_matches(value: str, key: str) -> bool:
    """Whether a platform named in a catalog (or on the command line) means the
    platform ``key``: the key itself or one of its ':'-separated parts, so
    ``sm_90``, ``NVIDIA H200`` and ``nvidia:sm_90:NVIDIA H200`` all name
    ``nvidia:sm_90:NVIDIA H200`` (``survey check --platform`` reads them the same way)."""
    return value == key or value in key.split(":")


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=CATALOG_PATTERN, max_length=MAX_NAME)
    label: str | None = None
    pip: str | list[str] | None = None
    python: str | None = Field(default=None, description="an interpreter: a path (relative to the catalog file), "
                                                         "a venv's directory, or a name on PATH")
    image: str | None = None
    index_url: str | None = None
    extra_index_urls: list[str] = Field(default_factory=list)
    pre: bool = False
    interpreter: str | None = Field(default=None, description="python for pip venvs / inside images")
    captures: list[str] = Field(default_factory=list)
    platforms: list[str] | None = Field(
        default=None, description="where it must be probed: platform keys or parts of one (sm_90, gfx942, "
                                  "none:x86_64); default: wherever the survey runs")
    versions: str | None = Field(
        default=None, description="a family: every release of the `pip` project in this range (PEP 440, "
                                  "e.g. >=3.6), one candidate each (survey.environments.discovery)")
    track: str | None = Field(default=None, description='"digest": a family of the image tag\'s digests, '
                                                        "one candidate per digest it pointed to")
    discovered_from: str | None = Field(default=None, description="set on a candidate discovery made: "
                                                                  "its family's name")

    @field_validator("label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        why = None if value is None else names_mod.problem(value, "label", names_mod.MAX_LABEL)
        if why:
            raise ValueError(why)
        return value

    @field_validator("platforms")
    @classmethod
    def _platforms(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("is empty: name at least one platform, or leave it out to probe where the survey runs")
        for p in value:
            if not p or p != p.strip() or len(p) > 300 or any(ord(c) < 32 for c in p):
                raise ValueError(f"{p!r} is not a platform (a key such as nvidia:sm_90:NVIDIA H200, or a part "
                                 "of one: sm_90, gfx942, none:x86_64)")
        dupes = sorted({p for p in value if value.count(p) > 1})
        if dupes:
            raise ValueError(f"names {', '.join(dupes)} more than once")
        return value

    @model_validator(mode="after")
    def one_source(self) -> Entry:
        given = [k for k in ("pip", "python", "image") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"needs exactly one of pip, python, image (has {given or 'none'})")
        if self.index_url and not self.pip:
            raise ValueError("index_url only applies to pip candidates")
        if self.versions is not None or self.track is not None:
            from survey.environments.discovery import family_problem

            problem = family_problem(self)
            if problem:
                raise ValueError(problem)
        return self

    @property
    def family(self) -> bool:
        """Does this entry name a family (releases in a range, a tag's digests) to discover?"""
        return self.versions is not None or self.track is not None

    @property
    def kind(self) -> str:
        return "pip" if self.pip else "python" if self.python else "image"

    @property
    def requirements(self) -> list[str]:
        if self.pip is None:
            return []
        return [self.pip] if isinstance(self.pip, str) else list(self.pip)

    @property
    def display_label(self) -> str:
        return self.label or self.name

    def runs_on(self, key: str) -> bool:
        """Whether this candidate is to be probed on the platform ``key``."""
        return self.platforms is None or any(platform_matches(p, key) for p in self.platforms)

    def spec(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude_defaults=True)


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidate: list[Entry]
    path: str | None = None

    def names(self) -> list[str]:
        return [c.name for c in self.candidate]

    def get(self, name: str) -> Entry | None:
        return next((c for c in self.candidate if c.name == name), None)


def load(path: str | Path | None = None) -> Catalog:
    p = Path(path) if path else DEFAULT
    text = read_text(p, "a TOML catalog", lambda msg: CatalogError(f"catalog {msg}"))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise CatalogError(f"catalog {p}: not valid TOML: {e}")
    if "candidate" not in data:
        raise CatalogError(f"catalog {p}: no [[candidate]] entries", field="candidate")
    for i, raw in enumerate(data["candidate"] if isinstance(data["candidate"], list) else []):
        if isinstance(raw, dict) and "discovered_from" in raw:
            raise CatalogError(f"catalog {p}: candidate {raw.get('name', f'#{i + 1}')!r}: discovered_from is set "
                               "by discovery, not in a catalog", field=f"candidate.{i}.discovered_from")
    try:
        cat = Catalog.model_validate({**data, "path": str(p)})
    except ValidationError as e:
        # every problem of the whole catalog, in one line: all are fixed before anything is probed
        found = []
        for err in e.errors():
            loc = list(err["loc"])
            if len(loc) >= 2 and loc[0] == "candidate" and isinstance(loc[1], int):
                entry = data["candidate"][loc[1]]
                name = entry.get("name", f"#{loc[1] + 1}") if isinstance(entry, dict) else f"#{loc[1] + 1}"
                where = f"candidate {name!r}" + (f", field {'.'.join(map(str, loc[2:]))}" if loc[2:] else "")
            else:
                where = ".".join(map(str, loc))
            found.append((where, " ".join(str(err["msg"]).split()), ".".join(map(str, loc))))
        listed = "; ".join(f"{where}: {msg}" for where, msg, _ in found)
        count = f"{len(found)} problems: " if len(found) > 1 else ""
        raise CatalogError(f"catalog {p}: {count}{listed}", field=found[0][2])
    dupes = {n for n in cat.names() if cat.names().count(n) > 1}
    if dupes:
        raise CatalogError(f"catalog {p}: duplicate candidate names {sorted(dupes)}", field="candidate.name")
    from survey.environments.launchers.python import interpreter_path

    base = p.absolute().parent  # a relative interpreter is relative to the catalog, not to where survey runs
    for entry in cat.candidate:
        if entry.python:
            entry.python = interpreter_path(entry.python, base)
        if entry.pip and entry.interpreter:
            entry.interpreter = interpreter_path(entry.interpreter, base)
    return cat
