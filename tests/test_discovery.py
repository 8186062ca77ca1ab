"""Families in the catalog, discovered when the survey runs (survey.environments.discovery).

The environments are real: a package index served on 127.0.0.1 (tests/pyindex.py) holding
real wheels - in the fast tier tiny ones packing the fake ``triton`` of tests/envs.py, in
the integration tier the real Triton wheels from PyPI (pip's cache) - and, in the podman
tier, a local image tag that the test moves to another image.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import feedparser
import httpx
import pytest
from packaging.tags import Tag
from sqlalchemy import func, select

from db import models as m
from db.store import Store
from survey.core.errors import CatalogError, Unobtainable
from survey.environments import catalog as catalog_mod
from survey.environments import discovery
from survey.environments.catalog import Entry
from tests.conftest import survey_cli
from tests.helpers.images import IMG, digest_of, podman
from tests.pyindex import LocalIndex, Receiver, build_wheel, closed_port, fake_triton_wheel

SECRET = "webhook-secret-for-tests"
HERE = discovery.target_python(None)


@pytest.fixture
def hermetic_pip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """pip sees only the indexes a test names (no configuration of this machine), and
    venvs live in the test's directory."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SURVEY_CACHE", str(tmp_path / "cache"))
    return tmp_path


def family(tmp_path: Path, index: str, versions: str = ">=3.10", *, extra: str = "") -> Path:
    cat = tmp_path / "catalog.toml"
    cat.write_text(f'[[candidate]]\nname = "triton"\nlabel = "Triton {{version}}"\npip = "triton"\n'
                   f'versions = "{versions}"\nindex_url = "{index}"\n{extra}')
    return cat


def names(store: Store) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(m.Candidate.name).order_by(m.Candidate.position, m.Candidate.id)))


def run_count(store: Store) -> int:
    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(m.Run)) or 0)


# --------------------------------------------------------------------------- the catalog's syntax
@pytest.mark.parametrize(("body", "needle"), [
    ('pip = "triton>=3.6"\nversions = ">=3.6"', "put the range in versions"),
    ('pip = "triton"\nversions = ">=three"', "is not a PEP 440 version range"),
    ('pip = ["triton", "torch"]\nversions = ">=3.6"', "one project name"),
    ('image = "x/y:latest"\nversions = ">=1"', "this entry has no pip"),
    ('image = "x/y:latest"\ntrack = "tags"', 'the one way to track an image is "digest"'),
    ('pip = "triton"\ntrack = "digest"', "this entry has no image"),
    ('image = "x/y@sha256:' + "0" * 64 + '"\ntrack = "digest"', "pinned by digest already"),
    ('pip = "triton==3.6.0"\ndiscovered_from = "x"', "discovered_from is set by discovery"),
])
def test_a_family_entry_that_cannot_work_is_refused_with_its_reason(tmp_path: Path, body: str, needle: str) -> None:
    cat = tmp_path / "c.toml"
    cat.write_text(f'[[candidate]]\nname = "fam"\n{body}\n')
    with pytest.raises(CatalogError, match="fam") as e:
        catalog_mod.load(cat)
    assert needle in e.value.message
    r = survey_cli("run", "--catalog", str(cat), "--db", f"sqlite:///{tmp_path / 's.db'}")
    assert r.returncode == 65 and needle in r.stderr and "Traceback" not in r.stderr, r


def test_pins_and_families_load_side_by_side() -> None:
    cat = catalog_mod.load()  # the default catalog: pins only, still valid
    assert not any(e.family for e in cat.candidate)
    pin = Entry(name="triton-3.9.0", pip="triton==3.9.0")
    fam = Entry(name="triton", pip="triton[tests]", versions=">=3.6", pre=True)
    img = Entry(name="rocm", image="docker.io/rocm/pytorch:latest", track="digest")
    assert (pin.family, fam.family, img.family) == (False, True, True)
    assert discovery.member_name("pt", "3.5.0+gitabc.def") == "pt-3.5.0_gitabc.def"


# --------------------------------------------------------------------------- what the index says
def test_versions_pip_would_install_here_and_nothing_else() -> None:
    py = ".".join(map(str, sys.version_info[:2]))
    cp = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    plat = next(t.platform for t in HERE.tags if t.platform != "any")
    files = [
        discovery.IndexFile("triton-3.5.0-py3-none-any.whl", "u"),  # below the range
        discovery.IndexFile(f"triton-3.6.0-{cp}-{cp}-{plat}.whl", "u"),  # this interpreter's own tags
        discovery.IndexFile("triton-3.7.0-py3-none-any.whl", "u", yanked=True),  # yanked: left out
        discovery.IndexFile("triton-3.7.1-cp27-cp27mu-manylinux1_x86_64.whl", "u"),  # no wheel for us
        discovery.IndexFile("triton-3.8.0-py3-none-any.whl", "u", requires_python=f"<{py}"),  # refuses us
        discovery.IndexFile("triton-3.8.1-py3-none-any.whl", "u", requires_python="not a specifier"),
        discovery.IndexFile("triton-3.9.0.tar.gz", "u"),  # a source distribution: pip would build it
        discovery.IndexFile("triton-3.10.0rc1-py3-none-any.whl", "u"),  # a pre-release
        discovery.IndexFile("triton_other-4.0.0-py3-none-any.whl", "u"),  # another project
        discovery.IndexFile("triton-4.0.0.exe", "u"),  # not a distribution pip reads
    ]
    spec = discovery.SpecifierSet(">=3.6")
    found = discovery.installable_versions(files, "triton", spec, False, HERE)
    assert [str(v) for v in found.versions] == ["3.6.0", "3.8.1", "3.9.0"]
    assert found.notes == ["3.7.0: left out (yanked)",
                           f"3.7.1: left out (no wheel for this Python ({HERE.version}) and platform)",
                           f"3.8.0: left out (needs Python <{py})"]
    pre = discovery.installable_versions(files, "triton", spec, True, HERE)
    assert [str(v) for v in pre.versions] == ["3.6.0", "3.8.1", "3.9.0", "3.10.0rc1"]
    # another interpreter takes other wheels: only the cp27 one (and the source distribution)
    other = discovery.Target("2.7.18", frozenset({Tag("cp27", "cp27mu", "manylinux1_x86_64")}))
    assert [str(v) for v in discovery.installable_versions(files, "triton", spec, False, other).versions] == \
        ["3.7.1", "3.9.0"]


def test_pep_503_and_pep_691_pages_read_alike() -> None:
    html = (b'<!DOCTYPE html><html><body>\n<a href="../../files/triton-3.6.0-py3-none-any.whl#sha256=00">'
            b'triton-3.6.0-py3-none-any.whl</a>\n<a href="https://x.example/t/triton-3.7.0-py3-none-any.whl" '
            b'data-yanked="" data-requires-python="&gt;=3.9">triton-3.7.0-py3-none-any.whl</a>\n</body></html>')
    got = discovery.parse_project_page(html, "text/html", "http://127.0.0.1:1/simple/triton/")
    assert [(f.filename, f.url, f.yanked, f.requires_python) for f in got] == [
        ("triton-3.6.0-py3-none-any.whl", "http://127.0.0.1:1/files/triton-3.6.0-py3-none-any.whl#sha256=00",
         False, None),
        ("triton-3.7.0-py3-none-any.whl", "https://x.example/t/triton-3.7.0-py3-none-any.whl", True, ">=3.9")]
    doc = {"meta": {"api-version": "1.1"}, "name": "triton", "files": [
        {"filename": "triton-3.6.0-py3-none-any.whl", "url": "../../files/triton-3.6.0-py3-none-any.whl"},
        {"filename": "triton-3.7.0-py3-none-any.whl", "url": "https://x.example/t/triton-3.7.0-py3-none-any.whl",
         "yanked": "broken", "requires-python": ">=3.9"}]}
    got2 = discovery.parse_project_page(json.dumps(doc).encode(), discovery.JSON_TYPE,
                                        "http://127.0.0.1:1/simple/triton/")
    assert [(f.filename, f.yanked, f.requires_python) for f in got2] == \
        [(f.filename, f.yanked, f.requires_python) for f in got]
    with pytest.raises(Unobtainable, match="not a simple-API project page"):
        discovery.parse_project_page(b'{"name": "triton"}', discovery.JSON_TYPE, "http://127.0.0.1:1/simple/t/")


@pytest.mark.parametrize("as_json", [False, True], ids=["pep503-html", "pep691-json"])
def test_a_local_index_lists_exactly_its_releases_and_then_the_new_one(tmp_path: Path, as_json: bool) -> None:
    wheels = tmp_path / "wheels"
    for v in ("3.9.0", "3.10.0", "3.10.1"):
        fake_triton_wheel(wheels, v, {"cupti": "ok"}, tmp_path / "work")
    build_wheel(wheels, "triton", "3.11.0", {"triton/__init__.py": b""}, requires_python="<3.0")
    build_wheel(wheels, "triton", "3.12.0", {"triton/__init__.py": b""})
    with LocalIndex(wheels, json=as_json) as index:
        index.state.yanked.add("triton-3.12.0-py3-none-any.whl")
        entry = Entry(name="triton", pip="triton", versions=">=3.10", index_url=index.url)
        members, notes = discovery.discover_pip(entry)
        assert [e.name for e in members] == ["triton-3.10.0", "triton-3.10.1"]
        assert [e.pip for e in members] == ["triton==3.10.0", "triton==3.10.1"]
        assert all(e.index_url == index.url and e.discovered_from == "triton" for e in members)
        assert notes == ["3.11.0: left out (needs Python <3.0)", "3.12.0: left out (yanked)"]
        fake_triton_wheel(wheels, "3.13.0", {"cupti": "ok"}, tmp_path / "work")  # a release is published
        again, _ = discovery.discover_pip(entry)
        assert [e.name for e in again] == ["triton-3.10.0", "triton-3.10.1", "triton-3.13.0"]
        accept = [r for r in index.state.requests if r.startswith("/simple/")]
        assert accept == ["/simple/triton/", "/simple/triton/"]


def test_an_index_that_cannot_be_read_is_unobtainable_with_the_real_error(tmp_path: Path) -> None:
    port = closed_port()
    entry = Entry(name="triton", pip="triton", versions=">=3.10", index_url=f"http://127.0.0.1:{port}/simple")
    with pytest.raises(Unobtainable, match=r"could not read http://127.0.0.1:\d+/simple/triton/: ConnectError: "
                                           r".*(refused|Errno 111)"):
        discovery.discover_pip(entry)
    with LocalIndex(tmp_path) as index:  # it answers, but has no such project
        with pytest.raises(Unobtainable, match="no index has a project named 'triton'"):
            discovery.discover_pip(Entry(name="t", pip="triton", versions=">=1", index_url=index.url))
    secret = Entry(name="t", pip="triton", versions=">=1", index_url=f"http://user:hunter2@127.0.0.1:{port}/simple")
    with pytest.raises(Unobtainable) as e:
        discovery.discover_pip(secret)
    assert "hunter2" not in e.value.message and "user:***@127.0.0.1" in e.value.message


def test_a_file_index_is_read_from_disk(tmp_path: Path) -> None:
    page = tmp_path / "simple" / "triton"
    page.mkdir(parents=True)
    (page / "index.html").write_text('<a href="../../triton-3.10.0-py3-none-any.whl">triton-3.10.0-py3-none-any.whl'
                                     '</a>\n')
    entry = Entry(name="t", pip="triton", versions=">=3", index_url=(tmp_path / "simple").as_uri())
    assert [e.pip for e in discovery.discover_pip(entry)[0]] == ["triton==3.10.0"]


# --------------------------------------------------------------------------- survey run, end to end
def verified(d: Any) -> dict[str, Any]:
    """The delivery's body, once its signature is checked the way a receiver checks it."""
    want = "sha256=" + hmac.new(SECRET.encode(), d.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(d.headers["x-survey-signature"], want)
    assert d.headers["content-type"] == "application/json" and d.headers["x-survey-event"] == "survey.changes"
    assert d.headers["x-survey-delivery"] == hashlib.sha256(d.body).hexdigest()
    doc = json.loads(d.body)
    assert doc["count"] == len(doc["changes"])
    return doc  # type: ignore[no-any-return]


def atom_ids(store: Store) -> list[str]:
    from fastapi.testclient import TestClient

    from api.app import create_app

    r = TestClient(create_app(store)).get("/changes.atom")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/atom+xml")
    feed = feedparser.parse(r.content)
    assert not feed.bozo, feed.bozo_exception
    return [e.id for e in feed.entries]


def test_survey_run_discovers_surveys_and_announces_only_what_is_new(hermetic_pip: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = hermetic_pip
    monkeypatch.setenv("SURVEY_WEBHOOK_SECRET", SECRET)
    wheels = tmp / "wheels"
    fake_triton_wheel(wheels, "3.9.0", {"cupti": "ok"}, tmp / "work")  # below the range: never surveyed
    fake_triton_wheel(wheels, "3.10.0", {"cupti": "ok"}, tmp / "work")
    db = f"sqlite:///{tmp / 's.db'}"
    with LocalIndex(wheels) as index, Receiver() as hook:
        cat = family(tmp, index.url)
        first = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--no-table",
                           "--notify", hook.url, "--notify-private")
        assert first.returncode == 0, first
        assert "triton: new: triton-3.10.0" in first.stderr and "1 probed" in first.stderr
        store = Store(db)
        assert names(store) == ["triton-3.10.0"]
        with store.session() as s:
            cand = s.scalar(select(m.Candidate).where(m.Candidate.name == "triton-3.10.0"))
            assert cand is not None and cand.label == "Triton 3.10.0" and cand.scope == "catalog"
            assert cand.spec["pip"] == "triton==3.10.0" and cand.spec["discovered_from"] == "triton"
            run = s.scalar(select(m.Run).where(m.Run.candidate_id == cand.id))
            assert run is not None and run.status == "complete" and run.triton_version == "3.10.0"
        ids_1 = atom_ids(store)
        assert len(ids_1) == 14 and all(i.startswith(f"urn:proton-survey:change:{run.report_hash}:") for i in ids_1)
        assert len(hook.got) == 1
        doc = verified(hook.got[0])
        assert doc["runs"] == [run.id] and {c["candidate"] for c in doc["changes"]} == {"triton-3.10.0"}
        assert {c["kind"] for c in doc["changes"]} == {"new"} and doc["count"] == 14
        cupti = next(c for c in doc["changes"] if (c["backend"], c["mode"]) == ("cupti", "none"))
        assert cupti["after"]["verdict"] == "accepted" and cupti["before"] is None
        assert cupti["previous_run_id"] is None and cupti["run_id"] == run.id

        venv = next((tmp / "cache" / "venvs").iterdir())
        marker = (venv / "proton-survey.json").stat()
        fake_triton_wheel(wheels, "3.11.0", {"cupti": "ok", "rocprofiler": "ok"}, tmp / "work")  # published
        second = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--no-table",
                            "--notify", hook.url, "--notify-private")
        assert second.returncode == 0, second
        assert "triton: new: triton-3.11.0" in second.stderr and "1 probed, 1 unchanged" in second.stderr
        assert names(store) == ["triton-3.10.0", "triton-3.11.0"]
        again = (venv / "proton-survey.json").stat()  # the stored release's venv was reused, not rebuilt
        assert (again.st_ino, again.st_mtime_ns) == (marker.st_ino, marker.st_mtime_ns)
        assert len(list((tmp / "cache" / "venvs").iterdir())) == 2
        ids_2 = atom_ids(store)
        assert len(ids_2) == 28 and ids_2[14:] == ids_1  # the new release's entries come first
        assert len(hook.got) == 2
        doc2 = verified(hook.got[1])
        assert {c["candidate"] for c in doc2["changes"]} == {"triton-3.11.0"} and doc2["count"] == 14
        rocprof = next(c for c in doc2["changes"] if (c["backend"], c["mode"]) == ("rocprofiler", "none"))
        assert rocprof["after"]["verdict"] == "accepted"

        runs_before = run_count(store)
        quiet = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--quiet", "--exit-code",
                           "--notify", hook.url, "--notify-private")
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")  # nothing changed: nothing said
        assert run_count(store) == runs_before and len(hook.got) == 2 and atom_ids(store) == ids_2
        with store.session() as s:
            assert s.scalar(select(func.count()).select_from(m.Delivery)) == 2
            assert set(s.scalars(select(m.Delivery.status))) == {"delivered"}
        store.close()


def test_quiet_speaks_and_exit_code_is_1_when_the_survey_changed_the_store(hermetic_pip: Path) -> None:
    tmp = hermetic_pip
    wheels = tmp / "wheels"
    fake_triton_wheel(wheels, "3.10.0", {"cupti": "ok"}, tmp / "work")
    db = f"sqlite:///{tmp / 's.db'}"
    with LocalIndex(wheels) as index:
        cat = family(tmp, index.url)
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--quiet", "--exit-code")
        assert r.returncode == 1 and r.stdout == "", r
        assert r.stderr.strip().splitlines() == [f"survey: 1 probed  (store: {db})"]
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--quiet", "--exit-code")
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--quiet")
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_only_selects_a_family_or_one_of_its_members(hermetic_pip: Path) -> None:
    tmp = hermetic_pip
    wheels = tmp / "wheels"
    for v in ("3.10.0", "3.11.0"):
        fake_triton_wheel(wheels, v, {"cupti": "ok"}, tmp / "work")
    db = f"sqlite:///{tmp / 's.db'}"
    with LocalIndex(wheels) as index:
        cat = family(tmp, index.url, extra='\n[[candidate]]\nname = "triton-3.10.0"\npip = "triton==3.10.0"\n'
                                            f'index_url = "{index.url}"\nlabel = "pinned by hand"\n')
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--no-table", "--only",
                       "triton-3.11.0")
        assert r.returncode == 0 and "1 probed" in r.stderr, r
        assert names(Store(db)) == ["triton-3.11.0"]
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--no-table", "--only", "triton")
        assert r.returncode == 0 and "1 unchanged" in r.stderr, r  # the family's one member besides the pin
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--timeout", "20", "--no-table", "--only",
                       "triton-3.10.0")
        assert r.returncode == 0 and "1 probed" in r.stderr, r
        with Store(db).session() as s:  # the catalog's pin of a member's name wins: its own label
            labels = dict(s.execute(select(m.Candidate.name, m.Candidate.label)).all())
        assert labels == {"triton-3.10.0": "pinned by hand", "triton-3.11.0": "Triton 3.11.0"}
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table", "--only", "triton-9.9.9")
        assert r.returncode == 65 and "not in the catalog: triton-9.9.9" in r.stderr, r


def test_an_unreachable_index_records_the_family_and_surveys_what_it_had(hermetic_pip: Path) -> None:
    tmp = hermetic_pip
    wheels = tmp / "wheels"
    fake_triton_wheel(wheels, "3.10.0", {"cupti": "ok"}, tmp / "work")
    db = f"sqlite:///{tmp / 's.db'}"
    with LocalIndex(wheels) as index:
        url = index.url
        r = survey_cli("run", "--catalog", str(family(tmp, url)), "--db", db, "--timeout", "20", "--no-table")
        assert r.returncode == 0 and "1 probed" in r.stderr, r
    # the index is gone; the venv of the release found before needs no index
    r = survey_cli("run", "--catalog", str(family(tmp, url)), "--db", db, "--timeout", "20", "--no-table")
    assert r.returncode == 0, r
    assert "triton: unobtainable: " in r.stderr and "1 unchanged" in r.stderr, r
    store = Store(db)
    with store.session() as s:
        fam = s.scalar(select(m.Candidate).where(m.Candidate.name == "triton"))
        assert fam is not None and fam.scope == "catalog" and fam.label == "Triton >=3.10"
        last = s.scalar(select(m.Run).where(m.Run.candidate_id == fam.id))
        assert last is not None and last.status == "unobtainable" and last.error is not None
        assert f"could not read {url}/triton/: ConnectError" in last.error
    table = survey_cli("table", "--format", "md", "--db", db).stdout
    assert "| Triton &gt;=3.10 " in table  # the failing family is published, with why
    assert "unobtainable here (the package index 127.0.0.1 cannot be reached" in table
    again = survey_cli("run", "--catalog", str(family(tmp, url)), "--db", db, "--timeout", "20", "--no-table")
    assert "triton: not asked again yet" in again.stderr and run_count(store) == 2, again  # backed off
    with LocalIndex(wheels) as index:  # the index is back (elsewhere): the family row leaves the table
        r = survey_cli("run", "--catalog", str(family(tmp, index.url)), "--db", db, "--timeout", "20",
                       "--no-table", "--retry-unobtainable")
        assert r.returncode == 0 and "unobtainable" not in r.stderr, r
    with store.session() as s:
        assert s.scalar(select(m.Candidate.scope).where(m.Candidate.name == "triton")) == "adhoc"
    assert "Triton &gt;=3.10" not in survey_cli("table", "--format", "md", "--db", db).stdout
    store.close()


# --------------------------------------------------------------------------- the real PyPI, real wheels
def _real_wheels(dest: Path, versions: tuple[str, ...]) -> None:
    """The real Triton wheels for this Python, through pip (and pip's cache)."""
    for v in versions:  # one at a time: pip resolves the requirements of one command together
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
                               "--no-deps", "--only-binary=:all:", "-d", str(dest), f"triton=={v}"],
                              capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.integration
def test_real_triton_wheels_from_a_local_index(hermetic_pip: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = hermetic_pip
    monkeypatch.delenv("PIP_CONFIG_FILE")  # pip download: this machine's configuration and cache
    store_dir = tmp / "pypi"
    _real_wheels(store_dir, ("3.7.1", "3.8.0", "3.9.0"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    served = tmp / "served"
    served.mkdir()
    for v in ("3.7.1", "3.8.0"):  # linked, not copied: 450 MB of wheels, and the flake hunt runs four at once
        wheel = next(store_dir.glob(f"triton-{v}-*.whl"))
        os.link(wheel, served / wheel.name)
    db = f"sqlite:///{tmp / 's.db'}"
    with LocalIndex(served) as index:
        cat = family(tmp, index.url, ">=3.8")
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table")
        assert r.returncode == 0 and "triton: new: triton-3.8.0" in r.stderr and "1 probed" in r.stderr, r
        store = Store(db)
        first = atom_ids(store)
        wheel = next(store_dir.glob("triton-3.9.0-*.whl"))
        os.link(wheel, served / wheel.name)  # 3.9.0 is published
        r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table")
        assert r.returncode == 0 and "triton: new: triton-3.9.0" in r.stderr, r
        assert "1 probed, 1 unchanged" in r.stderr, r
        assert names(store) == ["triton-3.8.0", "triton-3.9.0"]
        with store.session() as s:
            got = dict(s.execute(select(m.Candidate.name, m.Run.triton_version).join(m.Run)).all())
        assert got == {"triton-3.8.0": "3.8.0", "triton-3.9.0": "3.9.0"}
        ids = atom_ids(store)
        assert len(ids) > len(first) and ids[len(ids) - len(first):] == first
        store.close()


# --------------------------------------------------------------------------- an image tag that moves
@pytest.mark.podman
def test_a_tracked_tag_is_one_candidate_per_digest(tmp_path: Path, images: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTAINERS_CONF", os.environ.get("CONTAINERS_CONF") or
                       str(Path(__file__).resolve().parents[1] / ".ci" / "containers.conf"))
    monkeypatch.setenv("SURVEY_WEBHOOK_SECRET", SECRET)
    moving = f"{IMG}:discovery-moving"
    podman("tag", f"{IMG}:triton-3.7.1", moving)
    try:
        cat = tmp_path / "c.toml"
        cat.write_text(f'[[candidate]]\nname = "moving"\nlabel = "moving tag {{digest}}"\nimage = "{moving}"\n'
                       'track = "digest"\n')
        db = f"sqlite:///{tmp_path / 's.db'}"
        d1 = digest_of(moving)
        with Receiver() as hook:
            r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table", "--engine", "podman",
                           "--notify", hook.url, "--notify-private")
            assert r.returncode == 0 and "1 probed" in r.stderr, r
            first = f"moving-{d1.split(':')[1][:12]}"
            store = Store(db)
            assert names(store) == [first]
            with store.session() as s:
                spec = s.scalar(select(m.Candidate.spec).where(m.Candidate.name == first))
                run = s.scalar(select(m.Run).join(m.Candidate).where(m.Candidate.name == first))
            assert spec is not None and spec["image"] == f"{IMG}@{d1}"
            assert run is not None and run.image_digest == d1 and run.triton_version == "3.7.1"
            ids_1 = atom_ids(store)
            assert ids_1 and len(hook.got) == 1

            r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table", "--engine", "podman",
                           "--notify", hook.url, "--notify-private")
            assert r.returncode == 0 and "1 unchanged" in r.stderr and len(hook.got) == 1, r  # nothing moved

            podman("tag", f"{IMG}:triton-3.8.0", moving)  # the tag moves
            d2 = digest_of(moving)
            assert d2 != d1
            r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table", "--engine", "podman",
                           "--notify", hook.url, "--notify-private")
            assert r.returncode == 0 and "1 probed" in r.stderr, r
            second = f"moving-{d2.split(':')[1][:12]}"
            assert f"moving: new: {second}" in r.stderr
            assert names(store) == [first, second]  # the old digest keeps its evidence
            ids_2 = atom_ids(store)
            assert len(ids_2) > len(ids_1) and ids_2[len(ids_2) - len(ids_1):] == ids_1
            assert len(hook.got) == 2
            assert {c["candidate"] for c in verified(hook.got[1])["changes"]} == {second}
            store.close()
    finally:
        podman("rmi", moving, check=False)


def test_an_engine_that_is_not_there_makes_the_image_family_unobtainable(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cat = tmp_path / "c.toml"
    cat.write_text('[[candidate]]\nname = "img"\nimage = "docker.io/rocm/pytorch:latest"\ntrack = "digest"\n')
    db = f"sqlite:///{tmp_path / 's.db'}"
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no docker here
    r = survey_cli("run", "--catalog", str(cat), "--db", db, "--no-table", "--engine", "docker")
    assert r.returncode == 0, r
    assert "img: unobtainable: docker is not installed" in r.stderr, r
    with Store(db).session() as s:
        err = s.scalar(select(m.Run.error).join(m.Candidate).where(m.Candidate.name == "img"))
        status = s.scalar(select(m.Run.status).join(m.Candidate).where(m.Candidate.name == "img"))
    assert status == "unobtainable" and err is not None and "docker is not installed (not found on PATH)" in err


def test_notify_needs_a_secret_and_an_http_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SURVEY_WEBHOOK_SECRET", raising=False)
    cat = tmp_path / "c.toml"
    cat.write_text('[[candidate]]\nname = "x"\npython = "/nonexistent/python3"\n')
    db = tmp_path / "s.db"
    r = survey_cli("run", "--catalog", str(cat), "--db", f"sqlite:///{db}", "--notify", "http://127.0.0.1:1/h",
                   "--notify-private")
    assert r.returncode == 64 and "SURVEY_WEBHOOK_SECRET" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not db.exists()  # refused before anything was surveyed
    monkeypatch.setenv("SURVEY_WEBHOOK_SECRET", SECRET)
    r = survey_cli("run", "--catalog", str(cat), "--db", f"sqlite:///{db}", "--notify", "ftp://127.0.0.1/h")
    assert r.returncode == 64 and "not an http(s) URL" in r.stderr and not db.exists(), r
    monkeypatch.setenv("SURVEY_WEBHOOK_BACKOFF", "soon")
    r = survey_cli("run", "--catalog", str(cat), "--db", f"sqlite:///{db}", "--notify", "http://127.0.0.1:1/h",
                   "--notify-private")
    assert r.returncode == 64 and "SURVEY_WEBHOOK_BACKOFF='soon'" in r.stderr and not db.exists(), r


def test_the_index_is_the_entry_s_else_pip_s_environment_s_else_pypi(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = Entry(name="t", pip="triton", versions=">=1", extra_index_urls=["http://127.0.0.1:1/extra"])
    monkeypatch.delenv(discovery.INDEX_ENV, raising=False)
    assert discovery.indexes(entry) == [discovery.PYPI, "http://127.0.0.1:1/extra"]
    assert httpx.URL(discovery.PYPI).host == "pypi.org"
    monkeypatch.setenv(discovery.INDEX_ENV, "http://127.0.0.1:2/mirror")
    assert discovery.indexes(entry) == ["http://127.0.0.1:2/mirror", "http://127.0.0.1:1/extra"]
    pinned = entry.model_copy(update={"index_url": "http://127.0.0.1:3/own"})
    assert discovery.indexes(pinned) == ["http://127.0.0.1:3/own", "http://127.0.0.1:1/extra"]
