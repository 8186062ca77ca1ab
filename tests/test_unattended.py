"""docs/survey-unattended.sh, the script docs/unattended.md runs from a systemd timer, cron
and GitHub Actions: run for real (``sh``, the ``survey`` command in a subprocess) against a
package index on 127.0.0.1 (tests/pyindex.py). Nothing changed: exit 0 and no output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import feedparser
import pytest
import yaml

from tests.pyindex import LocalIndex, fake_triton_wheel

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "survey-unattended.sh"
PAGE = """# Availability

Measured by proton-survey:

<!-- proton-survey:availability:start -->
<!-- proton-survey:availability:end -->

Text after the table stays as it is.
"""


def unattended(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(SCRIPT)], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


@pytest.fixture
def settings(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "SURVEY_"))}
    env.update(SURVEY=f"{sys.executable} -m survey", SURVEY_DB=f"sqlite:///{tmp_path / 'store' / 's.db'}",
               SURVEY_CACHE=str(tmp_path / "cache"), PIP_CONFIG_FILE=os.devnull,
               SURVEY_PAGE=str(tmp_path / "page.md"), SURVEY_SITE=str(tmp_path / "site"),
               SURVEY_ARGS="--timeout 20 --jobs 1")
    (tmp_path / "page.md").write_text(PAGE)
    return env


def test_the_script_surveys_rewrites_publishes_and_is_silent_when_nothing_changed(tmp_path: Path,
                                                                                 settings: dict[str, str]) -> None:
    wheels = tmp_path / "wheels"
    fake_triton_wheel(wheels, "3.10.0", {"cupti": "ok"}, tmp_path / "work")
    page, site = Path(settings["SURVEY_PAGE"]), Path(settings["SURVEY_SITE"])
    with LocalIndex(wheels) as index:
        catalog = tmp_path / "catalog.toml"
        catalog.write_text(f'[[candidate]]\nname = "triton"\nlabel = "Triton {{version}}"\npip = "triton"\n'
                           f'versions = ">=3.10"\nindex_url = "{index.url}"\n')
        env = {**settings, "SURVEY_CATALOG": str(catalog)}

        first = unattended(env)
        assert first.returncode == 0, first
        assert first.stdout == ""
        lines = first.stderr.splitlines()
        assert lines[0] == f"survey: 1 probed  (store: {settings['SURVEY_DB']})"
        assert lines[1] == f"{page}: table updated" and lines[2].startswith(f"{site}: ")
        text = page.read_text()
        assert "| Triton 3.10.0 " in text and text.endswith("Text after the table stays as it is.\n")
        feed = feedparser.parse((site / "changes.atom").read_bytes())
        assert not feed.bozo and len(feed.entries) == 14
        assert all(e.title.startswith("triton-3.10.0 · ") for e in feed.entries)
        page_stat, site_stat = page.stat(), (site / "index.html").stat()

        second = unattended(env)  # nothing new: nothing said, nothing touched
        assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
        assert page.stat().st_mtime_ns == page_stat.st_mtime_ns
        assert (site / "index.html").stat().st_ino == site_stat.st_ino  # the site was not published again

        fake_triton_wheel(wheels, "3.11.0", {"cupti": "ok"}, tmp_path / "work")  # a release is published
        third = unattended(env)
        assert third.returncode == 0 and third.stderr.startswith("survey: 1 probed, 1 unchanged"), third
        assert "| Triton 3.11.0 " in page.read_text() and "| Triton 3.10.0 " in page.read_text()
        feed = feedparser.parse((site / "changes.atom").read_bytes())
        assert len(feed.entries) == 28 and feed.entries[0].title.startswith("triton-3.11.0 · ")


def test_the_script_passes_an_error_on(tmp_path: Path, settings: dict[str, str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[candidate]\n")
    r = unattended({**settings, "SURVEY_CATALOG": str(bad)})
    assert r.returncode == 65 and "not valid TOML" in r.stderr and r.stdout == "", r
    assert Path(settings["SURVEY_PAGE"]).read_text() == PAGE and not Path(settings["SURVEY_SITE"]).exists()
    r = unattended({**settings, "SURVEY_NOTIFY": "http://127.0.0.1:1/hook"})  # no SURVEY_WEBHOOK_SECRET
    assert r.returncode == 64 and "SURVEY_WEBHOOK_SECRET" in r.stderr, r


def test_the_documented_schedules_run_the_script() -> None:
    doc = (ROOT / "docs" / "unattended.md").read_text()
    assert "ExecStart=/bin/sh /opt/proton-survey/docs/survey-unattended.sh" in doc
    cron = re.search(r"^17\s+\*/6\s+\*\s+\*\s+\*\s+(.*)$", doc, re.M)
    assert cron is not None and cron.group(1).endswith("sh /opt/proton-survey/docs/survey-unattended.sh")
    flow = yaml.safe_load((ROOT / "docs" / "github-actions-survey.yml").read_text())
    triggers = flow[True]  # YAML 1.1 (PyYAML) reads the key `on` as true; GitHub reads it as "on"
    assert triggers["schedule"] == [{"cron": "17 */6 * * *"}] and "workflow_dispatch" in triggers
    steps = flow["jobs"]["survey"]["steps"]
    assert any(s.get("run") == "sh docs/survey-unattended.sh" for s in steps)
    gated = [s["name"] for s in steps if s.get("if") == "hashFiles('_site/index.html') != ''"]
    assert gated == ["Commit the docs page", "Upload the site", "Deploy the site"]
    # the flags the script relies on are the CLI's
    from tests.conftest import survey_cli

    helptext = survey_cli("run", "--help").stdout
    for flag in ("--quiet", "--exit-code", "--no-table", "--catalog", "--notify"):
        assert flag in helptext, flag


def _expand(value: str, workspace: Path) -> str:
    """A workflow value as GitHub Actions expands it here: the workspace, and no vars or secrets."""
    value = value.replace("${{ github.workspace }}", str(workspace))
    return re.sub(r"\$\{\{\s*(vars|secrets)\.[A-Za-z_]+\s*\}\}", "", value)


def test_the_shipped_workflow_runs_as_shipped(tmp_path: Path) -> None:
    """docs/github-actions-survey.yml, step by step as shipped, in a clone of a repository
    holding this checkout's README.md and docs/ (its remote a bare repository on disk): the
    survey, then the commit of its docs page, pushed. Its actions (`uses:`) are GitHub's; the
    install step is this test's own interpreter. (Failed first: SURVEY_PAGE was README.md,
    which has no table markers: exit 65.)"""
    import shutil

    flow = yaml.safe_load((ROOT / "docs" / "github-actions-survey.yml").read_text())
    job = flow["jobs"]["survey"]
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    seed = tmp_path / "seed"
    (seed / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", seed / "README.md")
    for doc in (ROOT / "docs").iterdir():
        if doc.is_file():
            shutil.copy(doc, seed / "docs" / doc.name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", "--bare", str(origin)], check=True)
    subprocess.run([*git, "init", "-q", str(seed)], check=True)
    subprocess.run([*git, "-C", str(seed), "add", "."], check=True)
    subprocess.run([*git, "-C", str(seed), "commit", "-qm", "seed"], check=True)
    subprocess.run([*git, "-C", str(seed), "push", "-q", str(origin), "HEAD:main"], check=True)
    subprocess.run([*git, "clone", "-q", str(origin), str(work)], check=True)

    wheels = tmp_path / "wheels"
    fake_triton_wheel(wheels, "3.10.0", {"cupti": "ok"}, tmp_path / "fake")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "SURVEY_", "GIT_"))}
    env = {**base, **{k: _expand(str(v), work) for k, v in job["env"].items()}}
    (work / ".survey").mkdir()
    bindir = tmp_path / "bin"  # `survey` on PATH, as `pip install -e .` leaves it
    bindir.mkdir()
    (bindir / "survey").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m survey "$@"\n')
    (bindir / "survey").chmod(0o755)
    env["PATH"] = f"{bindir}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env["PIP_CONFIG_FILE"] = os.devnull
    ran = []
    with LocalIndex(wheels) as index:
        catalog = tmp_path / "catalog.toml"
        catalog.write_text(f'[[candidate]]\nname = "triton"\nlabel = "Triton {{version}}"\npip = "triton"\n'
                           f'versions = ">=3.10"\nindex_url = "{index.url}"\n')
        env.update(SURVEY_CATALOG=str(catalog), SURVEY_ARGS="--timeout 20 --jobs 1")
        for step in job["steps"]:
            if "run" not in step or step["name"] == "Install proton-survey":
                continue
            cond = step.get("if")
            if cond == "hashFiles('_site/index.html') != ''" and not (work / "_site" / "index.html").exists():
                continue
            r = subprocess.run(["bash", "-e", "-c", _expand(step["run"], work)], cwd=work, env=env,
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, (step["name"], r.stdout, r.stderr)
            ran.append(step["name"])
    assert ran == ["Survey (stops quietly when nothing changed)", "Commit the docs page"]
    log = subprocess.run(["git", "-C", str(origin), "log", "--format=%s", "-1", "--stat", "main"],
                         capture_output=True, text=True, check=True).stdout
    assert log.startswith("Availability table: new evidence from proton-survey"), log
    assert env["SURVEY_PAGE"] in log, log
    pushed = subprocess.run(["git", "-C", str(origin), "show", f"main:{env['SURVEY_PAGE']}"],
                            capture_output=True, text=True, check=True).stdout
    assert "| Triton 3.10.0 " in pushed
