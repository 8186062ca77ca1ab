"""The GELU capture: payload exit codes, capture outcomes, harvesting, and the
real H200 capture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes import capture, classify
from probes import outcomes as O
from tests.conftest import report_bytes
from tests.envs import fake_gpu_stack, pypi_venv
from tests.helpers.probe import run_probe

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--capture-size", "4096", "--capture-iters", "7"]


def captures(report: dict) -> dict:
    return {(c["backend"], c["mode"]): c for c in report["captures"]}


def test_h200_capture_is_parsed() -> None:
    rep = json.loads(report_bytes("h200-triton-3.6.0.json"))
    cap = captures(rep)[("cupti", None)]
    assert cap["outcome"] == O.OK and cap["exit_code"] == 0
    assert cap["kernel_count"] == cap["iters"] == 50
    assert cap["top_kernel"] == "gelu_kernel" and cap["gpu_time_ns"] > 0
    assert 0 <= cap["max_abs_err"] <= 1e-6
    # the metrics in the report are what the kept artifact says
    assert capture.parse_hatchet(cap["artifact"]["content"])["kernel_count"] == 50
    pcs = captures(rep)[("cupti", "pcsampling")]
    assert pcs["outcome"] == O.OK and pcs["kernel_count"] == 50


def test_payload_on_a_capture_that_works(tmp_path: Path) -> None:
    env = fake_gpu_stack(tmp_path, "ok")
    rep = run_probe(sys.executable, ["probe", "--timeout", "20", "--only", "cupti", "--no-auto-capture",
                                     "--capture", "cupti"] + SMALL, pythonpath=env)[0]
    cap = captures(rep)[("cupti", None)]
    assert cap["outcome"] == O.OK, cap
    assert cap["kernel_count"] == 7 and cap["max_abs_err"] <= 1e-6
    assert cap["artifact"]["kept"] and cap["artifact"]["sha256"]


def test_empty_capture_is_its_own_outcome(tmp_path: Path) -> None:
    env = fake_gpu_stack(tmp_path, "empty")
    rep = run_probe(sys.executable, ["probe", "--timeout", "20", "--only", "cupti", "--no-auto-capture",
                                     "--capture", "cupti"] + SMALL, pythonpath=env)[0]
    cap = captures(rep)[("cupti", None)]
    assert cap["outcome"] == O.EMPTY_CAPTURE and cap["exit_code"] == 0 and cap["kernel_count"] == 0


def test_hang_after_capture_keeps_the_artifact(tmp_path: Path) -> None:
    env = fake_gpu_stack(tmp_path, "hang_at_exit")
    rep = run_probe(sys.executable, ["probe", "--timeout", "3", "--capture-timeout", "5", "--only", "cupti",
                                     "--no-auto-capture", "--capture", "cupti"] + SMALL, pythonpath=env)[0]
    # the start check itself started, finalized, then hung on the way out
    start = {(m["backend"], m["mode"]): m for m in rep["modes"]}[("cupti", None)]
    assert start["outcome"] == O.OK and start["hung_at_exit"] is True
    cap = captures(rep)[("cupti", None)]
    assert cap["outcome"] == O.HANG_AFTER_CAPTURE and cap["timed_out"] is True
    assert cap["kernel_count"] == 7 and cap["artifact"]["content"]


def test_payload_standalone_without_a_backend_takes_no_capture(tmp_path: Path) -> None:
    env = fake_gpu_stack(tmp_path, "ok")
    proc = subprocess.run([sys.executable, str(ROOT / "probes" / "gelu.py"), "--size", "1000", "--iters", "3"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(env)})
    assert proc.returncode == 0 and "gelu: PASS" in proc.stdout
    assert not list(tmp_path.glob("*.hatchet"))


@pytest.mark.integration
def test_no_gpu_is_the_capture_outcome_on_a_real_release() -> None:
    venv = pypi_venv("3.8.0")
    rep = run_probe(venv.python, ["probe", "--timeout", "60", "--only", "cupti", "--capture", "cupti",
                                  "--capture", "rocprofiler:pcsampling"])[0]
    cap = captures(rep)
    assert cap[("cupti", None)]["outcome"] == O.NO_GPU and cap[("cupti", None)]["exit_code"] == 2
    assert "no GPU" in cap[("cupti", None)]["message"]
    proc = subprocess.run([venv.python, str(ROOT / "probes" / "gelu.py"), "--backend", "cupti"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "gelu: no GPU" in proc.stdout
    old = pypi_venv("3.7.1")
    proc = subprocess.run([old.python, str(ROOT / "probes" / "gelu.py"), "--backend", "rocprofiler"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "no get_available_profilers" in proc.stdout


# --------------------------------------------------------------------------- what a capture recorded
def test_instrumentation_is_given_a_scoped_kernel_and_its_scopes_are_recorded(tmp_path: Path) -> None:
    """Instrumentation records cycles per proton.language scope; a kernel without
    scopes leaves it nothing to record (the H200's empty captures). The payload gives
    it the scoped kernel, enabling the triton semantic first (refused otherwise, as
    in Triton 3.6.0), and the capture reports the scopes the profile holds."""
    env = fake_gpu_stack(tmp_path, "ok", profilers=("cupti", "instrumentation"))
    rep = run_probe(sys.executable, ["probe", "--timeout", "20", "--only", "instrumentation", "--only", "cupti",
                                     "--no-auto-capture", "--capture", "instrumentation", "--capture", "cupti"]
                    + SMALL, pythonpath=env)[0]
    cap = captures(rep)[("instrumentation", None)]
    assert cap["outcome"] == O.OK, cap
    assert cap["kernel"] == "scoped" and cap["expected"] == "scopes"
    assert cap["scopes"]["enable_semantic"] == "called" and cap["scopes"]["compiled"] is True
    rec = cap["recorded"]
    assert [(s["kernel"], s["name"]) for s in rec["scopes"]] == [
        ("gelu_scoped_kernel", "load"), ("gelu_scoped_kernel", "gelu"), ("gelu_scoped_kernel", "store")]
    assert rec["cycle_metrics"] == ["cycles", "normalized_cycles"] and rec["format"] == "hatchet"
    assert all(s["cycles"] == 7000.0 for s in rec["scopes"])  # 7 launches, each recorded
    plain = captures(rep)[("cupti", None)]  # the tracing backend keeps the plain kernel, timed per launch
    assert plain["outcome"] == O.OK and plain["kernel"] == "plain" and plain["expected"] == "kernels"
    assert plain["recorded"]["launches"] == 7 and plain["recorded"]["kernels"] == ["gelu_kernel"]
    assert plain["recorded"]["scopes"] == []


def test_a_build_without_scopes_is_reported_raw_not_as_an_empty_capture(tmp_path: Path) -> None:
    env = fake_gpu_stack(tmp_path, "ok", profilers=("instrumentation",), language=False)
    rep = run_probe(sys.executable, ["probe", "--timeout", "20", "--only", "instrumentation", "--no-auto-capture",
                                     "--capture", "instrumentation"] + SMALL, pythonpath=env)[0]
    cap = captures(rep)[("instrumentation", None)]
    assert cap["outcome"] == O.ERROR and cap["expected"] is None and cap["kernel"] == "plain"
    assert "triton.profiler.language does not import: ModuleNotFoundError" in cap["scopes"]["error"]
    assert cap["scopes"]["error"] in cap["message"]
    assert cap["max_abs_err"] <= 1e-6  # the plain kernel still ran and passed its self-check


def test_a_tracing_capture_without_kernels_is_still_empty(tmp_path: Path) -> None:
    env = fake_gpu_stack(tmp_path, "empty")
    rep = run_probe(sys.executable, ["probe", "--timeout", "20", "--only", "cupti", "--no-auto-capture",
                                     "--capture", "cupti"] + SMALL, pythonpath=env)[0]
    cap = captures(rep)[("cupti", None)]
    assert cap["outcome"] == O.EMPTY_CAPTURE and cap["expected"] == "kernels"
    assert cap["recorded"]["launches"] == 0 and cap["recorded"]["nodes"] == 0


# --------------------------------------------------------------------------- options past the mode
def options(report: dict) -> dict:
    return {(o["option"], o["value"], o["capture"]["backend"]): o["capture"] for o in report["options"]}


def test_options_past_the_mode_are_each_measured_in_a_process_of_their_own(tmp_path: Path) -> None:
    """context, data, the instrumentation mode as aorta renders it with each
    granularity, and Proton's command line: one capture each, with its own timeout
    (here data=trace never finishes writing; only that option says so)."""
    env = fake_gpu_stack(tmp_path, "trace_hangs", profilers=("cupti", "instrumentation"))
    rep = run_probe(sys.executable, ["probe", "--timeout", "20", "--capture-timeout", "8", "--only", "cupti",
                                     "--only", "instrumentation"] + SMALL, pythonpath=env, timeout=300)[0]
    opts = options(rep)
    granularities = ("cta", "warp", "warp_2", "warp_4", "warp_8", "warp_group", "warp_group_2", "warp_group_4",
                     "warp_group_8")
    assert set(opts) == (
        {(o, v, b) for b in ("cupti", "instrumentation")
         for o, v in (("context", "python"), ("data", "trace"), ("cli", None))}
        | {("mode", f"{n}:granularity={g}", "instrumentation") for n in ("default", "mma") for g in granularities}
        | {("cli", "mma", "instrumentation")}
        | {("kernels", shape, "instrumentation") for shape in ("scoped", "plain", "mixed")})
    dirs = {os.path.dirname(next(a for a in c["argv"] if a.endswith("gelu.py"))) for c in opts.values()}
    assert len(dirs) == len(opts)  # a process (and a directory) each
    for key, cap in opts.items():
        if key[0] == "data":
            assert cap["outcome"] == O.TIMEOUT and cap["timed_out"] is True, cap  # cut at its timeout, not waited
        elif key[:2] == ("kernels", "mixed"):  # this build, like Triton 3.6.0, dies when both kinds share a session
            assert cap["outcome"] == O.CRASH and cap["signal"] == "SIGFPE" and cap["kernel"] == "mixed", cap
            assert cap["argv"][cap["argv"].index("--kernel") + 1] == "mixed" and cap["expected"] == "scopes"
        elif key[:2] == ("kernels", "plain"):  # an unscoped kernel alone: this build records nothing of it
            assert cap["outcome"] == O.EMPTY_CAPTURE and cap["kernel"] == "plain", cap
            assert cap["argv"][cap["argv"].index("--kernel") + 1] == "plain" and cap["expected"] == "kernels"
            assert cap["recorded"]["scopes"] == [] and not cap["recorded"]["launches"]
        elif key[:2] == ("kernels", "scoped"):
            assert cap["outcome"] == O.OK and cap["kernel"] == "scoped" and cap["expected"] == "scopes", cap
            assert [s["name"] for s in cap["recorded"]["scopes"]] == ["load", "gelu", "store"]
        elif key[0] == "mode":  # this build, like Triton 3.6.0, refuses a granularity at the kernel's exit
            assert cap["outcome"] == O.UNSUPPORTED_MODE and cap["rule"] == "granularity-not-warp", (key, cap)
            assert cap["exit_code"] == 2 and "Only warp granularity is supported for now" in cap["message"]
            assert cap["mode"] == key[1] and cap["recorded"] is None
        else:
            assert cap["outcome"] == O.OK, (key, cap)
        assert cap["iters"] == 5  # an option capture says whether it works, not what it costs
    shapes = [(o["value"], o["capture"]["mode"]) for o in rep["options"] if o["option"] == "kernels"]
    assert shapes == [(k, m) for m in (None, "mma") for k in ("scoped", "plain", "mixed")]  # each shape, each mode
    assert opts[("context", "python", "cupti")]["context"] == "python"
    assert [s["name"] for s in opts[("context", "python", "instrumentation")]["recorded"]["scopes"]] == [
        "load", "gelu", "store"]


def test_trace_data_is_read_as_a_chrome_trace(tmp_path: Path) -> None:
    """data=trace: kernel events for a tracing backend, and for instrumentation one
    event per scope, warp and launch, whose cycles are dur x Frequency (MHz)."""
    env = fake_gpu_stack(tmp_path, "ok", profilers=("cupti", "instrumentation"))
    rep = run_probe(sys.executable, ["probe", "--timeout", "20", "--only", "cupti", "--only", "instrumentation"]
                    + SMALL, pythonpath=env)[0]
    cap = options(rep)[("data", "trace", "cupti")]
    assert cap["outcome"] == O.OK and cap["data"] == "trace"
    rec = cap["recorded"]
    assert rec["format"] == "chrome_trace" and rec["trace_events"] == 5 and rec["launches"] == 5
    assert rec["kernels"] == ["gelu_kernel"] and rec["scopes"] == []
    assert rec["files"] == [{"name": "profile.chrome_trace", "bytes": cap["artifact"]["bytes"]}]
    ins = options(rep)[("data", "trace", "instrumentation")]
    assert ins["outcome"] == O.OK and ins["expected"] == "scopes", ins
    rec = ins["recorded"]
    assert rec["launches"] == 0 and rec["trace_events"] == 3 * 4 * 5
    assert [(s["kernel"], s["name"], s["cycles"]) for s in rec["scopes"]] == [
        ("gelu_scoped_kernel", n, 1.5 * 1000.0 * 4 * 5) for n in ("gelu", "load", "store")]


def test_the_command_line_is_measured_with_the_mode_its_session_really_uses(tmp_path: Path) -> None:
    """aorta's mode: cli runs the script under python -m triton.profiler.proton;
    given --mode, the session compiles with whatever mode the command line really
    passed on (this command line, like Triton 3.6.0's, parses it and drops it)."""
    env = fake_gpu_stack(tmp_path, "ok", profilers=("instrumentation",))
    rep = run_probe(sys.executable, ["probe", "--timeout", "20", "--only", "instrumentation"] + SMALL,
                    pythonpath=env)[0]
    cli = options(rep)[("cli", "mma", "instrumentation")]
    assert cli["attach"] == "cli" and cli["argv"][1:3] == ["-m", "triton.profiler.proton"]
    assert cli["argv"][cli["argv"].index("--mode") + 1] == "mma"
    assert cli["outcome"] == O.OK and cli["session_mode"] == "default"
    assert [s["name"] for s in cli["recorded"]["scopes"]] == ["load", "gelu", "store"]


# --------------------------------------------------------------------------- the real H200 report, schema 3
def schema3() -> dict:
    return json.loads(report_bytes("h200-sm90-triton-3.6.0-schema3.json"))


def test_real_instrumentation_profile_records_its_scopes() -> None:
    """The tree Triton 3.6.0's instrumentation wrote for the scoped GELU on the H200:
    one node per scope under the kernel, with cycles and normalized_cycles."""
    for mode in (None, "default", "mma"):
        cap = captures(schema3())[("instrumentation", mode)]
        assert cap["outcome"] == O.OK and cap["expected"] == "scopes" and cap["kernel"] == "scoped"
        rec = capture.recorded_in_tree(json.loads(cap["artifact"]["content"]), cap["recorded"]["files"])
        assert {(s["kernel"], s["name"]) for s in rec["scopes"]} == {
            ("gelu_scoped_kernel", n) for n in ("load", "gelu", "store")}
        assert rec["cycle_metrics"] == ["cycles", "normalized_cycles"]
        assert all(s["cycles"] > 0 and s["normalized_cycles"] > 0 for s in rec["scopes"])
        assert rec["launches"] == 0 and rec["kernels"] == []  # no timed kernel node: cycles only
        assert rec == cap["recorded"]


def test_real_cupti_trace_is_read() -> None:
    cap = options(schema3())[("data", "trace", "cupti")]
    rec = capture.recorded_in_trace(capture.load_trace(cap["artifact"]["content"]))
    assert rec["launches"] == 50 == cap["iters"] and rec["kernels"] == ["gelu_kernel"] and rec["scopes"] == []


def test_real_granularity_refusals_are_classified_or_kept_raw() -> None:
    """Triton 3.6.0 refuses every explicit granularity: 'warp' at the kernel's exit
    (a template of libproton's: unsupported_mode), the others with a compiler pass
    failure that names no cause (kept raw: error)."""
    opts = {o["value"]: o["capture"] for o in schema3()["options"] if o["option"] == "mode"}
    assert len(opts) == 18
    for mode, cap in opts.items():
        assert cap["recorded"] is None and cap["exit_code"] == 1, (mode, cap["message"])
        cls = classify.classify_message(cap["message"], True)
        if mode.endswith("granularity=warp"):
            assert cap["message"] == "RuntimeError: Only warp granularity is supported for now"
            assert (cls["outcome"], cls["rule"]) == (O.UNSUPPORTED_MODE, "granularity-not-warp")
        else:
            assert cap["message"] == "RuntimeError: PassManager::run failed"
            assert cls["outcome"] == O.ERROR


def test_real_command_line_drops_the_mode() -> None:
    cli = options(schema3())[("cli", "mma", "instrumentation")]
    assert cli["argv"][cli["argv"].index("--mode") + 1] == "mma" and cli["outcome"] == O.OK
    assert cli["session_mode"].startswith("default:") and cli["recorded"]["scopes"]


@pytest.mark.integration
@pytest.mark.parametrize("version", ["3.7.1", "3.8.0"])
def test_the_scoped_payload_imports_proton_language_on_real_releases(version: str) -> None:
    """The scoped kernel needs triton.profiler.language and, on these releases,
    enable_semantic; both come from the real wheels (no GPU is needed to import)."""
    venv = pypi_venv(version)
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from probes import gelu; "
            "print(gelu.PL_IMPORT_ERROR, hasattr(gelu.pl, 'enable_semantic'), gelu.SCOPE_NAMES)")
    proc = subprocess.run([venv.python, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["None", "True", "('load',", "'gelu',", "'store')"]
