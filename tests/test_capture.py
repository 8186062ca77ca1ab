"""The GELU capture: payload exit codes, capture outcomes, harvesting, and the
real H200 capture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes import capture
from probes import outcomes as O
from tests.conftest import report_bytes
from tests.envs import fake_gpu_stack, pypi_venv
from tests.test_probe import run_probe

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
