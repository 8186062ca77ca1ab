"""abw.py on a PostgreSQL server of its own (bench_scale.Postgres).

    OLD=/path/to/a/checkout/of/the/code/before python abwpg.py ROUNDS RUNS
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[2]), str(HERE.parents[1]), str(HERE)]
import abw  # noqa: E402
import bench_scale as b  # noqa: E402


def main() -> None:
    pg = b.Postgres()
    try:
        sys.argv = ["abw", sys.argv[1], sys.argv[2], pg.new()]
        abw.main()
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
