"""Where proton-survey keeps what it can rebuild: venvs, stub libraries, the test
root filesystem."""

from __future__ import annotations

import os
from pathlib import Path


def location() -> Path:
    """``SURVEY_CACHE``, else ``$XDG_CACHE_HOME/proton-survey`` (``~/.cache``); not created."""
    return Path(os.environ.get("SURVEY_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "proton-survey")


def root() -> Path:
    p = location()
    p.mkdir(parents=True, exist_ok=True)
    return p
