"""`survey check --recipe`: will each aorta cell leave a profile, link by link
(survey/aorta/links.py).

Real reports (tests/fixtures/reports: the H200's schema-3 and schema-2 reports),
real recipes (bench/aorta_truth/recipes, the ones run through aorta's own runner
on the H200, and their sidecar), and environments built for the test: a probe
report of a fake GPU stack (tests/envs.py, the real probe run against it), an
installed "aorta" whose workloads are classes of a module on PYTHONPATH.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from survey.core import exitcodes
from survey.evidence.ingest import ingest
from tests.conftest import report_bytes, survey_cli
from tests.envs import fake_gpu_stack, installed_aorta
from tests.helpers.aorta import link
from tests.helpers.probe import run_probe
from tests.helpers.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
TRUTH = ROOT / "bench" / "aorta_truth"
RECIPES = TRUTH / "recipes"
SIDECAR = TRUTH / "sidecar.json"
MEASURED = ROOT / "bench" / "measured" / "h200-2026-12-03-truth"


def cells_of(stdout: str) -> dict[str, dict]:
    rows = json.loads(stdout)
    assert isinstance(rows, list)
    return {r["cell"]: r for r in rows}


# The command the truth recipes ran (bench/aorta_truth/truth.py: aorta sweep run -- PY workload.py).
WORKLOAD_COMMAND = ("python3", str(TRUTH / "workload.py"))


def check(db: str, recipe: Path, *args: str, target: str | None = "h200", platform: str = "sm_90",
          command: tuple[str, ...] | None = WORKLOAD_COMMAND):
    return survey_cli("check", *([target] if target else []), "--recipe", str(recipe), *args, "--platform", platform,
                      "--json", "--db", db, *(("--", *command) if command else ()))


@pytest.fixture
def h200(tmp_path: Path, new_sqlite_store) -> str:
    """The H200's schema-3 report as `h200`, its schema-2 report as `h200-v2` (SQLite:
    these tests are about recipes, not the store)."""
    store = new_sqlite_store(tmp_path / "survey.db")
    with store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0-schema3.json"), candidate="h200", label="H200")
    with store.session() as s:
        ingest(s, report_bytes("h200-sm90-triton-3.6.0.json"), candidate="h200-v2", label="H200 (schema 2)")
    store.close()
    return store.url


@pytest.fixture(scope="module")
def fake_gpu_report(tmp_path_factory) -> bytes:
    """The real probe against a fake GPU stack (cupti and instrumentation; an unscoped
    kernel after a scoped one dies of SIGFPE in an instrumentation session, as
    Triton 3.6.0 on the H200 did), in an environment that sets HIP_VISIBLE_DEVICES=0."""
    env = fake_gpu_stack(tmp_path_factory.mktemp("fake-gpu"), "ok", profilers=("cupti", "instrumentation"))
    rep, _out = run_probe(sys.executable, ["probe", "--timeout", "30", "--capture-timeout", "30", "--only", "cupti",
                                           "--only", "instrumentation", "--only", "instrumentation:mma",
                                           "--only", "instrumentation:default",
                                           "--capture-size", "4096",
                                           "--capture-iters", "7"], pythonpath=env,
                          extra_env={"HIP_VISIBLE_DEVICES": "0"}, timeout=400)
    return json.dumps(rep).encode()


@pytest.fixture
def fake(tmp_path: Path, fake_gpu_report: bytes, new_sqlite_store) -> str:
    store = new_sqlite_store(tmp_path / "fake.db")
    with store.session() as s:
        ingest(s, fake_gpu_report, candidate="fake-gpu", label="a fake GPU stack")
    store.close()
    return store.url


def no_aorta(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


# =========================================================================== where a cell runs
def test_target_takes_the_sidecar_local_is_target_and_an_env_only_environment_its_baseline(
        h200: str, monkeypatch) -> None:
    """With TARGET, --aorta-environments is taken (its mitigations and environments):
    `local` is TARGET, an environment naming only `env` is TARGET with that baseline."""
    no_aorta(monkeypatch)
    cli = check(h200, RECIPES / "triage-gpu-smoke.yaml", "--aorta-environments", str(SIDECAR))
    assert cli.returncode == exitcodes.CANNOT_RUN, cli
    got = cells_of(cli.stdout)
    local = link(got["smoke-cupti-local"], "environment")
    assert (local["answer"], local["facts"]["checked_in"]) == ("yes", "h200")
    assert local["facts"]["layers"] == ["mitigation none"]
    side = link(got["smoke-auto-sidecar"], "environment")
    assert (side["answer"], side["cause"]) == ("no", "disabled")
    assert side["facts"]["layers"] == ["environment proton-disabled's env", "mitigation none"]
    [var] = side["facts"]["variables"]
    assert (var["name"], var["value"], var["set_by"]) == ("TRITON_PROTON_DISABLE", "1",
                                                         "environment proton-disabled's env")
    assert "triton.knobs.proton.disable" in var["basis"]
    assert got["smoke-auto-sidecar"]["checked_in"] == "h200"
    assert not [d for d in got["smoke-auto-sidecar"]["details"] if "not in the environment the cell names" in d]
    # without TARGET neither names an interpreter: said, with the fix
    cli = check(h200, RECIPES / "triage-gpu-smoke.yaml", "--aorta-environments", str(SIDECAR), target=None)
    for name in ("smoke-cupti-local", "smoke-auto-sidecar"):
        env = link(cells_of(cli.stdout)[name], "environment")
        assert (env["answer"], env["cause"]) == ("unknown", "environment_unresolved"), name
        assert "give TARGET" in env["fix"], name
    assert "only env" in link(cells_of(cli.stdout)["smoke-auto-sidecar"], "environment")["basis"]


# =========================================================================== probe axes are env overlays
def test_probe_axes_are_overlays_and_decide_the_answer(h200: str) -> None:
    """The recipe run on the H200 (bench/aorta_truth): TRITON_PROTON_DISABLE=1 from
    the mitigations file leaves no profile, CUDA_VISIBLE_DEVICES="" no GPU."""
    cli = check(h200, RECIPES / "probe-cupti.yaml", "--aorta-environments", str(SIDECAR))
    assert cli.returncode == exitcodes.CANNOT_RUN, cli
    got = cells_of(cli.stdout)
    assert [(n, r["verdict"], r["cause"], r["decided_by"]) for n, r in got.items()] == [
        ("none-none", "runs", None, None),
        ("none-proton-off", "cannot_run", "disabled", "environment"),
        ("none-no-gpus", "cannot_run", "no_gpu", "environment")]
    cell = link(got["none-proton-off"], "cell")
    assert cell["facts"]["variables"] == {"TRITON_PROTON_DISABLE": "1"}
    assert cell["facts"]["set_by"] == {"TRITON_PROTON_DISABLE": "proton-off"}
    assert "the CUDA runtime sees no device" in got["none-no-gpus"]["reason"]
    assert [lk["link"] for lk in got["none-none"]["links"]] == [
        "recipe", "options", "cell", "attach", "command", "collector", "environment", "start", "capture"]
    assert "50 kernel launches" in got["none-none"]["reason"]


def test_overlays_not_measured_are_unknown_and_others_are_said(h200: str, tmp_path: Path) -> None:
    side = tmp_path / "side.json"
    side.write_text(json.dumps({"version": 1, "mitigations": {
        "eager": {"CUDA_MODULE_LOADING": "EAGER"}, "enabled": {"TRITON_PROTON_DISABLE": "0"},
        "hip-none": {"HIP_VISIBLE_DEVICES": ""}}}))
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none, tf32_off]\n"
                      "diagnostic_axis: [eager, enabled, xnack, hip-none, no-such]\n"
                      "collect: {proton: {backend: cupti}}\n")
    cli = check(h200, recipe, "--aorta-environments", str(side))
    assert cli.returncode == exitcodes.NOT_ENOUGH_EVIDENCE, cli
    got = cells_of(cli.stdout)
    eager = got["none-eager"]
    assert (eager["verdict"], eager["cause"], eager["decided_by"]) == ("not_enough_evidence",
                                                                       "overlay_not_measured", "environment")
    assert "CUDA_MODULE_LOADING='EAGER'" in eager["reason"] and "was not measured" in eager["reason"]
    # a falsy TRITON_PROTON_DISABLE, a ROCm variable on NVIDIA and a library's own variable do not stop it
    for name in ("none-enabled", "none-xnack", "tf32_off-enabled", "none-hip-none"):
        assert got[name]["verdict"] == "runs", (name, got[name]["reason"])
    variables = {v["name"]: v for v in link(got["tf32_off-xnack"], "environment")["facts"]["variables"]}
    assert "not by Proton, Triton or the GPU runtime" in variables["DISABLE_TF32"]["basis"]
    assert "whose runtime does not read it" in variables["HSA_XNACK"]["basis"]
    unknown = link(got["none-no-such"], "cell")
    assert (unknown["answer"], unknown["cause"]) == ("unknown", "mitigation_unresolved")
    assert "'no-such' is not registered" in unknown["basis"] and str(side) in unknown["basis"]


def test_an_overlay_the_evidence_measured_is_answered_from_its_inherited_grid(fake: str, tmp_path: Path) -> None:
    """The probed environment set HIP_VISIBLE_DEVICES=0: the probe's inherited grid
    started each backend with it; a cell setting the same value is answered from
    that, another value is not measured."""
    side = tmp_path / "side.json"
    side.write_text(json.dumps({"version": 1, "mitigations": {"dev0": {"HIP_VISIBLE_DEVICES": "0"},
                                                              "dev1": {"HIP_VISIBLE_DEVICES": "1"}}}))
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
                      "diagnostic_axis: [dev0, dev1]\ncollect: {proton: {backend: cupti, mode: env}}\n")
    cli = check(fake, recipe, "--aorta-environments", str(side), target="fake-gpu", platform="x86_64")
    got = cells_of(cli.stdout)
    [v0] = link(got["none-dev0"], "environment")["facts"]["variables"]
    assert v0["answer"] == "yes" and "measured: proton.start(cupti) works with it set" in v0["basis"]
    assert got["none-dev0"]["verdict"] == "runs", got["none-dev0"]["reason"]
    env1 = link(got["none-dev1"], "environment")
    assert (env1["answer"], env1["cause"]) == ("unknown", "overlay_not_measured")
    assert "no GPU vendor" in env1["basis"]


# =========================================================================== the collector's reach
def test_in_process_workloads_get_no_collector(h200: str, monkeypatch) -> None:
    """gpu_smoke runs in aorta's own process: aorta 0.3.0 attaches Proton only to
    `_subprocess` (a probe recipe's command), so the cell leaves no profile, even
    where Proton itself works."""
    no_aorta(monkeypatch)
    cli = check(h200, RECIPES / "triage-gpu-smoke.yaml", "--aorta-environments", str(SIDECAR))
    got = cells_of(cli.stdout)
    row = got["smoke-cupti-local"]
    assert (row["verdict"], row["cause"], row["decided_by"], row["exit_code"]) == (
        "cannot_run", "not_attached", "collector", exitcodes.CANNOT_RUN)
    col = link(row, "collector")
    assert "'gpu_smoke' runs in aorta's own process" in col["basis"]
    assert col["source"] == "aorta 0.3.0's behaviour and workloads (no aorta installed here to read)"
    assert "mode: probe" in row["fix"]
    assert (link(row, "start")["answer"], link(row, "capture")["answer"]) == ("yes", "yes")  # Proton would work
    assert got["smoke-no-collector"]["verdict"] == "not_applicable"


def test_the_installed_aorta_s_workloads_are_read(h200: str, tmp_path: Path, monkeypatch) -> None:
    site = installed_aorta(tmp_path, "0.4.0")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("PYTHONPATH", str(site))
    answers = {}
    for workload in ("gpu_smoke", "wrapped", "unheard_of"):
        recipe = tmp_path / f"{workload}.yaml"
        recipe.write_text(f"schema_version: 1\nworkload: {workload}\ntrials: 1\nsteps: 1\ncollect: {{proton: "
                          "{backend: cupti}}\ncells:\n  - {name: a, mitigations: [none], environment: local}\n")
        [row] = json.loads(check(h200, recipe).stdout)
        answers[workload] = (link(row, "collector"), row["verdict"])
    smoke, wrapped, unheard = (answers[w][0] for w in ("gpu_smoke", "wrapped", "unheard_of"))
    assert smoke["answer"] == "no" and "(acme_aorta:GpuSmoke, from amd-aorta)" in smoke["basis"]
    assert "the installed aorta is 0.4.0" in smoke["source"] and str(sys.executable) in smoke["source"]
    assert wrapped["answer"] == "yes" and "is a SubprocessWorkload" in wrapped["basis"]
    assert answers["wrapped"][1] == "runs"
    assert unheard["answer"] == "unknown" and "not registered in the installed aorta" in unheard["basis"]


# =========================================================================== instrumentation
def test_instrumentation_cells_without_the_kernel_shape_records_say_what_is_measured(h200: str) -> None:
    """The H200's report holds the scoped capture (three scopes with cycles) but
    predates the unscoped and mixed sessions: the cell collects on the condition that
    every kernel is scoped (measured), and says the other shapes were not measured;
    never a no."""
    cli = check(h200, RECIPES / "probe-instrumentation.yaml", "--aorta-environments", str(SIDECAR))
    assert cli.returncode == exitcodes.CANNOT_RUN, cli  # the proton-off cell
    got = cells_of(cli.stdout)
    row = got["none-none"]
    assert (row["verdict"], row["exit_code"], row["cause"], row["decided_by"]) == (
        "conditional", exitcodes.CONDITIONAL, "depends_on_kernels", "capture")
    assert row["condition"].startswith("collects if every Triton kernel in the session carries a proton.language "
                                       "scope"), row["condition"]
    assert "launches scoped and unscoped Triton kernels: not measured" in row["condition"]
    kernels = link(row, "capture")["facts"]["kernels"]
    assert {k: v["answer"] for k, v in kernels.items()} == {"scoped": "yes", "plain": "unknown", "mixed": "unknown"}
    assert "3 scopes with cycles/normalized_cycles (gelu, load, store)" in kernels["scoped"]["basis"]
    assert got["none-proton-off"]["cause"] == "disabled"


def test_instrumentation_answers_with_the_condition_each_kernel_shape_measured(fake: str) -> None:
    """Where the report has every shape (a fake GPU stack that, like Triton 3.6.0 on
    the H200, records scopes of a scoped kernel, nothing of an unscoped one, and dies
    of SIGFPE where one session launches both): the answer is the condition, exit 8,
    never a confident no from the mixed session alone (the old answer: cannot_run)."""
    for recipe in ("probe-instrumentation.yaml", "probe-instrumentation-env.yaml", "probe-mma-env.yaml",
                   "probe-mma-cli.yaml", "probe-cta-cli.yaml", "pcsampling-scoped-cli.yaml"):
        cli = check(fake, RECIPES / recipe, "--aorta-environments", str(SIDECAR), target="fake-gpu",
                    platform="x86_64")
        row = cells_of(cli.stdout)["none-none"]
        assert (row["verdict"], row["exit_code"], row["cause"], row["decided_by"]) == (
            "conditional", exitcodes.CONDITIONAL, "depends_on_kernels", "capture"), (recipe, row["reason"])
        assert row["condition"] == (
            "collects if every Triton kernel in the session carries a proton.language scope; where no Triton kernel "
            "in the session carries a scope, it records nothing on this build (empty_capture); where the session "
            "launches scoped and unscoped Triton kernels, it dies on this build (SIGFPE) (measured)"), recipe
        kernels = link(row, "capture")["facts"]["kernels"]
        assert {k: v["answer"] for k, v in kernels.items()} == {"scoped": "yes", "plain": "no", "mixed": "no"}
    one = check(fake, RECIPES / "instr-scoped-env.yaml", target="fake-gpu", platform="x86_64")
    assert one.returncode == exitcodes.CONDITIONAL, one
    mma = cells_of(check(fake, RECIPES / "probe-mma-env.yaml", "--aorta-environments", str(SIDECAR),
                         target="fake-gpu", platform="x86_64").stdout)["none-none"]
    assert mma["mode"] == "mma" and "(mode mma)" in link(mma, "capture")["facts"]["kernels"]["mixed"]["basis"]


def test_a_granularity_the_build_refuses_is_mode_refused(fake: str, tmp_path: Path) -> None:
    """The current probe classifies Triton 3.6.0's refusal at the kernel's exit."""
    warp = tmp_path / "warp.yaml"
    warp.write_text((RECIPES / "probe-cta-env.yaml").read_text().replace("granularity: cta", "granularity: warp"))
    [row] = json.loads(check(fake, warp, target="fake-gpu", platform="x86_64").stdout)
    assert (row["verdict"], row["cause"], row["decided_by"]) == ("cannot_run", "mode_refused", "start")
    assert "mode=default:granularity=warp: this build refuses it" in row["reason"]
    assert "Only warp granularity is supported for now" in row["reason"]


# =========================================================================== options past backend and mode
def test_options_past_backend_and_mode_from_the_option_records(h200: str, tmp_path: Path) -> None:
    def one(recipe: Path, candidate: str = "h200") -> dict:
        cli = check(h200, recipe, "--aorta-environments", str(SIDECAR), target=candidate)
        [row] = json.loads(cli.stdout)
        assert cli.returncode == row["exit_code"]
        return row

    for name in ("probe-cta-env.yaml", "probe-warp-group-env.yaml"):
        row = one(RECIPES / name)
        assert (row["verdict"], row["cause"], row["decided_by"]) == ("cannot_run", "option_failed", "start"), name
        assert "PassManager::run failed" in row["reason"] and "mode=default:granularity=" in row["reason"], name
    # this report's probe kept the granularity=warp failure raw (the rule came later): said as measured
    warp = tmp_path / "warp.yaml"
    warp.write_text((RECIPES / "probe-cta-env.yaml").read_text().replace("granularity: cta", "granularity: warp"))
    row = one(warp)
    assert (row["cause"], row["decided_by"]) == ("option_failed", "start")
    assert "Only warp granularity is supported for now" in row["reason"]
    trace = one(RECIPES / "probe-cupti-trace.yaml")
    assert trace["verdict"] == "runs" and "data=trace measured to work here" in trace["reason"]
    assert "with data=trace recorded chrome_trace: 50 kernel launches" in trace["reason"]
    assert one(RECIPES / "probe-cupti-python.yaml")["verdict"] == "runs"
    # under mode: cli, Triton 3.6.0's command line drops the mode: measured, not assumed
    cta_cli = one(RECIPES / "probe-cta-cli.yaml")
    assert cta_cli["mode"] is None and "compiled its session with default (measured)" in cta_cli["mode_dropped"]
    assert "dropped" in link(cta_cli, "start")["basis"]
    # a report without option records: not measured, said
    old = one(RECIPES / "probe-cupti-python.yaml", candidate="h200-v2")
    assert (old["verdict"], old["cause"], old["decided_by"]) == ("not_enough_evidence", "not_checked", "start")
    assert "context=python was not measured: this report predates the option checks" in old["reason"]


# =========================================================================== the H200 truth
def truth_module():
    return load_script(TRUTH / "truth.py", "aorta_truth")


def test_the_h200_truth_agrees_cell_by_cell(tmp_path: Path) -> None:
    """bench/aorta_truth.sh compare's rows, on the stored H200 record (2026-12-04: the
    probe's report with every kernel shape, the commands aorta ran, the overlay runs
    `survey check --measure` made there): all 43 cells agree with what aorta's runner
    really left. The instrumentation cells answer with their condition, which for
    each workload's kernels (scoped, unscoped, both) is what happened."""
    truth = truth_module()
    record = ROOT / "bench" / "measured" / "h200-2026-12-04-truth"
    db = f"sqlite:///{tmp_path / 'truth.db'}"
    ing = survey_cli("ingest", str(record / "report.json"), "--candidate", truth.CANDIDATE, "--new", "--db", db)
    assert ing.returncode == 0, ing
    overlays = truth.overlay_reports(str(record))
    assert len(overlays) == 4
    for name, path in overlays:
        assert survey_cli("ingest", path, "--candidate", name, "--new", "--db", db).returncode == 0, name
    doc = json.loads((record / "truth.json").read_text())

    def run(recipe: str, command):
        cli = survey_cli(*truth.check_argv(recipe, "sm_90", db, command))
        return cli.returncode, cli.stdout, cli.stderr

    rows = truth.compare_rows(doc, run)
    assert len(rows) == 43
    assert [(r[0], r[1], r[3]) for r in rows if not r[4]] == []
    said = {(r[0], r[1]): r[3] for r in rows}
    assert said[("instr-scoped-cli.yaml", "none-none")].endswith("-> profile for scoped kernels")
    assert said[("instr-plain-env.yaml", "none-none")].endswith("-> none for plain kernels")
    assert said[("probe-instrumentation.yaml", "none-none")].endswith("-> none for mixed kernels")
    assert said[("cmd-shell-cli.yaml", "none-none")] == "cannot_run (command_refused)"
    assert said[("probe-overlays.yaml", "launch-blocking-triton-debug")] == "runs (None)"
    assert said[("unknown-and-no.yaml", "none-max-connections")] == "cannot_run (backend_absent)"


def test_overlay_cells_answer_from_the_measured_overlay_and_cite_it(tmp_path: Path) -> None:
    """The overlay cells of the H200 record: without the overlay runs, unknown (never a
    guess from a variable's name); with them stored, answered from them, each citing
    its run."""
    truth = truth_module()
    record = ROOT / "bench" / "measured" / "h200-2026-12-04-truth"
    db = f"sqlite:///{tmp_path / 'o.db'}"
    assert survey_cli("ingest", str(record / "report.json"), "--candidate", truth.CANDIDATE, "--new", "--db",
                      db).returncode == 0
    recipe = RECIPES / "probe-overlays.yaml"
    before = cells_of(check(db, recipe, "--aorta-environments", str(SIDECAR), target=truth.CANDIDATE).stdout)
    assert {n: (r["verdict"], r["cause"]) for n, r in before.items()} == {
        n: ("not_enough_evidence", "overlay_not_measured") for n in before}
    assert "--measure" in before["none-eager-loading"]["fix"]
    for name, path in truth.overlay_reports(str(record)):
        assert survey_cli("ingest", path, "--candidate", name, "--new", "--db", db).returncode == 0
    after = cells_of(check(db, recipe, "--aorta-environments", str(SIDECAR), target=truth.CANDIDATE).stdout)
    assert {n: r["verdict"] for n, r in after.items()} == {n: "runs" for n in before}
    row = after["launch-blocking-triton-debug"]
    assert row["candidate"] == "aorta-truth +CUDA_LAUNCH_BLOCKING=1,TRITON_DEBUG=1"
    env = link(row, "environment")
    assert env["source"].startswith("measured: run #") and "aorta-truth +CUDA_LAUNCH_BLOCKING=1,TRITON_DEBUG=1" in \
        env["source"]
    assert "probed with CUDA_LAUNCH_BLOCKING=1, TRITON_DEBUG=1 set" in " ".join(row["details"])


# =========================================================================== against aorta 0.3.0 itself
# Runs in aorta's venv: its built-in mitigations, which workloads are SubprocessWorkloads,
# the variables each probe cell of the truth recipes sets (its own loader), what its proton
# wrap does to the device variables, and the command line it builds.
AORTA_SAYS = r"""
import json, sys
from importlib import metadata
from pathlib import Path
from aorta.registry.mitigations import BUILTIN_MITIGATIONS
from aorta.workloads._subprocess import SubprocessWorkload
from aorta.triage.recipe import load_recipe
from aorta.instrumentation.proton import wrap_argv, build_argv_prefix
sidecar = Path(sys.argv[1])
cases = json.loads(sys.argv[2])
out = {"builtins": BUILTIN_MITIGATIONS, "workloads": {}, "cells": {}, "wraps": [], "argv": []}
for ep in metadata.entry_points(group="aorta.workloads"):
    out["workloads"][ep.name] = issubclass(ep.load(), SubprocessWorkload)
for path in sys.argv[3:]:
    r = load_recipe(Path(path), sidecar_files=(sidecar,))
    if r.probe_extras is not None:
        out["cells"][Path(path).name] = r.probe_extras.cell_envs
for backend, env in cases["wraps"]:
    out["wraps"].append(wrap_argv(["python", "x.py"], "/o", {"backend": backend}, env=env))
for opts in cases["argv"]:
    out["argv"].append(build_argv_prefix("/o", opts, python="python"))
print(json.dumps(out))
"""

WRAPS = [("rocprofiler", {"HIP_VISIBLE_DEVICES": "1"}), ("auto", {"CUDA_VISIBLE_DEVICES": "0"}),
         ("auto", {"CUDA_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "2"}), ("cupti", {"HIP_VISIBLE_DEVICES": "1"}),
         ("roctracer", {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "3"}), ("instrumentation", {})]
ARGV = [{}, {"backend": "instrumentation", "granularity": "cta", "context": "python"}, {"data": "trace"}]


@pytest.mark.integration
def test_our_reading_of_aorta_is_aorta_s(tmp_path: Path) -> None:
    from survey.aorta import mitigations as M
    from survey.aorta import overlays
    from survey.aorta import recipe as R
    from survey.aorta.check import attach_link
    from survey.aorta.workloads import WORKLOADS, collector_reach
    from survey.environments.launchers.pip import PipLauncher

    py = PipLauncher(["amd-aorta==0.3.0"]).obtain().python  # a real aorta 0.3.0 venv (cached)
    assert py is not None
    recipes = sorted(RECIPES.glob("*.yaml"))
    proc = subprocess.run([py, "-c", AORTA_SAYS, str(SIDECAR), json.dumps({"wraps": WRAPS, "argv": ARGV}),
                           *map(str, recipes)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    says = json.loads(proc.stdout)
    assert says["builtins"] == M.BUILTINS
    assert says["workloads"] == WORKLOADS
    registry = M.load_mitigations(SIDECAR, entry_points=False)
    for name, cells in says["cells"].items():
        ours = {c.name: M.overlay(registry, c.mitigations, probe=True).env for c in R.load_recipe(RECIPES / name).cells}
        assert ours == cells, name
    assert len(says["cells"]) == len(recipes) - 1  # every probe recipe (the triage one has no axes)
    for (backend, env), theirs in zip(WRAPS, says["wraps"], strict=True):
        layered = {k: (v, "extra_env") for k, v in env.items()}
        overlays.device_translation(backend, layered)
        unset = [theirs[i + 1] for i, a in enumerate(theirs) if a == "-u"]
        assigned = dict(a.split("=", 1) for a in theirs[:theirs.index("python")] if "=" in a)
        assert {k: v for k, (v, _l) in layered.items()} == {**{k: v for k, v in env.items() if k not in unset},
                                                             **assigned}, (backend, env)
    for opts, theirs in zip(ARGV, says["argv"], strict=True):
        cfg = R.parse_recipe({"mode": "probe", "mitigation_axis": ["none"], "diagnostic_axis": ["none"],
                              "collect": {"proton": opts}}).cells[0].proton
        assert cfg is not None
        assert attach_link(cfg).facts["argv"] == [a if a != "/o/proton" else "<dir>/proton" for a in theirs]
    # the installed aorta's own entry points, read where it is installed
    reach = collector_reach("triage", "gpu_smoke", python=py)
    assert reach.answer == "no" and reach.aorta.startswith("aorta 0.3.0's behaviour; workloads read from")
    assert collector_reach("triage", "_subprocess", python=py).answer == "no"


# =========================================================================== one definite no
def test_one_definite_no_decides_whatever_else_is_unknown(h200: str) -> None:
    """rocprofiler on a build without it, with a variable whose effect was never
    measured: a no (naming the backend), not "not enough evidence" (the old answer)."""
    cli = check(h200, RECIPES / "unknown-and-no.yaml", "--aorta-environments", str(SIDECAR))
    assert cli.returncode == exitcodes.CANNOT_RUN, cli
    [row] = json.loads(cli.stdout)
    assert (row["verdict"], row["cause"], row["decided_by"]) == ("cannot_run", "backend_absent", "start"), row
    assert "rocprofiler" in row["reason"]
    assert link(row, "environment")["answer"] == "unknown"
    assert link(row, "environment")["cause"] == "overlay_not_measured"


def test_a_run_time_no_in_evidence_without_the_cell_s_variable_is_not_definite(fake: str, tmp_path: Path) -> None:
    """A capture that died in evidence probed without a variable the cell sets (whose
    effect is unknown) does not decide: that evidence may not be the trial's."""
    side = tmp_path / "side.json"
    side.write_text(json.dumps({"version": 1, "mitigations": {"blocking": {"CUDA_LAUNCH_BLOCKING": "1"}}}))
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
                      "diagnostic_axis: [blocking]\ncollect: {proton: {backend: instrumentation, mode: env}}\n")
    [row] = json.loads(check(fake, recipe, "--aorta-environments", str(side), target="fake-gpu",
                             platform="x86_64").stdout)
    assert (row["verdict"], row["decided_by"]) == ("not_enough_evidence", "environment"), row


# =========================================================================== the command decides mode: cli
COMMAND_SHAPES = [
    # (recipe, command, verdict, cause)
    ("probe-cupti.yaml", ("python3", "workload.py"), "runs", None),
    ("cmd-module-cli.yaml", ("python3", "-m", "workload"), "cannot_run", "command_refused"),
    ("cmd-module-env.yaml", ("python3", "-m", "workload"), "runs", None),
    ("cmd-pytest-cli.yaml", ("python3", "-m", "pytest", "-q", "test_workload.py"), "runs", None),
    ("cmd-pytest-cli.yaml", ("/venv/bin/pytest", "-q", "test_workload.py"), "runs", None),
    ("cmd-shell-cli.yaml", ("bash", "run.sh"), "cannot_run", "command_refused"),
    ("cmd-shell-env.yaml", ("bash", "run.sh"), "runs", None),
    ("cmd-console-cli.yaml", ("/venv/bin/truth-workload",), "cannot_run", "command_refused"),
    ("cmd-console-env.yaml", ("/venv/bin/truth-workload",), "runs", None),
    ("probe-cupti.yaml", ("python3", "-X", "dev", "workload.py"), "cannot_run", "command_refused"),
    ("probe-cupti.yaml", ("python3", "-u"), "cannot_run", "command_refused"),
]


@pytest.mark.parametrize(("recipe", "command", "verdict", "cause"), COMMAND_SHAPES)
def test_the_command_decides_mode_cli(h200: str, monkeypatch, recipe: str, command: tuple[str, ...], verdict: str,
                                      cause: str | None) -> None:
    """aorta's mode: cli wraps only a Python script launch (and pytest): a module, a
    shell script or a console script is refused at setup; mode: env runs any
    command. With no aorta importable, from the declared model, which says so."""
    no_aorta(monkeypatch)
    cli = check(h200, RECIPES / recipe, "--aorta-environments", str(SIDECAR), command=command)
    row = cells_of(cli.stdout)["none-none"]
    assert (row["verdict"], row["cause"]) == (verdict, cause), row["reason"]
    cmd = link(row, "command")
    assert cmd["source"].startswith("the declared model of aorta 0.3.0 (survey/aorta/model.py)")
    assert cmd["facts"]["command"] == list(command)
    if cause == "command_refused":
        assert row["decided_by"] == "command" and "before anything launches" in row["reason"]


def test_no_command_under_mode_cli_is_unknown_and_said(h200: str, monkeypatch) -> None:
    no_aorta(monkeypatch)
    cli = check(h200, RECIPES / "probe-cupti.yaml", "--aorta-environments", str(SIDECAR), command=None)
    row = cells_of(cli.stdout)["none-none"]
    assert (row["verdict"], row["cause"], row["decided_by"]) == ("not_enough_evidence", "command_not_given",
                                                                 "command")
    assert "-- COMMAND" in row["fix"]
    env = cells_of(check(h200, RECIPES / "probe-cupti-env.yaml", command=None).stdout)["none-none"]
    assert env["verdict"] == "runs"


def test_a_command_needs_a_recipe(h200: str) -> None:
    cli = survey_cli("check", "h200", "--backend", "cupti", "--db", h200, "--", "python3", "x.py")
    assert cli.returncode == exitcodes.USAGE and "needs --recipe" in cli.stderr
    cli = survey_cli("check", "h200", "--recipe", str(RECIPES / "probe-cupti.yaml"), "--db", h200, "--")
    assert cli.returncode == exitcodes.USAGE and "nothing after --" in cli.stderr


@pytest.mark.integration
def test_aorta_s_own_code_and_the_declared_model_agree(h200: str, monkeypatch) -> None:
    """The same recipes and commands judged twice: by aorta 0.3.0's own loader and
    proton wrap (a real amd-aorta venv; its `aorta` on PATH), and by the declared
    model (no aorta anywhere). Every link's answer must agree; each says which it used."""
    from survey.environments.launchers.pip import PipLauncher

    py = PipLauncher(["amd-aorta==0.3.0"]).obtain().python  # a real aorta 0.3.0 venv (cached)
    assert py is not None, "amd-aorta 0.3.0 could not be installed (PyPI or the pip cache)"
    aorta_bin = str(Path(py).parent)
    cases = COMMAND_SHAPES + [(r.name, WORKLOAD_COMMAND, None, None) for r in sorted(RECIPES.glob("*.yaml"))]
    for recipe, command, _verdict, _cause in cases:
        answers = {}
        for who, path in (("model", "/usr/bin:/bin"), ("aorta", f"{aorta_bin}:/usr/bin:/bin")):
            monkeypatch.setenv("PATH", path)
            cli = check(h200, RECIPES / recipe, "--aorta-environments", str(SIDECAR), command=command)
            answers[who] = cells_of(cli.stdout)
        for name, row in answers["model"].items():
            theirs = answers["aorta"][name]
            assert row["verdict"] == theirs["verdict"], (recipe, name, row["reason"], theirs["reason"])
            for lk in ("recipe", "command"):
                if any(x["link"] == lk for x in row["links"]):
                    assert link(row, lk)["answer"] == link(theirs, lk)["answer"], (recipe, name, lk)
                    assert link(row, lk)["source"].startswith("the declared model of aorta 0.3.0")
                    assert link(theirs, lk)["source"].startswith("aorta 0.3.0's own code ("), link(theirs, lk)
