"""Read a user-named input file as text, or fail with one line that says why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

MAX_BYTES = 8 << 20


def read_text(path: Path, what: str, error: Callable[[str], Exception], *, max_bytes: int = MAX_BYTES) -> str:
    """The file's UTF-8 text. ``error(message)`` when it is missing, a directory,
    unreadable, larger than ``max_bytes``, binary (holds NUL) or not UTF-8;
    ``what`` names what the file should have been ("an aorta recipe")."""
    try:
        if path.is_dir():
            raise error(f"{path}: is a directory, not {what}")
        size = path.stat().st_size
        if size > max_bytes:
            raise error(f"{path}: {size} bytes is too large for {what} (limit {max_bytes})")
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: no such file")
    except PermissionError:
        raise error(f"{path}: permission denied")
    except OSError as e:
        raise error(f"{path}: cannot read it ({e.strerror or e})")
    if b"\x00" in data:
        raise error(f"{path}: binary data, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start}), not {what}")
