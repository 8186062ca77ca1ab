"""zlib with the shipped dictionary (revision 0008's bodies) against zstd at each level,
with the same dictionary as raw content and without one: bytes per body, and the time
to write and to read one, on every third of bench_scale.py's first 3,000 reports of a
100,000-run store (canonical JSON, as a body holds it).

    .venv/bin/python bench/measured/dev-2core-2026-12-05f-zstd/levels.py
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_scale  # noqa: E402
import zstandard  # noqa: E402

from db import compression  # noqa: E402
from survey.evidence.report import canonical_json  # noqa: E402


def timed(f: Callable[[bytes], bytes], items: list[bytes]) -> tuple[list[bytes], float]:
    t0 = time.perf_counter()
    out = [f(x) for x in items]
    return out, 1000 * (time.perf_counter() - t0) / len(items)


def main() -> None:
    tpls = bench_scale.templates()
    texts = [canonical_json(json.loads(bench_scale.variant(tpls, i, 100_000)[1])) for i in range(0, 3000, 3)]
    print(f"{len(texts)} reports, {sum(map(len, texts)) / len(texts):,.0f} bytes each on average")
    zd = compression.dictionary(compression.CURRENT)

    def zlib_write(t: bytes) -> bytes:
        c = zlib.compressobj(6, zdict=zd)
        return c.compress(t) + c.flush()

    def zlib_read(b: bytes) -> bytes:
        d = zlib.decompressobj(zdict=zd)
        return d.decompress(b) + d.flush()

    bodies, w = timed(zlib_write, texts)
    _, r = timed(zlib_read, bodies)
    print(f"zlib 6, dictionary      {sum(map(len, bodies)) / len(bodies):6,.0f} B  write {w:.3f} ms  read {r:.3f} ms")
    raw = zstandard.ZstdCompressionDict(zd, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    for name, dd in (("no dictionary", None), ("dictionary", raw)):
        for level in (3, 6, 9, 12, 19):
            c = zstandard.ZstdCompressor(level=level, dict_data=dd) if dd else zstandard.ZstdCompressor(level=level)
            d = zstandard.ZstdDecompressor(dict_data=dd) if dd else zstandard.ZstdDecompressor()
            bodies, w = timed(c.compress, texts)
            _, r = timed(d.decompress, bodies)
            print(f"zstd {level:2d}, {name:14s} {sum(map(len, bodies)) / len(bodies):6,.0f} B  write {w:.3f} ms  "
                  f"read {r:.3f} ms")
    bodies, w = timed(compression.compress, texts)
    _, r = timed(compression.decompress, bodies)
    print(f"db.compression (zstd {compression.LEVEL}, named) {sum(map(len, bodies)) / len(bodies):,.0f} B  "
          f"write {w:.3f} ms  read {r:.3f} ms")


if __name__ == "__main__":
    main()
