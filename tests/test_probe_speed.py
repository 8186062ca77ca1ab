"""What makes the probe fast, and that none of it changes what it measures: the
stub cache (keyed, whole or nothing, safe under concurrent probes), the bundle's
bytecode (used only when it matches its source), a child that never reads its
stdin, the phase timeline, and the stub reruns forked from their own zygotes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from probes import bundle, runner, stubs
from survey.evidence.report import parse_report
from tests.envs import fake_triton, pypi_venv

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "probes" / "stubs")
CC = stubs.find_compiler(dict(os.environ))
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler")
NAMES = [s for s, _ in stubs.STUBS]


def _compile(args: tuple[str, str]) -> tuple[list[str], list[str], str]:
    out, cache = args
    return stubs.compile_cached(SRC, out, CC, cache)


# --------------------------------------------------------------------------- stub cache
@needs_cc
def test_stub_cache_stores_then_hits(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    built, errors, how = stubs.compile_cached(SRC, str(tmp_path / "a"), CC, str(cache))
    assert (built, errors, how) == (NAMES, [], "stored")
    built, errors, how = stubs.compile_cached(SRC, str(tmp_path / "b"), CC, str(cache))
    assert (built, errors, how) == (NAMES, [], "hit")
    for n in NAMES:  # the copy a probe uses is its own, and what the compiler made
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes()
    # one entry, nothing half-built left beside it
    assert [p.name for p in cache.iterdir()] == [stubs.cache_key(SRC, CC)]


@needs_cc
def test_stub_cache_key_follows_sources_and_compiler(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(SRC, src)
    key = stubs.cache_key(str(src), CC)
    with open(src / "roctracer64.c", "a") as f:
        f.write("\n/* changed */\n")
    assert stubs.cache_key(str(src), CC) != key
    other_cc = tmp_path / "cc"
    shutil.copy2(os.path.realpath(CC), other_cc)
    os.utime(other_cc, ns=(1, 1))
    assert stubs.cache_key(str(src), str(other_cc)) != stubs.cache_key(str(src), CC)


@needs_cc
def test_stub_cache_under_concurrent_probes(tmp_path: Path) -> None:
    """Probes racing to fill an empty cache all get whole stubs; one build is kept."""
    cache = str(tmp_path / "cache")
    with ProcessPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(_compile, [(str(tmp_path / f"out{i}"), cache) for i in range(6)]))
    for i, (built, errors, how) in enumerate(results):
        assert built == NAMES and errors == [], results
        assert how in ("stored", "hit", "not stored: another probe stored the same build first"), how
        for n in NAMES:
            assert stubs.elf_machine(str(tmp_path / f"out{i}" / n)) == stubs.MACHINES[os.uname().machine]
    assert sorted(os.listdir(cache)) == [stubs.cache_key(SRC, CC)]
    assert sorted(os.listdir(os.path.join(cache, stubs.cache_key(SRC, CC)))) == sorted(NAMES)


@needs_cc
def test_a_cache_that_cannot_be_written_still_compiles(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    built, errors, how = stubs.compile_cached(SRC, str(tmp_path / "out"), CC, str(blocker / "cache"))
    assert built == NAMES and errors == [] and how.startswith("not used: ")
    built, _, how = stubs.compile_cached(SRC, str(tmp_path / "out2"), CC, None)
    assert built == NAMES and how == "not used: no cache directory"


@needs_cc
def test_a_damaged_cache_entry_is_not_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    stubs.compile_cached(SRC, str(tmp_path / "a"), CC, str(cache))
    entry = cache / stubs.cache_key(SRC, CC)
    (entry / NAMES[0]).write_bytes(b"garbage")
    built, errors, how = stubs.compile_cached(SRC, str(tmp_path / "b"), CC, str(cache))
    assert built == NAMES and errors == [] and how.startswith("not stored")
    assert stubs.elf_machine(str(tmp_path / "b" / NAMES[0])) is not None


# --------------------------------------------------------------------------- bundle bytecode
def _run_zip(zp: Path, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(zp)!r})\n{code}"],
                         capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


def test_bundle_bytecode_is_used_and_checked_against_its_source(tmp_path: Path) -> None:
    zp = tmp_path / "probe.zip"
    bundle.write(str(zp))
    with zipfile.ZipFile(zp) as z:
        names = set(z.namelist())
    assert {"probes/orchestrator.py", "probes/orchestrator.pyc"} <= names
    assert _run_zip(zp, "import probes.orchestrator as m; print(m.__file__)").endswith("orchestrator.pyc")
    # A .pyc that no longer matches the source beside it is not used: the source is.
    changed = tmp_path / "changed.zip"
    with zipfile.ZipFile(zp) as src, zipfile.ZipFile(changed, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "probes/outcomes.py":
                data += b"\nCHANGED = 'from the source'\n"
            dst.writestr(info, data)
    assert _run_zip(changed, "import probes.outcomes as m; print(m.CHANGED)") == "from the source"


# --------------------------------------------------------------------------- runner
def test_a_child_that_never_reads_its_stdin_still_times_out() -> None:
    res = runner.run(["sleep", "30"], dict(os.environ), 1.0, stdin_data=b"x" * (4 << 20))
    # killed at its timeout: a runner blocked on the write would have seen sleep exit 0 first
    assert res["timed_out"] is True and res["exit_code"] == -signal.SIGKILL, res


# --------------------------------------------------------------------------- timeline, forked stub reruns
def test_timeline_goes_to_stderr_and_leaves_the_report_alone(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(fake_triton(tmp_path, {"cupti": "ok"}, registry=["cupti"])))
    zp = tmp_path / "probe.zip"
    bundle.write(str(zp))
    out = subprocess.run([sys.executable, str(zp), "probe", "--only", "cupti", "--no-auto-capture", "--timeline",
                          "--timeout", "30"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["result"] == "report", result
    report = result["report"]
    parse_report(json.dumps(report).encode())  # valid against the schema: nothing was added to the report
    assert report["probe"]["argv"][-3:] == ["--timeline", "--timeout", "30"]
    lines = out.stderr.splitlines()
    assert any("zygote: spawn" in x for x in lines) and lines[-1].split()[-1] == "finish"
    assert [float(x.split()[0]) for x in lines] == sorted(float(x.split()[0]) for x in lines)


@pytest.mark.integration
def test_stub_reruns_fork_from_a_zygote_of_their_own_environment() -> None:
    """Each stub rerun runs under the same environment forked or fresh (the zygote
    it forks from was started with it) and maps the same stubs, on 3.8.0 (a knob
    for rocprofiler, none for roctracer: two environments, two stub zygotes)."""
    venv = pypi_venv("3.8.0")
    from tests.helpers.probe import run_probe

    forked = run_probe(venv.python, ["probe", "--timeout", "60", "--no-auto-capture"])[0]
    fresh = run_probe(venv.python, ["probe", "--timeout", "60", "--no-auto-capture", "--no-fork"])[0]

    def stub_runs(rep: dict) -> dict:
        def rel(p: str) -> str:
            return p.split("/proton-survey-stubs/", 1)[1]
        return {(m["backend"], m["mode"]): (m["outcome"], m["message"], sorted(map(rel, m["stubs_mapped"])),
                                            sorted(m["overrides"]))
                for m in rep["modes"] if m["stub"]}

    assert len(stub_runs(forked)) == 5 and stub_runs(forked) == stub_runs(fresh)
    assert forked["probe"]["interpreters_started"] == 3  # the zygote and one per stub environment
    assert all(m["argv"][0].startswith("(forked from") for m in forked["modes"] if m["env"] == "clean")
    assert not any(m["argv"][0].startswith("(forked") for m in fresh["modes"])
    assert forked["registry"]["triton_import"]["imported_in"] == "the zygote this worker was forked from"
    assert forked["libraries"] == fresh["libraries"]


def _processes_running(needle: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if needle in cmd:
            found.append(f"{pid}: {cmd}")
    return found


@needs_cc
def test_a_wrongly_guessed_stub_zygote_is_discarded_and_decides_nothing(tmp_path: Path) -> None:
    """The stub zygotes start before the checks and the knobs are known, on a guess
    (here a wrong one: knobs.py names TRITON_ROCTRACER_LIB_PATH, but this Triton
    has no such knob). A rerun forks only from a zygote of exactly its own
    environment; the wrongly guessed one is killed unused, leaving no process, and
    the reruns answer as in fresh interpreters."""
    root = fake_triton(tmp_path / "t", {"roctracer": "missing"})
    prof = root / "triton" / "profiler" / "__init__.py"
    prof.write_text(prof.read_text().replace(
        '    raise RuntimeError("Unknown profiler: "',
        '    if what == "missing":\n        raise RuntimeError("Could not load `libroctracer64.so`")\n'
        '    raise RuntimeError("Unknown profiler: "'))
    (root / "triton" / "knobs.py").write_text("# TRITON_ROCTRACER_LIB_PATH: not read by this release\n")
    env = dict(os.environ, PYTHONPATH=str(root), HOME=str(tmp_path))
    zp = tmp_path / "probe.zip"
    bundle.write(str(zp))
    base = [sys.executable, str(zp), "probe", "--only", "roctracer", "--only", "rocprofiler", "--no-auto-capture",
            "--timeout", "30"]
    forked = subprocess.run(base + ["--timeline"], capture_output=True, text=True, env=env, timeout=120)
    assert forked.returncode == 0, forked.stderr
    fresh = subprocess.run(base + ["--no-fork"], capture_output=True, text=True, env=env, timeout=120)
    assert fresh.returncode == 0, fresh.stderr
    assert _processes_running(str(zp)) == []
    rep, rep_fresh = json.loads(forked.stdout)["report"], json.loads(fresh.stdout)["report"]
    if rep["environment"]["rocm"]["status"] == "found":
        pytest.skip("ROCm is installed here: no stub zygote is started on a guess")

    def stub_runs(r: dict) -> dict:
        return {(m["backend"], m["mode"]): (m["outcome"], m["message"], sorted(m["overrides"]))
                for m in r["modes"] if m["stub"]}

    assert len(stub_runs(rep)) == 1 and stub_runs(rep) == stub_runs(rep_fresh)
    assert all(sorted(m["overrides"]) == ["LD_LIBRARY_PATH"] for m in rep["modes"] if m["stub"])
    assert all(m["argv"][0].startswith("(forked from") for m in rep["modes"] if m["stub"])
    assert "speculative one used" in forked.stderr and "discarded unused" in forked.stderr
    assert rep["probe"]["interpreters_started"] == 3  # the zygote, the one used, the one discarded
