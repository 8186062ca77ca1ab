"""One clock: every "now" in survey/, api/ and db/ comes from survey/core/clock.py.

The scan reads the source (AST) for direct reads of the wall clock - ``datetime.now()``,
``time.time()`` and their relatives, under any import alias - anywhere but the clock
itself; durations and timeouts use ``time.monotonic()``, which it allows."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import pytest

from tests.conftest import FIXED_NOW, Clock

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("survey", "api", "db")
# path -> why it may read the wall clock
ALLOWED = {
    "survey/core/clock.py": "the clock itself",
    "db/migrations/versions/0002_identities.py": "a migration, run once on an old store: the database's now() "
                                                 "for the rows it derives (db/ imports nothing of survey/)",
}

# Reading any of these is a read of the wall clock.
WALL = {
    "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today", "datetime.date.today",
    "time.time", "time.time_ns", "sqlalchemy.func.now", "sqlalchemy.func.current_timestamp",
    "sqlalchemy.sql.func.now", "sqlalchemy.sql.functions.now",
}
# These read it when called without the time they would otherwise format: (its
# position, its keyword).
WALL_WITHOUT_TIME = {"time.gmtime": (0, "secs"), "time.localtime": (0, "secs"), "time.ctime": (0, "secs"),
                     "time.asctime": (0, "t"), "time.strftime": (1, "t"), "email.utils.formatdate": (0, "timeval")}


def _aliases(tree: ast.Module) -> dict[str, str]:
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _qualified(node: ast.expr, names: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return ".".join([names[node.id], *reversed(parts)])


def _without_time(call: ast.Call, what: str) -> bool:
    position, keyword = WALL_WITHOUT_TIME[what]
    return len(call.args) <= position and keyword not in {k.arg for k in call.keywords}


def wall_clock_reads(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: what`` for each direct read of the wall clock in ``source``."""
    tree = ast.parse(source, filename)
    names = _aliases(tree)
    found = []
    calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute | ast.Name) or isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        what = _qualified(node, names)
        if what is None:
            continue
        call = calls.get(id(node))
        if what in WALL or (what in WALL_WITHOUT_TIME and call is not None and _without_time(call, what)):
            found.append(f"{filename}:{node.lineno}: {what}")
    return found


def test_no_code_reads_the_wall_clock_but_the_clock() -> None:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in ALLOWED:
                found += wall_clock_reads(path.read_text(), rel)
    assert found == [], "read survey.core.clock.now() instead (time.monotonic() for a duration):\n" + "\n".join(found)


def test_the_allowed_files_exist() -> None:
    assert [p for p in ALLOWED if not (ROOT / p).is_file()] == []


@pytest.mark.parametrize("source", [
    "import datetime\nx = datetime.datetime.now()",
    "import datetime as dt\nx = dt.datetime.now(dt.UTC)",
    "from datetime import datetime\nx = datetime.utcnow()",
    "from datetime import date\nx = date.today()",
    "import time\nx = time.time()",
    "from time import time as t\nx = t()",
    "import time\nx = time.strftime('%Y')",
    "import time\nx = time.gmtime()",
    "from email.utils import formatdate\nx = formatdate(usegmt=True)",
    "from sqlalchemy import func\nx = func.now()",
    "import datetime as dt\nfrom dataclasses import field\nx = field(default_factory=dt.datetime.now)",
])
def test_the_scan_finds_a_direct_read(source: str) -> None:
    assert len(wall_clock_reads(source)) == 1


@pytest.mark.parametrize("source", [
    "import time\nx = time.monotonic()",
    "import time\ntime.sleep(1)",
    "import time\nx = time.gmtime(0)",
    "import time\nx = time.strftime('%Y', time.gmtime(0))",
    "from email.utils import formatdate\nx = formatdate(0, usegmt=True)",
    "import datetime as dt\nx = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)",
    "from survey.core import clock\nx = clock.now()",
    "class A:\n    def now(self): ...\nx = A().now()",
])
def test_the_scan_passes_what_does_not_read_it(source: str) -> None:
    assert wall_clock_reads(source) == []


def test_the_clock_fixture_fixes_now_in_every_layer(clock: Clock) -> None:
    from survey.core import ages
    from survey.core import clock as product_clock
    from survey.evidence import identity

    assert product_clock.now() == FIXED_NOW
    assert identity.now_iso() == "2026-12-04T12:00:00+00:00"
    assert ages.age_text(FIXED_NOW - dt.timedelta(hours=3)) == "3 hours old"
    clock.advance(days=2)
    assert ages.age_text(FIXED_NOW - dt.timedelta(hours=3)) == "2 days old"


def test_the_clock_reads_the_wall_clock_outside_a_fixed_block() -> None:
    import time_machine

    from survey.core import clock as product_clock

    wall = dt.datetime(2030, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
    with time_machine.travel(wall, tick=False):
        with product_clock.fixed(dt.datetime(2001, 2, 3, 4, 5, 6)):
            assert product_clock.now() == dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
        assert product_clock.now() == wall
