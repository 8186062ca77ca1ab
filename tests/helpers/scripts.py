"""The project's scripts (bench/), loaded as modules by the tests that check them.

A script puts the checkout first on ``sys.path`` when it starts, as it must when run as
``python bench/X.py``; loaded into a test process, which has the checkout on it already,
that insertion would stay behind for every later test (``--flake-hunt``'s leak report named
each test that loaded one). :func:`load_script` gives ``sys.path`` back as it was."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """The script at ``path``, executed as module ``name`` (not added to ``sys.modules``),
    with ``sys.path`` as it was before."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path[:] = saved
    return mod
