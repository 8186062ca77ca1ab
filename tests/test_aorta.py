"""aorta as it really is: recipes (per-cell Proton configuration and environment),
the environments registry, and the two Proton rules `survey check` applies.

The fast tier reads the fixtures in tests/fixtures/aorta/ and checks every rule;
the integration tier installs amd-aorta 0.3.0 from PyPI (cached in SURVEY_CACHE)
and has aorta's own loaders read the same files, and runs the real Triton 3.7.1,
3.8.0 and 3.9.0 wheels for the two rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from survey.aorta import recipe as R
from survey.aorta.environments import BUILTINS, find_aorta_python, load_environments, load_sidecar
from survey.aorta.proton_rules import mode_dropped, resolve_auto
from survey.core.errors import EnvironmentsError, RecipeError
from tests.envs import plugin_dist

FIX = Path(__file__).parent / "fixtures" / "aorta"
SIDECAR = FIX / "environments.json"
DIGEST = "efda816b3fc2c1f03fb94123cefe944a285ff0298924b460517e8848c5780bb3"  # sha256("aorta-fixture")
IMAGE = f"localhost/aorta-fixture@sha256:{DIGEST}"
DEFAULTS = {"mode": "cli", "backend": "auto", "context": "shadow", "data": "tree"}
RECIPES = sorted(p.name for p in FIX.glob("*.yaml"))


@pytest.fixture(scope="module")
def envs():
    return load_environments(SIDECAR, entry_points=False)


def read(name: str, envs=None) -> R.Recipe:
    return R.load_recipe(FIX / name, envs)


# --------------------------------------------------------------------------- recipes: what is read
def test_list_form_proton_defaults_and_cell_overrides(envs) -> None:
    r = read("collect-list.yaml", envs)
    assert (r.shape, r.model_refuses, r.newer_keys) == ("triage", None, [])
    assert [c.name for c in r.cells] == ["baseline", "in-image", "in-venv", "no-profiler", "proton-and-numerics"]
    base = r.cell("baseline")
    assert base.proton is not None and base.proton.aorta_options() == DEFAULTS
    assert (base.proton.backend, base.proton.launch, base.proton.mode, base.proton.mode_key) == \
        ("auto", "cli", None, None)
    assert base.environment == R.EnvironmentRef(name="local") and not base.environment.inline
    assert base.extra_env == {"TRITON_PRINT_AUTOTUNING": "1"} and base.collect_from == "recipe"
    img = r.cell("in-image").environment
    assert img is not None and img.inline and img.docker == IMAGE and img.env == {"ROCR_VISIBLE_DEVICES": "0"}
    assert img.name == "_inline_1055278f"  # aorta 0.3.0 names it so (checked against aorta below)
    assert r.cell("in-venv").extra_env == {"TRITON_PRINT_AUTOTUNING": "0"}  # the cell's wins
    venv = r.cell("in-venv").environment
    assert venv is not None and venv.resolve(envs).venv == "/opt/venvs/triton-3.8.0"
    none = r.cell("no-profiler")
    assert (none.proton, none.collectors, none.collect_from) == (None, (), "cell")
    both = r.cell("proton-and-numerics")
    assert both.collectors == ("layer_numerics", "proton") and both.proton == base.proton


def test_mapping_form_is_replaced_per_cell_never_merged(envs) -> None:
    r = read("collect-mapping.yaml", envs)
    inherit = r.cell("inherits").proton
    assert inherit is not None
    assert inherit.aorta_options() == {"mode": "env", "backend": "instrumentation", "context": "shadow",
                                       "data": "tree", "instrumentation_mode": "mma", "granularity": "warp_group"}
    assert (inherit.mode, inherit.mode_key) == ("mma:granularity=warp_group", "instrumentation_mode")
    assert r.cell("inherits").collectors == ("proton", "layer_numerics")
    # a cell's own proton options start from the defaults, not from the recipe's
    roc = r.cell("roctracer-cli").proton
    assert roc is not None and roc.aorta_options() == {**DEFAULTS, "backend": "roctracer"} and roc.mode is None
    # values are stripped and lower-cased, as aorta does
    ins = r.cell("instrumentation-cli").proton
    assert ins is not None and (ins.launch, ins.backend, ins.mode, ins.mode_key) == \
        ("cli", "instrumentation", "default", "instrumentation_mode")
    gran = r.cell("granularity-only").proton
    assert gran is not None and (gran.mode, gran.mode_key) == ("default:granularity=warp", "granularity")
    rocprof = r.cell("with-rocprof")
    assert rocprof.collectors == ("rocprof", "proton") and rocprof.proton is not None
    assert rocprof.proton.backend == "instrumentation"
    assert r.cell("enabled-no-options").proton == R.ProtonConfig(backend="auto", launch="cli", mode=None,
                                                                  mode_key=None)
    cupti = r.cell("cupti-in-image")
    assert cupti.proton is not None and (cupti.proton.context, cupti.proton.data) == ("python", "trace")
    assert cupti.environment is not None and cupti.environment.name == "_inline_17722ff2"


def test_probe_mode_cells_run_in_local() -> None:
    r = read("probe-roctracer.yaml")
    assert r.shape == "probe" and [c.name for c in r.cells] == ["none-none", "tf32_off-none"]
    assert {c.environment for c in r.cells} == {R.EnvironmentRef(name="local")}
    assert {c.proton for c in r.cells} == {R.ProtonConfig(backend="roctracer", launch="env", mode=None,
                                                          mode_key=None)}


def test_reference_page_shape_is_read_and_flagged_as_newer_than_030() -> None:
    r = read("reference-rocprofiler.yaml")
    p = r.cells[0].proton
    assert p is not None and (p.backend, p.launch, p.mode, p.mode_key, p.backend_mode) == \
        ("rocprofiler", "env", "pcsampling", "backend_mode", "pcsampling")
    assert r.newer_keys == ["collect.proton.backend_mode"]
    assert r.model_refuses is not None and "backend_mode" in r.model_refuses


def test_legacy_proton_block_still_reads() -> None:
    r = read("legacy-proton-block.yaml")
    assert r.shape == "proton-block" and [c.name for c in r.cells] == ["gelu"] and r.cells[0].environment is None
    p = r.cells[0].proton
    assert p is not None and (p.backend, p.mode, p.mode_key) == ("rocprofiler", "periodic_flushing", "backend_mode")
    assert r.model_refuses is not None and "not aorta's schema" in r.model_refuses


# --------------------------------------------------------------------------- recipes: what is refused
HEAD = "schema_version: 1\nworkload: gpu_smoke\ntrials: 1\nsteps: 1\n"
CELL = "cells:\n  - name: a\n    mitigations: [none]\n    environment: local\n"


def cell(extra: str, name: str = "a") -> str:
    head = f"cells:\n  - name: {name}\n    mitigations: [none]\n    environment: local\n"
    return head + textwrap.indent(extra, "    ")


# (id, recipe body, field, words the one-line message must hold). Every one is
# refused by aorta 0.3.0 too (test_invalid_recipes_are_refused_by_aorta_too).
INVALID = [
    ("unknown-option", HEAD + "collect: {proton: {backend: cupti, sampling: '1'}}\n" + CELL,
     "collect.proton.sampling", ["recipe-level", "sampling", "unknown proton option"]),
    ("backend", HEAD + "collect: {proton: {backend: nvtx}}\n" + CELL,
     "collect.proton.backend", ["'nvtx'", "auto, cupti, rocprofiler, roctracer, instrumentation"]),
    ("launch-mode", HEAD + cell("collect: {proton: {mode: attach}}\n"),
     "cells[0].collect.proton.mode", ["cell 'a'", "collect.proton.mode 'attach'"]),
    ("instrumentation-mode-without-backend", HEAD + cell("collect: {proton: {backend: cupti, "
                                                         "instrumentation_mode: default}}\n"),
     "cells[0].collect.proton.instrumentation_mode", ["cell 'a'", "needs backend: instrumentation"]),
    ("granularity-under-auto", HEAD + cell("collect: {proton: {granularity: warp}}\n"),
     "cells[0].collect.proton.granularity", ["cell 'a'", "granularity", "got backend: auto"]),
    ("instrumentation-mode-value", HEAD + cell("collect: {proton: {backend: instrumentation, "
                                               "instrumentation_mode: sampling}}\n"),
     "cells[0].collect.proton.instrumentation_mode", ["'sampling'", "default, mma, pcsampling"]),
    ("non-string-value", HEAD + "collect: {proton: {backend: 1}}\n" + CELL,
     "collect.proton", ["string -> string"]),
    ("unknown-collector", HEAD + "collect: [proton, nsight]\n" + CELL, "collect", ["'nsight'"]),
    ("collect-scalar", HEAD + "collect: proton\n" + CELL, "collect", ["list of collector names"]),
    ("rocprof-with-auto", HEAD + "collect: [rocprof, proton]\n" + CELL, "collect",
     ["rocprof and proton", "backend auto"]),
    ("rocprof-with-rocprofiler", HEAD + cell("collect: {rocprof: null, proton: {backend: rocprofiler}}\n"),
     "cells[0].collect", ["cell 'a'", "backend rocprofiler"]),
    ("cell-collect-null", HEAD + cell("collect: null\n"), "cells[0].collect", ["cell 'a'", "null"]),
    ("inline-env-key", HEAD + "cells:\n  - name: a\n    mitigations: [none]\n    environment: {docker: x, name: y}\n",
     "cells[0].environment", ["cell 'a'", "only docker and env"]),
    ("inline-env-no-docker", HEAD + "cells:\n  - name: a\n    mitigations: [none]\n    environment: {env: {}}\n",
     "cells[0].environment.docker", ["cell 'a'", "environment.docker"]),
    ("inline-env-int", HEAD + "cells:\n  - name: a\n    mitigations: [none]\n"
     "    environment: {docker: x, env: {HIP_VISIBLE_DEVICES: 0}}\n",
     "cells[0].environment.env", ["cell 'a'", "HIP_VISIBLE_DEVICES", "must be a string"]),
    ("extra-env-name", HEAD + cell("extra_env: {'BAD KEY': '1'}\n"), "cells[0].extra_env",
     ["cell 'a'", "'BAD KEY'", "not a variable name"]),
    ("recipe-extra-env", HEAD + "extra_env: {A: [1]}\n" + CELL, "extra_env", ["recipe-level", "extra_env.A"]),
    ("no-environment", HEAD + "cells:\n  - name: a\n    mitigations: [none]\n", "cells[0].environment",
     ["cell 'a'", "missing environment"]),
    ("unregistered-environment", HEAD + "cells:\n  - name: a\n    mitigations: [none]\n    environment: nightly\n",
     "cells[0].environment", ["cell 'a'", "'nightly' is not registered", "triton-3.8.0-venv"]),
    ("duplicate-cell", HEAD + CELL + "  - name: a\n    mitigations: [none]\n    environment: local\n",
     "cells[1].name", ["cell 'a' (cells[1])", "duplicate"]),
    ("unsafe-cell-name", HEAD + cell("", name="'../x'"), "cells[0].name", ["cell '../x'"]),
    ("no-cells", HEAD + "cells: []\n", "cells", ["non-empty list"]),
    ("mitigations-scalar", HEAD + "cells:\n  - name: a\n    mitigations: none\n    environment: local\n",
     "cells[0].mitigations", ["cell 'a'", "list of mitigation names", "'none'"]),
    ("mode", HEAD + "mode: sweep\n" + CELL, "mode", ["triage or probe", "'sweep'"]),
    ("probe-axis", "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n", "diagnostic_axis",
     ["diagnostic_axis"]),
    # the reference page's key, broken in the ways its schema refuses
    ("backend-mode-roctracer", HEAD + cell("collect: {proton: {mode: env, backend: roctracer, "
                                           "backend_mode: pcsampling}}\n"),
     "cells[0].collect.proton.backend_mode", ["cell 'a'", "roctracer accepts only periodic_flushing"]),
    ("backend-mode-auto", HEAD + cell("collect: {proton: {backend_mode: periodic_flushing}}\n"),
     "cells[0].collect.proton.backend", ["needs an explicit backend"]),
    ("backend-mode-and-instrumentation-mode", HEAD + cell(
        "collect: {proton: {backend: instrumentation, backend_mode: pcsampling, instrumentation_mode: mma}}\n"),
     "cells[0].collect.proton.backend_mode", ["single --mode"]),
    ("backend-mode-instrumentation", HEAD + cell("collect: {proton: {backend: instrumentation, "
                                                 "backend_mode: pcsampling}}\n"),
     "cells[0].collect.proton.backend_mode", ["instrumentation_mode"]),
    ("backend-mode-value", HEAD + cell("collect: {proton: {backend: rocprofiler, backend_mode: sometimes}}\n"),
     "cells[0].collect.proton.backend_mode", ["'sometimes'", "pcsampling, periodic_flushing"]),
]


@pytest.mark.parametrize("body,fld,words", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_recipes_name_cell_and_key(tmp_path: Path, envs, body: str, fld: str, words: list[str]) -> None:
    p = tmp_path / "recipe.yaml"
    p.write_text(body)
    with pytest.raises(RecipeError) as e:
        R.load_recipe(p, envs)
    assert e.value.field == fld
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{p}: ")
    for w in words:
        assert w in msg


def test_unregistered_name_passes_without_a_registry(tmp_path: Path) -> None:
    p = tmp_path / "recipe.yaml"
    p.write_text(HEAD + "cells:\n  - name: a\n    mitigations: [none]\n    environment: nightly\n")
    assert R.load_recipe(p).cells[0].environment == R.EnvironmentRef(name="nightly")


@pytest.mark.parametrize("content,words", [
    (None, "no such file"),
    ("DIR", "is a directory"),
    (b"\x7fELF\x02\x01\x01\x00\x00", "binary data"),
    (b"cells: \xff\xfe\n", "not UTF-8"),
    (b"cells: [a\n  b: c\n", "not valid YAML at line"),
    (b"- one\n- two\n", "top level must be a mapping, got list"),
    (b"", "top level must be a mapping, got NoneType"),
    (b"workload: x\n", "not an aorta recipe"),
])
def test_unreadable_files_are_one_line_recipe_errors(tmp_path: Path, content, words: str) -> None:
    p = tmp_path / "recipe.yaml"
    if content == "DIR":
        p.mkdir()
    elif content is not None:
        p.write_bytes(content)
    with pytest.raises(RecipeError) as e:
        R.load_recipe(p)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_json_recipes_are_read_as_json(tmp_path: Path) -> None:
    p = tmp_path / "recipe.json"
    p.write_text(json.dumps(yaml.safe_load((FIX / "probe-roctracer.yaml").read_text())))
    assert R.load_recipe(p).cells == read("probe-roctracer.yaml").cells
    p.write_text("{'single': 'quotes'}")  # YAML would take it; aorta reads .json as JSON
    with pytest.raises(RecipeError, match="not valid JSON at line 1"):
        R.load_recipe(p)


def test_the_inline_environment_name_folds_env_in() -> None:
    assert R.inline_env_name(IMAGE) != R.inline_env_name(IMAGE, {"A": "1"})
    assert R.inline_env_name(IMAGE, {"A": "1", "B": "2"}) == R.inline_env_name(IMAGE, {"B": "2", "A": "1"})
    assert R.inline_env_name(IMAGE, {}) == R.inline_env_name(IMAGE)


# --------------------------------------------------------------------------- environments
def test_sidecar_environments() -> None:
    reg = load_environments(SIDECAR, entry_points=False)
    assert sorted(reg) == sorted([*BUILTINS, "triton-3.8.0-venv", "triton-3.7.1-venv", "pinned-image"])
    venv = reg["triton-3.8.0-venv"]
    assert (venv.kind, venv.venv, venv.python, venv.source) == \
        ("venv", "/opt/venvs/triton-3.8.0", "/opt/venvs/triton-3.8.0/bin/python", "sidecar:environments.json")
    assert venv.env == {"TRITON_ROCPROFILER_SDK_LIB_PATH": "/opt/rocm/lib", "ROCR_VISIBLE_DEVICES": "0"}
    assert reg["triton-3.7.1-venv"].env == {}
    img = reg["pinned-image"]
    assert (img.kind, img.docker, img.pinned, img.env) == ("docker", IMAGE, True, {"HSA_TOOLS_LIB": ""})
    assert (reg["local"].kind, reg["emulated-rocjitsu"].kind, reg["local"].source) == ("local", "emulated", "aorta")
    assert load_sidecar(SIDECAR) == {k: v for k, v in reg.items() if v.source.startswith("sidecar:")}


def sidecar(tmp_path: Path, doc, name: str = "side.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


@pytest.mark.parametrize("doc,words", [
    ({"environments": {}}, "missing the required key 'version'"),
    ({"version": 2}, "version 2 is not supported"),
    ({"version": 1, "envs": {}}, "unknown top-level keys ['envs']"),
    ({"version": 1, "environments": []}, "'environments' must be an object"),
    ({"version": 1, "environments": {"x": "img"}}, "environments.x: must be a mapping, got str"),
    ({"version": 1, "environments": {"x": {"rocm": "7.2"}}}, "unknown keys ['rocm']"),
    ({"version": 1, "environments": {"x": {"docker": 3}}}, "environments.x.docker: must be a string or null"),
    ({"version": 1, "environments": {"x": {"env": {"A": 1}}}}, "environments.x.env.A: the value must be a string"),
    ({"version": 1, "environments": {"x": {"env": {"1A": "v"}}}}, "'1A' is not a variable name"),
    ({"version": 1, "environments": {"x": {"env": {"A": "a\u0000b"}}}}, "contains a NUL byte"),
    ({"version": 1, "environments": {"local": {"venv": "/v"}}}, "'local' registered by both 'aorta'"),
    ("[1, 2]", "top level must be a JSON object"),
    ('{"version": 1,', "not valid JSON at line 1"),
])
def test_invalid_sidecars(tmp_path: Path, doc, words: str) -> None:
    with pytest.raises(EnvironmentsError) as e:
        load_environments(sidecar(tmp_path, doc), entry_points=False)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_sidecar_file_errors(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = sidecar(tmp_path / "a", {"version": 1})
    two = sidecar(tmp_path / "b", {"version": 1})
    with pytest.raises(EnvironmentsError, match="share the file name 'side.json'"):
        load_environments([one, two], entry_points=False)
    with pytest.raises(EnvironmentsError, match="no such file"):
        load_environments(tmp_path / "missing.json", entry_points=False)
    with pytest.raises(EnvironmentsError, match="is a directory"):
        load_environments(tmp_path / "a", entry_points=False)
    (tmp_path / "bin.json").write_bytes(b"\x00\x01")
    with pytest.raises(EnvironmentsError, match="binary data"):
        load_environments(tmp_path / "bin.json", entry_points=False)
    dup = sidecar(tmp_path, {"version": 1, "environments": {"triton-3.7.1-venv": {}}})
    with pytest.raises(EnvironmentsError, match="'triton-3.7.1-venv' registered by both 'sidecar:environments.json' "
                                                "and 'sidecar:side.json'"):
        load_environments([SIDECAR, dup], entry_points=False)


def test_entry_points_are_read_in_the_named_python(tmp_path: Path, monkeypatch) -> None:
    root = plugin_dist(tmp_path / "site", {
        "NIGHTLY": "{'docker': 'rocm/pytorch-nightly@sha256:' + '0' * 64, 'env': {'HIP_FORCE_DEV_KERNARG': '1'}}",
        "HOST_VENV": "{'venv': '/opt/venvs/host'}",
    })
    monkeypatch.setenv("PYTHONPATH", str(root))
    reg = load_environments(SIDECAR, python=sys.executable)
    night = reg["nightly"]
    assert (night.kind, night.source, night.env, night.pinned) == \
        ("docker", "plugin:acme-envs", {"HIP_FORCE_DEV_KERNARG": "1"}, True)
    assert (reg["host-venv"].venv, reg["host-venv"].source) == ("/opt/venvs/host", "plugin:acme-envs")
    assert "triton-3.8.0-venv" in reg  # sidecars merge after plugins
    # without PYTHONPATH that Python has no such plugin
    monkeypatch.delenv("PYTHONPATH")
    assert "nightly" not in load_environments(python=sys.executable)


@pytest.mark.parametrize("payload,words", [
    ("['docker', 'x']", "must be a mapping, got list"),
    ("{'docker': 'x', 'rocm': '7'}", "unknown keys ['rocm']"),
    ("{'venv': object()}", "venv: must be a string or null, got object"),
    ("{'env': {'A': 2}}", "env.A: the value must be a string"),
    ("{'venv': '/v'}\nraise RuntimeError('boom')", "did not load: RuntimeError: boom"),
])
def test_bad_plugins(tmp_path: Path, monkeypatch, payload: str, words: str) -> None:
    monkeypatch.setenv("PYTHONPATH", str(plugin_dist(tmp_path / "site", {"BAD": payload})))
    with pytest.raises(EnvironmentsError) as e:
        load_environments(python=sys.executable)
    assert words in str(e.value) and "plugin 'acme-envs' environment 'bad'" in str(e.value)


def test_plugin_colliding_with_a_sidecar(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(plugin_dist(tmp_path / "site", {"PINNED_IMAGE": "{'venv': '/v'}"})))
    with pytest.raises(EnvironmentsError, match="'pinned-image' registered by both 'plugin:acme-envs' and "
                                                "'sidecar:environments.json'"):
        load_environments(SIDECAR, python=sys.executable)


def test_entry_point_python_errors(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentsError, match="no such interpreter"):
        load_environments(python=str(tmp_path / "nope"))
    bad = tmp_path / "python"
    bad.write_text("#!/bin/sh\necho not python >&2\nexit 3\n")
    bad.chmod(0o755)
    with pytest.raises(EnvironmentsError, match="could not read the aorta.environments entry points: not python"):
        load_environments(python=str(bad))


def test_find_aorta_python_reads_the_shebang(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    assert find_aorta_python(str(bin_dir)) is None
    aorta = bin_dir / "aorta"
    aorta.write_text("#!/opt/venvs/aorta/bin/python3.12\nimport sys\n")
    aorta.chmod(0o755)
    assert find_aorta_python(str(bin_dir)) == "/opt/venvs/aorta/bin/python3.12"
    aorta.write_text("#!/usr/bin/env python3\n")
    (bin_dir / "python3").symlink_to(sys.executable)
    assert find_aorta_python(str(bin_dir)) == str(bin_dir / "python3")
    aorta.write_bytes(b"\x7fELF\x02")
    assert find_aorta_python(str(bin_dir)) is None


def test_no_aorta_on_path_reads_no_entry_points(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(plugin_dist(tmp_path / "site", {"NIGHTLY": "{'venv': '/v'}"})))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sorted(load_environments()) == sorted(BUILTINS)


# --------------------------------------------------------------------------- the two rules
@pytest.mark.parametrize("vendor,available,loads,backend,words", [
    ("nvidia", None, None, "cupti", "no profiler registry"),
    ("amd", None, None, "roctracer", "maps hip to roctracer"),
    ("nvidia", ["cupti", "rocprofiler", "roctracer", "instrumentation"], False, "cupti", "selects cupti"),
    ("amd", ["cupti", "rocprofiler", "roctracer", "instrumentation"], True, "rocprofiler", "loads here"),
    ("amd", ["cupti", "rocprofiler", "roctracer", "instrumentation"], False, "rocprofiler",
     "does not fall back to roctracer"),
    ("amd", ["cupti", "rocprofiler", "roctracer", "instrumentation"], None, "rocprofiler", "was not measured"),
    ("amd", ["cupti", "roctracer", "instrumentation"], False, None, "No profiler registered for triton backend hip"),
    ("nvidia", ["rocprofiler", "roctracer", "instrumentation"], None, None, "registers only rocprofiler"),
    ("none", ["cupti"], None, None, "no GPU here"),
])
def test_resolve_auto(vendor, available, loads, backend, words) -> None:
    got, why = resolve_auto(vendor, available, loads)
    assert got == backend and words in why


def test_resolve_auto_rejects_an_unknown_vendor() -> None:
    with pytest.raises(ValueError):
        resolve_auto("intel", None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("launch,version,mode,dropped", [
    ("cli", "3.7.1", "pcsampling", True),
    ("cli", "3.6.0+rocm7.2.4", "mma", True),
    ("cli", "3.7.0", "default:granularity=warp", True),
    ("cli", "3.8.0", "pcsampling", False),
    ("cli", "3.9.0", "periodic_flushing", False),
    ("cli", "3.10.0", "pcsampling", False),
    ("cli", "3.7.1", None, False),
    ("env", "3.7.1", "pcsampling", False),
    ("cli", None, "pcsampling", False),
])
def test_mode_dropped(launch, version, mode, dropped) -> None:
    why = mode_dropped(launch, version, mode)
    assert (why is not None) == dropped
    if why:
        assert f"Triton {version}" in why and repr(mode) in why and "mode: env" in why


def test_mode_dropped_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        mode_dropped("attach", "3.7.1", "mma")
    with pytest.raises(ValueError):
        mode_dropped("cli", "main", "mma")


# =========================================================================== integration: aorta itself
@pytest.fixture(scope="module")
def aorta_python() -> str:
    from tests.envs import pip_venv

    py = pip_venv("amd-aorta==0.3.0").python
    assert py is not None
    return py


# Runs in aorta's venv: aorta's own loader and option validator read a recipe.
AORTA_READS = r"""
import json, sys
from pathlib import Path
from aorta.triage.recipe import load_recipe
from aorta.instrumentation.proton import validate_options, mode_argument
out = {}
sidecar = Path(sys.argv[1])
for arg in sys.argv[2:]:
    try:
        r = load_recipe(Path(arg), sidecar_files=(sidecar,))
    except Exception as e:
        out[arg] = {"error": "%s: %s" % (type(e).__name__, e)}
        continue
    inline = {e.name: {"docker": e.docker, "env": e.env} for e in r.inline_environments}
    cells = []
    for c in r.cells:
        names = list(c.effective_collect(r.collect))
        opts = c.effective_collect_options(r.collect_options)
        eff = validate_options(opts.get("proton")) if "proton" in names else None
        cells.append({"name": c.name, "environment": c.environment, "inline": inline.get(c.environment),
                      "mitigations": list(c.mitigations),
                      "extra_env": {**r.extra_env, **c.extra_env}, "collectors": names, "proton": eff,
                      "proton_mode": mode_argument(eff) if eff else None})
    out[arg] = {"cells": cells}
print(json.dumps(out))
"""


def aorta_reads(python: str, paths: list[Path]) -> dict:
    proc = subprocess.run([python, "-c", AORTA_READS, str(SIDECAR), *map(str, paths)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def our_reading(r: R.Recipe) -> list[dict]:
    return [{"name": c.name, "environment": c.environment.name if c.environment else None,
             "mitigations": list(c.mitigations),
             "inline": {"docker": c.environment.docker, "env": c.environment.env}
             if c.environment and c.environment.inline else None,
             "extra_env": c.extra_env, "collectors": list(c.collectors),
             "proton": c.proton.aorta_options() if c.proton else None,
             "proton_mode": c.proton.mode if c.proton else None} for c in r.cells]


@pytest.mark.integration
def test_fixtures_are_aorta_input_and_read_alike(aorta_python: str, envs) -> None:
    paths = [FIX / name for name in RECIPES]
    theirs = aorta_reads(aorta_python, paths)
    for p in paths:
        ours = R.load_recipe(p, envs)
        got = theirs[str(p)]
        if ours.model_refuses is None:
            assert "error" not in got, (p.name, got)
            assert got["cells"] == our_reading(ours), p.name
        else:
            # what aorta 0.3.0 refuses, it refuses for the reason given
            assert "error" in got, p.name
            if ours.shape == "proton-block":
                assert "unknown top-level keys ['name', 'proton']" in got["error"]
            else:
                assert ours.newer_keys
                for key in ours.newer_keys:
                    assert f"unknown option(s) ['{key.rsplit('.', 1)[1]}']" in got["error"]
    readable = [p.name for p in paths if R.load_recipe(p).model_refuses is None]
    assert readable == ["check-cells.yaml", "collect-list.yaml", "collect-mapping.yaml", "probe-roctracer.yaml"]


@pytest.mark.integration
def test_invalid_recipes_are_refused_by_aorta_too(aorta_python: str, tmp_path: Path) -> None:
    paths = []
    for name, body, *_ in INVALID:
        p = tmp_path / f"{name}.yaml"
        p.write_text(body)
        paths.append(p)
    theirs = aorta_reads(aorta_python, paths)
    accepted = [p.stem for p in paths if "error" not in theirs[str(p)]]
    assert accepted == []


# Runs in aorta's venv: aorta's merged registry, as `aorta environments list` builds it.
AORTA_ENVS = r"""
import json, sys
from pathlib import Path
from aorta.registry import load_environments
reg = load_environments(extra_files=[Path(p) for p in sys.argv[1:]])
print(json.dumps({n: {"docker": e.docker, "venv": e.venv, "buck_target": e.buck_target, "emulator": e.emulator,
                      "mirage_profile": e.mirage_profile, "env": e.env, "source": e.source_package}
                  for n, e in reg.items()}))
"""


@pytest.mark.integration
def test_environments_read_alike(aorta_python: str, tmp_path: Path, monkeypatch) -> None:
    root = plugin_dist(tmp_path / "site", {
        "NIGHTLY": "{'docker': 'rocm/pytorch-nightly@sha256:' + '0' * 64, 'env': {'HIP_FORCE_DEV_KERNARG': '1'}}",
        "HOST_VENV": "{'venv': '/opt/venvs/host', 'env': None}",
    })
    monkeypatch.setenv("PYTHONPATH", str(root))
    proc = subprocess.run([aorta_python, "-c", AORTA_ENVS, str(SIDECAR)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout)
    ours = load_environments(SIDECAR, python=aorta_python)
    as_theirs = {n: {**{k: v for k, v in e.as_dict().items() if k not in ("name", "kind", "source")},
                     "source": e.source.removeprefix("plugin:")} for n, e in ours.items()}
    assert as_theirs == theirs
    assert {"nightly", "host-venv", "triton-3.8.0-venv", "local"} <= set(theirs)
    # the aorta command's shebang names the Python its plugins are read in
    bin_dir = str(Path(aorta_python).parent)
    assert find_aorta_python(bin_dir) == aorta_python
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ["PATH"])
    assert load_environments(SIDECAR) == ours
    cli = subprocess.run([str(Path(bin_dir) / "aorta"), "environments", "list", "--file", str(SIDECAR)],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and "triton-3.8.0-venv" in cli.stdout and "nightly" in cli.stdout
    # and a sidecar aorta refuses, we refuse
    bad = sidecar(tmp_path, {"version": 1, "environments": {"x": {"rocm": "7.2"}}})
    cli = subprocess.run([str(Path(bin_dir) / "aorta"), "environments", "list", "--file", str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode != 0 and "rocm" in cli.stderr
    with pytest.raises(EnvironmentsError, match="rocm"):
        load_environments(bad, python=aorta_python)


# =========================================================================== integration: Triton itself
@pytest.fixture(scope="module", params=["3.7.1", "3.8.0", "3.9.0"])
def triton_python(request) -> tuple[str, str]:
    from tests.envs import pypi_venv

    py = pypi_venv(request.param).python
    assert py is not None
    return request.param, py


# Runs in a Triton venv: Proton's real backend selection, with the GPU platform
# (Triton's active driver) as the one thing supplied - there is no GPU here.
SELECT = r"""
import ctypes, json, sys
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton._C.libproton import proton as libproton
from triton.profiler.profile import _select_backend
class Platform:
    def __init__(self, target): self.target = target
    def get_current_target(self): return self.target
out = {"available": libproton.get_available_profilers() if hasattr(libproton, "get_available_profilers") else None}
try:
    ctypes.CDLL("librocprofiler-sdk.so")
    out["loads"] = True
except OSError:
    out["loads"] = False
for vendor, target in (("amd", GPUTarget("hip", "gfx942", 64)), ("nvidia", GPUTarget("cuda", 90, 32))):
    driver.set_active(Platform(target))
    out[vendor] = _select_backend()
print(json.dumps(out))
"""


@pytest.mark.integration
def test_resolve_auto_matches_real_triton(triton_python) -> None:
    version, py = triton_python
    proc = subprocess.run([py, "-c", SELECT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    real = json.loads(proc.stdout)
    assert (real["available"] is None) == (version == "3.7.1")
    for vendor in ("amd", "nvidia"):
        assert resolve_auto(vendor, real["available"], real["loads"])[0] == real[vendor], (version, vendor)
    if version != "3.7.1":  # the registry picks rocprofiler even where its library does not load
        assert (real["loads"], real["amd"]) == (False, "rocprofiler")


# Runs in a Triton venv: Proton's real command front-end, given -b and -m, with
# start()/finalize() recorded instead of profiling (no GPU here).
FRONT_END = r"""
import json, sys
import triton
import triton.profiler.proton as front
calls = []
front.start = lambda *a, **k: calls.append(k)
front.finalize = lambda *a, **k: None
sys.argv = ["proton", "-b", "cupti", "-m", "pcsampling", sys.argv[1]]
try:
    front.main()
except SystemExit:
    pass
print(json.dumps({"version": triton.__version__, "start": calls}))
"""


@pytest.mark.integration
def test_mode_dropped_matches_real_triton(triton_python, tmp_path: Path) -> None:
    version, py = triton_python
    script = tmp_path / "payload.py"
    script.write_text("print('payload ran')\n")
    proc = subprocess.run([py, "-c", FRONT_END, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    real = json.loads(proc.stdout.splitlines()[-1])
    assert "payload ran" in proc.stdout and len(real["start"]) == 1 and real["start"][0]["backend"] == "cupti"
    dropped = real["start"][0].get("mode") != "pcsampling"
    assert dropped == (mode_dropped("cli", real["version"], "pcsampling") is not None), real
    assert dropped == (version == "3.7.1")
