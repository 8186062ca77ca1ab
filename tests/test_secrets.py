"""Credentials in URLs never reach the store, a page, a published site or the terminal.

A catalog's ``index_url`` may carry a password (pip needs it); the store keeps the
URL with the password masked, the service and ``survey publish`` show it masked,
and ``survey run`` prints a database URL's password masked in its closing line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text

from db.store import Store
from survey.core.credentials import mask, mask_text
from survey.evidence.identity import PlatformId
from survey.evidence.ingest import record_failure
from tests.conftest import survey_cli
from tests.helpers.store import stored_text

SECRET = "hunter2"
INDEX = f"http://alice:{SECRET}@127.0.0.1:9/simple"  # nothing listens on port 9: pip fails at once


def test_a_catalog_index_password_is_never_stored_shown_or_published(store_url: str, tmp_path: Path,
                                                                      make_client: Any) -> None:
    cat = tmp_path / "catalog.toml"
    cat.write_text('[[candidate]]\nname = "private"\nlabel = "Private index"\n'
                   'pip = "proton-survey-no-such-dist==1.0"\n'
                   f'index_url = "{INDEX}"\nextra_index_urls = ["https://tok{SECRET}@127.0.0.1:9/extra"]\n')
    r = survey_cli("run", "--catalog", str(cat), "--db", store_url, "--no-table")
    assert r.returncode == 0 and "1 unobtainable" in r.stderr, r
    assert SECRET not in r.stdout + r.stderr
    store = Store(store_url)
    try:
        held = stored_text(store)
        assert "private" in held and "alice:***@127.0.0.1:9/simple" in held and SECRET not in held
        if store_url.startswith("sqlite"):
            store.close()  # the WAL checkpointed into the file: every byte of it
            assert SECRET.encode() not in Path(store_url.removeprefix("sqlite:///")).read_bytes()
            store = Store(store_url)
        c = make_client(store)
        for path in ("/candidates/private.json", "/candidates/private", "/candidates.json", "/matrix.json",
                     "/matrix", "/candidates.md"):
            page = c.get(path)
            assert page.status_code == 200 and SECRET not in page.text, path
        assert "alice:***@" in c.get("/candidates/private.json").text
        site = tmp_path / "site"
        assert survey_cli("publish", str(site), "--db", store_url).returncode == 0
        published = [p for p in site.rglob("*") if p.is_file()]
        assert published and not [p for p in published if SECRET.encode() in p.read_bytes()]
    finally:
        store.close()


def test_a_password_stored_before_is_masked_where_it_is_shown(store: Store, make_client: Any) -> None:
    """A spec written by an older proton-survey still holds the password: pages mask it."""
    with store.session() as s:
        record_failure(s, "old", label="Old", kind="pip", spec={"pip": "x==1"}, position=0, error="unreachable",
                       platform=PlatformId("none:x86_64", "none", None, "x86_64", {}), scope="catalog")
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE candidates SET spec = :spec WHERE name = 'old'"),
                     {"spec": json.dumps({"pip": "x==1", "index_url": INDEX})})
    c = make_client(store)
    for path in ("/candidates/old.json", "/candidates/old"):
        page = c.get(path)
        assert page.status_code == 200 and SECRET not in page.text and "alice:***@" in page.text, path


def test_masking_keeps_the_url_and_hides_the_credentials() -> None:
    assert mask_text(INDEX) == "http://alice:***@127.0.0.1:9/simple"
    assert mask_text("https://TOKEN123@host/simple") == "https://***@host/simple"
    assert mask_text("pkg @ git+https://u:p@github.com/x/y.git@main") == "pkg @ git+https://u:***@github.com/x/y.git@main"
    assert mask_text("no url, user@example.com") == "no url, user@example.com"
    assert mask({"a": [INDEX], "b": 1}) == {"a": ["http://alice:***@127.0.0.1:9/simple"], "b": 1}


def test_survey_run_masks_the_database_password_in_its_closing_line(pg_url: str, tmp_path: Path) -> None:
    # The test server trusts every local connection, so any password opens the store.
    url = pg_url.replace("postgres@", f"postgres:{SECRET}@", 1)
    assert SECRET in url
    cat = tmp_path / "catalog.toml"
    cat.write_text(f'[[candidate]]\nname = "nothing"\npython = "{tmp_path / "no-such-python"}"\n')
    r = survey_cli("run", "--catalog", str(cat), "--db", url, "--no-table")
    assert r.returncode == 0, r
    closing = [ln for ln in r.stderr.splitlines() if ln.startswith("survey: ")]
    assert len(closing) == 1 and "postgres:***@127.0.0.1" in closing[0], r
    assert SECRET not in r.stdout + r.stderr
