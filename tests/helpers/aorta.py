"""What ``survey check --recipe --json`` answers of aorta's cells, read back. The
installed aorta those tests read (``installed_aorta``) is in tests/envs.py."""

from __future__ import annotations


def link(row: dict, name: str) -> dict:
    """The link ``name`` of one cell's row (there is exactly one)."""
    [lk] = [x for x in row["links"] if x["link"] == name]
    return lk
