"""A container image, through podman or docker.

The engine is chosen when the launcher is made (``engine=``, else ``SURVEY_ENGINE``,
else the first of podman and docker that answers): an engine that is not
installed or not running is refused there, before anything is obtained, so it is
never stored as a property of a candidate. ``obtain()`` pulls the image if asked
to (``pull``: never, missing, always), pins it by its image ID, records its
digest, finds the Python inside it (``python``, else ``python3`` then ``python``)
and lists the distributions installed there. The identity depends on the digest:
the same digest is the same environment, a tag moved to a new digest is a new one.

Every container runs the probe bundle on stdin with ``ENGINE run --rm -i
--network=none`` (no host mounts), the image's entrypoint replaced by its Python,
under a unique name (``proton-survey-<random>``) so that one that outlives its
timeout is killed and removed. On a GPU host the GPU devices are passed in
(AMD: /dev/kfd and /dev/dri; NVIDIA: CDI with podman, ``--gpus all`` with docker).
Baseline variables (``env``: an aorta environment's ``env``) are set in every
container with ``-e NAME=VALUE``, as a trial in that image would see them; a
non-empty ``env`` is part of the environment's identity and of the report's origin.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import threading
from typing import Any

from survey.core import credentials
from survey.core.errors import EngineUnavailable, ImageNotFound, InputError, NotAPython, ProbeFailed, Unobtainable
from survey.environments import probe as probe_run
from survey.evidence.identity import Resolved

ENGINES = ("podman", "docker")
PULL_POLICIES = ("never", "missing", "always")
PYTHONS = ("python3", "python")
# The container runtimes' exit codes for "the command could not be found / run".
EXEC_FAILED = (126, 127)
ENGINE_FAILED = 125
NOT_FOUND_TEXT = re.compile(
    r"manifest unknown|not found|does not exist|name unknown|pull access denied|invalid reference format"
    r"|repository name must|no such image|image not known|access to the resource is denied",
    re.IGNORECASE,
)

_engine_lock = threading.Lock()
_engine_checks: dict[str, tuple[bool, str]] = {}


def _tail(text: str, n: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def _errors(text: str) -> str:
    """The engine's error lines (podman/docker print them as ``Error: ...``), else its tail."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.lower().startswith("error")]
    return "\n".join(errs[-3:]) if errs else "\n".join(lines[-5:])


def flavor(engine: str) -> str | None:
    """podman or docker, from a name or a path; None for anything else."""
    base = os.path.basename(engine)
    for f in ENGINES:
        if base == f or base.startswith(f + "-"):
            return f
    return None


def check_engine(engine: str) -> tuple[bool, str]:
    """(usable, version or the reason it is not), asked once per process and executable."""
    exe = shutil.which(engine)
    if exe is None:
        return False, f"{engine} is not installed (not found on PATH)"
    with _engine_lock:
        if exe in _engine_checks:
            return _engine_checks[exe]
    if flavor(engine) == "podman":
        cmd = [exe, "info", "--format", "{{.Version.Version}}"]
    else:  # the docker CLI answers `version` without a daemon; the server part needs one
        cmd = [exe, "version", "--format", "{{.Server.Version}}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        result = (False, f"{engine} is installed but did not answer `{engine} {cmd[1]}` within 60s")
    except OSError as e:
        result = (False, f"{engine} is installed but cannot be run: {e}")
    else:
        if proc.returncode == 0 and proc.stdout.strip():
            result = (True, proc.stdout.strip())
        else:
            why = _errors(proc.stderr) or f"exit {proc.returncode}"
            result = (False, f"{engine} is installed but its engine is not usable: {why}")
    with _engine_lock:
        _engine_checks[exe] = result
    return result


def choose_engine(engine: str | None) -> tuple[str, str]:
    """(engine, its version); raises EngineUnavailable."""
    engine = engine or os.environ.get("SURVEY_ENGINE") or None
    if engine is not None:
        if flavor(engine) is None:
            raise EngineUnavailable(f"unknown container engine {engine!r}: use podman or docker",
                                    hint="--engine podman or --engine docker")
        ok, text = check_engine(engine)
        if not ok:
            raise EngineUnavailable(text, hint=_install_hint(engine))
        return engine, text
    reasons = []
    for candidate in ENGINES:
        ok, text = check_engine(candidate)
        if ok:
            return candidate, text
        reasons.append(text)
    raise EngineUnavailable("no usable container engine: " + "; ".join(reasons), hint=_install_hint(None))


def _install_hint(engine: str | None) -> str:
    if engine is not None and flavor(engine) == "docker":
        return "start the Docker daemon (or use --engine podman)"
    return "install podman (apt-get install -y podman runc) or start a Docker daemon"


def gpu_flags(engine_flavor: str, dev: str = "/dev") -> list[str]:
    """The device flags that give a container this host's GPUs (none on a host without)."""
    flags: list[str] = []
    if os.path.exists(os.path.join(dev, "kfd")):
        flags += [f"--device={dev}/kfd", f"--device={dev}/dri", "--group-add", "video",
                  "--security-opt", "seccomp=unconfined"]
    if os.path.exists(os.path.join(dev, "nvidia0")):
        flags += ["--device", "nvidia.com/gpu=all"] if engine_flavor == "podman" else ["--gpus", "all"]
    return flags


class ImageLauncher:
    kind = "image"

    def __init__(
        self,
        image: str,
        *,
        engine: str | None = None,
        pull: str = "missing",
        python: str | None = None,
        env: dict[str, str] | None = None,
        resolve_timeout: float = 120.0,
        pull_timeout: float = 1800.0,
    ):
        if pull not in PULL_POLICIES:
            raise InputError(f"unknown pull policy {pull!r}: use one of {', '.join(PULL_POLICIES)}", field="pull")
        self.image = image
        self.pull = pull
        self.python = python or None
        self.env = dict(env) if env else None
        self.resolve_timeout = resolve_timeout
        self.pull_timeout = pull_timeout
        self.engine, self.engine_version = choose_engine(engine)
        self.flavor = flavor(self.engine) or "podman"

    def describe(self) -> str:
        with_env = f" with {', '.join(sorted(self.env))} set" if self.env else ""
        return credentials.mask_text(f"the image {self.image} ({self.flavor}){with_env}")

    def env_flags(self) -> list[str]:
        """``-e NAME=VALUE`` for each baseline variable (always with a value: a bare
        ``-e NAME`` would copy the host's)."""
        return [arg for k, v in sorted((self.env or {}).items()) for arg in ("-e", f"{k}={v}")]

    # ------------------------------------------------------------ the engine
    def _engine(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.engine, *args], capture_output=True, text=True, timeout=timeout)

    def _inspect(self) -> tuple[dict[str, Any] | None, str]:
        try:
            proc = self._engine(["image", "inspect", self.image], 120)
        except subprocess.TimeoutExpired:
            raise EngineUnavailable(f"{self.engine} did not answer `image inspect {self.image}` within 120s")
        if proc.returncode != 0:
            return None, _errors(proc.stderr)
        try:
            data = json.loads(proc.stdout)  # both engines print a list of one object per image
        except ValueError:
            raise ProbeFailed(f"{self.engine} image inspect {self.image} printed no JSON: {proc.stdout[:300]!r}")
        if isinstance(data, list):
            data = data[0] if data else None
        if not isinstance(data, dict):
            return None, f"{self.engine} image inspect printed no image"
        return data, ""

    def _pull(self) -> None:
        try:
            proc = self._engine(["pull", self.image], self.pull_timeout)
        except subprocess.TimeoutExpired:
            raise Unobtainable(f"{self.engine} pull {self.image} did not finish within {self.pull_timeout:.0f}s")
        if proc.returncode != 0:
            err = _errors(proc.stderr) or f"exit {proc.returncode}"
            cls = ImageNotFound if NOT_FOUND_TEXT.search(err) and "connect" not in err else Unobtainable
            raise cls(f"{self.engine} pull {self.image} failed:\n{err}")

    def _remove(self, name: str) -> None:
        cmd = ["rm", "-f", "-t", "0", name] if self.flavor == "podman" else ["rm", "-f", name]
        try:
            self._engine(cmd, 60)
        except (subprocess.SubprocessError, OSError):
            pass

    def _run(self, ref: str, python: str, args: list[str], timeout: float,
             *, devices: bool) -> tuple[probe_run.BundleOutput, str]:
        """``ENGINE run --rm -i --network=none ... --entrypoint PYTHON REF -c BOOTSTRAP ARGS``,
        and the container's name. A container still running at the timeout is killed and
        removed (and removal is always made sure of afterwards)."""
        name = f"proton-survey-{secrets.token_hex(6)}"
        prefix = [self.engine, "run", "--rm", "-i", "--network=none", "--name", name]
        if self.flavor == "podman":
            prefix.append("--pull=never")
        if devices:
            prefix += gpu_flags(self.flavor)
        prefix += self.env_flags()
        prefix += ["--entrypoint", python, ref]
        try:
            return probe_run.run_bundle(prefix, args, timeout, on_timeout=lambda: self._remove(name)), name
        finally:
            self._remove(name)

    def _engine_failed(self, out: probe_run.BundleOutput, ref: str) -> ProbeFailed:
        err = _errors(out.stderr)
        hint = None
        if "nvidia.com/gpu" in err or "CDI" in err:
            hint = "generate the NVIDIA CDI specification: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
        return ProbeFailed(f"{self.engine} could not run a container from {ref} (exit {out.exit_code}):\n{err}",
                           hint=hint)

    # ------------------------------------------------------------ obtain
    def obtain(self) -> Resolved:
        notes = [f"{self.flavor} {self.engine_version}"]
        info, why = (None, "") if self.pull == "always" else self._inspect()
        if info is None:
            if self.pull == "never":
                raise ImageNotFound(f"{self.image}: not in {self.engine}'s local images and --pull never"
                                    + (f" ({why})" if why else ""),
                                    hint="pull it first, or use --pull missing")
            self._pull()
            notes.append("pulled")
            info, why = self._inspect()
            if info is None:
                raise ImageNotFound(f"{self.image}: pulled, but {self.engine} cannot inspect it: {why}")
        else:
            notes.append("present locally")
        raw_id = str(info.get("Id") or "")
        if not raw_id:
            raise ImageNotFound(f"{self.image}: {self.engine} reports no image ID")
        image_id = raw_id if raw_id.startswith("sha256:") else f"sha256:{raw_id}"
        ref = raw_id  # run by ID, never by the mutable tag
        digest = info.get("Digest") or None  # podman: the manifest digest
        if not digest:
            repo_digests = [d for d in info.get("RepoDigests") or [] if "@" in d]
            digest = repo_digests[0].split("@", 1)[1] if repo_digests else None
        platform = "/".join(str(info.get(k)) for k in ("Os", "Architecture") if info.get(k))

        tried: list[str] = []
        for python in [self.python] if self.python else list(PYTHONS):
            out, name = self._run(ref, python, ["resolve"], self.resolve_timeout, devices=False)
            if out.timed_out:
                raise ProbeFailed(f"{python} in the image {self.image} did not answer within "
                                  f"{self.resolve_timeout:.0f}s; its container {name} was killed and removed",
                                  hint=_tail(out.stderr) or None)
            if out.exit_code in EXEC_FAILED:
                err = _errors(out.stderr)
                m = re.search(r'exec: "?[^"]*"?: ([^:\n]+(?:: [^:\n]+)?)', err)
                tried.append(f"{python}: {m.group(1) if m else err or f'exit {out.exit_code}'}")
                continue
            if out.exit_code == ENGINE_FAILED:
                raise self._engine_failed(out, self.image)
            try:  # a Python older than 3.8 says so (NotAPython)
                inner = probe_run.resolved_of(out, f"{python} in the image {self.image}")
            except ProbeFailed:
                raise NotAPython(
                    f"{python} in the image {self.image} does not behave like a Python (exit {out.exit_code}"
                    + (f": {_tail(out.stderr, 5)}" if out.stderr.strip() else "") + ")"
                )
            resolved = {
                "image": self.image,
                "repo_tags": list(info.get("RepoTags") or []),
                "digest": digest,
                "image_id": image_id,
                "engine": self.flavor,
                "platform": platform or None,
                "interpreter": python,
                "gpu_flags": gpu_flags(self.flavor),
                "python": inner.get("python"),
                "executable": inner.get("executable"),
                "machine": inner.get("machine"),
                "distributions": inner.get("distributions") or [],
            }
            if self.env:
                resolved["env"] = dict(sorted(self.env.items()))
            return Resolved(kind="image", resolved=resolved, python=python, image_digest=digest or image_id,
                            notes=notes, target=self.image)
        raise NotAPython(
            f"the image {self.image} has no Python ({'; '.join(tried)})",
            hint="name the interpreter inside the image (catalog: interpreter = \"/path/to/python\")",
        )

    # ------------------------------------------------------------ probe
    def probe(self, resolved: Resolved, args: list[str], timeout: float) -> tuple[bytes, bool]:
        ref = str(resolved.resolved["image_id"])
        python = resolved.python or PYTHONS[0]
        out, name = self._run(ref, python, args, timeout, devices=True)
        if out.timed_out:
            raise ProbeFailed(f"the probe in {self.describe()} did not finish within {timeout:.0f}s; "
                              f"its container {name} was killed and removed", hint=_tail(out.stderr) or None)
        if out.exit_code == ENGINE_FAILED:
            raise self._engine_failed(out, self.image)
        return probe_run.collect_report(out, self.describe())
