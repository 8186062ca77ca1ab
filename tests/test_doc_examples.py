"""The docs' examples run as shipped.

docs/aorta.md's commands, exactly as its first code block prints them, run from a copy
of docs/examples/aorta/ where `./venv` is a real venv (made here, without pip) whose
`triton` is a fake one (an environment double, tests/envs.py): no GPU for cupti, a
working instrumentation start. Each command answers with the exit code of an answer,
never a usage error (64) or a file or name that names nothing (65).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from survey.core import exitcodes
from tests.envs import fake_triton

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples" / "aorta"


def doc_commands(page: Path) -> list[str]:
    """The `survey` command lines of the page's first sh block, comments cut off."""
    block = re.search(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert block is not None, f"{page}: no sh block"
    return [re.sub(r"\s+#.*$", "", ln) for ln in block.group(1).splitlines() if ln.startswith("survey ")]


def test_aorta_md_examples_run_as_shipped(tmp_path: Path) -> None:
    work = tmp_path / "aorta"
    shutil.copytree(EXAMPLES, work)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / "venv")], check=True, timeout=120)
    fake = fake_triton(tmp_path / "fake", {"cupti": "no-gpu", "instrumentation": "ok"},
                       registry=["cupti", "instrumentation"], dist=True, version="3.6.0")
    site = next((work / "venv" / "lib").glob("python3*/site-packages"))
    (site / "fake_triton.pth").write_text(f"{fake}\n")
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # no `aorta` on it: the declared model answers
    env = {**os.environ, "SURVEY_DB": str(tmp_path / "survey.db"), "PATH": path}
    env.pop("PYTHONPATH", None)

    commands = doc_commands(ROOT / "docs" / "aorta.md")
    # What each line answers here, in the block's order: gpu_smoke runs in aorta's own
    # process (no profile: 2); the probe recipe's cells need a GPU that is not here (3);
    # survey run stores the venv (0).
    want = [exitcodes.CANNOT_RUN] * 4 + [exitcodes.NOT_ENOUGH_EVIDENCE] * 2 + [exitcodes.OK]
    assert len(commands) == len(want), commands
    for line, code in zip(commands, want, strict=True):
        argv = shlex.split(line)
        r = subprocess.run([sys.executable, "-m", "survey", *argv[1:]], cwd=work, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == code, (line, r.returncode, r.stdout[-2000:], r.stderr[-2000:])
        assert "Traceback" not in r.stdout + r.stderr, line


def test_analysis_md_examples_run_as_shipped(tmp_path: Path) -> None:
    """docs/analysis.md's Python and its export commands, on a store of real fixture
    reports (filed as the catalog's candidates) at the path the page uses (./survey.db)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    env.pop("SURVEY_DB", None)
    reports = ROOT / "tests" / "fixtures" / "reports"
    for report, name in (("cpu-triton-3.8.0.json", "triton-3.8.0"), ("cpu-triton-3.9.0.json", "triton-3.9.0"),
                         ("h200-sm90-triton-3.6.0-schema3.json", "triton-3.6.0")):  # as the catalog's candidates
        stored = subprocess.run([sys.executable, "-m", "survey", "ingest", "--db", "survey.db", str(reports / report),
                                 "--candidate", name], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=300)
        assert stored.returncode == 0, stored.stderr
    page = (ROOT / "docs" / "analysis.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert code is not None
    r = subprocess.run([sys.executable, "-c", code.group(1)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "triton_version" in r.stdout and "kernel_count" in r.stdout  # the pivot's index, the captures' columns
    commands = doc_commands(ROOT / "docs" / "analysis.md")
    assert [shlex.split(c)[:2] for c in commands] == [["survey", "export"]] * 2
    for line in commands:
        argv = shlex.split(line)
        r = subprocess.run([sys.executable, "-m", "survey", *argv[1:], "--db", "survey.db"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (line, r.stderr)
        assert (tmp_path / argv[argv.index("-o") + 1]).stat().st_size > 0, line


def test_fleet_md_examples_hold_as_shipped(tmp_path: Path) -> None:
    """docs/fleet.md: its catalog (fleet.toml) loads as written, and `survey platform
    --address HEAD:6379` prints the platform and the `ray start` line of the shape the page
    shows. (The cluster itself is the fleet tier's: tests/test_fleet.py.)"""
    from survey.environments import catalog

    page = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    toml = re.search(r"```toml\n(.*?)```", page, flags=re.DOTALL)
    assert toml is not None
    (tmp_path / "fleet.toml").write_text(toml.group(1))
    loaded = catalog.load(tmp_path / "fleet.toml")
    assert loaded.names() == ["triton-3.9.0"] and loaded.candidate[0].platforms == ["sm_90", "gfx942"]
    assert "survey platform --address HEAD:6379" in doc_commands(ROOT / "docs" / "fleet.md")
    r = subprocess.run([sys.executable, "-m", "survey", "platform", "--address", "HEAD:6379"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    shown = re.search(r"#   (platform: .*)\n#   (ray start .*)\n", page)
    assert shown is not None
    got = r.stdout.splitlines()
    assert re.fullmatch(r"platform: \S+  \(.+\)", got[0]) and shown.group(1).startswith("platform: ")
    assert re.fullmatch(r"ray start --address=HEAD:6379 --resources '\{\"proton-survey/platform:[^\"]+\": 1\}'", got[1])
    assert re.fullmatch(r"ray start --address=HEAD:6379 --resources '\{\"proton-survey/platform:[^\"]+\": 1\}'",
                        shown.group(2))
