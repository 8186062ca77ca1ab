"""aorta's environments registry, read the way the declared release reads it.

An environment is a named baseline for a trial: launch hints (``docker`` image,
``venv`` path, ``buck_target``, ``emulator``/``mirage_profile``; any
combination, or none for the current process) plus ``env``, baseline variables
applied to the trial (the lowest layer: mitigations, then the recipe's and the
cell's ``extra_env`` override it). Three sources, merged in this order, a name
given twice being an error (aorta ``registry/environments.py:158-264``):

1. aorta's built-ins (``registry/environments.py:137-155``): ``local`` and
   ``default`` (the current process) and two GPU-emulated baselines;
2. the ``aorta.environments`` entry-point group: the entry-point name is the
   environment's name, the loaded object its payload (a dict). Entry points
   belong to the Python where aorta and its plugins are installed, which is
   not this one: :func:`find_aorta_python` reads it off the ``aorta`` command's
   shebang, and the entry points are read by a child process of that Python;
3. JSON sidecar files (``aorta environments list --file F``, ``--mitigations-file
   F`` elsewhere; ``registry/sidecar.py``): ``{"version": 1, "environments":
   {NAME: PAYLOAD}, "mitigations": {...}}``.

A payload may hold only ``docker``, ``venv``, ``buck_target``, ``emulator``,
``mirage_profile`` (each a string or null) and ``env`` (string to string, POSIX
names, no NUL in a value); anything else is refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from survey.aorta.model import NAME
from survey.core.errors import EnvironmentsError
from survey.core.textfile import read_text

HINT_KEYS = ("docker", "venv", "buck_target", "emulator", "mirage_profile")
PAYLOAD_KEYS = (*HINT_KEYS, "env")
SIDECAR_KEYS = ("version", "mitigations", "environments")
SIDECAR_VERSION = 1
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
GROUP = "aorta.environments"

# the declared release's registry/environments.py:137-155
BUILTINS: dict[str, dict[str, str]] = {
    "local": {},
    "default": {},
    "emulated-rocjitsu": {"emulator": "rocjitsu", "mirage_profile": "mi350x"},
    "emulated-rocjitsu-dbt": {"emulator": "rocjitsu-dbt", "mirage_profile": "dbt-mi350x"},
}

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class AortaEnvironment:
    name: str
    docker: Optional[str] = None
    venv: Optional[str] = None
    buck_target: Optional[str] = None
    emulator: Optional[str] = None
    mirage_profile: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict, hash=False)
    source: str = "aorta"  # "aorta", "plugin:<dist>", "sidecar:<file name>"

    @property
    def kind(self) -> str:
        """docker | venv | buck | emulated | local (the first hint set, in that order)."""
        if self.docker:
            return "docker"
        if self.venv:
            return "venv"
        if self.buck_target:
            return "buck"
        if self.mirage_profile or self.emulator:
            return "emulated"
        return "local"

    @property
    def pinned(self) -> bool:
        """Whether the docker image is named by digest (``...@sha256:<64 hex>``)."""
        return bool(self.docker and re.search(r"@sha256:[0-9a-f]{64}$", self.docker))

    @property
    def python(self) -> Optional[str]:
        """The venv's interpreter (``<venv>/bin/python``), for a venv environment."""
        return str(Path(self.venv) / "bin" / "python") if self.venv else None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, **{k: getattr(self, k) for k in HINT_KEYS},
                "env": dict(self.env), "source": self.source}


def check_env_mapping(where: str, raw: Any, error: type[Exception] = EnvironmentsError) -> dict[str, str]:
    """A baseline ``env`` mapping: string names of POSIX shape to strings without NUL.

    Values are never echoed in messages (they may be secrets)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise error(f"{where}: must be a mapping of variable names to strings, got {type(raw).__name__}")
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(k, str):
            raise error(f"{where}: variable names must be strings, got {type(k).__name__}")
        if not isinstance(v, str):
            raise error(f"{where}.{k}: the value must be a string, got {type(v).__name__}")
        if not ENV_NAME.fullmatch(k):
            raise error(f"{where}: {k!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
        if "\x00" in v:
            raise error(f"{where}.{k}: the value contains a NUL byte")
        out[k] = v
    return out


def _type_name(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"__type__"}:  # a plugin value the child could not encode
        return str(value["__type__"])
    return type(value).__name__


def environment_from_payload(name: str, payload: Any, *, where: str, source: str) -> AortaEnvironment:
    if not isinstance(payload, dict):
        raise EnvironmentsError(f"{where}: must be a mapping, got {_type_name(payload)}")
    bad = [k for k in payload if not isinstance(k, str) or k not in PAYLOAD_KEYS]
    if bad:
        raise EnvironmentsError(f"{where}: unknown keys {sorted(map(str, bad))}; allowed: {', '.join(PAYLOAD_KEYS)}")
    for k in HINT_KEYS:
        v = payload.get(k)
        if v is not None and not isinstance(v, str):
            raise EnvironmentsError(f"{where}.{k}: must be a string or null, got {_type_name(v)}")
    env = check_env_mapping(f"{where}.env", payload.get("env"))
    return AortaEnvironment(name=name, env=env, source=source, **{k: payload.get(k) for k in HINT_KEYS})


# --------------------------------------------------------------------------- sidecar files
def register(registry: dict[str, Any], found: Mapping[str, Any], what: str) -> None:
    """Add ``found`` (entries with a ``source``) to ``registry``; a name two sources register is
    refused, as aorta refuses it."""
    for name, entry in found.items():
        if name in registry:
            raise EnvironmentsError(f"{what} {name!r} registered by both {registry[name].source!r} and "
                                    f"{entry.source!r}; rename one or remove the duplicate")
        registry[name] = entry


def sidecar_section(path: PathLike, key: str) -> tuple[Path, dict[str, Any], str]:
    """A sidecar file's ``key`` object (``environments`` or ``mitigations``; empty when
    the file declares only the other), with the file and the source name its entries carry."""
    p = Path(path)
    raw = read_sidecar(p).get(key)
    if raw is None:
        return p, {}, f"sidecar:{p.name}"
    if not isinstance(raw, dict):
        raise EnvironmentsError(f"{p}: '{key}' must be an object, got {type(raw).__name__}")
    return p, raw, f"sidecar:{p.name}"


def load_sidecar(path: PathLike) -> dict[str, AortaEnvironment]:
    """The environments a sidecar file declares (none if it declares only mitigations)."""
    p, raw, src = sidecar_section(path, "environments")
    return {name: environment_from_payload(name, payload, where=f"{p}: environments.{name}", source=src)
            for name, payload in raw.items()}


def read_sidecar(path: PathLike) -> dict[str, Any]:
    """A sidecar file's top level, checked as aorta checks it (version 1, known keys)."""
    p = Path(path)
    text = read_text(p, "an aorta sidecar (JSON)", EnvironmentsError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise EnvironmentsError(f"{p}: not valid JSON at line {e.lineno} column {e.colno}: {e.msg}")
    if not isinstance(data, dict):
        raise EnvironmentsError(f"{p}: the top level must be a JSON object, got {type(data).__name__}")
    if "version" not in data:
        raise EnvironmentsError(f"{p}: missing the required key 'version' (1)")
    if data["version"] != SIDECAR_VERSION:
        raise EnvironmentsError(f"{p}: version {data['version']!r} is not supported; {NAME} reads version 1")
    unknown = sorted(set(data) - set(SIDECAR_KEYS))
    if unknown:
        raise EnvironmentsError(f"{p}: unknown top-level keys {unknown}; allowed: {', '.join(SIDECAR_KEYS)}")
    return data


# --------------------------------------------------------------------------- entry points
# Runs in the Python where aorta is installed (any Python >= 3.8): lists the
# aorta.environments entry points and loads each, as aorta does.
_ENTRY_POINTS_CHILD = r"""
import json, sys
from importlib import metadata
group = sys.argv[1]
try:
    eps = list(metadata.entry_points(group=group))
except TypeError:
    eps = list(metadata.entry_points().get(group, []))
out = []
for ep in eps:
    dist = getattr(getattr(ep, "dist", None), "name", None) or "unknown"
    row = {"name": ep.name, "dist": dist, "value": ep.value}
    try:
        row["payload"] = ep.load()
    except BaseException as e:
        row["error"] = "%s: %s" % (type(e).__name__, e)
    out.append(row)
sys.stdout.write(json.dumps(out, default=lambda o: {"__type__": type(o).__name__}))
"""


def find_aorta_python(path: Optional[str] = None) -> Optional[str]:
    """The interpreter that runs the ``aorta`` command on PATH (its shebang), or None.

    That is where aorta's entry points are installed; the survey's own Python
    usually is not."""
    exe = shutil.which("aorta", path=path)
    if exe is None:
        return None
    try:
        with open(exe, "rb") as f:
            line = f.readline(512)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    try:
        parts = line[2:].decode("utf-8").split()
    except UnicodeDecodeError:
        return None
    if parts and Path(parts[0]).name == "env" and len(parts) > 1:
        found = shutil.which(parts[1], path=path)
        return found
    return parts[0] if parts else None


def read_entry_points(python: str, group: str, *, timeout: float = 60.0) -> list[dict[str, Any]]:
    """The entry points of ``group`` installed in ``python``, each loaded there:
    ``{name, dist, value, payload | error}``."""
    try:
        proc = subprocess.run([python, "-c", _ENTRY_POINTS_CHILD, group], capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EnvironmentsError(f"{python}: no such interpreter (where the {group} entry points "
                                "were to be read)")
    except PermissionError:
        raise EnvironmentsError(f"{python}: not executable")
    except subprocess.TimeoutExpired:
        raise EnvironmentsError(f"{python}: reading the {group} entry points took over {timeout:.0f}s")
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    if proc.returncode != 0:
        raise EnvironmentsError(f"{python}: could not read the {group} entry points: "
                                f"{err[-1] if err else f'exit {proc.returncode}'}")
    try:
        rows = json.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise EnvironmentsError(f"{python}: printed something that is not the entry-point list")
    return list(rows)


def load_entry_points(python: str, *, timeout: float = 60.0) -> dict[str, AortaEnvironment]:
    """The ``aorta.environments`` entry points installed in ``python``."""
    rows = read_entry_points(python, GROUP, timeout=timeout)
    out: dict[str, AortaEnvironment] = {}
    for row in rows:
        name, dist = row["name"], row["dist"]
        where = f"plugin {dist!r} environment {name!r}"
        if "error" in row:
            raise EnvironmentsError(f"{where} ({row['value']}) did not load: {row['error']}")
        if name in out:
            raise EnvironmentsError(f"environment {name!r} registered by both {out[name].source[7:]!r} "
                                    f"and {dist!r}")
        out[name] = environment_from_payload(name, row["payload"], where=where, source=f"plugin:{dist}")
    return out


# --------------------------------------------------------------------------- the merged registry
def load_environments(
    file: Union[PathLike, Sequence[PathLike], None] = None,
    *,
    python: Optional[str] = None,
    entry_points: bool = True,
) -> dict[str, AortaEnvironment]:
    """aorta's merged environments: built-ins, then entry points, then sidecar files.

    ``file``: one sidecar path or several (merged in order; two with one file
    name are refused, as aorta does). ``python``: the interpreter whose
    ``aorta.environments`` entry points to read; by default the one running
    ``aorta`` on PATH, and none are read when there is no ``aorta`` there.
    ``entry_points=False`` reads built-ins and sidecars only. Raises
    :class:`EnvironmentsError` (one line) for anything aorta would refuse.
    """
    files: list[Path]
    if file is None:
        files = []
    elif isinstance(file, (str, os.PathLike)):
        files = [Path(file)]
    else:
        files = [Path(f) for f in file]
    registry: dict[str, AortaEnvironment] = {
        name: environment_from_payload(name, payload, where=f"built-in {name}", source="aorta")
        for name, payload in BUILTINS.items()
    }

    def merge(found: Mapping[str, AortaEnvironment]) -> None:
        register(registry, found, "environment")

    if entry_points:
        py = python or find_aorta_python()
        if py:
            merge(load_entry_points(py))
    seen: dict[str, Path] = {}
    for f in files:
        if f.name in seen:
            raise EnvironmentsError(f"two sidecars share the file name {f.name!r} ({seen[f.name]} and {f}); "
                                    "aorta refuses that, rename one")
        seen[f.name] = f
    for f in files:
        merge(load_sidecar(f))
    return registry


__all__ = [
    "AortaEnvironment",
    "BUILTINS",
    "find_aorta_python",
    "load_entry_points",
    "load_environments",
    "load_sidecar",
]
