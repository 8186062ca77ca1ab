"""`survey check --recipe` (one verdict per cell), aorta's environments as targets
and candidates (`--aorta-environment`, `survey run --aorta-environments`), and the
env baseline the launchers apply.

Fast tier: the real fixture reports (tests/fixtures/reports) answer through
``--platform``; the launchers run our own interpreter with a fake ``triton`` on
PYTHONPATH (an environment double). Integration tier: real Triton 3.7.1 and 3.8.0
venvs (tests/envs.py). Podman tier: the test images (.ci/build-images).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
from pydantic import TypeAdapter, ValidationError

from db.store import Store
from probes import outcomes as O
from survey.aorta.links import RecipeCell
from survey.core import exitcodes
from survey.environments import probe as probe_run
from survey.environments.launchers.python import PythonLauncher
from survey.evidence import identity, queries
from survey.evidence.ingest import ingest
from tests.conftest import report_bytes, survey_cli
from tests.envs import fake_triton, installed_aorta, plugin_dist
from tests.helpers.aorta import link
from tests.helpers.images import IMG

FIX = Path(__file__).parent / "fixtures" / "aorta"
SIDECAR = FIX / "environments.json"
# A triage recipe whose workload gets the collector: `wrapped`, a SubprocessWorkload of
# the installed aorta (the `wrapped_workload` fixture). aorta 0.3.0's own triage
# workloads run in its process and are never profiled (tests/test_recipe_links.py).
HEAD = "schema_version: 1\nworkload: wrapped\ntrials: 1\nsteps: 1\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# What `survey check --recipe R --json` prints: a list of the one recipe cell model.
CELLS = TypeAdapter(list[RecipeCell])


def cells_of(stdout: str) -> dict[str, dict]:
    rows = json.loads(stdout)
    assert isinstance(rows, list)
    jsonschema.validate(rows, CELLS.json_schema(mode="serialization"))
    assert CELLS.dump_python(CELLS.validate_python(rows), mode="json") == rows
    return {r["cell"]: r for r in rows}


def sidecar(tmp_path: Path, envs: dict) -> Path:
    return write(tmp_path, "envs.json", json.dumps({"version": 1, "environments": envs}))


# =========================================================================== the env baseline
def test_identity_includes_a_non_empty_env_baseline() -> None:
    resolved = {"prefix": "/opt/venvs/t", "python": "3.11.2", "machine": "x86_64",
                "distributions": [["triton", "3.8.0"]]}
    plain = identity.identity_of_resolved("python", resolved)
    assert "env" not in plain
    assert identity.identity_of_resolved("python", {**resolved, "env": {}}) == plain  # an empty baseline is none
    a = identity.identity_of_resolved("python", {**resolved, "env": {"HIP_VISIBLE_DEVICES": "0", "A": "1"}})
    b = identity.identity_of_resolved("python", {**resolved, "env": {"A": "1", "HIP_VISIBLE_DEVICES": "0"}})
    assert a == b and a["env"] == {"A": "1", "HIP_VISIBLE_DEVICES": "0"}
    assert identity.digest(a) != identity.digest(plain)
    other = identity.identity_of_resolved("python", {**resolved, "env": {"HIP_VISIBLE_DEVICES": "1", "A": "1"}})
    assert identity.digest(other) != identity.digest(a)
    img = identity.identity_of_resolved("image", {"digest": "sha256:" + "0" * 64, "env": {"X": ""}})
    assert img["env"] == {"X": ""}


def test_python_launcher_applies_the_baseline_to_the_probe(tmp_path: Path) -> None:
    """The baseline reaches the probe: its PYTHONPATH finds the fake triton, its
    controlled variable is recorded and measured in the inherited grid, and it is
    in the origin and the identity."""
    fake = fake_triton(tmp_path / "fake", {"instrumentation": "ok"}, registry=["instrumentation"])
    env = {"PYTHONPATH": str(fake), "HIP_VISIBLE_DEVICES": "0"}
    with_env = PythonLauncher(sys.executable, env=env)
    resolved = with_env.obtain()
    assert resolved.resolved["env"] == dict(sorted(env.items()))
    assert resolved.identity != PythonLauncher(sys.executable).obtain().identity
    assert "HIP_VISIBLE_DEVICES, PYTHONPATH set" in with_env.describe()
    origin = resolved.origin()
    assert origin["interpreter"]["env"] == dict(sorted(env.items())) and origin["identity"]["env"] == origin[
        "interpreter"]["env"]
    args = probe_run.probe_args(10, auto_capture=False, only=["instrumentation"], repeats=1)
    raw, has_triton = with_env.probe(resolved, args, 300)
    rep = json.loads(raw)
    assert has_triton and rep["environment"]["triton"]["package_dir"] == str(fake / "triton")  # via the baseline
    variables = {v["name"]: v for v in rep["environment"]["variables"]}
    assert variables["HIP_VISIBLE_DEVICES"]["value"] == "0" and variables["HIP_VISIBLE_DEVICES"]["controlled"]
    envs = {(m["backend"], m["env"]) for m in rep["modes"] if not m["stub"]}
    assert ("instrumentation", "clean") in envs and ("instrumentation", "inherited") in envs
    # without the baseline there is no triton and nothing inherited
    raw, has_triton = PythonLauncher(sys.executable).probe(PythonLauncher(sys.executable).obtain(), args, 300)
    assert not has_triton


def test_image_launcher_sets_each_variable_with_its_value(tmp_path: Path, monkeypatch) -> None:
    """``-e NAME=VALUE`` (never a bare ``-e NAME``, which would copy the host's),
    read off the command line a fake engine (an environment double) receives."""
    from survey.environments.launchers import image as image_mod

    log = tmp_path / "argv.log"
    engine = tmp_path / "podman"
    engine.write_text(f"""#!/bin/sh
[ "$1" = run ] && printf '%s\\n' "$@" > {log}
[ "$1" = info ] && echo 5.0.0 && exit 0
exit 125
""")
    engine.chmod(0o755)
    monkeypatch.setattr(image_mod, "_engine_checks", {})
    launcher = image_mod.ImageLauncher("localhost/x:1", engine=str(engine), env={"HSA_TOOLS_LIB": "", "B": "x y"})
    assert launcher.env_flags() == ["-e", "B=x y", "-e", "HSA_TOOLS_LIB="]
    out, _name = launcher._run("sha256:" + "0" * 64, "python3", ["resolve"], 30, devices=False)
    argv = log.read_text().splitlines()
    assert argv[:2] == ["run", "--rm"] and "B=x y" in argv and "HSA_TOOLS_LIB=" in argv
    assert argv.index("B=x y") < argv.index("--entrypoint")


# =========================================================================== recipes against stored evidence
@pytest.fixture
def wrapped_workload(tmp_path: Path, monkeypatch) -> None:
    """An installed aorta 0.3.0 whose workload `wrapped` is a SubprocessWorkload."""
    site = installed_aorta(tmp_path / "aorta", "0.3.0")
    monkeypatch.setenv("PATH", f"{tmp_path / 'aorta' / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("PYTHONPATH", str(site))


@pytest.fixture
def gpu_store(store: Store, wrapped_workload: None) -> Store:
    """The real H200 (schema 2) and CPU reports; the H200's also filed as an aorta environment."""
    with store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="h200", label="H200")
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.8.0.json"), candidate="aorta:cpu-380", label="aorta cpu-380")
    with store.session() as s:
        ingest(s, report_bytes("cpu-triton-3.7.1.json"), candidate="triton-3.7.1", label="Triton 3.7.1")
    return store


def test_every_cell_answered_from_the_h200(gpu_store: Store, tmp_path: Path) -> None:
    recipe = write(tmp_path, "r.yaml", HEAD + """collect:
  proton:
    mode: env
    backend: instrumentation
    instrumentation_mode: mma
cells:
  - {name: inherits, mitigations: [none], environment: local}
  - name: auto
    mitigations: [none]
    environment: local
    collect: {proton: {}}
  - name: roctracer
    mitigations: [none]
    environment: local
    collect: {proton: {backend: roctracer, mode: env}}
  - name: mma-cli
    mitigations: [none]
    environment: local
    collect: {proton: {backend: instrumentation, instrumentation_mode: mma}}
  - name: no-proton
    mitigations: [none]
    environment: local
    collect: [numerics]
""")
    cli = survey_cli("check", "h200", "--recipe", str(recipe), "--platform", "sm_90", "--json", "--db", gpu_store.url)
    assert cli.returncode == exitcodes.CANNOT_RUN, cli
    got = cells_of(cli.stdout)
    assert list(got) == ["inherits", "auto", "roctracer", "mma-cli", "no-proton"]
    # auto on NVIDIA with Triton 3.6.0 (no registry) is cupti, which captured 50 launches there
    auto = got["auto"]
    assert (auto["verdict"], auto["backend"], auto["mode"], auto["exit_code"]) == ("runs", "cupti", None, 0)
    assert "maps cuda to cupti" in auto["auto"] and "50 kernel launches" in auto["reason"]
    assert auto["configuration"] == {"mode": "cli", "backend": "auto", "context": "shadow", "data": "tree"}
    roc = got["roctracer"]
    assert (roc["verdict"], roc["cause"]) == ("cannot_run", "library_missing")
    assert roc["library_loads"]["answer"] == "no" and roc["library_loads"]["library"] == "libroctracer64.so"
    assert roc["backend_present"]["answer"] == "yes"
    # mode: env passes mma to start(); mode: cli on 3.6.0 drops it and instrumentation runs in its default mode
    assert (got["inherits"]["mode"], got["inherits"]["mode_dropped"]) == ("mma", None)
    drop = got["mma-cli"]
    assert drop["mode"] is None and drop["proton_mode"] == "mma" and "Triton 3.6.0" in drop["mode_dropped"]
    assert "in the backend's default mode" in drop["mode_dropped"] and drop["decided_by"] == "capture"
    assert got["no-proton"]["verdict"] == "not_applicable" and got["no-proton"]["exit_code"] == 0
    assert {r["checked_in"] for r in got.values() if r["configuration"]} == {"h200"}
    # the text form names each cell and the one that cannot run
    text = survey_cli("check", "h200", "--recipe", str(recipe), "--platform", "sm_90", "--db", gpu_store.url)
    assert text.returncode == exitcodes.CANNOT_RUN
    assert "cell roctracer [environment local]: no profile (library_missing)" in text.stdout
    assert "5 cells: 1 will leave a profile, 1 will not (roctracer), 2 without enough evidence (inherits, " \
           "mma-cli), 1 collect no proton" in text.stdout
    assert "  ok collector: 'wrapped' (acme_aorta:Wrapped, from amd-aorta) is a SubprocessWorkload" in text.stdout


def test_the_recipe_json_is_the_recipe_cell_model(gpu_store: Store, tmp_path: Path) -> None:
    """Every cell printed validates against RecipeCell and dumps back to what was printed,
    key for key and in the printed order; a cell whose exit code is not its verdict's, or
    with a field the model lacks, does not validate."""
    recipe = write(tmp_path, "r.yaml", HEAD + "collect: {proton: {mode: env, backend: cupti}}\ncells:\n"
                   "  - {name: a, mitigations: [none], environment: local}\n"
                   "  - {name: b, mitigations: [none], environment: local, collect: {proton: {backend: roctracer}}}\n"
                   "  - {name: c, mitigations: [none], environment: local, collect: [numerics]}\n")
    cli = survey_cli("check", "h200", "--recipe", str(recipe), "--platform", "sm_90", "--json", "--db", gpu_store.url)
    rows = json.loads(cli.stdout)
    assert [(r["cell"], r["verdict"], r["exit_code"]) for r in rows] == [
        ("a", "runs", 0), ("b", "cannot_run", 2), ("c", "not_applicable", 0)]
    jsonschema.validate(rows, CELLS.json_schema(mode="serialization"))
    again = CELLS.dump_python(CELLS.validate_python(rows), mode="json")
    assert [list(r) for r in again] == [list(r) for r in rows] and again == rows
    with pytest.raises(ValidationError, match="exit code 3 is not cannot_run's"):
        CELLS.validate_python([{**rows[1], "exit_code": 3}])
    with pytest.raises(ValidationError):
        CELLS.validate_python([{**rows[0], "verdit": "runs"}])
    with pytest.raises(ValidationError):
        CELLS.validate_python([{**rows[2], "links": rows[0]["links"]}])


def test_the_verdict_is_what_really_runs(gpu_store: Store, tmp_path: Path) -> None:
    """The reference page's shape on Triton 3.6.0: cupti+periodic_flushing is refused
    when the mode reaches start() (mode: env), and runs - in the default mode - when
    3.6.0's CLI drops it (mode: cli)."""
    def one(launch: str) -> dict:
        recipe = write(tmp_path, f"{launch}.yaml", HEAD + "mode: probe\nmitigation_axis: [none]\n"
                       "diagnostic_axis: [none]\ncollect:\n  proton:\n"
                       f"    mode: {launch}\n    backend: cupti\n    backend_mode: periodic_flushing\n")
        cli = survey_cli("check", "h200", "--recipe", str(recipe), "--platform", "sm_90", "--json",
                         "--db", gpu_store.url, "--", "python3", "train.py")
        [row] = json.loads(cli.stdout)
        assert cli.returncode == row["exit_code"] and row["cell"] == "none-none"
        assert "backend_mode: aorta 0.3.0 has no such proton option" in cli.stderr
        return row

    env = one("env")
    assert (env["exit_code"], env["cause"], env["mode"]) == (2, "mode_refused", "periodic_flushing")
    assert env["mode_accepted"]["answer"] == "no"
    cli = one("cli")
    assert (cli["exit_code"], cli["verdict"], cli["mode"]) == (0, "runs", None)
    assert "periodic_flushing" in cli["mode_dropped"]


def test_auto_without_a_gpu_and_without_a_registry(gpu_store: Store, tmp_path: Path) -> None:
    recipe = write(tmp_path, "r.yaml", HEAD + "collect: [proton]\ncells:\n"
                   "  - {name: a, mitigations: [none], environment: local}\n")
    cli = survey_cli("check", "triton-3.7.1", "--recipe", str(recipe), "--json", "--platform", "x86_64",
                     "--db", gpu_store.url)
    assert cli.returncode == exitcodes.NOT_ENOUGH_EVIDENCE, cli
    [row] = json.loads(cli.stdout)
    assert (row["cause"], row["backend"]) == ("no_gpu", "auto") and "no GPU here" in row["reason"]
    assert row["backend_present"]["answer"] == "unknown" and row["mode_accepted"]["answer"] == "unknown"


def test_cells_in_their_own_environments(gpu_store: Store, tmp_path: Path) -> None:
    """Without TARGET each cell is checked in the environment it names: registered
    ones through the sidecar (evidence filed as aorta:NAME), and the ones that cannot
    be resolved say why."""
    side = sidecar(tmp_path, {"cpu-380": {"venv": str(tmp_path / "no-such-venv"),
                                          "env": {"ROCR_VISIBLE_DEVICES": "0"}},
                              "buck-env": {"buck_target": "//x:y"}})
    recipe = write(tmp_path, "r.yaml", HEAD + """collect: {proton: {mode: env, backend: rocprofiler}}
cells:
  - {name: in-cpu-380, mitigations: [none], environment: cpu-380}
  - name: pcsampling
    mitigations: [none]
    environment: cpu-380
    extra_env: {HIP_VISIBLE_DEVICES: "0"}
    collect: {proton: {mode: env, backend: rocprofiler, backend_mode: pcsampling}}
  - {name: in-local, mitigations: [none], environment: local}
  - {name: in-buck, mitigations: [none], environment: buck-env}
  - {name: unregistered, mitigations: [none], environment: nightly}
  - {name: inline, mitigations: [none], environment: {docker: "localhost/nothing:1"}}
""")
    cli = survey_cli("check", "--recipe", str(recipe), "--aorta-environments", str(side), "--platform", "x86_64",
                     "--json", "--db", gpu_store.url)
    assert cli.returncode == exitcodes.CANNOT_RUN, cli  # the pcsampling cell: a definite no (below)
    got = cells_of(cli.stdout)
    first = got["in-cpu-380"]
    assert (first["checked_in"], first["cell_environment"]) == ("aorta:cpu-380", "cpu-380")
    # the stored evidence was probed without the environment's baseline, whose device
    # selection was not measured there (no GPU vendor): said, before what start says
    env = link(first, "environment")
    assert (env["answer"], env["cause"], first["decided_by"]) == ("unknown", "overlay_not_measured", "environment")
    assert env["facts"]["layers"] == ["environment cpu-380's env", "mitigation none"]
    assert "ROCR_VISIBLE_DEVICES='0' (set by environment cpu-380's env)" in first["reason"]
    start = link(first, "start")
    assert start["cause"] == "library_missing" and "librocprofiler-sdk.so" in start["basis"]
    pcs = got["pcsampling"]
    assert (link(pcs, "start")["cause"], pcs["mode_accepted"]["source"]) == ("mode_refused", "stub")
    # the build refuses the mode whatever the unmeasured device variable does: a definite no
    assert (pcs["verdict"], pcs["decided_by"]) == ("cannot_run", "start")
    # aorta's proton wrap moves the cell's HIP_VISIBLE_DEVICES away for rocprofiler (Proton refuses it on AMD)
    env = link(pcs, "environment")["facts"]
    assert env["device_translation"] == ("aorta's proton wrap (backend rocprofiler) unsets HIP_VISIBLE_DEVICES and "
                                         "runs with ROCR_VISIBLE_DEVICES='0'")
    assert [v["name"] for v in env["variables"]] == ["ROCR_VISIBLE_DEVICES"]
    for name, words in (("in-local", "is aorta's own process"), ("in-buck", "Buck2 target (//x:y)"),
                        ("unregistered", "'nightly' is not registered")):
        assert (got[name]["exit_code"], got[name]["cause"]) == (3, "environment_unresolved"), name
        assert words in got[name]["reason"], name
        assert got[name]["checked_in"] is None
    inline = got["inline"]
    assert inline["cause"] == "not_probed" and inline["checked_in"].startswith("aorta:_inline_")
    # another platform: the environment has no evidence there, and says where it has some
    cli = survey_cli("check", "--recipe", str(recipe), "--aorta-environments", str(side), "--platform", "sm_90",
                     "--json", "--db", gpu_store.url)
    assert cli.returncode == exitcodes.NOT_ENOUGH_EVIDENCE
    row = cells_of(cli.stdout)["in-cpu-380"]
    assert row["cause"] == "not_probed" and "none:x86_64" in row["fix"]


def test_aorta_environment_as_target(gpu_store: Store, tmp_path: Path) -> None:
    side = sidecar(tmp_path, {"cpu-380": {"venv": str(tmp_path / "no-such-venv")}})
    base = ["--aorta-environments", str(side), "--platform", "x86_64", "--db", gpu_store.url]
    cli = survey_cli("check", "--aorta-environment", "cpu-380", "--backend", "rocprofiler", "--mode",
                     "periodic_flushing", "--json", *base)
    assert cli.returncode == exitcodes.CANNOT_RUN, cli
    res = json.loads(cli.stdout)
    assert (res["cause"], res["target"], res["candidate"]) == ("library_missing", "aorta:cpu-380", "aorta:cpu-380")
    # with --recipe: every cell in that environment, whatever it names
    recipe = write(tmp_path, "r.yaml", HEAD + "collect: {proton: {mode: env, backend: cupti}}\ncells:\n"
                   "  - {name: a, mitigations: [none], environment: local}\n"
                   "  - {name: b, mitigations: [none], environment: nightly}\n")
    cli = survey_cli("check", "--aorta-environment", "cpu-380", "--recipe", str(recipe), "--json", *base)
    assert cli.returncode == exitcodes.NOT_ENOUGH_EVIDENCE, cli
    got = cells_of(cli.stdout)
    assert {r["checked_in"] for r in got.values()} == {"aorta:cpu-380"}
    assert {r["cause"] for r in got.values()} == {"no_gpu"}
    assert "checked in aorta:cpu-380, not in the environment the cell names (nightly)" in got["b"]["details"]


@pytest.mark.parametrize("args,code,words", [
    (["h200", "--aorta-environment", "x", "--backend", "cupti"], exitcodes.USAGE, "not both"),
    (["h200", "--recipe", str(FIX / "check-cells.yaml"), "--backend", "cupti"], exitcodes.USAGE, "not both"),
    (["--backend", "cupti"], exitcodes.USAGE, "give TARGET"),
    (["--aorta-environment", "nope", "--backend", "cupti"], exitcodes.INPUT, "'nope' is not registered"),
    (["--aorta-environment", "local", "--backend", "cupti"], exitcodes.INPUT, "is the current process"),
    (["--aorta-environment", "emulated-rocjitsu", "--recipe", str(FIX / "check-cells.yaml")], exitcodes.INPUT,
     "GPU-emulated"),
    (["--recipe", str(FIX / "check-cells.yaml"), "--aorta-environments", "/nonexistent.json"], exitcodes.INPUT,
     "no such file"),
])
def test_usage_errors(gpu_store: Store, args: list[str], code: int, words: str) -> None:
    """The command line itself wrong: 64; a name or file that names nothing usable: 65."""
    cli = survey_cli("check", *args, "--db", gpu_store.url)
    assert cli.returncode == code, cli
    assert words in cli.stderr and "Traceback" not in cli.stderr


PROBE = ("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n"
         "collect:\n  proton: {backend: cupti}\n")


@pytest.mark.parametrize("typo,code,words", [
    (("mode: probe", "mode: prob"), exitcodes.INPUT, "mode must be triage or probe, got 'prob'; did you mean 'probe'?"),
    (("{backend: cupti}", "{backend: cupti, backend_mode: pcsampeling}"), exitcodes.INPUT,
     "backend_mode 'pcsampeling' is not accepted by backend cupti; did you mean 'pcsampling'?"),
])
def test_a_mistyped_recipe_value_gets_a_did_you_mean(gpu_store: Store, tmp_path: Path, typo: tuple[str, str],
                                                     code: int, words: str) -> None:
    """A recipe value one typo away from a valid one is named. (Failed first: the list only.)"""
    recipe = write(tmp_path, "r.yaml", PROBE.replace(*typo))
    cli = survey_cli("check", "h200", "--recipe", str(recipe), "--platform", "sm_90", "--db", gpu_store.url,
                     "--", "python", "x.py")
    assert cli.returncode == code, cli
    assert words in cli.stderr and "Traceback" not in cli.stderr


def test_a_mistyped_mitigation_or_environment_gets_a_did_you_mean(gpu_store: Store, tmp_path: Path) -> None:
    """An axis value or environment name one typo from a registered one is named, and one
    cell is "1 cell". (Failed first: no suggestion, and "1 cells".)"""
    recipe = write(tmp_path, "r.yaml", PROBE.replace("diagnostic_axis: [none]", "diagnostic_axis: [nonee]"))
    cli = survey_cli("check", "h200", "--recipe", str(recipe), "--platform", "sm_90", "--db", gpu_store.url,
                     "--", "python", "x.py")
    assert cli.returncode == exitcodes.NOT_ENOUGH_EVIDENCE, cli
    assert "mitigation 'nonee' is not registered" in cli.stdout and "did you mean 'none'?" in cli.stdout
    assert "\n1 cell: 0 will leave a profile, 1 without enough evidence (none-nonee)" in cli.stdout
    cli = survey_cli("check", "--aorta-environment", "defualt", "--backend", "cupti", "--db", gpu_store.url)
    assert cli.returncode == exitcodes.INPUT, cli
    assert "'defualt' is not registered" in cli.stderr and "did you mean 'default'?" in cli.stderr


# =========================================================================== survey run --aorta-environments (fast)
def test_survey_run_takes_aorta_environments_as_candidates(store: Store, tmp_path: Path) -> None:
    """Our own venv with a fake triton on the baseline's PYTHONPATH: surveyed as
    aorta:NAME with its baseline in the stored report; the kinds that cannot be
    launched are skipped with why."""
    fake = fake_triton(tmp_path / "fake", {"instrumentation": "ok"}, registry=["instrumentation"])
    venv = str(Path(sys.executable).parent.parent)
    side = sidecar(tmp_path, {"ours": {"venv": venv, "env": {"PYTHONPATH": str(fake), "TRITON_PROTON_DISABLE": "1"}},
                              "buck-env": {"buck_target": "//x:y"}})
    cli = survey_cli("run", "--aorta-environments", str(side), "--db", store.url, "--timeout", "10", "--no-table")
    assert cli.returncode == 0, cli
    assert "aorta:buck-env: skipped" in cli.stderr and "aorta:local: skipped" in cli.stderr
    assert "aorta:emulated-rocjitsu: skipped" in cli.stderr
    assert "survey: 1 probed" in cli.stderr
    with store.session() as s:
        assert [c.name for c in queries.candidates(s)] == ["aorta:ours"]  # the catalog only with --catalog
        cand = queries.get_candidate(s, "aorta:ours")
        assert cand.scope == "adhoc" and cand.spec["env"]["TRITON_PROTON_DISABLE"] == "1"
        run = queries.latest_complete(s, cand.id)
        assert run is not None and run.report is not None
        origin = json.loads(run.report.raw)["origin"]
        assert origin["interpreter"]["env"] == {"PYTHONPATH": str(fake), "TRITON_PROTON_DISABLE": "1"}
        assert origin["identity"]["env"] == origin["interpreter"]["env"]
        assert {(r.backend, r.env) for r in run.modes if not r.stub} >= {("instrumentation", "clean"),
                                                                          ("instrumentation", "inherited")}
    # unchanged: a second run re-probes nothing; --only takes the aorta name
    again = survey_cli("run", "--aorta-environments", str(side), "--only", "aorta:ours", "--db", store.url,
                       "--no-table")
    assert again.returncode == 0 and "survey: 1 unchanged" in again.stderr, again
    bad = survey_cli("run", "--aorta-environments", str(side), "--only", "triton-3.8.0", "--db", store.url)
    assert bad.returncode == exitcodes.INPUT and "not among aorta's environments: triton-3.8.0" in bad.stderr


def test_survey_run_reads_aorta_s_registry(store: Store, tmp_path: Path, monkeypatch) -> None:
    """--aorta-registry: the entry points of the Python that runs `aorta` (its shebang),
    no sidecar file."""
    fake = fake_triton(tmp_path / "fake", {"instrumentation": "ok"}, registry=["instrumentation"])
    venv = str(Path(sys.executable).parent.parent)
    site = plugin_dist(tmp_path / "site", {"OURS": repr({"venv": venv, "env": {"PYTHONPATH": str(fake)}})})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aorta").write_text(f"#!{sys.executable}\n")
    (bin_dir / "aorta").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("PYTHONPATH", str(site))
    cli = survey_cli("run", "--aorta-registry", "--db", store.url, "--timeout", "10")
    assert cli.returncode == 0 and "survey: 1 probed" in cli.stderr, cli
    assert "aorta:default: skipped" in cli.stderr
    assert "aorta ours: venv" in cli.stdout  # the table shows ad-hoc evidence when aorta's environments were surveyed
    with store.session() as s:
        cand = queries.get_candidate(s, "aorta:ours")
        assert cand.spec["source"] == "plugin:acme-envs" and cand.spec["env"] == {"PYTHONPATH": str(fake)}
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no aorta: the built-ins only, none launchable
    cli = survey_cli("run", "--aorta-registry", "--db", store.url, "--no-table")
    assert cli.returncode == 0 and "survey: nothing to survey" in cli.stderr, cli


# =========================================================================== integration: real Triton venvs
@pytest.fixture(scope="module")
def int_store(tmp_path_factory) -> Store:
    """One store for the integration tests: each venv state is probed once."""
    return Store(f"sqlite:///{tmp_path_factory.mktemp('int') / 'survey.db'}")


def venv_python(version: str) -> str:
    from tests.envs import pypi_venv

    py = pypi_venv(version).python
    assert py is not None
    return py


@pytest.mark.integration
def test_recipe_against_triton_371(int_store: Store) -> None:
    """(a) An aorta 0.3.0 recipe (test_aorta checks aorta's own loader accepts it) with a
    recipe-level collect mapping and per-cell overrides, against the Triton 3.7.1
    venv: every cell answered by name. Its workload, gpu_smoke, runs in aorta's own
    process, so no cell leaves a profile (exit 2), and each cell's start link still
    says what Proton would do there: the cell asking for rocprofiler could not start."""
    py = venv_python("3.7.1")
    cli = survey_cli("check", py, "--recipe", str(FIX / "check-cells.yaml"), "--json", "--db", int_store.url)
    assert cli.returncode == exitcodes.CANNOT_RUN, cli
    got = cells_of(cli.stdout)
    assert list(got) == ["inherits", "inherits-in-venv", "asks-rocprofiler", "auto-backend", "mma-through-cli",
                         "numerics-only"]
    assert {n: r["cause"] for n, r in got.items() if r["configuration"]} == dict.fromkeys(
        ["inherits", "inherits-in-venv", "asks-rocprofiler", "auto-backend", "mma-through-cli"], "not_attached")
    roc = link(got["asks-rocprofiler"], "start")
    assert (roc["answer"], roc["cause"]) == ("no", "backend_absent")
    assert "Triton 3.7.1 has no `rocprofiler` backend" in roc["basis"]
    assert got["inherits"]["configuration"]["instrumentation_mode"] == "default"  # the recipe-level mapping
    assert link(got["auto-backend"], "start")["cause"] == "no_gpu"  # no GPU on this machine: auto picks nothing
    assert "Triton 3.7.1" in got["mma-through-cli"]["mode_dropped"] and got["mma-through-cli"]["mode"] is None
    assert got["numerics-only"]["verdict"] == "not_applicable"
    text = survey_cli("check", py, "--recipe", str(FIX / "check-cells.yaml"), "--db", int_store.url)
    assert text.returncode == exitcodes.CANNOT_RUN
    assert "cell asks-rocprofiler [environment local]: no profile (not_attached)" in text.stdout
    assert "NO start: Triton 3.7.1 has no `rocprofiler` backend" in text.stdout


@pytest.mark.integration
def test_reference_shape_against_triton_380(int_store: Store) -> None:
    """(b) The reference page's shape (rocprofiler, backend_mode: pcsampling, mode: env)
    against the Triton 3.8.0 venv: exit 2, the build refuses the mode."""
    py = venv_python("3.8.0")
    cli = survey_cli("check", py, "--recipe", str(FIX / "reference-rocprofiler.yaml"), "--json", "--db",
                     int_store.url)
    assert cli.returncode == exitcodes.CANNOT_RUN, cli
    [row] = json.loads(cli.stdout)
    assert (row["cell"], row["cause"], row["backend"], row["mode"]) == ("none-none", "mode_refused", "rocprofiler",
                                                                          "pcsampling")
    assert "this build refuses `rocprofiler` with mode `pcsampling`" in row["reason"]
    assert row["mode_accepted"]["answer"] == "no" and row["mode_dropped"] is None
    assert "aorta 0.3.0 would refuse this recipe: collect.proton.backend_mode" in cli.stderr


@pytest.mark.integration
def test_aorta_venv_with_an_env_baseline(int_store: Store, tmp_path: Path) -> None:
    """(c) An aorta environments file with a venv and an env baseline, surveyed as a
    candidate: the baseline is in the stored report, and HIP_VISIBLE_DEVICES is
    measured as Proton's rejection for the queue-intercepting backends."""
    py = venv_python("3.8.0")
    venv = str(Path(py).parent.parent)
    side = sidecar(tmp_path, {"t380-hip": {"venv": venv, "env": {"HIP_VISIBLE_DEVICES": "0"}}})
    cli = survey_cli("run", "--aorta-environments", str(side), "--db", int_store.url, "--no-table")
    assert cli.returncode == 0 and "aorta:t380-hip" in cli.stderr, cli
    with int_store.session() as s:
        cand = queries.get_candidate(s, "aorta:t380-hip")
        run = queries.latest_complete(s, cand.id)
        assert run is not None and run.report is not None and run.triton_version == "3.8.0"
        origin = json.loads(run.report.raw)["origin"]
        assert origin["interpreter"]["env"] == {"HIP_VISIBLE_DEVICES": "0"} and origin["identity"]["env"]
        inherited = {(r.backend, r.mode): r.outcome for r in run.modes if r.env == "inherited" and not r.stub}
        clean = {(r.backend, r.mode): r.outcome for r in run.modes if r.env == "clean" and not r.stub}
    for backend in ("roctracer", "rocprofiler"):
        assert inherited[(backend, None)] == O.DEVICES_ENV_REJECTED, backend
        assert clean[(backend, None)] == O.LIBRARY_MISSING, backend  # the clean grid is unaffected
    assert inherited[("cupti", None)] != O.DEVICES_ENV_REJECTED
    # the check answers from that evidence (unchanged: nothing probed again) ...
    chk = survey_cli("check", "--aorta-environment", "t380-hip", "--aorta-environments", str(side), "--backend",
                     "roctracer", "--json", "--db", int_store.url)
    assert chk.returncode == exitcodes.CANNOT_RUN, chk
    res = json.loads(chk.stdout)
    assert res["cause"] == O.DEVICES_ENV_REJECTED and res["run_id"] == run.id
    assert "HIP_VISIBLE_DEVICES" in res["reason"] and "ROCR_VISIBLE_DEVICES" in res["fix"]
    # ... and the same venv without the baseline is another environment
    plain = survey_cli("check", py, "--backend", "roctracer", "--json", "--db", int_store.url)
    res = json.loads(plain.stdout)
    assert res["cause"] == "library_missing" and res["run_id"] != run.id
    with int_store.session() as s:
        ids = {queries.get_run(s, i).environment.identity for i in (run.id, res["run_id"])}  # type: ignore[union-attr]
    assert len(ids) == 2


# =========================================================================== podman: an image with a baseline
@pytest.mark.podman
def test_aorta_image_with_an_env_baseline(images: list[str], store: Store, tmp_path: Path) -> None:
    """An aorta docker environment: the baseline goes into the container with -e,
    and the probe inside measures it."""
    ref = f"{IMG}:triton-3.8.0"
    assert ref in images
    side = sidecar(tmp_path, {"img-hip": {"docker": ref, "env": {"HIP_VISIBLE_DEVICES": "0"}}})
    cli = survey_cli("run", "--aorta-environments", str(side), "--only", "img-hip", "--pull", "never",
                     "--engine", "podman", "--db", store.url, "--no-table")
    assert cli.returncode == 0 and "survey: 1 probed" in cli.stderr, cli
    with store.session() as s:
        cand = queries.get_candidate(s, "aorta:img-hip")
        run = queries.latest_complete(s, cand.id)
        assert run is not None and run.report is not None and cand.kind == "image"
        origin = json.loads(run.report.raw)["origin"]
        assert origin["image"]["env"] == {"HIP_VISIBLE_DEVICES": "0"} and origin["identity"]["env"]
        inherited = {(r.backend, r.mode): r.outcome for r in run.modes if r.env == "inherited" and not r.stub}
    assert inherited[("roctracer", None)] == O.DEVICES_ENV_REJECTED
