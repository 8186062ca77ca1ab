"""Does a cell's workload get aorta's collectors? The collector's reach, from
aorta's own code and registry.

In the declared aorta release (survey/aorta/model.py) the collectors that attach by wrapping a command (``rocprof``,
``proton``) are applied in exactly one place: ``SubprocessWorkload.setup``
(``workloads/_subprocess.py``), which rewrites the command it runs with
``run.collectors.wrap_argv_for_collectors`` (Proton's command line around it under
``mode: cli``, the ``AORTA_PROTON_*`` variables in front of it under ``mode:
env``). Nothing else calls that function:

- a ``mode: probe`` recipe runs the command given after ``--`` as the workload
  ``_subprocess`` (``probe/recipe_builder.py``): its cells get the collector;
- a triage recipe's workload runs in aorta's own process (``gpu_smoke``,
  ``training``, ...: subclasses of ``Workload``, not of ``SubprocessWorkload``)
  and never gets it: the trial runs, and no profile is written;
- a triage recipe naming ``_subprocess`` itself has no command (only the probe
  flow supplies ``_aorta_subprocess_argv``): its setup fails;
- a plugin workload (the ``aorta.workloads`` entry points) gets it when its class
  is a subclass of ``SubprocessWorkload``, whose setup does the wrapping.

Which classes the workload names are read from the installed aorta (its
``aorta.workloads`` entry points, loaded in the Python that runs ``aorta``) where
there is one, else from the declared release's own list (:data:`WORKLOADS`). The
rule that only ``SubprocessWorkload`` wraps is that release's; every answer says which
aorta it describes.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any, Optional

from survey.aorta.environments import find_aorta_python
from survey.aorta.links import NO, UNKNOWN, YES, LinkWord
from survey.aorta.model import RELEASE

SUBPROCESS = "_subprocess"
BEHAVIOUR_OF = RELEASE  # the aorta release whose code the rule above was read from

# The declared release's aorta.workloads entry points: whether each class is (a
# subclass of) SubprocessWorkload.
WORKLOADS: dict[str, bool] = {
    "_subprocess": True,
    "gpu_smoke": False,
    "hrx": False,
    "hrx_perf": False,
    "inference": False,
    "llm_determinism": False,
    "race": False,
    "tokenspeed_serve": False,
    "training": False,
}

# Runs in the Python where aorta is installed: its version, and whether the named
# workload's class is a subclass of the _subprocess entry point's class.
_CHILD = r"""
import json, sys
from importlib import metadata
name = sys.argv[1]
out = {}
try:
    out["version"] = metadata.version("amd-aorta")
except Exception as e:
    out["version"] = None
try:
    eps = list(metadata.entry_points(group="aorta.workloads"))
except TypeError:
    eps = list(metadata.entry_points().get("aorta.workloads", []))
found = {ep.name: ep for ep in eps}
out["names"] = sorted(found)
def load(n):
    ep = found[n]
    dist = getattr(getattr(ep, "dist", None), "name", None) or "unknown"
    return ep, dist, ep.load()
if name in found:
    try:
        ep, dist, cls = load(name)
        out["workload"] = {"value": ep.value, "dist": dist}
        if "_subprocess" in found:
            _ep, _dist, base = load("_subprocess")
            out["subclass"] = isinstance(cls, type) and isinstance(base, type) and issubclass(cls, base)
            out["base"] = _ep.value
    except BaseException as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
sys.stdout.write(json.dumps(out))
"""


@dataclass
class Reach:
    """Whether the workload gets the collector: ``yes`` | ``no`` | ``unknown``."""

    answer: LinkWord
    basis: str
    aorta: str  # which aorta's behaviour the answer describes, and where the workload was read


def _installed(python: str, workload: str, timeout: float) -> dict[str, Any] | None:
    try:
        proc = subprocess.run([python, "-c", _CHILD, workload], capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    try:
        return dict(json.loads(proc.stdout.decode("utf-8")))
    except (UnicodeDecodeError, ValueError):
        return None


def collector_reach(shape: str, workload: Optional[str], *, python: Optional[str] = None,
                    timeout: float = 60.0) -> Reach:
    """Whether the workload of a recipe of ``shape`` (triage | probe |
    proton-block) gets aorta's wrapping collectors. ``python``: the interpreter whose
    aorta to read (default: the one running ``aorta`` on PATH; none: the declared
    release's list)."""
    rule = f"aorta {BEHAVIOUR_OF} wraps a command with its collectors only in SubprocessWorkload.setup"
    if shape == "proton-block":
        return Reach(YES, "a top-level proton: block (survey's own shape, which aorta does not take) names no "
                            "workload: it describes a run that starts Proton with these options", "recipe")
    if shape == "probe":
        return Reach(YES, f"a mode: probe recipe runs the command given after `--` as `{SUBPROCESS}`; {rule}",
                     f"aorta {BEHAVIOUR_OF}")
    if not workload:
        return Reach(UNKNOWN, "the recipe names no workload", f"aorta {BEHAVIOUR_OF}")
    if workload == SUBPROCESS:
        return Reach(NO, f"a triage recipe gives `{SUBPROCESS}` no command (only the probe flow, `aorta sweep "
                           f"run --recipe R -- COMMAND` with mode: probe, supplies it), so its setup fails before "
                           "anything is profiled", f"aorta {BEHAVIOUR_OF}")
    py = python or find_aorta_python()
    got = _installed(py, workload, timeout) if py is not None else None
    if py is not None:
        if got is not None and got.get("version"):
            version = got["version"]
            said = (f"aorta {BEHAVIOUR_OF}'s behaviour" + ("" if version == BEHAVIOUR_OF else
                    f" (the installed aorta is {version}, whose wrapping was not read: this assumes it is "
                    f"unchanged)") + f"; workloads read from the aorta.workloads entry points of {py}")
            if "error" in got:
                return Reach(UNKNOWN, f"workload {workload!r} did not load there: {got['error']}", said)
            if "workload" not in got:
                return Reach(UNKNOWN, f"workload {workload!r} is not registered in the installed aorta "
                                        f"(registered: {', '.join(got.get('names') or []) or 'none'})", said)
            where = f"{workload!r} ({got['workload']['value']}, from {got['workload']['dist']})"
            if got.get("subclass"):
                return Reach(YES, f"{where} is a SubprocessWorkload: its setup wraps its command; {rule}", said)
            if "subclass" not in got:
                return Reach(UNKNOWN, f"{where}: the installed aorta registers no `{SUBPROCESS}` to compare "
                                        "it with", said)
            return Reach(NO, f"{where} runs in aorta's own process (not a SubprocessWorkload), so no collector "
                               f"is attached and the trial leaves no profile; {rule}", said)
    said = f"aorta {BEHAVIOUR_OF}'s behaviour and workloads " + (
        "(no aorta installed here to read)" if py is None else f"(the aorta of {py} could not be read)")
    if workload not in WORKLOADS:
        return Reach(UNKNOWN, f"workload {workload!r} is not one of aorta {BEHAVIOUR_OF}'s "
                                f"({', '.join(WORKLOADS)}) and no aorta is installed here to read its plugins",
                     said)
    return Reach(NO, f"{workload!r} runs in aorta's own process (not a SubprocessWorkload), so no collector is "
                       f"attached and the trial leaves no profile; {rule}", said)
