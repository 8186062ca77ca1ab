"""The aorta release survey's own reading of aorta describes, declared once.

Where aorta itself cannot be imported (neither in the Python that runs ``survey``
nor in TARGET's), survey answers from a model of one aorta release: the recipe
loader's rules (survey/aorta/recipe.py), the mitigations and environments registries
(survey/aorta/mitigations.py, environments.py), the workloads that get a collector
(survey/aorta/workloads.py), the proton collector's wrap (survey/aorta/overlays.py,
check.py's attach link) and its command rules (below). Every answer from the model
names :data:`RELEASE`; every answer from aorta's own code names the version it ran.

The command rules, for ``mode: cli`` (aorta's ``instrumentation/proton/__init__.py``
``_split_python_launch`` and ``_module_target``): Proton's command front-end runs a
script through ``runpy.run_path``, so aorta wraps only

- a command whose ``argv[0]`` is named ``pytest`` (Proton runs it as
  ``pytest.main``);
- ``python[N[.M]] [FLAGS] script.py ...`` where every flag before the script is one
  of :data:`SAFE_PYTHON_FLAGS`;
- ``python [FLAGS] -m pytest ...`` (``-mpytest`` too), the one module Proton also runs;

and refuses anything else at the trial's setup, before anything launches: another
program (``bash run.sh``, a console script other than ``pytest``, ``torchrun``),
``python -m`` another module, an interpreter option that takes an argument, or an
interpreter with no script. Under ``mode: env`` aorta runs the command as it is,
with the ``AORTA_PROTON_*`` variables in front of it (``env(1)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Optional, Sequence

RELEASE = "0.3.0"  # the one aorta release the model describes
NAME = f"aorta {RELEASE}"
MODEL = f"the declared model of {NAME} (survey/aorta/model.py)"

PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
SAFE_PYTHON_FLAGS = frozenset({"-u", "-B", "-E", "-s", "-S", "-O", "-OO", "-I", "-b", "-q"})
WRAPPABLE_MODULES = frozenset({"pytest"})


def model_of(version: Optional[str]) -> str:
    """What an answer from the model says about the aorta it assumes."""
    if version is None or version == RELEASE:
        return MODEL
    return f"{MODEL}; the installed aorta is {version}, whose code was not run: this assumes it behaves as {RELEASE}"


@dataclass(frozen=True)
class CommandRule:
    """Whether aorta's ``mode: cli`` wraps a command, and why (the model's answer)."""

    wraps: bool
    why: str  # for a refusal: aorta's own reason, in the model's words
    kind: str  # pytest | script | module | program | interpreter_option | no_script | empty


def _name(arg: str) -> str:
    return PurePosixPath(arg).name


def cli_rule(argv: Sequence[str]) -> CommandRule:
    """The model of aorta's ``mode: cli`` wrap applied to ``argv``."""
    if not argv:
        return CommandRule(False, "cannot wrap an empty argv with proton", "empty")
    if _name(argv[0]) in WRAPPABLE_MODULES:
        return CommandRule(True, f"{argv[0]!r} is run by Proton's front-end as pytest.main(args)", "pytest")
    if not PYTHON_NAME.match(_name(argv[0])):
        return CommandRule(False, f"proton mode 'cli' needs a Python script launch, got {argv[0]!r}: Proton's "
                                  "command front-end executes a script, not an arbitrary command", "program")
    rest = list(argv[1:])
    for i, arg in enumerate(rest):
        if arg in SAFE_PYTHON_FLAGS:
            continue
        if arg == "-m" or arg.startswith("-m"):
            module = (rest[i + 1] if i + 1 < len(rest) else "") if arg == "-m" else arg[2:]
            if not module:
                return CommandRule(False, "proton mode 'cli' saw '-m' with no module name", "module")
            if module not in WRAPPABLE_MODULES:
                return CommandRule(False, f"proton mode 'cli' cannot wrap 'python -m {module}': Proton's front-end "
                                          "runs its target through runpy.run_path, which resolves a script path, "
                                          f"not a module name (it also accepts only {sorted(WRAPPABLE_MODULES)})",
                                   "module")
            return CommandRule(True, f"'python -m {module}' is forwarded as Proton's {module} target", "module")
        if arg.startswith("-"):
            return CommandRule(False, f"proton mode 'cli' cannot wrap interpreter option {arg!r} (supported: "
                                      f"{sorted(SAFE_PYTHON_FLAGS)}, plus '-m' with {sorted(WRAPPABLE_MODULES)})",
                               "interpreter_option")
        return CommandRule(True, f"a Python script launch ({arg!r}) is run by Proton's front-end", "script")
    return CommandRule(False, "proton mode 'cli' needs a script path after the interpreter", "no_script")
