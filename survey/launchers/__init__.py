"""Launchers obtain a candidate environment and run the probe inside it.

- ``python``: an existing interpreter
- ``pip``: a fresh venv from a requirement (cached by spec)
- ``image``: a container image, through podman or docker

Each returns a :class:`Resolved` (what was obtained, and the identity used to
skip unchanged candidates) and runs the probe bundle inside the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from survey import identity as ident


@dataclass
class Resolved:
    kind: str  # python | pip | image
    resolved: dict[str, Any]
    python: str | None = None
    image_digest: str | None = None
    notes: list[str] = field(default_factory=list)
    target: str | None = None  # how the user named it

    @property
    def identity_doc(self) -> dict[str, Any]:
        """What identifies the environment (survey/identity.py); volatile details
        (the executable's spelling, engine flags) stay out of it."""
        return ident.identity_of_resolved(self.kind, self.resolved)

    @property
    def identity(self) -> str:
        """sha256 of the identity document (without the probe's version: runs carry that)."""
        return ident.digest(self.identity_doc)

    def origin(self) -> dict[str, Any]:
        """The report's ``origin``: where it came from, written by the host side."""
        r = self.resolved
        sections: dict[str, Any] = {}
        if self.kind == "python":
            sections["interpreter"] = {"executable": r.get("executable"), "prefix": r.get("prefix"),
                                       "base_prefix": r.get("base_prefix"), "version": r.get("python")}
            if r.get("env"):
                sections["interpreter"]["env"] = r["env"]
        elif self.kind == "pip":
            sections["pip"] = {k: r.get(k) for k in ("requirements", "index_url", "extra_index_urls", "pre",
                                                      "installed")}
            sections["interpreter"] = {"executable": self.python, "version": r.get("python")}
        elif self.kind == "image":
            sections["image"] = {"reference": r.get("image"), "id": r.get("image_id"), "digest": r.get("digest"),
                                 "engine": r.get("engine"), "python": r.get("interpreter")}
            if r.get("env"):
                sections["image"]["env"] = r["env"]
        return ident.make_origin(self.kind, self.target, r, **sections)


class Launcher(Protocol):
    kind: str

    def describe(self) -> str: ...

    def obtain(self) -> Resolved: ...

    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]: ...
