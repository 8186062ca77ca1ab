"""tests/run.sh, the command CI runs: what it does once every tier has passed.

Its exit status is the contract CI reads (0 when every tier passed). The clean-up it runs on
exit stops the background jobs that made the images and venvs; by then they have ended, so
stopping them fails — under ``set -e`` that failure must not become the script's status.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

RUN_SH = Path(__file__).resolve().parent / "run.sh"


def _exit_trap() -> str:
    """The clean-up tests/run.sh installs for EXIT, as written there."""
    text = RUN_SH.read_text()
    found = re.findall(r"^\s*trap (.+) EXIT\s*$", text, flags=re.MULTILINE)
    assert len(found) == 1, "tests/run.sh installs one EXIT trap"
    return found[0]


def _run_with_trap(tmp_path: Path, jobs: str) -> subprocess.CompletedProcess[str]:
    logs = tmp_path / "logs"
    logs.mkdir()
    # run.sh's own options, its two background jobs and its clean-up, then its last line
    script = f"""set -euo pipefail
{jobs}
logs={logs}
trap {_exit_trap()} EXIT
exit 0
"""
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_every_tier_passed_exits_0_though_the_background_jobs_have_ended(tmp_path: Path) -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()  # ended and reaped: no process has this pid now
    gone = ended.pid
    result = _run_with_trap(tmp_path, f"started=({gone} {gone})")
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "logs").exists()


def _ends(pid: int) -> bool:
    """Whether process ``pid`` ends (or is left a zombie) once sent SIGTERM: it may take a moment."""
    stat = Path(f"/proc/{pid}/stat")
    for _ in range(200):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def test_the_clean_up_stops_background_jobs_still_running(tmp_path: Path) -> None:
    jobs = "started=()\nsleep 300 & started+=($!)\nsleep 300 & started+=($!)\necho ${started[@]} >&2"
    result = _run_with_trap(tmp_path, jobs)
    assert result.returncode == 0, result.stderr
    for pid in (int(p) for p in result.stderr.split()[:2]):
        assert _ends(pid), f"background job {pid} still running after the clean-up"
    assert not (tmp_path / "logs").exists()


def _function(name: str) -> str:
    """A one-level shell function of tests/run.sh, as written there."""
    found = re.findall(rf"^{name}\(\) \{{.*?^\}}$", RUN_SH.read_text(), flags=re.MULTILINE | re.DOTALL)
    assert len(found) == 1, f"tests/run.sh defines {name} once"
    return found[0]


def test_a_background_job_writes_its_exit_status_when_it_ends(tmp_path: Path) -> None:
    # the tests that need a job are handed out once JOB.rc is there (tests/helpers/scheduling.py)
    script = f"""set -euo pipefail
logs={tmp_path} started=()
{_function("prepare")}
prepare images bash -c 'echo building; exit 3'
wait $!
"""
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "images.rc").read_text() == "3\n"
    assert (tmp_path / "images").read_text() == "building\n"


def test_it_says_what_each_background_job_took(tmp_path: Path) -> None:
    # the job's own CPU, not the shell's: a command that burns CPU shows it, one that sleeps does not
    script = f"""set -euo pipefail
logs={tmp_path} started=()
{_function("prepare")}
{_function("cpu")}
{_function("took")}
prepare images python3 -c 'sum(range(10**7))'
wait $!
prepare venvs sleep 0.2
wait $!
took images; took venvs; took types
"""
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    images, venvs, types = result.stdout.splitlines()
    found = re.fullmatch(r"images (\d+) s, CPU (\d+\.\d) s", images)
    assert found and float(found[2]) >= 0.1, images
    assert re.fullmatch(r"venvs \d+ s, CPU 0\.0 s", venvs), venvs
    assert types == "types (not ended)"


def test_cpu_reads_the_children_line_of_times(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("0m0.010s 0m0.020s\n1m2.500s 0m0.600s\n")
    result = subprocess.run(["bash", "-c", f"{_function('cpu')}\ncpu {tmp_path / 't'}"],
                            capture_output=True, text=True, timeout=60)
    assert result.stdout == "63.1", result.stderr


def test_the_clean_up_stops_the_command_of_a_prepared_job(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    script = f"""set -euo pipefail
logs={logs} started=()
{_function("prepare")}
prepare images bash -c 'echo $$ >{tmp_path}/pid; exec sleep 300'
while [[ ! -s {tmp_path}/pid ]]; do sleep 0.05; done
trap {_exit_trap()} EXIT
exit 0
"""
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert _ends(int((tmp_path / "pid").read_text())), "the job's command still runs after the clean-up"


def test_the_clean_up_waits_for_the_jobs_it_stopped_before_it_removes_their_logs(tmp_path: Path) -> None:
    # A stopped job's wrapper still writes its status files as it ends. A clean-up that
    # removed the logs meanwhile failed now and then ("Directory not empty": exit status 1
    # though every tier passed; a flake hunt saw it). Here one of those files is a FIFO that
    # a reader opens only after a moment, so the wrapper's last writes are slow: the clean-up
    # must have waited for them (the wrapper ended, the logs gone).
    logs = tmp_path / "logs"
    logs.mkdir()
    os.mkfifo(logs / "images.wall")
    script = f"""set -euo pipefail
logs={logs} started=()
{_function("prepare")}
prepare images bash -c 'echo $$ >{tmp_path}/pid; exec sleep 300'
echo ${{started[0]}} >{tmp_path}/wrapper
while [[ ! -s {tmp_path}/pid ]]; do sleep 0.05; done
(sleep 0.5; cat {logs}/images.wall >/dev/null 2>&1 || true) &
trap {_exit_trap()} EXIT
exit 0
"""
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    wrapper = int((tmp_path / "wrapper").read_text())
    try:
        assert result.returncode == 0, result.stderr
        assert _ends(wrapper), "the clean-up returned before the job it stopped had ended"
        assert not logs.exists()
    finally:
        try:
            os.kill(wrapper, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _system_packages_section() -> str:
    """tests/run.sh's system-packages section, as written there (up to the next section)."""
    text = RUN_SH.read_text()
    found = re.findall(r"^# -+ system packages\n(.*?)^# -+ ", text, flags=re.MULTILINE | re.DOTALL)
    assert len(found) == 1, "tests/run.sh has one system-packages section"
    return found[0]


def _needs(tmp_path: Path, tools: list[str]) -> subprocess.CompletedProcess[str]:
    """The section run on a machine with only ``tools`` (and no apt-get) on its PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ["bash", "id", "date", *tools]:
        real = subprocess.run(["bash", "-c", f"command -v {name} || echo /bin/true"], capture_output=True, text=True)
        (bin_dir / name).symlink_to(real.stdout.strip())
    script = f"""set -euo pipefail
mode=all
say() {{ printf '%s\\n' "$*" >&2; }}
{_system_packages_section()}"""
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, env={"PATH": str(bin_dir)}
    )


def test_it_says_which_package_it_needs_and_why(tmp_path: Path) -> None:
    result = _needs(tmp_path, [])
    assert result.returncode == 69, result.stderr
    lines = result.stderr.splitlines()
    assert "needs podman: the podman tier runs real containers" in lines
    assert "needs runc: podman's container runtime" in lines
    named = lines[-1].split("no apt-get here: install these by hand (Debian names): ")[1].split(";")[0].split()
    assert [name for name in named if name != "postgresql"] == ["podman", "runc", "debootstrap", "chromium"]


def test_crun_stands_for_runc(tmp_path: Path) -> None:
    result = _needs(tmp_path, ["crun", "podman"])
    assert result.returncode == 69, result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith(("needs runc", "needs podman"))]
    named = result.stderr.splitlines()[-1].split("(Debian names): ")[1].split(";")[0].split()
    # postgresql is found where Debian put it, whatever the PATH: this machine may have it or not
    assert [name for name in named if name != "postgresql"] == ["debootstrap", "chromium"]
