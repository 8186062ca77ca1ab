"""aorta's mitigations registry, read the way the declared release reads it, and the
variables each cell's mitigations set.

A mitigation is a named bundle of environment variables (``{VAR: VALUE}``); a
cell names mitigations and aorta applies their union to every trial of the cell,
later names overriding earlier ones, over the environment's ``env`` baseline and
under the recipe's and the cell's ``extra_env`` (aorta ``run/dispatcher.py``:
``Environment.env < mitigations < extra_env``). A ``mode: probe`` recipe's two
axes are both mitigation names: cell ``M-D`` applies ``M``'s variables and then
``D``'s, and aorta refuses the recipe when the two set one variable to different
values (``probe/recipe_builder.py``); a triage cell whose stacked mitigations
disagree on a variable is refused the same way (``triage/recipe.py``).

Three sources, merged in this order, a name given twice being an error
(``registry/mitigations.py``):

1. the declared release's built-ins (:data:`BUILTINS`: ``none`` sets nothing);
2. the ``aorta.mitigations`` entry points of the Python that runs ``aorta``
   (read there, as survey/aorta/environments.py reads ``aorta.environments``);
3. the ``mitigations`` of JSON sidecar files (``--mitigations-file`` to aorta,
   ``--aorta-environments`` here): ``{"version": 1, "mitigations": {NAME: {VAR:
   VALUE}}, "environments": {...}}``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from survey.aorta.environments import (
    PathLike,
    _type_name,
    check_env_mapping,
    find_aorta_python,
    read_entry_points,
    register,
    sidecar_section,
)
from survey.aorta.model import NAME
from survey.core.errors import EnvironmentsError

GROUP = "aorta.mitigations"

# The declared release's registry/mitigations.py BUILTIN_MITIGATIONS: the name and the
# variables each sets.
BUILTINS: dict[str, dict[str, str]] = {
    "none": {},
    "tf32_off": {"DISABLE_TF32": "1"},
    "xnack": {"HSA_XNACK": "1"},
    "gpu_max_hw_queues_2": {"GPU_MAX_HW_QUEUES": "2"},
    "debug_hip_dynamic_queues_1": {"DEBUG_HIP_DYNAMIC_QUEUES": "1"},
    "debug_hip_dynamic_queues_2": {"DEBUG_HIP_DYNAMIC_QUEUES": "2"},
    "roc_aql_queue_size_1024": {"ROC_AQL_QUEUE_SIZE": "1024"},
    "hsa_no_sdma": {"HSA_ENABLE_SDMA": "0"},
    "hsa_no_scratch_reclaim": {"HSA_NO_SCRATCH_RECLAIM": "1"},
    "hsa_disable_cache": {"HSA_DISABLE_CACHE": "1"},
    "hsa_enable_cache": {"HSA_DISABLE_CACHE": "0"},
    "roc_signal_pool_16k": {"ROC_SIGNAL_POOL_SIZE": "16384"},
    "gpu_force_blit_copy_128": {"GPU_FORCE_BLIT_COPY_SIZE": "128"},
    "debug_clr_no_batch_cpu_sync": {"DEBUG_CLR_BATCH_CPU_SYNC_SIZE": "0"},
    "nccl_launch_order_implicit": {"NCCL_LAUNCH_ORDER_IMPLICIT": "1"},
    "rccl_gfx942_cheap_fence_off": {"RCCL_GFX942_CHEAP_FENCE_OFF": "1"},
    "pytorch_no_cuda_memory_caching": {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    "pytorch_alloc_expandable_segments": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "hip_launch_blocking": {"HIP_LAUNCH_BLOCKING": "1"},
    "amd_log_level_4": {"AMD_LOG_LEVEL": "4"},
    "fa_prefer_ck": {"TORCH_ROCM_FA_PREFER_CK": "1"},
    "fa_prefer_aotriton": {"TORCH_ROCM_FA_PREFER_CK": "0"},
}


@dataclass(frozen=True)
class Mitigation:
    name: str
    env: dict[str, str] = field(default_factory=dict, hash=False)
    source: str = "aorta"  # "aorta" (built-in), "plugin:<dist>", "sidecar:<file name>"


@dataclass
class Registry:
    """The merged mitigations, and where they were read from (said in answers)."""

    mitigations: dict[str, Mitigation]
    sources: list[str]  # e.g. ["aorta X's built-ins", "the aorta.mitigations entry points of /x/python", ...]

    def where(self) -> str:
        return ", ".join(self.sources)


@dataclass
class Overlay:
    """The variables a cell's mitigations set, or why they are not known."""

    env: dict[str, str]  # the union, in aorta's order
    origin: dict[str, str]  # VAR -> the mitigation that set it
    unknown: list[str]  # names not registered here
    conflict: Optional[str] = None  # why aorta refuses the combination, or None


def load_sidecar_mitigations(path: PathLike) -> dict[str, Mitigation]:
    """The mitigations a sidecar file declares (none if it declares only environments)."""
    p, raw, src = sidecar_section(path, "mitigations")
    return {name: Mitigation(name, check_env_mapping(f"{p}: mitigations.{name}", payload), src)
            for name, payload in raw.items()}


def _from_plugin(row: dict[str, Any]) -> Mitigation:
    name, dist = row["name"], row["dist"]
    where = f"plugin {dist!r} mitigation {name!r}"
    if "error" in row:
        raise EnvironmentsError(f"{where} ({row['value']}) did not load: {row['error']}")
    payload = row["payload"]
    if not isinstance(payload, dict):
        raise EnvironmentsError(f"{where}: must be a mapping of variable names to strings, got "
                                f"{_type_name(payload)}")
    return Mitigation(name, check_env_mapping(where, payload), f"plugin:{dist}")


def load_mitigations(
    file: Union[PathLike, Sequence[PathLike], None] = None,
    *,
    python: Optional[str] = None,
    entry_points: bool = True,
) -> Registry:
    """aorta's merged mitigations: built-ins, then entry points, then sidecar files
    (the files of ``--aorta-environments``; ``python`` and ``entry_points`` as in
    :func:`survey.aorta.environments.load_environments`)."""
    files: list[Path]
    if file is None:
        files = []
    elif isinstance(file, (str, os.PathLike)):
        files = [Path(file)]
    else:
        files = [Path(f) for f in file]
    out = {name: Mitigation(name, dict(env), "aorta") for name, env in BUILTINS.items()}
    sources = [f"{NAME}'s built-ins"]

    def merge(found: Mapping[str, Mitigation]) -> None:
        register(out, found, "mitigation")

    if entry_points:
        py = python or find_aorta_python()
        if py:
            merge({m.name: m for m in map(_from_plugin, read_entry_points(py, GROUP))})
            sources.append(f"the {GROUP} entry points of {py}")
        else:
            sources.append(f"no {GROUP} entry points (no `aorta` on PATH)")
    for f in files:
        merge(load_sidecar_mitigations(f))
        sources.append(str(f))
    return Registry(out, sources)


def overlay(registry: Registry, names: Sequence[str], *, probe: bool) -> Overlay:
    """The variables ``names`` set, in aorta's order; a name not registered here is
    listed in ``unknown``; a combination aorta refuses says why in ``conflict``."""
    env: dict[str, str] = {}
    origin: dict[str, str] = {}
    unknown: list[str] = []
    conflict = None
    for name in names:
        mit = registry.mitigations.get(name)
        if mit is None:
            unknown.append(name)
            continue
        for var, value in mit.env.items():
            if var in env and env[var] != value and conflict is None:
                what = "the mitigation and diagnostic axes" if probe else "stacked mitigations"
                conflict = (f"{what} disagree: {origin[var]!r} sets {var}={env[var]!r} and {name!r} sets "
                            f"{var}={value!r}; aorta refuses the recipe")
            env[var] = value
            origin[var] = name
    return Overlay(env, origin, unknown, conflict)
