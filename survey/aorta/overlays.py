"""The environment a cell's trial runs with, and what each variable aorta sets
there does to Proton, answered from the evidence.

aorta builds a trial's environment in layers, each over the one before
(``run/dispatcher.py``): the environment's ``env`` baseline, the cell's
mitigations (a probe cell's two axes), the recipe's and the cell's ``extra_env``;
then its ``proton`` wrap (``instrumentation/proton/__init__.py``
``_device_env_prefix``) moves ``HIP_VISIBLE_DEVICES`` (and, once an AMD host is
established, ``CUDA_VISIBLE_DEVICES``) to ``ROCR_VISIBLE_DEVICES`` for the backends
that intercept HSA queues (``auto``, ``rocprofiler``, ``roctracer``).

Evidence is a probe run in an environment that may not have had those variables.
Each variable is answered from what was measured, or said unknown with why:

- in the evidence (the probed environment had it, with this value): measured.
  The probe's clean grid removes the variables that change what Proton does
  (``probes/facts.py`` ``is_controlled``) and its inherited grid starts each
  backend with them set, so for those the inherited row of the backend answers;
- ``TRITON_PROTON_DISABLE``: the build's Proton knobs (the report's
  ``registry.knobs``, read from ``triton.knobs.proton``) say whether this build
  reads it; ``proton.start`` returns without a session when it is set
  (``triton/profiler/profile.py``: ``if flags.command_line or
  triton.knobs.proton.disable: return``), and Triton's ``getenv_bool`` takes
  1/true/on/yes (any case) as set and 0/false/off/no/"" as not (measured with the
  3.9.0 wheel);
- a device-selection variable the evidence's GPU runtime reads, set to the empty
  string: no device is visible to the trial (CUDA reads ``CUDA_VISIBLE_DEVICES``;
  ROCm reads ``HIP_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``,
  ``GPU_DEVICE_ORDINAL`` and ``CUDA_VISIBLE_DEVICES``);
- any other variable Proton, Triton or a GPU runtime reads (``TRITON_*``,
  ``PROTON_*``, the controlled ones, the loader's ``LD_PRELOAD`` /
  ``LD_LIBRARY_PATH``, ``HSA_*``, ``HIP_*``, ``ROC*``, ``GPU_*``, ``AMD_*``,
  ``DEBUG_HIP_*``, ``DEBUG_CLR_*``, ``CUDA_*``, ``NVIDIA_*``, ``CUPTI_*``): unknown
  unless measured; one of the other vendor's runtime (``HSA_XNACK`` on NVIDIA) is
  not read there;
- anything else (``DISABLE_TF32``, ``NCCL_*``, ``PYTORCH_*``): read by the
  workload's libraries, not by Proton or the GPU runtime: no bearing on whether a
  profile is written.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Optional, Sequence

from probes import facts as probe_facts
from probes import outcomes as O
from survey.aorta.links import NO, UNKNOWN, YES

TRUE_VALUES = ("1", "true", "on", "yes")
FALSE_VALUES = ("0", "false", "off", "no", "")
QUEUE_INTERCEPTING = ("auto", "rocprofiler", "roctracer")  # the declared aorta release QUEUE_INTERCEPTING_BACKENDS
AMD_BACKENDS = ("rocprofiler", "roctracer")
AMD_SIGNALS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
# The device-selection variables each vendor's runtime reads.
DEVICE_VARIABLES: dict[str, tuple[str, ...]] = {
    "CUDA_VISIBLE_DEVICES": ("nvidia", "amd"),
    "HIP_VISIBLE_DEVICES": ("amd",),
    "ROCR_VISIBLE_DEVICES": ("amd",),
    "GPU_DEVICE_ORDINAL": ("amd",),
}
RUNTIMES = {"nvidia": "CUDA", "amd": "ROCm"}
_PROTON = re.compile(r"^(TRITON_\w+|PROTON_\w+)$")
_AMD_RUNTIME = re.compile(r"^(HSA_\w+|HIP_\w+|ROC\w+|GPU_\w+|AMD_\w+|DEBUG_HIP_\w+|DEBUG_CLR_\w+)$")
_NVIDIA_RUNTIME = re.compile(r"^(CUDA_\w+|NVIDIA_\w+|CUPTI_\w+)$")
_LOADER = ("LD_PRELOAD", "LD_LIBRARY_PATH")


@dataclass
class Variable:
    """One variable of the trial's environment and what it does to the profile."""

    name: str
    value: str
    set_by: str  # the layer: "environment X's env", "mitigation M", "extra_env", "aorta's proton wrap"
    answer: str  # yes (no bearing, or measured to work) | no | unknown
    basis: str
    cause: Optional[str] = None  # for no: disabled | no_gpu | devices_env_rejected | ...; unknown: overlay_not_measured

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EvidenceFacts:
    """What one evidence run says about environments: read once per run."""

    vendor: str  # nvidia | amd | none | unknown
    variables: dict[str, str]  # what the probed environment had set (recorded variables and its baseline)
    knobs: Optional[dict[str, str]]  # variable -> knob attribute, as this build reads them; None: not recorded
    inherited: dict[tuple[str, Optional[str]], tuple[str, Optional[str]]]  # (backend, mode) -> (outcome, message)
    clean: dict[tuple[str, Optional[str]], str]  # (backend, mode) -> outcome


def evidence_facts(vendor: str, report: Optional[Mapping[str, Any]], identity_env: Mapping[str, str],
                   modes: Sequence[Any]) -> EvidenceFacts:
    """From a run's platform vendor, its raw report, its identity's env baseline and its mode rows."""
    variables = dict(identity_env)
    knobs: Optional[dict[str, str]] = None
    if report is not None:
        env = report.get("environment") or {}
        for v in env.get("variables") or []:
            if isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("value"), str):
                variables.setdefault(v["name"], v["value"])
        origin = report.get("origin") or {}
        for part in ("interpreter", "image"):
            base = (origin.get(part) or {}).get("env") if isinstance(origin.get(part), dict) else None
            if isinstance(base, dict):
                for k, val in base.items():
                    if isinstance(val, str):
                        variables.setdefault(k, val)
        raw = (report.get("registry") or {}).get("knobs")
        if isinstance(raw, list):
            knobs = {k["variable"]: str(k.get("attr")) for k in raw if isinstance(k, dict) and k.get("variable")}
    inherited = {(r.backend, r.mode): (r.outcome, r.message) for r in modes if r.env == "inherited" and not r.stub}
    clean = {(r.backend, r.mode): r.outcome for r in modes if r.env == "clean" and not r.stub}
    return EvidenceFacts(vendor, variables, knobs, inherited, clean)


def layered(layers: Sequence[tuple[str, Mapping[str, str]]]) -> dict[str, tuple[str, str]]:
    """VAR -> (value, layer): each layer over the ones before it."""
    out: dict[str, tuple[str, str]] = {}
    for name, env in layers:
        for k, v in env.items():
            out[k] = (v, name)
    return out


def device_translation(backend: str, env: dict[str, tuple[str, str]]) -> Optional[str]:
    """the declared aorta release's proton wrap, applied to ``env`` in place: for a queue-intercepting
    backend, HIP_VISIBLE_DEVICES (and CUDA_VISIBLE_DEVICES once an AMD host is
    established) is unset and its value moved to ROCR_VISIBLE_DEVICES unless that is
    set. Returns what was done, or None."""
    if backend not in QUEUE_INTERCEPTING:
        return None
    candidates = ["HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"]
    if backend not in AMD_BACKENDS and not any(n in env for n in AMD_SIGNALS):
        candidates.remove("CUDA_VISIBLE_DEVICES")
    present = [n for n in candidates if n in env]
    if not present:
        return None
    moved = env["ROCR_VISIBLE_DEVICES"][0] if "ROCR_VISIBLE_DEVICES" in env else env[present[0]][0]
    for n in present:
        del env[n]
    if "ROCR_VISIBLE_DEVICES" not in env:
        env["ROCR_VISIBLE_DEVICES"] = (moved, "aorta's proton wrap")
    return (f"aorta's proton wrap (backend {backend}) unsets {', '.join(present)} and runs with "
            f"ROCR_VISIBLE_DEVICES={moved!r}")


def _measured(name: str, value: str, facts: EvidenceFacts, backend: str, mode: Optional[str]) -> tuple[str, str,
                                                                                                         str | None]:
    """A variable the probed environment had, with this value."""
    if not probe_facts.is_controlled(name):
        return YES, "the probed environment had it set so (its evidence is with it)", None
    row = facts.inherited.get((backend, mode))
    if row is None:
        return UNKNOWN, (f"the probed environment had it set so, and the probe's inherited grid did not start "
                         f"{backend} mode {mode or 'default'} with it"), "overlay_not_measured"
    outcome, message = row
    if outcome == O.OK:
        return YES, f"measured: proton.start({backend}) works with it set (the probe's inherited grid)", None
    if outcome in (O.DISABLED, O.DEVICES_ENV_REJECTED):
        said = message or "start() returned None"
        return NO, f"measured with it set (the probe's inherited grid): {outcome}: {said}", outcome
    clean = facts.clean.get((backend, mode))
    if clean == outcome:
        return YES, f"measured with it set: {outcome}, as without it (no effect of its own)", None
    return UNKNOWN, (f"measured with it set: {outcome} ({message or '-'}), and {clean or 'not measured'} without it"
                     ), "overlay_not_measured"


def effect(name: str, value: str, facts: EvidenceFacts, backend: str, mode: Optional[str]) -> tuple[str, str,
                                                                                                    str | None]:
    """(answer, basis, cause) for one variable of the trial's environment."""
    if facts.variables.get(name) == value:
        return _measured(name, value, facts, backend, mode)
    vendor = facts.vendor
    if name == "TRITON_PROTON_DISABLE":
        if facts.knobs is None:
            return UNKNOWN, ("this evidence does not record which variables the build's Proton reads (probe "
                             "again with the current probe)"), "overlay_not_measured"
        if name not in facts.knobs:
            return UNKNOWN, ("the build's Proton knobs do not read it, and what it does without them was not "
                             "measured"), "overlay_not_measured"
        low = value.strip().lower()
        if low in TRUE_VALUES:
            return NO, (f"the build reads it (triton.knobs.proton.{facts.knobs[name]}, measured), and proton.start "
                        "returns without a session when it is set: no profile is written"), O.DISABLED
        if low in FALSE_VALUES:
            return YES, f"{value!r} leaves triton.knobs.proton.{facts.knobs[name]} unset", None
        return UNKNOWN, f"whether Triton reads {value!r} as set was not measured", "overlay_not_measured"
    if name in DEVICE_VARIABLES:
        readers = DEVICE_VARIABLES[name]
        if vendor not in RUNTIMES:
            return UNKNOWN, ("it selects GPU devices, and this evidence has no GPU vendor to say which runtime "
                             "reads it"), "overlay_not_measured"
        if vendor not in readers:
            return YES, f"the {RUNTIMES[vendor]} runtime of this evidence's GPUs does not read it", None
        if value == "":
            return NO, (f"empty: the {RUNTIMES[vendor]} runtime sees no device, so the trial has no GPU to run on "
                        "or profile"), O.NO_GPU
        return UNKNOWN, (f"it selects devices {value!r}, and what Proton does with it was not measured (the probe "
                         "measures it where the probed environment sets it)"), "overlay_not_measured"
    if _AMD_RUNTIME.match(name) and vendor == "nvidia":
        return YES, "a ROCm variable; this evidence's GPUs are NVIDIA's, whose runtime does not read it", None
    if _NVIDIA_RUNTIME.match(name) and vendor == "amd":
        return YES, "a CUDA variable; this evidence's GPUs are AMD's, whose runtime does not read it", None
    if (_PROTON.match(name) or probe_facts.is_controlled(name) or name in _LOADER or _AMD_RUNTIME.match(name)
            or _NVIDIA_RUNTIME.match(name)):
        return UNKNOWN, ("it changes what Proton, Triton or the GPU runtime does, and this evidence was not "
                         "measured with it (probe an environment that sets it: an aorta environment whose env has "
                         "it, `survey run --aorta-environments`)"), "overlay_not_measured"
    return YES, "read by the workload's libraries, not by Proton, Triton or the GPU runtime", None


def answer_environment(layers: Sequence[tuple[str, Mapping[str, str]]], facts: EvidenceFacts, aorta_backend: str,
                       backend: str, mode: Optional[str]) -> tuple[list[Variable], Optional[str]]:
    """Every variable aorta sets for the trial, answered (``aorta_backend``: the
    recipe's, for aorta's device translation; ``backend``/``mode``: what starts)."""
    env = layered(layers)
    moved = device_translation(aorta_backend, env)
    out = []
    for name in sorted(env):
        value, layer = env[name]
        answer, basis, cause = effect(name, value, facts, backend, mode)
        out.append(Variable(name, value, layer, answer, basis, cause))
    return out, moved
