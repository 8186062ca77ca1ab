"""The probe: isolation, timeouts, crashes, bad bytes, exit codes; and what it
measures in real PyPI releases (integration tier)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes import classify
from probes import outcomes as O
from survey.core import exitcodes
from survey.core.errors import NotAPython, ProbeFailed
from survey.environments import probe as probe_run
from survey.environments.launchers.python import PythonLauncher
from tests.conftest import processes_with, survey_cli
from tests.envs import fake_triton, pypi_venv
from tests.helpers.probe import by_check, run_probe

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- fast tier
@pytest.mark.parametrize("fork", [True, False], ids=["zygote", "fresh-interpreters"])
def test_hang_crash_and_bad_bytes_are_contained(tmp_path: Path, fork: bool) -> None:
    env = fake_triton(tmp_path, {"cupti": "hang", "roctracer": "segv", "rocprofiler": "bad-bytes",
                                 "instrumentation": "ok"}, registry=["cupti", "roctracer"])
    args = ["probe", "--timeout", "3", "--no-auto-capture", "--only", "cupti", "--only", "roctracer",
            "--only", "rocprofiler", "--only", "instrumentation", "--repeats", "2"] + ([] if fork else ["--no-fork"])
    hanging = tmp_path / "hanging"  # each attempt writes a line here as it begins to hang
    report, out = run_probe(sys.executable, args, pythonpath=env, extra_env={"FAKE_TRITON_HANGING": str(hanging)})
    checks = by_check(report)
    hang = checks[("cupti", None)]
    assert hang["outcome"] == O.TIMEOUT and hang["timed_out"] is True
    assert [a["outcome"] for a in hang["attempts"]] == [O.TIMEOUT, O.TIMEOUT]
    assert hanging.read_text() == "cupti\ncupti\n"  # both attempts hung, in proton.start
    assert not processes_with(str(hanging))  # and were killed, not waited on
    segv = checks[("roctracer", None)]
    assert segv["outcome"] == O.CRASH and segv["signal"] == "SIGSEGV"
    bad = checks[("rocprofiler", None)]
    # bytes that are not UTF-8 are kept visible, escaped, and the report is valid JSON
    assert "caf\\xe9 \\xff\\xfe not utf-8" in bad["stderr_tail"]
    assert bad["outcome"] == O.LIBRARY_MISSING and bad["library"].startswith("lib")
    assert checks[("instrumentation", None)]["outcome"] == O.OK
    assert report["registry"]["profilers"] == ["cupti", "roctracer"]
    assert ("forked" in report["probe"]["isolation"]) is fork
    # nothing the checks started is left running
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in ps


def test_every_start_check_runs_twice_and_a_steady_failure_is_not_unstable(tmp_path: Path) -> None:
    env = fake_triton(tmp_path, {"cupti": "no-gpu", "roctracer": "segv"})
    report, _ = run_probe(sys.executable, ["probe", "--timeout", "10", "--no-auto-capture", "--only", "cupti",
                                           "--only", "roctracer"], pythonpath=env)
    checks = by_check(report)
    steady = checks[("cupti", None)]
    assert steady["outcome"] == O.NO_GPU and steady["outcome_counts"] == {O.NO_GPU: 2}
    assert [a["outcome"] for a in steady["attempts"]] == [O.NO_GPU, O.NO_GPU]
    # a crash may be of the moment: repeated to the bound (6); crashing every time is a crash, not `unstable`
    crash = checks[("roctracer", None)]
    assert crash["outcome"] == O.CRASH and crash["outcome_counts"] == {O.CRASH: 6} and len(crash["attempts"]) == 6
    assert report["probe"]["repeats"] == 6
    assert report["probe"]["forked_checks"] == 2 + 6


def test_a_lucky_first_attempt_is_not_a_clean_answer(tmp_path: Path) -> None:
    """Undefined behaviour (Triton 3.7.x's periodic_flushing on a host without a GPU):
    the first attempt says `library_missing`, every later one crashes. One attempt
    would have stored a clean `library_missing` (and a stub rerun behind it)."""
    env = fake_triton(tmp_path, {"roctracer": "refuse",
                                 "roctracer:periodic_flushing": "seq:no-lib,segv,segv,segv,segv,segv"})
    report, _ = run_probe(sys.executable, ["probe", "--timeout", "10", "--no-auto-capture",
                                           "--only", "roctracer:periodic_flushing"], pythonpath=env)
    [check] = report["modes"]
    assert check["outcome"] == O.UNSTABLE, check
    assert check["outcome_counts"] == {O.LIBRARY_MISSING: 1, O.CRASH: 5}
    assert [a["outcome"] for a in check["attempts"]] == [O.LIBRARY_MISSING] + [O.CRASH] * 5
    assert check["attempts"][0]["message"] == "Could not load `libroctracer64.so`"
    assert check["attempts"][1]["signal"] == "SIGSEGV"
    # the first attempt's record is kept as the check's
    assert check["rule"] == "could-not-load" and check["library"] == "libroctracer64.so"
    # a capped probe (--repeats 2): the two attempts already disagree
    report, _ = run_probe(sys.executable, ["probe", "--timeout", "10", "--no-auto-capture", "--repeats", "2",
                                           "--only", "roctracer:periodic_flushing"], pythonpath=env)
    [check] = report["modes"]
    assert check["outcome"] == O.UNSTABLE and check["outcome_counts"] == {O.LIBRARY_MISSING: 1, O.CRASH: 1}


@pytest.mark.parametrize("fork", [True, False], ids=["zygote", "fresh-interpreters"])
def test_a_forked_check_sees_the_process_a_fresh_interpreter_would(tmp_path: Path, fork: bool) -> None:
    """Undefined behaviour that depends on the process's memory (a stale read of the
    environment block, as 3.7.x's periodic_flushing does): a check forked from the
    zygote must see the memory a fresh interpreter starts with, so both crash. A
    fork child that rewrote its environment (the same variables, their strings moved
    to the heap) raised an unrecognised error instead, on every attempt."""
    env = fake_triton(tmp_path, {"roctracer": "layout"})
    report, _ = run_probe(sys.executable, ["probe", "--timeout", "10", "--no-auto-capture", "--only", "roctracer"]
                          + ([] if fork else ["--no-fork"]), pythonpath=env)
    [check] = report["modes"]
    assert check["argv"][0].startswith("(forked from") is fork
    assert check["outcome"] == O.CRASH and check["signal"] == "SIGSEGV", check
    assert check["outcome_counts"] == {O.CRASH: 6}


def test_unrecognised_failures_stay_raw(tmp_path: Path) -> None:
    env = fake_triton(tmp_path, {"cupti": "exit", "roctracer": "script"})
    report, _ = run_probe(sys.executable, ["probe", "--timeout", "10", "--only", "cupti", "--only", "roctracer"],
                          pythonpath=env)
    checks = by_check(report)
    quiet = checks[("cupti", None)]
    assert quiet["outcome"] == O.ERROR and quiet["rule"] == "no-result" and quiet["exit_code"] == 7
    raw = checks[("roctracer", None)]
    assert raw["outcome"] == O.ERROR and raw["rule"] is None
    assert raw["message"] == "<b>bold</b> failure"
    assert "<script>window.__xss = 1</script>" in raw["stderr_tail"]


def test_inherited_proton_variables_are_controlled_and_measured(tmp_path: Path) -> None:
    env = fake_triton(tmp_path, {"cupti": "ok"})
    report, _ = run_probe(sys.executable, ["probe", "--timeout", "10", "--only", "cupti"], pythonpath=env,
                          extra_env={"TRITON_PROTON_DISABLE": "1", "HIP_VISIBLE_DEVICES": "0"})
    variables = {v["name"]: v for v in report["environment"]["variables"]}
    assert variables["TRITON_PROTON_DISABLE"] == {"name": "TRITON_PROTON_DISABLE", "value": "1", "controlled": True}
    assert variables["HIP_VISIBLE_DEVICES"]["controlled"] is True
    envs = {m["env"] for m in report["modes"]}
    assert envs == {"clean", "inherited"}


@pytest.mark.parametrize("args", [["probe", "--stub-cahce", "x"], ["probe", "--jobs", "many"]])
def test_a_mistyped_probe_command_line_is_a_usage_error_not_2(args: list[str]) -> None:
    # 2 means "this environment cannot run it" in this project; argparse's own 2 would read as that.
    out = probe_run.run_bundle([sys.executable], args, 60,
                               env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.exit_code == exitcodes.USAGE, (out.exit_code, out.stderr)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert lines and "error:" in lines[-1] and args[1] in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_python_without_triton_is_a_typed_result_with_its_report(tmp_path: Path) -> None:
    """The probe says what happened in its output, typed (like uv's interpreter query),
    not through an exit code of its own that the host renumbers."""
    out = probe_run.run_bundle([sys.executable], ["probe", "--timeout", "5"], 60,
                               env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.exit_code == 0, out.stderr  # it printed its result
    result = json.loads(out.stdout)
    assert (result["result"], result["kind"]) == ("error", "missing_triton") and sys.executable in result["message"]
    raw, has_triton = probe_run.collect_report(out, "x")
    assert has_triton is False
    rep = json.loads(raw)
    assert rep == result["report"]  # the report still says what was found
    assert rep["environment"]["triton"]["status"] == "absent" and rep["modes"] == []
    cli = survey_cli("probe", "--python", sys.executable,
                          "-o", str(tmp_path / "r.json"))
    assert cli.returncode == exitcodes.NO_TRITON, cli.stderr
    assert json.loads((tmp_path / "r.json").read_text())["environment"]["triton"]["status"] == "absent"


def test_a_probe_that_fails_inside_says_so_typed(tmp_path: Path) -> None:
    out = probe_run.run_bundle([sys.executable], ["probe", "--timeout", "5", "-o", str(tmp_path / "no" / "r.json")],
                               60, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.exit_code == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["result"], result["kind"]) == ("error", "internal_error")
    assert "No such file or directory" in result["message"] and result["traceback"]
    with pytest.raises(ProbeFailed, match="internal_error.*No such file or directory"):
        probe_run.collect_report(out, "x")


@pytest.mark.parametrize("target,needle", [
    ("/nonexistent/python3", "no such file"),
    ("{tmp}/notes.txt", "not executable"),
    ("{tmp}/script.txt", "Exec format error"),
    ("/bin/true", "does not behave like a Python"),
    ("/tmp", "is a directory"),
])
def test_not_a_python(tmp_path: Path, target: str, needle: str) -> None:
    (tmp_path / "notes.txt").write_text("not a program\n")
    (tmp_path / "script.txt").write_bytes(b"\x00\x01 not a program either\n")
    (tmp_path / "script.txt").chmod(0o755)
    target = target.format(tmp=tmp_path)
    with pytest.raises(NotAPython, match=needle):
        PythonLauncher(target).obtain()
    cli = survey_cli("probe", "--python", target)
    assert cli.returncode == exitcodes.NOT_A_PYTHON
    assert needle in cli.stderr


OLD_PYTHONS = [os.path.expanduser(p) for p in ("~/.pyenv/versions/3.7.16/bin/python3.7",
                                               "~/.pyenv/versions/2.7.18/bin/python2.7")]


@pytest.mark.parametrize("old", OLD_PYTHONS, ids=["3.7", "2.7"])
def test_old_python_is_refused_with_its_version(old: str) -> None:
    if not os.path.exists(old):
        pytest.skip(f"{old} is not on this machine")
    with pytest.raises(NotAPython, match="needs Python >= 3.8"):
        PythonLauncher(old).obtain()
    # the bootstrap itself refuses too, before reading the bundle, with a typed result
    out = probe_run.run_bundle([old], ["probe"], 60)
    assert out.exit_code == 0 and "needs Python >= 3.8" in out.stderr
    result = json.loads(out.stdout)
    assert (result["result"], result["kind"]) == ("error", "unsupported_python")
    assert "needs Python >= 3.8" in result["message"] and result["python"] == [int(x) for x in old.split("/")[-3]
                                                                                 .split(".")[:2]]
    with pytest.raises(NotAPython, match="needs Python >= 3.8"):
        probe_run.collect_report(out, old)


def test_probe_runs_on_python_3_8(tmp_path: Path) -> None:
    py38 = os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8")
    if not os.path.exists(py38):
        pytest.skip("no Python 3.8 on this machine")
    env = fake_triton(tmp_path, {"cupti": "ok", "roctracer": "segv"})
    report, _ = run_probe(py38, ["probe", "--timeout", "10", "--only", "cupti", "--only", "roctracer"],
                          pythonpath=env)
    assert report["environment"]["python"]["version"].startswith("3.8.")
    checks = by_check(report)
    assert checks[("cupti", None)]["outcome"] == O.OK
    assert checks[("roctracer", None)]["signal"] == "SIGSEGV"


def test_classification_rules_cite_their_source() -> None:
    for rule_id, info in classify.RULE_SOURCES.items():
        assert info["outcome"] in O.OUTCOMES, rule_id
        assert info["source"] and info["seen"], rule_id
    # an unknown message is never guessed at
    assert classify.classify_message("something new went wrong", False)["outcome"] == O.ERROR
    # CUPTI's "not initialised" only means no GPU when no NVIDIA device is there
    msg = "Failed to execute cuptiSubscribe with error 15"
    assert classify.classify_message(msg, False)["outcome"] == O.NO_GPU
    assert classify.classify_message(msg, True)["outcome"] == O.ERROR


# --------------------------------------------------------------------------- integration tier
@pytest.fixture(scope="session")
def venv_371():
    return pypi_venv("3.7.1")


@pytest.fixture(scope="session")
def venv_380():
    return pypi_venv("3.8.0")


@pytest.fixture(scope="session")
def venv_390():
    return pypi_venv("3.9.0")


@pytest.fixture(scope="session")
def report_371(venv_371):
    return run_probe(venv_371.python, ["probe", "--timeout", "60"])[0]


@pytest.fixture(scope="session")
def report_380(venv_380):
    return run_probe(venv_380.python, ["probe", "--timeout", "60"])[0]


@pytest.fixture(scope="session")
def report_390(venv_390):
    return run_probe(venv_390.python, ["probe", "--timeout", "60"])[0]


@pytest.mark.integration
def test_371_has_no_registry_and_no_rocprofiler(report_371) -> None:
    r = report_371
    assert r["environment"]["triton"]["version"] == "3.7.1"
    assert r["registry"]["profilers"] is None and r["registry"]["status"] == "absent"
    assert r["registry"]["cli_backends"] == ["cupti", "roctracer", "instrumentation"]
    live = by_check(r)
    for mode in (None, "pcsampling", "periodic_flushing"):
        assert live[("rocprofiler", mode)]["outcome"] == O.UNKNOWN_BACKEND
        assert live[("rocprofiler", mode)]["rule"] == "unknown-profiler"
    assert live[("roctracer", "pcsampling")]["outcome"] == O.UNSUPPORTED_MODE
    assert live[("roctracer", None)]["outcome"] == O.LIBRARY_MISSING
    assert live[("roctracer", None)]["library"] == "libroctracer64.so"
    # 3.7.1's cupti + periodic_flushing is undefined behaviour on this host: seen as
    # SIGSEGV, as "unsupported option key: " with an empty key, and as CUPTI error 15,
    # varying with the process's memory layout. Whatever it does, it does not start.
    # Every check runs at least twice, and up to 6 times while an attempt crashed or
    # raised an unrecognised error or they disagree; every outcome is kept, and
    # disagreeing attempts make the check `unstable` with the counts.
    pf = live[("cupti", "periodic_flushing")]
    assert pf["outcome"] in (O.CRASH, O.ERROR, O.NO_GPU, O.UNSTABLE)
    assert pf["outcome"] != O.CRASH or pf["signal"] == "SIGSEGV"
    assert sum(pf["outcome_counts"].values()) == len(pf["attempts"])
    assert (len(pf["outcome_counts"]) > 1) == (pf["outcome"] == O.UNSTABLE)
    assert set(pf["outcome_counts"]) <= {O.CRASH, O.ERROR, O.NO_GPU}
    assert len(pf["attempts"]) == (2 if pf["outcome"] == O.NO_GPU else 6)
    stub = by_check(r, stub=True)
    assert stub[("roctracer", None)]["outcome"] == O.OK
    # no knob for roctracer in 3.7.1: the stub comes through the loader path
    assert set(stub[("roctracer", None)]["overrides"]) == {"LD_LIBRARY_PATH"}
    assert any(p.endswith("/libroctracer64.so") for p in stub[("roctracer", None)]["stubs_mapped"])


@pytest.mark.integration
def test_380_registry_library_first_and_stub_mode_answer(report_380) -> None:
    r = report_380
    four = ["cupti", "rocprofiler", "roctracer", "instrumentation"]
    assert r["registry"]["profilers"] == four and r["registry"]["cli_backends"] == four
    live = by_check(r)
    for mode in (None, "pcsampling", "periodic_flushing"):
        assert live[("rocprofiler", mode)]["outcome"] == O.LIBRARY_MISSING
        assert live[("rocprofiler", mode)]["library"] == "librocprofiler-sdk.so"
        assert live[("cupti", mode)]["outcome"] == O.NO_GPU
    stub = by_check(r, stub=True)
    assert stub[("rocprofiler", "pcsampling")]["outcome"] == O.UNSUPPORTED_MODE
    assert "RocprofSDKProfiler: unsupported mode: pcsampling" in stub[("rocprofiler", "pcsampling")]["message"]
    assert stub[("rocprofiler", "periodic_flushing")]["outcome"] == O.OK
    assert stub[("rocprofiler", None)]["outcome"] == O.OK
    # 3.8.0 reads TRITON_ROCPROFILER_SDK_LIB_PATH: the stub went through Proton's own override
    assert "TRITON_ROCPROFILER_SDK_LIB_PATH" in stub[("rocprofiler", "pcsampling")]["overrides"]
    libs = {lib["name"]: lib for lib in r["libraries"]}
    assert libs["librocprofiler-sdk.so"]["loads"] is False
    assert libs["libcupti.so"]["loads"] is True and libs["libcupti.so"]["via"] == "TRITON_CUPTI_LIB_PATH"
    # the 14 clean checks fork from the zygote, the 5 stub reruns from zygotes started
    # with their own loader environment (one per environment: here two); every
    # attempt of each (at least two) is a fork
    assert len(r["modes"]) == 14 + 5 and all(len(m["attempts"]) >= 2 for m in r["modes"])
    assert r["probe"]["forked_checks"] == sum(len(m["attempts"]) for m in r["modes"])
    assert all("stub loader environment" in m["argv"][0] for m in r["modes"] if m["stub"])
    assert r["probe"]["interpreters_started"] == 3


@pytest.mark.integration
@pytest.mark.parametrize("version", ["3.7.1", "3.8.0", "3.9.0"])
def test_fork_and_fresh_interpreters_measure_the_same(version: str, request) -> None:
    """On every release of the integration tier: the zygote's forked checks and fresh
    interpreters give the same outcomes. Checks whose outcome is undefined behaviour
    (3.7.x periodic_flushing: crash, garbage error or CUPTI error 15, varying run to
    run) must agree on not starting, not on which failure."""
    venv = pypi_venv(version)
    forked = request.getfixturevalue(f"report_{version.replace('.', '')}")  # `probe --timeout 60`, run once
    fresh = run_probe(venv.python, ["probe", "--timeout", "60", "--no-fork"])[0]
    assert fresh["probe"]["forked_checks"] == 0 and forked["probe"]["forked_checks"] >= 2 * 14  # attempts fork too

    varying = {O.CRASH, O.ERROR, O.UNSTABLE}

    def outcomes(rep):
        return {(m["backend"], m["mode"], m["stub"]): (m["outcome"], m["library"]) for m in rep["modes"]}

    a, b = outcomes(forked), outcomes(fresh)
    live = {k for k in a if not k[2]}
    assert live == {k for k in b if not k[2]}

    def varies(key) -> bool:  # the live check behind `key` is undefined behaviour in either run
        base = (key[0], key[1], False)
        return a[base][0] in varying or b[base][0] in varying

    for key in live:
        if varies(key):
            assert a[key][0] != O.OK and b[key][0] != O.OK, key
        else:
            assert a[key] == b[key], key
    # a stub rerun follows its live check: the same ones, except behind a varying check
    for key in set(a) ^ set(b):
        assert varies(key), key
    for key in (set(a) & set(b)) - live:
        if not varies(key):
            assert a[key] == b[key], key


@pytest.mark.integration
def test_inherited_variables_on_a_real_release(venv_380) -> None:
    r = run_probe(venv_380.python, ["probe", "--timeout", "60", "--only", "roctracer", "--only", "cupti"],
                  extra_env={"HIP_VISIBLE_DEVICES": "0"})[0]
    inherited = by_check(r, env="inherited")
    assert inherited[("roctracer", None)]["outcome"] == O.DEVICES_ENV_REJECTED
    assert by_check(r)[("roctracer", None)]["outcome"] == O.LIBRARY_MISSING  # clean: unaffected
    r = run_probe(venv_380.python, ["probe", "--timeout", "60", "--only", "cupti"],
                  extra_env={"TRITON_PROTON_DISABLE": "1"})[0]
    assert by_check(r, env="inherited")[("cupti", None)]["outcome"] == O.DISABLED


def _versioned_only_dir(tmp_path: Path) -> Path:
    """A wheel-style ROCm lib dir holding only librocprofiler-sdk.so.1 (built with cc)."""
    d = tmp_path / "_rocm_sdk_core" / "lib"
    d.mkdir(parents=True)
    src = ROOT / "probes" / "stubs"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,librocprofiler-sdk.so.1", "-I", str(src), "-o",
                    str(d / "librocprofiler-sdk.so.1"), str(src / "rocprofiler_sdk.c")], check=True)
    return d


@pytest.mark.integration
@pytest.mark.parametrize("version", ["3.8.0", "3.9.0"])
def test_versioned_only_soname_is_found_and_the_fix_works(tmp_path: Path, version: str, request) -> None:
    venv = request.getfixturevalue("venv_" + version.replace(".", ""))
    libdir = _versioned_only_dir(tmp_path)
    r = run_probe(venv.python, ["probe", "--timeout", "60", "--only", "rocprofiler:periodic_flushing"],
                  extra_env={"LD_LIBRARY_PATH": str(libdir)})[0]
    lib = {x["name"]: x for x in r["libraries"]}["librocprofiler-sdk.so"]
    assert lib["loads"] is False and lib["versioned_only"] is True
    assert [c["path"] for c in lib["candidates"] if c["where"] == "LD_LIBRARY_PATH"] == \
        [str(libdir / "librocprofiler-sdk.so.1")]
    # The fix names what this release reads, and following it makes the library load.
    if version == "3.9.0":
        assert "TRITON_ROCPROFILER_SDK_LIBRARY=librocprofiler-sdk.so.1" in lib["fix"]
        fix_env = {"TRITON_ROCPROFILER_SDK_LIB_PATH": str(libdir),
                   "TRITON_ROCPROFILER_SDK_LIBRARY": "librocprofiler-sdk.so.1"}
    else:
        assert "ln -s" in lib["fix"] and "TRITON_ROCPROFILER_SDK_LIB_PATH" in lib["fix"]
        linkdir = tmp_path / "link"
        linkdir.mkdir()
        (linkdir / "librocprofiler-sdk.so").symlink_to(libdir / "librocprofiler-sdk.so.1")
        fix_env = {"TRITON_ROCPROFILER_SDK_LIB_PATH": str(linkdir)}
    code = ("import triton.profiler as p\n"
            "try:\n    p.start('x', backend='rocprofiler', mode='periodic_flushing')\n    print('started')\n"
            "except Exception as e:\n    print(e)\n")
    done = subprocess.run([venv.python, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, **fix_env, "LD_LIBRARY_PATH": str(libdir)})
    # past the rocprofiler library: it starts, or what fails is HIP, which this host lacks
    assert "librocprofiler-sdk.so" not in done.stdout, done.stdout
    assert done.stdout.strip() == "started" or "libamdhip64.so" in done.stdout, done.stdout


def test_a_target_that_dies_or_hangs_is_a_clear_error(tmp_path: Path) -> None:
    """An interpreter that answers the preflight but dies (or hangs) running the probe."""
    for name, action in (("dies", "kill -SEGV $$"), ("hangs", "exec sleep 3600")):
        wrapper = tmp_path / f"python-that-{name}"
        script = f'#!/bin/sh\ncase "$*" in *" probe --"*) {action} ;; esac\nexec {sys.executable} "$@"\n'
        wrapper.write_text(script)
        wrapper.chmod(0o755)
        launcher = PythonLauncher(str(wrapper))
        resolved = launcher.obtain()
        with pytest.raises(ProbeFailed, match="SIGSEGV" if name == "dies" else "did not finish"):
            launcher.probe(resolved, probe_run.probe_args(5), timeout=3)
    cli = survey_cli("probe", "--python", str(tmp_path / "python-that-dies"))
    assert cli.returncode == exitcodes.PROBE_FAILED and "killed by SIGSEGV" in cli.stderr
