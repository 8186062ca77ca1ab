"""How a stored report is compressed: zlib, with a preset dictionary.

A report is one canonical JSON text of a few tens of KB, and every report repeats the
same keys, outcome names, message templates and library paths. zlib starts each
text with an empty window, so a report pays for its own vocabulary; a preset
dictionary (RFC 1950 ``FDICT``) puts that vocabulary in the window before the first
byte. The stream's header names the dictionary by its Adler-32, so a body says
which dictionary it needs, and a body without one (written before dictionaries, by
``zlib.compress``) still reads as it always did.

The dictionaries are files of this package, ``db/dictionaries/<adler32>.zdict``,
named by that checksum. They are part of the store's format: one shipped is never
changed or removed (tests/test_compression.py holds every name to its bytes), and a
new one is added beside it, with a migration, as :data:`CURRENT`. How each was made:
db/dictionaries/README.md.
"""

from __future__ import annotations

import functools
import zlib
from pathlib import Path

DICTIONARIES = Path(__file__).with_name("dictionaries")
CURRENT = "10295c2b"  # the dictionary new bodies are written with
LEVEL = 6  # a 35 KB report in about 0.15 ms, to about a tenth

_FDICT = 0x20  # RFC 1950: FLG bit 5, a DICTID follows the two header bytes


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


def compress(raw: bytes) -> bytes:
    """``raw``'s stored form, with the :data:`CURRENT` dictionary."""
    c = zlib.compressobj(LEVEL, zdict=dictionary(CURRENT))
    return c.compress(raw) + c.flush()


def dictionary_of(body: bytes) -> str | None:
    """The name of the dictionary ``body`` was compressed with (None: none)."""
    if len(body) >= 6 and body[1] & _FDICT:
        return body[2:6].hex()
    return None


def decompress(body: bytes) -> bytes:
    """The text ``body`` holds, whichever dictionary (or none) it was written with."""
    name = dictionary_of(body)
    if name is None:
        return zlib.decompress(body)
    d = zlib.decompressobj(zdict=dictionary(name))
    out = d.decompress(body) + d.flush()
    if not d.eof:
        raise zlib.error("incomplete or truncated stream")
    return out
