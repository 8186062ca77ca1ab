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
