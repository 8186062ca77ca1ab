"""Launchers obtain a candidate environment and run the probe inside it.

- ``python``: an existing interpreter
- ``pip``: a fresh venv from a requirement (cached by spec)
- ``image``: a container image, through podman or docker

Each returns a :class:`Resolved` (what was obtained, and the identity used to
skip unchanged candidates) and runs the probe bundle inside the target.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Resolved:
    kind: str
    resolved: dict[str, Any]
    python: str | None = None
    image_digest: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def identity(self) -> str:
        """sha256 of what was resolved (without the probe's version: runs carry that)."""
        blob = json.dumps(self.resolved, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()


class Launcher(Protocol):
    kind: str

    def describe(self) -> str: ...

    def obtain(self) -> Resolved: ...

    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]: ...
