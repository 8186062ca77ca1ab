"""What the preset dictionary (db/dictionaries/10295c2b.zdict) does to a report's stored
size: every real report under bench/measured/ except the one the dictionary was cut
from, and the fixture reports the scale generator copies, compressed by zlib (level 6)
without and with it.

    .venv/bin/python bench/measured/dev-2core-2026-12-05e-store/dictionary.py
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from db import compression  # noqa: E402
from survey.evidence.report import canonical_json  # noqa: E402

SOURCE = "bench/measured/h200-2026-12-03b/report.json"  # the dictionary's own text


def main() -> None:
    paths = sorted(p for p in (ROOT / "bench" / "measured").glob("h200-*/**/*.json")
                   if p.relative_to(ROOT).as_posix() != SOURCE)
    paths += sorted((ROOT / "tests" / "fixtures" / "reports").glob("*.json"))
    print("report | canonical bytes | zlib | zlib + dictionary")
    for p in paths:
        try:
            data = json.loads(p.read_text())
        except ValueError:
            continue
        if not isinstance(data, dict) or "modes" not in data or "schema_version" not in data:
            continue
        text = canonical_json(data)
        plain, preset = len(zlib.compress(text, 6)), len(compression.compress(text))
        print(f"{p.relative_to(ROOT)} | {len(text)} | {plain} | {preset}")


if __name__ == "__main__":
    main()
