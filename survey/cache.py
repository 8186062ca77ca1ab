"""Where proton-survey keeps what it can rebuild: venvs, stub libraries, rootfs."""

from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    p = Path(os.environ.get("SURVEY_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "proton-survey")
    p.mkdir(parents=True, exist_ok=True)
    return p
