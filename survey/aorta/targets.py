"""aorta's environments as survey targets.

An environment of aorta's registry (survey/aorta/environments.py) or a recipe's inline
``{docker: REF, env: {...}}`` becomes the candidate ``aorta:<name>`` (ad hoc
evidence: ``survey table --all`` shows it), launched the way a trial there runs:

- ``venv``: that venv's ``bin/python`` (survey/launchers/python.py);
- ``docker``: the image (survey/launchers/image.py); with ``venv`` as well, the
  venv's ``bin/python`` inside the image is the interpreter (aorta leaves a
  combination to the workload's wrapper; this is our reading of it);

each with the environment's ``env`` baseline applied, so the probe sees what a
trial sees (and measures controlled variables such as ``HIP_VISIBLE_DEVICES`` in
its second, inherited-environment grid). A non-empty baseline is part of the
environment's identity: the same venv with another baseline is another
environment.

The kinds proton-survey cannot launch are said, with why: ``local``/``default``
(aorta's own process: which Python a cell's command runs in is not named),
``buck`` (a Buck2 target label) and ``emulated`` (a GPU emulator profile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from db.store import Store
from survey.aorta.environments import AortaEnvironment, find_aorta_python
from survey.environments.launchers import Launcher
from survey.flows.run import Outcome, ProbeSettings, in_parallel, survey_one

PREFIX = "aorta:"


def candidate_name(env_name: str) -> str:
    """The candidate an aorta environment's evidence is filed under."""
    return PREFIX + env_name


@dataclass
class AortaTarget:
    env: AortaEnvironment
    engine: str | None = None
    pull: str = "missing"

    @property
    def name(self) -> str:
        return candidate_name(self.env.name)

    @property
    def kind(self) -> str:
        """The launcher kind: python (a venv) | image."""
        return "image" if self.env.docker else "python"

    @property
    def label(self) -> str:
        e = self.env
        where = f"image {e.docker}" if e.docker else f"venv {e.venv}"
        if e.docker and e.venv:
            where += f" (venv {e.venv} inside)"
        return f"aorta {e.name}: {where}" + (f", with {', '.join(sorted(e.env))} set" if e.env else "")

    @property
    def unusable(self) -> str | None:
        """Why this environment cannot be launched by proton-survey, or None."""
        e = self.env
        kind = e.kind
        if kind in ("docker", "venv"):
            return None
        if kind == "local":
            aorta_py = find_aorta_python()
            where = f" (aorta itself runs in {aorta_py})" if aorta_py else ""
            return (f"aorta environment {e.name!r} is the current process{where}: it names no venv or image, so "
                    "which Python the cell's command runs in is not known here; name that interpreter as TARGET")
        if kind == "buck":
            return (f"aorta environment {e.name!r} is a Buck2 target ({e.buck_target}); proton-survey does not "
                    "build or launch Buck targets")
        return (f"aorta environment {e.name!r} is GPU-emulated (emulator {e.emulator or '-'}, mirage_profile "
                f"{e.mirage_profile or '-'}); proton-survey cannot launch an emulator")

    def spec_doc(self) -> dict[str, Any]:
        """The candidate's spec: how to obtain it again (survey/environments/targets.py reads python/image/env)."""
        e = self.env
        spec: dict[str, Any] = {"aorta": e.name, "source": e.source}
        if e.docker:
            spec["image"] = e.docker
            if e.python:
                spec["interpreter"] = e.python
        else:
            spec["python"] = e.python
        if e.env:
            spec["env"] = dict(sorted(e.env.items()))
        return spec

    def launcher(self) -> Launcher:
        """The launcher (raises TargetError, e.g. no container engine for an image)."""
        e = self.env
        if self.unusable is not None:
            raise ValueError(self.unusable)
        if e.docker:
            from survey.environments.launchers.image import ImageLauncher

            return ImageLauncher(e.docker, engine=self.engine, pull=self.pull, python=e.python, env=e.env)
        from survey.environments.launchers.python import PythonLauncher

        assert e.python is not None
        return PythonLauncher(e.python, env=e.env)


def survey_target(store: Store, t: AortaTarget, settings: ProbeSettings,
                  report: Callable[[str], None] = lambda _m: None) -> Outcome:
    """Obtain and probe one aorta environment (unless unchanged on this platform), and
    store it. A launcher that cannot be made here (no container engine) raises and
    stores nothing: that is a property of this host, not of the environment."""
    return survey_one(store, t.name, t.label, t.kind, t.spec_doc(), None, t.launcher(), settings, report=report)


def survey_targets(
    store: Store,
    targets: list[AortaTarget],
    *,
    jobs: int,
    settings: ProbeSettings,
    on_update: Callable[[str, str], None] = lambda _n, _m: None,
    on_done: Callable[[Outcome], None] = lambda _o: None,
) -> list[Outcome]:
    """``survey run --aorta-environments``: every launchable aorta environment, in parallel."""

    def one(t: AortaTarget) -> Outcome:
        return survey_target(store, t, settings, report=lambda msg: on_update(t.name, msg))

    return in_parallel(targets, jobs, lambda t: t.name, one, on_done)
