"""An existing interpreter, optionally with baseline environment variables
(``env``: an aorta environment's ``env``) applied over this process's
environment, as a trial launched there would see them: to the preflight, the
distribution listing and the probe alike. A non-empty ``env`` is part of the
environment's identity (survey/evidence/identity.py) and of the report's origin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from concurrent.futures import Future

from survey.core import credentials
from survey.core.errors import NotAPython, ProbeFailed
from survey.environments import probe as probe_run
from survey.evidence.identity import Resolved

PREFLIGHT = "import sys, json; print(json.dumps([list(sys.version_info[:3]), sys.executable]))"
# An interpreter asked ahead (PythonLauncher.prefetch) is asked again when its answer is older than this.
PREFETCH_FRESH_S = 10.0


def is_venv(path: str) -> bool:
    """A directory holding ``bin/python``: an environment, named by its directory."""
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "bin", "python"))


def interpreter_path(text: str, base: str | os.PathLike[str] | None = None) -> str:
    """An interpreter as typed, made absolute (relative to ``base``, else the working
    directory) so that it names the same file from anywhere. A bare name (``python3``)
    stays a name looked up on PATH, unless it is a directory there (a venv: ``venv``)."""
    where = os.fspath(base) if base is not None else os.getcwd()
    if os.sep not in text and not text.startswith("~") and not os.path.isdir(os.path.join(where, text)):
        return text
    path = os.path.expanduser(text)
    if not os.path.isabs(path):
        path = os.path.join(where, path)
    return os.path.normpath(path)


class PythonLauncher:
    kind = "python"

    def __init__(self, python: str, *, env: dict[str, str] | None = None):
        self.python = python
        self.env = dict(env) if env else None
        self._ahead: tuple[float, Future[Resolved]] | None = None

    def describe(self) -> str:
        with_env = f" with {', '.join(sorted(self.env))} set" if self.env else ""
        return credentials.mask_text(f"the interpreter {self.python}{with_env}")

    def environ(self) -> dict[str, str] | None:
        """The child's environment: None (inherit) without a baseline."""
        return {**os.environ, **self.env} if self.env else None

    def executable(self) -> str:
        path = self.python
        if os.sep not in path:
            found = shutil.which(path)
            if found is None:
                raise NotAPython(f"{path}: not found on PATH")
            path = found
        if not os.path.exists(path):
            raise NotAPython(f"{path}: no such file")
        if os.path.isdir(path):  # a venv (or any prefix): its interpreter
            inside = next((os.path.join(path, "bin", n) for n in ("python", "python3")
                           if os.path.exists(os.path.join(path, "bin", n))), None)
            if inside is None:
                raise NotAPython(f"{path}: is a directory with no bin/python (give a venv's directory or an "
                                 "interpreter)")
            path = inside
        if not os.access(path, os.X_OK):
            raise NotAPython(f"{path}: not executable")
        return path

    def prefetch(self) -> None:
        """Start :meth:`obtain` in the background (a daemon thread): ``survey run`` asks its
        first interpreters while it loads the store. This launcher's next ``obtain`` takes
        that answer (or its error), unless it is older than PREFETCH_FRESH_S."""
        future: Future[Resolved] = Future()

        def work() -> None:
            try:
                future.set_result(self._obtain())
            except BaseException as e:
                future.set_exception(e)

        self._ahead = (time.monotonic(), future)
        threading.Thread(target=work, name=f"prefetch {self.python}", daemon=True).start()

    def obtain(self) -> Resolved:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and time.monotonic() - ahead[0] < PREFETCH_FRESH_S:
            return ahead[1].result()
        return self._obtain()

    def _obtain(self) -> Resolved:
        exe = self.executable()
        try:
            proc = subprocess.run([exe, "-c", PREFLIGHT], capture_output=True, timeout=60, env=self.environ())
        except (OSError, subprocess.SubprocessError) as e:
            raise NotAPython(f"{exe}: cannot run it as a Python: {e}") from e
        try:
            version, _ = json.loads(proc.stdout)
        except (ValueError, TypeError):
            tail = proc.stderr.decode("utf-8", "backslashreplace").strip()[-300:]
            raise NotAPython(
                f"{exe}: does not behave like a Python (exit {proc.returncode}{': ' + tail if tail else ''})"
            )
        if tuple(version) < (3, 8):
            raise NotAPython(f"{exe}: Python {'.'.join(map(str, version))}; the probe needs Python >= 3.8")
        out = probe_run.run_bundle([exe], ["resolve"], timeout=120, env=self.environ())
        try:
            resolved = probe_run.resolved_of(out, exe)
        except ProbeFailed as e:
            raise NotAPython(f"{exe}: could not list its installed distributions: {e.message}", hint=e.hint)
        if self.env:
            resolved["env"] = dict(sorted(self.env.items()))
        return Resolved(kind="python", resolved=resolved, python=exe, target=self.python)

    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]:
        assert resolved.python
        out = probe_run.run_bundle([resolved.python], args, timeout, env=self.environ())
        return probe_run.collect_report(out, self.describe())
