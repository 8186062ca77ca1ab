"""How a stored report is compressed: zstd, with a preset dictionary the body names.

A report is one canonical JSON text of a few tens of KB, and every report repeats the
same keys, outcome names, message templates and library paths. A compressor starts
each text knowing nothing, so a report pays for its own vocabulary; a preset
dictionary puts that vocabulary before the first byte. zstd also matches across the
whole report, where zlib sees 32 KiB back: on the scale benchmark's reports a body is
2.1 KB instead of zlib's 3.4 KB, written in 0.27 ms instead of 0.43 ms and read in
0.015 ms instead of 0.086 ms (bench/measured/dev-2core-2026-12-05f-zstd/levels.txt).

A body is two zstd frames: a skippable frame (RFC 8878 3.1.2) holding the name of
its dictionary, then the compressed frame, with its content size and checksum. The
zstd tool reads such a body as it is (``zstd -d -D db/dictionaries/<name>.zdict``: it
skips the first frame). Bodies written before it are zlib streams (RFC 1950), with the dictionary
named by the stream's ``FDICT`` header (revision 0008) or without one (revisions
0005-0007); they read as they always did.

The dictionaries are files of this package, ``db/dictionaries/<adler32>.zdict``,
named by their Adler-32. They are part of the store's format: one shipped is never
changed or removed (tests/test_compression.py holds every name to its bytes), and a
new one is added beside it, with a migration, as :data:`CURRENT`. How each was made:
db/dictionaries/README.md.
"""

from __future__ import annotations

import functools
import struct
import threading
import zlib
from pathlib import Path

import zstandard

DICTIONARIES = Path(__file__).with_name("dictionaries")
CURRENT = "10295c2b"  # the dictionary new bodies are written with
LEVEL = 9  # zstd's: a 48 KB report in about 0.26 ms, to about a twentieth

_FDICT = 0x20  # RFC 1950: FLG bit 5, a DICTID follows the two header bytes
# RFC 8878: a skippable frame's magic number (0x184D2A50 to 0x184D2A5F) and its size,
# little-endian; here 4 bytes follow, the dictionary's Adler-32 as its name reads.
_NAMED = struct.pack("<II", 0x184D2A50, 4)
_ZSTD_START = len(_NAMED) + 4


class UnknownDictionary(ValueError):
    """A body names a dictionary this proton-survey does not ship."""


@functools.cache
def dictionary(name: str) -> bytes:
    """The dictionary named ``name`` (its Adler-32, eight hex digits)."""
    path = DICTIONARIES / f"{name}.zdict"
    try:
        data = path.read_bytes()
    except OSError:
        raise UnknownDictionary(f"a stored report needs compression dictionary {name}, which this proton-survey "
                                "does not have: a newer proton-survey wrote it") from None
    if f"{zlib.adler32(data):08x}" != name:
        raise UnknownDictionary(f"compression dictionary {path} does not match its name: the installation is damaged")
    return data


def _zstd_dictionary(name: str) -> zstandard.ZstdCompressionDict:
    return zstandard.ZstdCompressionDict(dictionary(name), dict_type=zstandard.DICT_TYPE_RAWCONTENT)


# A zstd compressor or decompressor, and the dictionary object it prepares its tables in,
# are for one thread at a time (the service compresses and reads in several): each thread
# keeps its own, made once.
_mine = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    found: zstandard.ZstdCompressor | None = getattr(_mine, "compressor", None)
    if found is None:
        found = _mine.compressor = zstandard.ZstdCompressor(
            level=LEVEL, dict_data=_zstd_dictionary(CURRENT), write_checksum=True, write_content_size=True,
            write_dict_id=False)
    return found


def _decompressor(name: str) -> zstandard.ZstdDecompressor:
    kept: dict[str, zstandard.ZstdDecompressor] | None = getattr(_mine, "decompressors", None)
    if kept is None:
        kept = _mine.decompressors = {}
    found = kept.get(name)
    if found is None:
        found = kept[name] = zstandard.ZstdDecompressor(dict_data=_zstd_dictionary(name))
    return found


def compress(raw: bytes) -> bytes:
    """``raw``'s stored form: zstd with the :data:`CURRENT` dictionary, which it names."""
    return _NAMED + bytes.fromhex(CURRENT) + _compressor().compress(raw)


def dictionary_of(body: bytes) -> str | None:
    """The name of the dictionary ``body`` was compressed with (None: none)."""
    if body.startswith(_NAMED) and len(body) >= _ZSTD_START:
        return body[len(_NAMED):_ZSTD_START].hex()
    if len(body) >= 6 and body[1] & _FDICT and not body.startswith(_NAMED[:4]):
        return body[2:6].hex()
    return None


def decompress(body: bytes) -> bytes:
    """The text ``body`` holds, however it was written: zstd, or zlib with or without a
    dictionary."""
    name = dictionary_of(body)
    if body.startswith(_NAMED):
        if name is None:
            raise zstandard.ZstdError("a truncated body: it names no dictionary")
        return _decompressor(name).decompress(body[_ZSTD_START:])
    if name is None:
        return zlib.decompress(body)
    d = zlib.decompressobj(zdict=dictionary(name))
    out = d.decompress(body) + d.flush()
    if not d.eof:
        raise zlib.error("incomplete or truncated stream")
    return out

