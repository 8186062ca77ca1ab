"""Layering: probes/ imports nothing of ours; survey/ never imports api/ (only the CLI's
`serve` and `publish` load the app, inside the command)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_probes_import_nothing_of_ours() -> None:
    for path in (ROOT / "probes").rglob("*.py"):
        assert not imports(path, top_level_only=False) & {"survey", "db", "api"}, path


def test_survey_never_imports_api() -> None:
    for path in (ROOT / "survey").rglob("*.py"):
        if path.name == "cli.py":
            assert "api" not in imports(path, top_level_only=True), path
            continue
        assert "api" not in imports(path, top_level_only=False), path
