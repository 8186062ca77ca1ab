"""Shared fixtures. Tiers: plain tests are fast (seconds, no network); tests
marked ``integration`` build real venvs from PyPI triton wheels (cached in
SURVEY_CACHE), ``podman`` ones need the test images, ``browser`` ones chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.store import Store

FIXTURES = Path(__file__).parent / "fixtures"
REPORTS = FIXTURES / "reports"


def report_bytes(name: str) -> bytes:
    """A real probe report from tests/fixtures/reports (see its README)."""
    return (REPORTS / name).read_bytes()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'survey.db'}")
    yield s
    s.close()


@pytest.fixture
def filled_store(store: Store) -> Store:
    """The four real CPU reports, stored as four candidates in release order."""
    from survey.ingest import ingest

    for pos, v in enumerate(("3.6.0", "3.7.1", "3.8.0", "3.9.0")):
        with store.session() as s:
            ingest(s, report_bytes(f"cpu-triton-{v}.json"), candidate=f"triton-{v}", label=f"Triton {v}",
                   kind="pip", spec={"pip": f"triton=={v}"}, position=pos, source="ingest")
    return store
