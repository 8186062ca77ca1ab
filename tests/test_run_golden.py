"""`survey run`'s output, byte for byte, on fake environments (tests/envs.py) and a
fixed clock: what the terminal log, the summary and the table say is the contract the
flow (plan, execute, report) keeps. `--json-lines` says the same in events.

Regenerate tests/golden/ only for a change of output that is meant:
SURVEY_GOLDEN_WRITE=1 pytest tests/test_run_golden.py."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sys
from pathlib import Path

import pytest
import time_machine

from tests.conftest import survey_cli
from tests.envs import fake_interpreter, fake_triton

GOLDEN = Path(__file__).resolve().parent / "golden"
NOW = "2026-03-14 09:26:53+00:00"


@pytest.fixture(scope="module")
def environments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two interpreters that see fake Tritons (one accepts cupti, one refuses its modes)
    and one that is not there."""
    root = tmp_path_factory.mktemp("golden")
    ok = fake_interpreter(root / "ok", fake_triton(root / "fake-ok", {"cupti": "ok"}, version="3.10.0"))
    refuses = fake_interpreter(root / "refuses", fake_triton(root / "fake-refuses", {
        "cupti": "ok", "cupti:pcsampling": "refuse", "cupti:periodic_flushing": "refuse"}, version="3.11.0"))
    (root / "catalog.toml").write_text(
        f'[[candidate]]\nname = "fake-ok"\nlabel = "Fake 3.10.0"\npython = "{ok}"\n\n'
        f'[[candidate]]\nname = "fake-refuses"\nlabel = "Fake 3.11.0"\npython = "{refuses}"\n\n'
        f'[[candidate]]\nname = "gone"\nlabel = "Not there"\npython = "{root / "gone" / "bin" / "python"}"\n')
    return root


def normalised(text: str, root: Path) -> str:
    """What differs between machines and days: paths, the platform, the host, the Python,
    and the date a probe writes in its report (a subprocess: the fixed clock is this
    process's)."""
    from survey.evidence.identity import local_platform

    here = local_platform()
    text = text.replace(str(root), "<root>").replace(sys.executable, "<python>")
    text = text.replace(f"host {socket.gethostname()}", "host <host>")
    text = text.replace(dt.datetime.now(dt.UTC).date().isoformat(), "<today>")
    text = text.replace(here.key, "<platform-key>").replace(here.label, "<platform>")
    return text.replace(f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}",
                        "<python-version>")


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SURVEY_GOLDEN_WRITE"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_survey_run_says_what_it_always_said(environments: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    cat = str(environments / "catalog.toml")
    with time_machine.travel(NOW, tick=False):
        first = survey_cli("run", "--catalog", cat, "--jobs", "1", "--timeout", "20", "--db", db)
        again = survey_cli("run", "--catalog", cat, "--jobs", "1", "--timeout", "20", "--db", db)
        quiet = survey_cli("run", "--catalog", cat, "--jobs", "1", "--quiet", "--db", db)
    assert (first.returncode, again.returncode, quiet.returncode) == (0, 0, 0), (first, again)
    root = tmp_path.parent
    text = "\n".join(f"== {what} (exit {r.returncode})\n-- stdout\n{r.stdout}-- stderr\n{r.stderr}"
                     for what, r in (("first", first), ("again", again), ("quiet", quiet)))
    # the test's own directory by name: pytest numbers it by how often the test ran in this process
    golden("run.txt", normalised(normalised(text.replace(str(tmp_path), "<tmp>"), environments), root))


def test_json_lines_are_the_events_of_the_survey(environments: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    cat = str(environments / "catalog.toml")
    with time_machine.travel(NOW, tick=False):
        r = survey_cli("run", "--catalog", cat, "--jobs", "1", "--timeout", "20", "--json-lines", "--db", db)
    assert r.returncode == 0, r
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.stderr == ""
    plan = events[0]
    assert plan["event"] == "plan"
    assert [(c["name"], c["why"]) for c in plan["candidates"]] == [("fake-ok", "new"), ("fake-refuses", "new"),
                                                                    ("gone", "new")]
    done = {e["name"]: e for e in events if e["event"] == "done"}
    assert {n: e["status"] for n, e in done.items()} == {"fake-ok": "probed", "fake-refuses": "probed",
                                                         "gone": "unobtainable"}
    assert events[-1] == {"event": "summary", "counts": {"probed": 2, "unobtainable": 1},
                          "store": str(tmp_path / "s.db"), "changed": True}
    golden("run.jsonl", normalised(normalised(r.stdout.replace(str(tmp_path), "<tmp>"), environments),
                                   tmp_path.parent))
    with time_machine.travel(NOW, tick=False):
        again = survey_cli("run", "--catalog", cat, "--jobs", "1", "--json-lines", "--db", db)
    [plan] = [json.loads(line) for line in again.stdout.splitlines() if '"event": "plan"' in line]
    assert [(c["name"], c["why"]) for c in plan["candidates"]] == [("fake-ok", "recheck"),
                                                                    ("fake-refuses", "recheck"),
                                                                    ("gone", "unobtainable")]
    assert json.loads(again.stdout.splitlines()[-1])["changed"] is False
