"""Modules loaded on first use, so that ``survey --help`` does not pay for pandas,
SQLAlchemy and Alembic (about 1.5 s of imports) that only some commands need.

``lazy("survey.table")`` returns the module object at once and executes it the first
time one of its attributes is read (importlib's LazyLoader).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
