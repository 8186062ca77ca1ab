"""The command a probe recipe's cells run (``aorta sweep run --recipe R -- COMMAND``),
judged by aorta's own rules: whether aorta's proton collector can wrap it, and whether
aorta loads the recipe at all.

Where aorta can be imported (the Python that runs ``survey``, TARGET's interpreter,
the Python of ``aorta`` on PATH: the first that imports it), its own code answers, in
a process of its own: ``aorta.triage.recipe.load_recipe`` (with the sidecar files) and
``aorta.instrumentation.proton.wrap_argv`` per cell's options. Elsewhere the declared
model of one release answers (survey/aorta/model.py). Each answer says which.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from survey.aorta import model
from survey.aorta.links import NO, UNKNOWN, YES, LinkWord

# Runs in a Python that may have aorta: its version, whether its loader takes the
# recipe, and what its proton wrap does with the command under each options set.
_CHILD = r"""
import json, sys
from importlib import metadata
out = {}
try:
    from aorta.instrumentation.proton import ProtonWrapError, wrap_argv
    from aorta.triage.recipe import load_recipe
except Exception as e:
    out["import_error"] = "%s: %s" % (type(e).__name__, e)
    sys.stdout.write(json.dumps(out))
    raise SystemExit(0)
try:
    out["version"] = metadata.version("amd-aorta")
except Exception:
    out["version"] = None
from pathlib import Path
req = json.loads(sys.argv[1])
if req.get("recipe"):
    try:
        r = load_recipe(Path(req["recipe"]), sidecar_files=tuple(Path(p) for p in req["sidecars"]))
        out["recipe"] = {"loaded": True, "cells": [c.name for c in r.cells]}
    except Exception as e:
        out["recipe"] = {"loaded": False, "error": "%s: %s" % (type(e).__name__, e)}
wraps = []
for options in req["options"]:
    try:
        wraps.append({"wraps": True, "argv": wrap_argv(req["argv"], "/aorta-out", options, env={})})
    except ProtonWrapError as e:
        wraps.append({"wraps": False, "error": str(e)})
    except ValueError as e:
        wraps.append({"wraps": False, "error": "invalid options: %s" % e})
out["wraps"] = wraps
sys.stdout.write(json.dumps(out))
"""


@dataclass
class AortaSays:
    """aorta's own answers, from one interpreter."""

    python: str
    version: Optional[str]
    recipe: Optional[dict[str, Any]] = None  # {"loaded": bool, "cells": [...] | "error": str}
    wraps: list[dict[str, Any]] = field(default_factory=list)  # per options set, in the order asked

    @property
    def source(self) -> str:
        return f"aorta {self.version or '(version unknown)'}'s own code ({self.python})"


def _ask(python: str, recipe: Optional[Path], sidecars: Sequence[Path], argv: Sequence[str],
         options: Sequence[dict[str, str]], timeout: float) -> Optional[AortaSays]:
    req = {"recipe": str(recipe) if recipe else None, "sidecars": [str(p) for p in sidecars], "argv": list(argv),
           "options": list(options)}
    try:
        proc = subprocess.run([python, "-c", _CHILD, json.dumps(req)], capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    try:
        got = json.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(got, dict) or "import_error" in got:
        return None
    return AortaSays(python, got.get("version"), got.get("recipe"), list(got.get("wraps") or []))


def interpreters(target: Optional[str], aorta_python: Optional[str]) -> list[str]:
    """Where aorta may be importable, in order: the Python running survey (only when
    aorta is importable here: looked up in this process, not by starting another), TARGET
    (where it is an interpreter), the Python of ``aorta`` on PATH."""
    out = [sys.executable] if importlib.util.find_spec("aorta") is not None else []
    if target and os.sep in target and os.access(target, os.X_OK) and not os.path.isdir(target):
        out.append(target)
    if aorta_python:
        out.append(aorta_python)
    return list(dict.fromkeys(out))


def ask_aorta(pythons: Sequence[str], recipe: Optional[Path], sidecars: Sequence[Path], argv: Sequence[str],
              options: Sequence[dict[str, str]], timeout: float = 60.0) -> Optional[AortaSays]:
    """aorta's own answers from the first interpreter that imports it, or None."""
    for py in pythons:
        said = _ask(py, recipe, sidecars, argv, options, timeout)
        if said is not None:
            return said
    return None


@dataclass(frozen=True)
class CommandAnswer:
    answer: LinkWord  # yes | no | unknown
    basis: str
    source: str  # aorta's own code (version, python) or the declared model (version)
    facts: dict[str, Any]


def judge(launch: str, argv: Optional[Sequence[str]], said: Optional[dict[str, Any]],
          aorta: Optional[AortaSays]) -> CommandAnswer:
    """Whether aorta's collector wraps ``argv`` under ``launch`` (cli | env): from
    ``said`` (aorta's own wrap_argv for this cell's options) where there is one,
    else from the declared model."""
    if argv is None:
        if launch == "env":
            return CommandAnswer(YES, "mode: env runs the command as it is (none was given here), with "
                                        "AORTA_PROTON_* in front of it; it must call proton.start() and "
                                        "proton.finalize() itself", model.MODEL, {"command": None})
        return CommandAnswer(UNKNOWN, "the command was not given: under mode: cli aorta wraps only a Python "
                                        "script launch (`python script.py`, `python -m pytest`, `pytest`) and "
                                        "refuses anything else at setup; give it after -- (`survey check --recipe R "
                                        "[TARGET] -- COMMAND`)", model.MODEL, {"command": None})
    facts: dict[str, Any] = {"command": list(argv), "launch": launch}
    if said is not None and aorta is not None:
        facts["wrapped"] = said.get("argv")
        if said.get("wraps"):
            how = ("runs it as it is, with AORTA_PROTON_* in front of it; the command must call proton.start() and "
                   "proton.finalize() itself" if launch == "env" else "wraps it in Proton's command line")
            return CommandAnswer(YES, f"mode: {launch}: aorta {how}", aorta.source, facts)
        return CommandAnswer(NO, f"mode: {launch}: aorta refuses the command at the trial's setup, before anything "
                                   f"launches: {said.get('error')}", aorta.source, facts)
    version = aorta.version if aorta is not None else None
    if launch == "env":
        return CommandAnswer(YES, "mode: env: aorta runs the command as it is, with AORTA_PROTON_* in front of it; "
                                    "the command must call proton.start() and proton.finalize() itself",
                             model.model_of(version), facts)
    rule = model.cli_rule(argv)
    facts["kind"] = rule.kind
    if rule.wraps:
        return CommandAnswer(YES, f"mode: cli: {rule.why}", model.model_of(version), facts)
    return CommandAnswer(NO, f"mode: cli: aorta refuses the command at the trial's setup, before anything "
                               f"launches: {rule.why}", model.model_of(version), facts)
