"""A helper process that ends with the process that started it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

GRACEFUL_S = 10  # how long a stopping process may take to finish what is in flight
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


def name_process(name: str) -> None:
    """The name ``ps`` and ``top`` show for this process (Linux: its ``comm``, 15 bytes)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
        except (OSError, AttributeError):
            pass


def die_with(parent: int) -> None:
    """End this process when ``parent`` ends: SIGTERM from the kernel (Linux), and a
    thread that watches the parent's pid (anywhere; and should the signal be lost),
    which ends the process if a graceful stop takes too long."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)  # a graceful stop first
        time.sleep(GRACEFUL_S + 5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
