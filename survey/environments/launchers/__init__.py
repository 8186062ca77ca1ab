"""Launchers obtain a candidate environment and run the probe inside it.

- ``python``: an existing interpreter
- ``pip``: a fresh venv from a requirement (cached by spec)
- ``image``: a container image, through podman or docker

Each returns a :class:`~survey.evidence.identity.Resolved` (what was obtained, and the identity used to
skip unchanged candidates) and runs the probe bundle inside the target.
"""

from __future__ import annotations

from typing import Protocol

from survey.evidence.identity import Resolved


class Launcher(Protocol):
    kind: str

    def describe(self) -> str: ...

    def obtain(self) -> Resolved: ...

    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]: ...
