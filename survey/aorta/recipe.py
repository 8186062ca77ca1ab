"""aorta recipes, read for what ``survey check`` needs: per cell, the effective
Proton configuration and the environment the cell runs in.

The rules are aorta's (the declared release, survey/aorta/model.py, unless said otherwise; paths are in the
installed package):

- Collectors are named under ``collect:`` (``triage/recipe.py:832-919``): a list
  of names, or a mapping name -> options (null or ``{}``: enabled without
  options; options are string -> string). Known names: rocprof, proton,
  numerics, layer_numerics, amd_log (``run/collectors.py:41-49``).
- A cell's own ``collect:`` *replaces* the recipe's, options included; absent
  inherits both; ``[]`` disables; null is refused (``triage/recipe.py:345-357,
  965-978``). Options never merge between the two levels.
- Proton's options (``instrumentation/proton/_options.py``): ``mode`` cli|env
  (aorta's launch: wrap argv with Proton's CLI, or export ``AORTA_PROTON_*``
  for a payload that starts Proton itself), ``backend``
  auto|cupti|rocprofiler|roctracer|instrumentation, ``context`` shadow|python,
  ``data`` tree|trace, ``instrumentation_mode`` default|mma|pcsampling and
  ``granularity`` (both only with ``backend: instrumentation``); defaults
  cli/auto/shadow/tree; values are stripped and lower-cased (``:93-135``).
  Proton's ``--mode`` is rendered from ``instrumentation_mode`` and
  ``granularity`` (``:138-151``).
- Newer aorta (upstream, unreleased; the reference page's shape) adds
  ``backend_mode`` (cupti and rocprofiler: pcsampling | periodic_flushing;
  roctracer: periodic_flushing; needs an explicit backend; exclusive with the
  intra-kernel pair, both rendering the single ``--mode``) and ``hook``
  (triton). The declared release refuses both as unknown options: a recipe using them is
  read here and flagged (:attr:`Recipe.newer_keys`).
- ``rocprof`` with a queue-intercepting Proton backend (auto, rocprofiler,
  roctracer) is refused (``run/collectors.py:532-547``).
- Each cell names its environment (``triage/recipe.py:681-731``): a registered
  name, or inline ``{docker: REF, env: {...}}``, which aorta auto-names
  ``_inline_<8 hex of blake2b(REF [+ NUL + sorted compact JSON of env])>``.
  ``mode: probe`` recipes synthesise their cells from ``mitigation_axis`` x
  ``diagnostic_axis`` and run them in ``local`` (``probe/recipe_builder.py``).

Also read, for survey's own earlier recipes: a top-level ``proton:`` block
(shape ``proton-block``, one cell, no environment). aorta itself does not take
that shape.

Also read, not judged here: the ``workload`` a triage recipe names (a probe
recipe's is ``_subprocess``, the command after ``--``) and each cell's
``mitigations`` (names; a probe cell's are its two axis values), which
survey/aorta/mitigations.py resolves to the variables aorta sets. Only these parts
are validated; the rest of a recipe (trials, steps, ...) is aorta's to judge.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from survey.aorta.environments import AortaEnvironment, check_env_mapping
from survey.aorta.model import NAME
from survey.core.errors import RecipeError, did_you_mean, suggestion
from survey.core.textfile import read_text

COLLECTORS = ("rocprof", "proton", "numerics", "layer_numerics", "amd_log")
LAUNCH_MODES = ("cli", "env")
BACKENDS = ("auto", "cupti", "rocprofiler", "roctracer", "instrumentation")
CONTEXTS = ("shadow", "python")
DATA_FORMATS = ("tree", "trace")
INSTRUMENTATION_MODES = ("default", "mma", "pcsampling")
GRANULARITIES = ("cta", "warp", "warp_2", "warp_4", "warp_8", "warp_group", "warp_group_2", "warp_group_4",
                 "warp_group_8")
HOOKS = ("triton",)
BACKEND_MODES: dict[str, tuple[str, ...]] = {
    "cupti": ("pcsampling", "periodic_flushing"),
    "rocprofiler": ("pcsampling", "periodic_flushing"),
    "roctracer": ("periodic_flushing",),
}
OPTION_KEYS = ("mode", "backend", "context", "data", "instrumentation_mode", "granularity")
OPTION_KEYS_NEWER = ("backend_mode", "hook")
DEFAULTS = {"mode": "cli", "backend": "auto", "context": "shadow", "data": "tree"}
QUEUE_INTERCEPTING = ("auto", "rocprofiler", "roctracer")
_ENUMS: dict[str, tuple[str, ...]] = {
    "mode": LAUNCH_MODES, "backend": BACKENDS, "context": CONTEXTS, "data": DATA_FORMATS,
    "instrumentation_mode": INSTRUMENTATION_MODES, "granularity": GRANULARITIES, "hook": HOOKS,
}
_CELL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_RESERVED_CELL_NAMES = (".", "..", "matrix.md", "matrix.json")
_INLINE_ENV_KEYS = ("docker", "env")
# The workload a probe recipe's cells run: the command given after `--`
# (the declared release's probe/recipe_builder.py SUBPROCESS_WORKLOAD_NAME).
PROBE_WORKLOAD = "_subprocess"


# --------------------------------------------------------------------------- what is read
@dataclass(frozen=True)
class ProtonConfig:
    """The effective ``proton`` collector options of one cell."""

    backend: str  # "auto" (Proton picks: see survey.aorta.proton_rules.resolve_auto) or a backend
    launch: str  # aorta's mode: "cli" | "env"
    mode: Optional[str]  # Proton's --mode as aorta renders it; None: Proton's default
    mode_key: Optional[str]  # "backend_mode" | "instrumentation_mode" | "granularity" | None
    instrumentation_mode: Optional[str] = None
    granularity: Optional[str] = None
    backend_mode: Optional[str] = None
    context: str = "shadow"
    data: str = "tree"
    hook: Optional[str] = None

    def aorta_options(self) -> dict[str, str]:
        """The options as aorta computes them (defaults filled in, unset knobs absent)."""
        out = {"mode": self.launch, "backend": self.backend, "context": self.context, "data": self.data}
        for key in ("instrumentation_mode", "granularity", "backend_mode", "hook"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class EnvironmentRef:
    """The environment a cell names: registered (``docker`` None) or inline."""

    name: str  # the registered name, or aorta's auto-name _inline_<hash> for an inline one
    docker: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def inline(self) -> bool:
        return self.docker is not None

    def resolve(self, environments: Mapping[str, AortaEnvironment]) -> AortaEnvironment:
        """The environment itself: the inline one, or the registered one (KeyError if unknown)."""
        if self.docker is not None:
            return AortaEnvironment(name=self.name, docker=self.docker, env=dict(self.env), source="inline")
        return environments[self.name]


@dataclass(frozen=True)
class Cell:
    name: str
    proton: Optional[ProtonConfig]  # None: no proton collector in this cell
    environment: Optional[EnvironmentRef]  # None only for the proton-block shape
    collectors: tuple[str, ...] = ()
    collect_from: str = "recipe"  # "recipe" (inherited) | "cell" (the cell's own collect:)
    extra_env: dict[str, str] = field(default_factory=dict, hash=False)  # recipe's, then the cell's over it
    where: str = ""  # "cells[2]"
    mitigations: tuple[str, ...] = ()  # mitigation names, in aorta's order (a probe cell: its two axes)


@dataclass
class Recipe:
    source: str
    shape: str  # "triage" | "probe" | "proton-block"
    cells: list[Cell]
    newer_keys: list[str] = field(default_factory=list)  # keys the declared release refuses (backend_mode, hook)
    workload: Optional[str] = None  # the workload aorta runs (a probe recipe: _subprocess, the command after --)

    @property
    def model_refuses(self) -> Optional[str]:
        """Why the declared aorta release would refuse this recipe for what was read here, or None."""
        if self.shape == "proton-block":
            return "a top-level proton: block is not aorta's schema (aorta reads collect: {proton: {...}})"
        if self.newer_keys:
            return (f"{', '.join(self.newer_keys)}: {NAME} has no such proton option (a newer aorta's "
                    "schema)")
        return None

    def cell(self, name: str) -> Cell:
        for c in self.cells:
            if c.name == name:
                return c
        raise KeyError(name)


# --------------------------------------------------------------------------- rules
def inline_env_name(docker: str, env: Optional[Mapping[str, str]] = None) -> str:
    """aorta's auto-name for an inline environment (``triage/recipe.py:508-531``)."""
    h = hashlib.blake2b(docker.encode("utf-8"), digest_size=4)
    if env:
        h.update(b"\x00" + json.dumps(dict(env), sort_keys=True, separators=(",", ":")).encode("utf-8"))
    return f"_inline_{h.hexdigest()}"


class _Ctx:
    """Where in which file: builds the one-line errors and collects newer keys."""

    def __init__(self, source: str):
        self.source = source
        self.root = ""  # "cells[2]." while a cell is read: fields are full paths, messages relative
        self.newer: list[str] = []

    def fail(self, where: str, message: str, fld: str) -> RecipeError:
        return RecipeError(f"{self.source}: {where}: {message}" if where else f"{self.source}: {message}",
                           field=self.root + fld)


def _proton(ctx: _Ctx, where: str, prefix: str, raw: Any) -> ProtonConfig:
    """Validate proton options (``prefix``: the field path of the proton mapping)."""
    opts: dict[str, Any] = {} if raw is None else raw
    if not isinstance(opts, dict):
        raise ctx.fail(where, f"{prefix} must be a mapping of option -> string, got {type(opts).__name__}", prefix)
    for k, v in opts.items():
        if not isinstance(k, str):
            raise ctx.fail(where, f"{prefix}: option names must be strings, got {k!r}", prefix)
        if k not in OPTION_KEYS + OPTION_KEYS_NEWER:
            raise ctx.fail(where, f"{prefix}.{k}: unknown proton option; "
                           f"{did_you_mean(k, OPTION_KEYS + OPTION_KEYS_NEWER)}known: "
                           f"{', '.join(OPTION_KEYS + OPTION_KEYS_NEWER)}", f"{prefix}.{k}")
        if not isinstance(v, str):
            raise ctx.fail(where, f"{prefix}.{k} must be a string, got {type(v).__name__} ({v!r})",
                           f"{prefix}.{k}")
    for k in OPTION_KEYS_NEWER:
        if k in opts:
            ctx.newer.append(f"{ctx.root}{prefix}.{k}")
    eff = dict(DEFAULTS)
    eff.update({k: v.strip().lower() for k, v in opts.items()})
    for opt, allowed in _ENUMS.items():
        if opt in eff and eff[opt] not in allowed:
            near = did_you_mean(eff[opt], list(allowed)).strip()
            raise ctx.fail(where, f"{prefix}.{opt} {eff[opt]!r} is not one of {', '.join(allowed)}"
                           + (f"; {near}" if near else ""), f"{prefix}.{opt}")
    backend = eff["backend"]
    intra = [k for k in ("instrumentation_mode", "granularity") if k in eff]
    if "backend_mode" in eff and intra:
        raise ctx.fail(where, f"{prefix}.backend_mode and {prefix}.{intra[0]} both render Proton's single "
                       "--mode; set one of them", f"{prefix}.backend_mode")
    if intra and backend != "instrumentation":
        raise ctx.fail(where, f"{prefix}.{intra[0]} needs backend: instrumentation (got backend: {backend})",
                       f"{prefix}.{intra[0]}")
    if "backend_mode" in eff:
        bmode = eff["backend_mode"]
        if backend == "auto":
            raise ctx.fail(where, f"{prefix}.backend_mode needs an explicit backend (one of "
                           f"{', '.join(BACKEND_MODES)}), not auto", f"{prefix}.backend")
        if backend not in BACKEND_MODES:
            raise ctx.fail(where, f"{prefix}.backend_mode is for {', '.join(BACKEND_MODES)}; the instrumentation "
                           "backend takes instrumentation_mode", f"{prefix}.backend_mode")
        allowed = BACKEND_MODES[backend]
        if bmode not in allowed:
            only = (f" ({backend} accepts only {allowed[0]})" if len(allowed) == 1
                    else f" (one of {', '.join(allowed)})")
            raise ctx.fail(where, f"{prefix}.backend_mode {bmode!r} is not accepted by backend {backend}"
                           f"{suggestion(bmode, list(allowed))}{only}",
                           f"{prefix}.backend_mode")
    mode: Optional[str]
    key: Optional[str]
    if "backend_mode" in eff:
        mode, key = eff["backend_mode"], "backend_mode"
    elif intra:
        mode = eff.get("instrumentation_mode") or "default"
        if "granularity" in eff:
            mode += f":granularity={eff['granularity']}"
        key = intra[0]
    else:
        mode, key = None, None
    return ProtonConfig(backend=backend, launch=eff["mode"], mode=mode, mode_key=key,
                        instrumentation_mode=eff.get("instrumentation_mode"), granularity=eff.get("granularity"),
                        backend_mode=eff.get("backend_mode"), context=eff["context"], data=eff["data"],
                        hook=eff.get("hook"))


def _collect(ctx: _Ctx, where: str, prefix: str, raw: Any) -> tuple[tuple[str, ...], Optional[ProtonConfig]]:
    """A ``collect:`` value: the collector names and the proton configuration."""
    options: dict[str, Any] = {}
    if isinstance(raw, dict):
        names = list(raw)
        for name, opts in raw.items():
            if not isinstance(name, str):
                raise ctx.fail(where, f"{prefix}: collector names must be strings, got {name!r}", prefix)
            if opts is None:
                continue
            if not isinstance(opts, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in opts.items()):
                raise ctx.fail(where, f"{prefix}.{name}: options must be a mapping of string -> string, got "
                               f"{opts!r}"[:300], f"{prefix}.{name}")
            if opts:
                options[name] = opts
    elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        names = list(raw)
    else:
        raise ctx.fail(where, f"{prefix} must be a list of collector names or a mapping of name -> options, got "
                       f"{raw!r}"[:300], prefix)
    unknown = [n for n in names if n not in COLLECTORS]
    if unknown:
        raise ctx.fail(where, f"{prefix}: unknown collector {unknown[0]!r}; known: {', '.join(COLLECTORS)}",
                       prefix)
    deduped = tuple(dict.fromkeys(names))
    proton = _proton(ctx, where, f"{prefix}.proton", options.get("proton")) if "proton" in deduped else None
    if proton is not None and "rocprof" in deduped and proton.backend in QUEUE_INTERCEPTING:
        raise ctx.fail(where, f"{prefix}: rocprof and proton cannot run together with proton backend "
                       f"{proton.backend} (both intercept HSA queues); use backend: instrumentation or two cells",
                       prefix)
    return deduped, proton


def _environment(ctx: _Ctx, where: str, prefix: str, raw: Any,
                 environments: Optional[Mapping[str, AortaEnvironment]]) -> EnvironmentRef:
    if isinstance(raw, str):
        if environments is not None and raw not in environments:
            raise ctx.fail(where, f"environment {raw!r} is not registered{suggestion(raw, sorted(environments))} "
                           f"(known: {', '.join(sorted(environments))})",
                           prefix)
        return EnvironmentRef(name=raw)
    if not isinstance(raw, dict):
        raise ctx.fail(where, f"{prefix} must be a registered name or {{docker: REF, env: {{...}}}}, got "
                       f"{type(raw).__name__}", prefix)
    unknown = sorted(str(k) for k in raw if k not in _INLINE_ENV_KEYS)
    if unknown:
        raise ctx.fail(where, f"{prefix}: an inline environment takes only docker and env, not {unknown}", prefix)
    ref = raw.get("docker")
    if not isinstance(ref, str) or not ref:
        raise ctx.fail(where, f"{prefix}.docker must be a non-empty image reference, got {ref!r}",
                       f"{prefix}.docker")
    env = _env_mapping(ctx, where, f"{prefix}.env", raw.get("env"))
    return EnvironmentRef(name=inline_env_name(ref, env), docker=ref, env=env)


def _env_mapping(ctx: _Ctx, where: str, prefix: str, raw: Any) -> dict[str, str]:
    try:
        return check_env_mapping(prefix, raw, RecipeError)
    except RecipeError as e:
        raise ctx.fail(where, e.message, prefix)


def _triage(ctx: _Ctx, data: dict[str, Any], environments: Optional[Mapping[str, AortaEnvironment]]) -> list[Cell]:
    names, proton = _collect(ctx, "recipe-level", "collect", data.get("collect")) \
        if data.get("collect") is not None else ((), None)
    recipe_env = _env_mapping(ctx, "recipe-level", "extra_env", data.get("extra_env"))
    raw_cells = data["cells"]
    if not isinstance(raw_cells, list) or not raw_cells:
        raise ctx.fail("", f"cells must be a non-empty list, got {raw_cells!r}"[:300], "cells")
    cells: list[Cell] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_cells):
        at = f"cells[{i}]"
        ctx.root = ""
        if not isinstance(raw, dict):
            raise ctx.fail(at, f"a cell must be a mapping, got {type(raw).__name__}", at)
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise ctx.fail(at, f"name must be a non-empty string, got {name!r}", f"{at}.name")
        label = f"cell {name!r} ({at})"
        ctx.root = f"{at}."
        if name in _RESERVED_CELL_NAMES or not _CELL_NAME.fullmatch(name):
            raise ctx.fail(label, "a cell name must match [A-Za-z0-9_][A-Za-z0-9_.-]* and not be "
                           f"{', '.join(_RESERVED_CELL_NAMES)} (it names the cell's directory)", "name")
        if name in seen:
            raise ctx.fail(label, "duplicate cell name", "name")
        seen.add(name)
        if "environment" not in raw:
            raise ctx.fail(label, "missing environment (a registered name or {docker: REF})", "environment")
        env = _environment(ctx, label, "environment", raw["environment"], environments)
        if "collect" in raw:
            if raw["collect"] is None:
                raise ctx.fail(label, "collect: null is not allowed in a cell; omit it to inherit the recipe's "
                               "collectors or use [] for none", "collect")
            c_names, c_proton = _collect(ctx, label, "collect", raw["collect"])
            frm = "cell"
        else:
            c_names, c_proton, frm = names, proton, "recipe"
        extra = {**recipe_env, **_env_mapping(ctx, label, "extra_env", raw.get("extra_env"))}
        mitigations = raw.get("mitigations", [])
        if not isinstance(mitigations, list) or not all(isinstance(x, str) and x for x in mitigations):
            raise ctx.fail(label, f"mitigations must be a list of mitigation names, got {mitigations!r}"[:300],
                           "mitigations")
        cells.append(Cell(name=name, proton=c_proton, environment=env, collectors=c_names, collect_from=frm,
                          extra_env=extra, where=at, mitigations=tuple(mitigations)))
    ctx.root = ""
    return cells


def _slug(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
    return "_" + cleaned if not cleaned or cleaned[0] in ".-" else cleaned


def _probe(ctx: _Ctx, data: dict[str, Any], environments: Optional[Mapping[str, AortaEnvironment]]) -> list[Cell]:
    axes = []
    for key in ("mitigation_axis", "diagnostic_axis"):
        raw = data.get(key)
        if not isinstance(raw, list) or not raw or not all(isinstance(x, str) for x in raw):
            raise ctx.fail("", f"{key} must be a non-empty list of names (mode: probe), got {raw!r}"[:300], key)
        axes.append(raw)
    names, proton = _collect(ctx, "recipe-level", "collect", data.get("collect")) \
        if data.get("collect") is not None else ((), None)
    if environments is not None and "local" not in environments:
        raise ctx.fail("", "mode: probe runs its cells in the environment 'local', which is not registered",
                       "mode")
    cells = []
    seen: dict[str, tuple[str, str]] = {}
    for m in axes[0]:
        for d in axes[1]:
            name = f"{_slug(m)}-{_slug(d)}"
            if name in seen:
                raise ctx.fail("", f"({m!r}, {d!r}) and {seen[name]!r} both make the cell name {name!r}",
                               "mitigation_axis")
            seen[name] = (m, d)
            cells.append(Cell(name=name, proton=proton, environment=EnvironmentRef(name="local"),
                              collectors=names, collect_from="recipe", where=f"{m} x {d}", mitigations=(m, d)))
    return cells


def _proton_block(ctx: _Ctx, data: dict[str, Any]) -> list[Cell]:
    proton = _proton(ctx, "", "proton", data["proton"])
    raw_name = data.get("name")
    name = raw_name if isinstance(raw_name, str) and raw_name else "recipe"
    return [Cell(name=name, proton=proton, environment=None, collectors=("proton",), where="proton")]


# --------------------------------------------------------------------------- entry points
def parse_recipe(data: Any, source: str = "recipe",
                 environments: Optional[Mapping[str, AortaEnvironment]] = None) -> Recipe:
    """Read a parsed recipe document. ``environments`` (from
    :func:`survey.aorta.environments.load_environments`), when given, must know every
    registered name a cell uses."""
    ctx = _Ctx(source)
    if not isinstance(data, dict):
        raise ctx.fail("", f"the top level must be a mapping, got {type(data).__name__}", "")
    mode = data.get("mode", "triage")
    if mode not in ("triage", "probe"):
        raise ctx.fail("", f"mode must be triage or probe, got {mode!r}"[:300] + suggestion(mode, ("triage", "probe")),
                       "mode")
    if mode == "probe":
        shape, cells = "probe", _probe(ctx, data, environments)
    elif "cells" in data:
        shape, cells = "triage", _triage(ctx, data, environments)
    elif "proton" in data and (data["proton"] is None or isinstance(data["proton"], dict)):
        shape, cells = "proton-block", _proton_block(ctx, data)
    else:
        raise ctx.fail("", "not an aorta recipe: no cells: (nor mode: probe axes, nor a proton: block)", "cells")
    workload = PROBE_WORKLOAD if shape == "probe" else data.get("workload")
    return Recipe(source=source, shape=shape, cells=cells, newer_keys=ctx.newer,
                  workload=workload if isinstance(workload, str) and workload else None)


def load_recipe(path: str | Path, environments: Optional[Mapping[str, AortaEnvironment]] = None) -> Recipe:
    """Read an aorta recipe file (YAML; ``.json`` as JSON, as aorta does).

    Raises :class:`RecipeError` with a one-line message (file, cell, key) and
    ``field`` set to the key's path, e.g. ``cells[1].collect.proton.backend``."""
    p = Path(path)
    text = read_text(p, "an aorta recipe (YAML)", RecipeError)
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise RecipeError(f"{p}: not valid JSON at line {e.lineno} column {e.colno}: {e.msg}")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise RecipeError(f"{p}: not valid YAML{at}: {what}")
    return parse_recipe(data, str(p), environments)
