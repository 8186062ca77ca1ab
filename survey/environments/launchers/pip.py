"""A fresh venv from a pip requirement, cached by spec.

The venv is built in place and marked complete only at the end
(``proton-survey.json``), so a killed survey leaves a venv the next run rebuilds,
never one it trusts. One process at a time looks at a venv and builds it (a lock
file in the cache's locks/), so surveys at once build it once instead of removing it from under
each other. pip's own download cache is reused across venvs. What was
installed (names, versions, wheel URLs and sha256) comes from pip's installation
report and is the environment's identity.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from survey.core import credentials
from survey.core import paths as cache
from survey.core.errors import Unobtainable
from survey.environments import probe as probe_run
from survey.environments.launchers.python import PythonLauncher
from survey.evidence.identity import Resolved

MARKER = "proton-survey.json"
PINNED = re.compile(r"^[A-Za-z0-9._\-\[\],]+==[^=*]+$")


def _tail(text: str, n: int = 15) -> str:
    return "\n".join(line for line in text.strip().splitlines() if "is ignored: it is neither" not in line)[-2000:]


class PipLauncher:
    kind = "pip"

    def __init__(
        self,
        requirements: list[str],
        *,
        index_url: str | None = None,
        extra_index_urls: list[str] | None = None,
        pre: bool = False,
        python: str | None = None,
        pip_timeout: float = 30.0,
        install_timeout: float = 1800.0,
    ):
        self.requirements = list(requirements)
        self.index_url = index_url
        self.extra_index_urls = list(extra_index_urls or [])
        self.pre = pre
        self.python = python or sys.executable
        self.pip_timeout = pip_timeout
        self.install_timeout = install_timeout

    def describe(self) -> str:
        idx = f" from {self.index_url}" if self.index_url else ""
        # a requirement may hold a URL too (`x --index-url https://user:pw@host/`, `pkg @ https://...`)
        return credentials.mask_text(f"a venv with {' '.join(self.requirements)}{idx}")

    @property
    def pinned(self) -> bool:
        return all(PINNED.match(r.replace(" ", "")) for r in self.requirements)

    def key(self, python_version: str) -> str:
        blob = json.dumps(
            [self.requirements, self.index_url, self.extra_index_urls, self.pre, python_version], sort_keys=True
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def venv_dir(self, python_version: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9.]+", "-", "_".join(self.requirements))[:60].strip("-")
        return cache.root() / "venvs" / f"{slug}-py{python_version}-{self.key(python_version)}"

    def _pip_args(self) -> list[str]:
        args = ["--disable-pip-version-check", "--timeout", str(int(self.pip_timeout)), "--retries", "1"]
        if self.index_url:
            args += ["--index-url", self.index_url]
        for u in self.extra_index_urls:
            args += ["--extra-index-url", u]
        if self.pre:
            args.append("--pre")
        return args

    def _pip(self, target_python: str, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "pip", "--python", target_python, *args]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            said = f"pip did not finish within {timeout:.0f}s: {' '.join(cmd[5:])}"
            raise Unobtainable(credentials.mask_text(said)) from e

    def _installed(self, report_path: Path) -> list[dict[str, Any]]:
        rep = json.loads(report_path.read_text())
        rows = []
        for item in rep.get("install", []):
            info = item.get("download_info") or {}
            hashes = (info.get("archive_info") or {}).get("hashes") or {}
            rows.append(
                {
                    "name": item["metadata"]["name"].lower(),
                    "version": item["metadata"]["version"],
                    "url": info.get("url"),
                    "sha256": hashes.get("sha256"),
                }
            )
        return sorted(rows, key=lambda r: r["name"])

    def _resolve_only(self, base_python: str) -> list[dict[str, Any]]:
        """What the requirement resolves to today (pip --dry-run), for unpinned specs."""
        with tempfile.TemporaryDirectory() as td:
            rep = Path(td) / "report.json"
            proc = self._pip(
                base_python,
                ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(rep),
                 *self._pip_args(), *self.requirements],
                self.install_timeout,
            )
            if proc.returncode != 0:
                raise Unobtainable(credentials.mask_text(
                    f"pip could not resolve {' '.join(self.requirements)}:\n{_tail(proc.stderr)}"))
            return self._installed(rep)

    def obtain(self) -> Resolved:
        base = PythonLauncher(self.python)
        base_exe = base.executable()
        if os.path.realpath(base_exe) == os.path.realpath(sys.executable):  # this very interpreter: no need to ask
            version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        else:
            version = subprocess.run(
                [base_exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, timeout=60,
            ).stdout.strip()
        vdir = self.venv_dir(version)
        vdir.parent.mkdir(parents=True, exist_ok=True)
        locks = cache.root() / "locks"  # not among the venvs: everything there is a venv
        locks.mkdir(exist_ok=True)
        with open(locks / f"{vdir.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process ends
            return self._obtain(base_exe, version, vdir)

    def _obtain(self, base_exe: str, version: str, vdir: Path) -> Resolved:
        marker = vdir / MARKER
        vpy = vdir / "bin" / "python"
        if marker.exists() and vpy.exists():
            saved = json.loads(marker.read_text())
            if self.pinned:
                return Resolved(kind="pip", resolved=saved, python=str(vpy), notes=["venv reused"],
                                target=" ".join(self.requirements))
            if self._resolve_only(str(vpy)) == saved["installed"]:
                return Resolved(kind="pip", resolved=saved, python=str(vpy), notes=["venv reused (re-resolved)"],
                                target=" ".join(self.requirements))
        # Build (or rebuild) in place; the marker is written last.
        if vdir.exists():
            shutil.rmtree(vdir)
        proc = subprocess.run([base_exe, "-m", "venv", "--without-pip", str(vdir)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise Unobtainable(f"could not create a venv with {base_exe}:\n{_tail(proc.stderr)}")
        rep = vdir / "pip-report.json"
        proc = self._pip(
            str(vpy),
            ["install", "--quiet", "--report", str(rep), *self._pip_args(), *self.requirements],
            self.install_timeout,
        )
        if proc.returncode != 0:
            shutil.rmtree(vdir, ignore_errors=True)
            raise Unobtainable(credentials.mask_text(
                f"pip install {' '.join(self.requirements)} failed:\n{_tail(proc.stderr)}"))
        resolved = credentials.mask({  # what is kept and reported: the URLs without their credentials
            "python": version,
            "requirements": self.requirements,
            "index_url": self.index_url,
            "extra_index_urls": self.extra_index_urls,
            "installed": self._installed(rep),
        })
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps(resolved, indent=1, sort_keys=True))
        tmp.replace(marker)
        return Resolved(kind="pip", resolved=resolved, python=str(vpy), notes=["venv built"],
                        target=" ".join(self.requirements))

    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]:
        assert resolved.python
        out = probe_run.run_bundle([resolved.python], args, timeout)
        return probe_run.collect_report(out, self.describe())
