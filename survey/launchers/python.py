"""An existing interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from survey import probe_run
from survey.errors import NotAPython
from survey.launchers import Resolved

PREFLIGHT = "import sys, json; print(json.dumps([list(sys.version_info[:3]), sys.executable]))"


class PythonLauncher:
    kind = "python"

    def __init__(self, python: str):
        self.python = python

    def describe(self) -> str:
        return f"the interpreter {self.python}"

    def executable(self) -> str:
        path = self.python
        if os.sep not in path:
            found = shutil.which(path)
            if found is None:
                raise NotAPython(f"{path}: not found on PATH")
            path = found
        if not os.path.exists(path):
            raise NotAPython(f"{path}: no such file")
        if os.path.isdir(path):
            raise NotAPython(f"{path}: is a directory, not a Python interpreter")
        if not os.access(path, os.X_OK):
            raise NotAPython(f"{path}: not executable")
        return path

    def obtain(self) -> Resolved:
        exe = self.executable()
        try:
            proc = subprocess.run([exe, "-c", PREFLIGHT], capture_output=True, timeout=60)
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
        out = probe_run.run_bundle([exe], ["resolve"], timeout=120)
        try:
            resolved = json.loads(out.stdout)
        except ValueError:
            raise NotAPython(f"{exe}: could not list its installed distributions: {out.stderr.strip()[-300:]}")
        return Resolved(kind="python", resolved=resolved, python=exe, target=self.python)

    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]:
        assert resolved.python
        out = probe_run.run_bundle([resolved.python], args, timeout)
        return probe_run.collect_report(out, self.describe())
