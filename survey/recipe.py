"""The ``proton:`` block of an aorta recipe, validated with the reference page's rules.

- ``backend``: cupti | roctracer | rocprofiler | instrumentation | auto (or absent)
- ``backend_mode`` and ``instrumentation_mode`` both render Proton's single
  ``--mode``, so they are mutually exclusive;
- ``backend_mode`` needs an explicit (non-auto) backend and is one of
  pcsampling | periodic_flushing; roctracer accepts only periodic_flushing;
- ``instrumentation_mode`` belongs to the instrumentation backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from probes import outcomes as O
from survey.errors import RecipeError

BACKEND_MODES = ("pcsampling", "periodic_flushing")


@dataclass
class ProtonBlock:
    backend: str | None
    mode: str | None
    source: str


def find_block(data: Any) -> dict[str, Any] | None:
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("proton"), dict):
        return data["proton"]
    for value in data.values():
        if isinstance(value, dict) and isinstance(value.get("proton"), dict):
            return value["proton"]
    return None


def parse(data: Any, where: str = "recipe") -> ProtonBlock:
    block = find_block(data)
    if block is None:
        raise RecipeError(f"{where}: no `proton:` block", field="proton")
    backend = block.get("backend")
    bmode = block.get("backend_mode")
    imode = block.get("instrumentation_mode")
    for key, value in (("backend", backend), ("backend_mode", bmode), ("instrumentation_mode", imode)):
        if value is not None and not isinstance(value, str):
            raise RecipeError(f"{where}: proton.{key} must be a string, got {value!r}", field=f"proton.{key}")
    if backend not in (None, "auto", *O.BACKENDS):
        raise RecipeError(f"{where}: proton.backend {backend!r} is not one of auto, {', '.join(O.BACKENDS)}",
                          field="proton.backend")
    if bmode is not None and imode is not None:
        raise RecipeError(f"{where}: proton.backend_mode and proton.instrumentation_mode both render Proton's "
                          "single --mode; set one of them", field="proton.backend_mode")
    if bmode is not None:
        if backend in (None, "auto"):
            raise RecipeError(f"{where}: proton.backend_mode needs an explicit backend (not auto)",
                              field="proton.backend")
        if bmode.split(":", 1)[0] not in BACKEND_MODES:
            raise RecipeError(f"{where}: proton.backend_mode {bmode!r} is not one of {', '.join(BACKEND_MODES)}",
                              field="proton.backend_mode")
        if backend == "roctracer" and bmode.split(":", 1)[0] != "periodic_flushing":
            raise RecipeError(f"{where}: roctracer accepts only backend_mode periodic_flushing",
                              field="proton.backend_mode")
        if backend == "instrumentation":
            raise RecipeError(f"{where}: the instrumentation backend takes instrumentation_mode, not backend_mode",
                              field="proton.backend_mode")
    if imode is not None and backend not in ("instrumentation",):
        raise RecipeError(f"{where}: proton.instrumentation_mode needs backend: instrumentation",
                          field="proton.instrumentation_mode")
    if backend in (None, "auto"):
        raise RecipeError(f"{where}: proton.backend is {backend or 'absent'} (auto); `survey check` needs the "
                          "backend the run will use", field="proton.backend")
    return ProtonBlock(backend=backend, mode=bmode or imode, source=where)


def load(path: str | Path) -> ProtonBlock:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise RecipeError(f"{p}: no such file")
    except yaml.YAMLError as e:
        raise RecipeError(f"{p}: not valid YAML: {e}")
    return parse(data, str(p))
