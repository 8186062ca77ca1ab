"""Faults and hostile input at the command line.

- every command on a damaged store: one line and exit 65; on a store it may not read: exit 74;
- a catalog with several problems: all of them named, exit 65, before anything is probed;
- ``survey ingest`` holds a report to the upload's limits (size, JSON types, names);
- a credentialed URL in a pip spec never reaches a line, the store, a page or the site;
- a Markdown link target in the docs table cannot end its definition;
- webhook targets on loopback, link-local or private addresses are refused unless allowed.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from db.store import Store
from survey.environments.launchers.pip import PipLauncher
from survey.render.escape import link_target
from tests.conftest import report_bytes, survey_cli
from tests.helpers.store import filled_sqlite, stored_text, unprivileged

SECRET = "s3cr3t-pw"


def one_line(r: Any, code: int) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == code and "Traceback" not in r.stderr + r.stdout and 1 <= len(lines) <= 2, r
    assert "sqlalche.me" not in r.stderr, r  # no driver's second line
    return str(lines[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- a damaged store
def damaged(path: Path) -> None:
    """A store that opens (its schema and revision read) and whose evidence does not: the
    first pages of its tables of evidence are garbage, as a disk may leave them."""
    filled_sqlite(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        roots = conn.execute("SELECT tbl_name, rootpage FROM sqlite_master WHERE rootpage > 0").fetchall()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for number in sorted({root for table, root in roots if table not in ("alembic_version", "meta")}):
        for at in range((number - 1) * page + 8, number * page, 61):
            data[at] = 0xA5
    path.write_bytes(bytes(data))


def commands(db: str, tmp_path: Path) -> dict[str, list[str]]:
    report = tmp_path / "r.json"
    report.write_bytes(report_bytes("cpu-triton-3.6.0.json"))
    cat = tmp_path / "cat.toml"
    cat.write_text(f'[[candidate]]\nname = "x"\npython = "{tmp_path / "no-such-python"}"\n')
    return {
        "table": ["table", "--db", db],
        "history": ["history", "triton-3.9.0", "--backend", "cupti", "--db", db],
        "diff": ["diff", "triton-3.8.0", "triton-3.9.0", "--db", db],
        "changes": ["changes", "--db", db],
        "check": ["check", "triton-3.9.0", "--backend", "cupti", "--platform", "none:x86_64", "--db", db],
        "ingest": ["ingest", str(report), "--db", db],
        "run": ["run", "--catalog", str(cat), "--no-table", "--db", db],
        "publish": ["publish", str(tmp_path / "site"), "--db", db],
        "serve": ["serve", "--port", str(free_port()), "--db", db],
        "store backup": ["store", "backup", str(tmp_path / "copy.db"), "--db", db],
        "store replace": ["store", "replace", str(report), "--db", db],
    }


@pytest.mark.parametrize("command", ["table", "history", "diff", "changes", "check", "ingest", "run", "publish",
                                     "serve", "store backup", "store replace"])
def test_every_command_on_a_damaged_store_says_so_in_one_line_and_exits_65(command: str, tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    damaged(path)
    r = survey_cli(*commands(f"sqlite:///{path}", tmp_path)[command])
    one_line(r, 65)


@pytest.mark.parametrize("command", ["table", "history", "changes", "check", "publish"])
def test_a_store_this_user_may_not_read_is_exit_74(command: str, shared_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to become an unprivileged user")
    path = shared_dir / "s.db"
    filled_sqlite(path)
    os.chmod(path, 0o000)
    argv = commands(f"sqlite:///{path}", shared_dir)[command]
    got = unprivileged(lambda: vars(survey_cli(*argv)))
    assert got["returncode"] == 74 and "Traceback" not in got["stderr"], got
    assert len([ln for ln in got["stderr"].splitlines() if ln.strip()]) == 1, got


# --------------------------------------------------------------------------- the whole catalog first
def test_every_catalog_problem_is_named_before_anything_is_probed(tmp_path: Path) -> None:
    cat = tmp_path / "cat.toml"
    cat.write_text('[[candidate]]\nname = "good"\npython = "/usr/bin/python3"\n'
                   '[[candidate]]\nname = "bad-label"\nlabel = "evil\\u202elabel"\npython = "/usr/bin/python3"\n'
                   '[[candidate]]\nname = "bad name"\npython = "/usr/bin/python3"\n'
                   '[[candidate]]\nname = "two-sources"\npython = "/usr/bin/python3"\nimage = "x"\n')
    db = tmp_path / "s.db"
    r = survey_cli("run", "--catalog", str(cat), "--db", f"sqlite:///{db}", "--no-table")
    line = one_line(r, 65)
    assert "3 problems" in line and "bad-label" in line and "U+202E" in line, line
    assert "bad name" in line and "two-sources" in line, line
    assert not db.exists()  # nothing probed, nothing stored


# --------------------------------------------------------------------------- ingest holds the upload's limits
def test_ingest_refuses_what_an_upload_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    big = json.loads(report_bytes("cpu-triton-3.9.0.json"))
    big["environment"]["triton"]["error"] = "x" * (2 * 1024 * 1024)
    report = tmp_path / "big.json"
    report.write_text(json.dumps(big))
    monkeypatch.setenv("SURVEY_MAX_UPLOAD_BYTES", str(1024 * 1024))
    assert "at most 1048576 bytes" in one_line(survey_cli("ingest", str(report), "--db", db), 65)
    monkeypatch.delenv("SURVEY_MAX_UPLOAD_BYTES")
    wrong = json.loads(report_bytes("cpu-triton-3.9.0.json"))
    wrong["probe"]["timeout_s"] = False  # a boolean for a number: the upload's 422
    report.write_text(json.dumps(wrong))
    assert "probe.timeout_s" in one_line(survey_cli("ingest", str(report), "--db", db), 65)
    report.write_bytes(report_bytes("cpu-triton-3.9.0.json"))
    line = one_line(survey_cli("ingest", str(report), "--candidate", "evil\u202ename", "--new", "--db", db), 64)
    assert "U+202E" in line, line
    assert one_line(survey_cli("ingest", str(report), "--label", "x" * 401, "--candidate", "mine", "--new",
                               "--db", db), 64)
    assert not (tmp_path / "s.db").exists() or "evil" not in stored_text(Store(db))


# --------------------------------------------------------------------------- credentials in a pip spec
def test_a_password_in_a_pip_spec_reaches_no_output_of_a_run(tmp_path: Path, make_client: Any) -> None:
    index = f"http://alice:{SECRET}@127.0.0.1:9/simple"
    assert SECRET not in PipLauncher([f"triton==3.6.0 --index-url {index}"]).describe()
    cat = tmp_path / "catalog.toml"
    cat.write_text(f'[[candidate]]\nname = "private"\npip = "proton-survey-no-such-dist==1.0 --index-url {index}"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    r = survey_cli("run", "--catalog", str(cat), "--db", db)
    assert r.returncode == 0 and "obtaining a venv with" in r.stderr and "alice:***@" in r.stderr, r
    outputs = [r.stdout, r.stderr]
    for argv in (["table", "--all"], ["table", "--all", "--format", "json"], ["changes", "--all"],
                 ["history", "private", "--backend", "cupti"]):
        got = survey_cli(*argv, "--db", db)
        outputs += [got.stdout, got.stderr]
    store = Store(db)
    try:
        outputs.append(stored_text(store))
        c = make_client(store)
        for path in ("/candidates/private.json", "/candidates/private", "/candidates.json", "/matrix.json?scope=all",
                     "/matrix?scope=all", "/changes.json?scope=all", "/runs/1.json", "/runs/1"):
            page = c.get(path)
            assert page.status_code == 200, path
            outputs.append(page.text)
    finally:
        store.close()
    site = tmp_path / "site"
    assert survey_cli("publish", str(site), "--all", "--db", db).returncode == 0
    outputs += [p.read_bytes().decode("utf-8", "replace") for p in site.rglob("*") if p.is_file()]
    assert (tmp_path / "s.db").read_bytes().find(SECRET.encode()) == -1
    leaks = [o for o in outputs if SECRET in o]
    assert not leaks, [o[max(0, o.find(SECRET) - 200):o.find(SECRET) + 50] for o in leaks]


# --------------------------------------------------------------------------- Markdown link targets
def test_a_link_target_cannot_end_its_markdown_definition() -> None:
    hostile = 'https://example.com/a b>"title"\n[x]: javascript:alert(1) <b>'
    target = link_target(hostile)
    assert target.startswith("https://example.com/a%20b%3E%22title%22%0A"), target
    assert not set(target) & set(' <>"\'()\n\r\t'), target
    assert link_target("https://github.com/t/t/blob/abc/x.md#L1") == "https://github.com/t/t/blob/abc/x.md#L1"


# --------------------------------------------------------------------------- webhook targets
@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook", "http://169.254.169.254/latest/meta-data",
                                 "http://10.1.2.3/h", "http://192.168.0.10/h", "http://[::1]:9/h", "http://localhost/h",
                                 "http://0.0.0.0/h"])
def test_a_webhook_on_an_internal_address_is_refused_unless_allowed(url: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURVEY_WEBHOOK_SECRET", "k")
    cat = tmp_path / "c.toml"
    cat.write_text(f'[[candidate]]\nname = "x"\npython = "{tmp_path / "no-such-python"}"\n')
    db = tmp_path / "s.db"
    line = one_line(survey_cli("run", "--catalog", str(cat), "--db", f"sqlite:///{db}", "--notify", url), 64)
    assert "--notify-private" in line or "private address" in line, line
    assert not db.exists()
