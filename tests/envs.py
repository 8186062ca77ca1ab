"""Test environments (doubles of *environments*, never of our code's answers).

``fake_triton`` writes a small ``triton`` package whose ``proton.start`` does
what a broken environment does - hang, die of a signal, print bytes that are not
UTF-8 - so the real probe can be run against it. ``pypi_venv`` builds a real
venv from a PyPI triton wheel with our own pip launcher (cached in SURVEY_CACHE).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

FAKE_PROFILER = '''
import os, signal, sys, time

BEHAVIOUR = {behaviour!r}


def start(name=None, *, context="shadow", data="tree", backend=None, mode=None, hook=None):
    what = BEHAVIOUR.get(backend, "unknown")
    if what == "hang":
        time.sleep(3600)
    if what == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "abort":
        os.abort()
    if what == "bad-bytes":
        sys.stderr.buffer.write(b"caf\\xe9 \\xff\\xfe not utf-8\\n")
        sys.stderr.flush()
        raise RuntimeError("Could not load `lib\\udcff.so`".encode("utf-8", "surrogateescape").decode("latin-1"))
    if what == "script":
        sys.stderr.write("<script>window.__xss = 1</script>\\n")
        raise RuntimeError("<b>bold</b> failure")
    if what == "ok":
        return 0
    if what == "exit":
        os._exit(7)
    raise RuntimeError("Unknown profiler: " + str(backend))


def finalize(session=None, output_format=""):
    return None
'''


def fake_triton(root: Path, behaviour: dict[str, str], *, version: str = "0.0.0+fake",
                registry: list[str] | None = None, import_hang: bool = False) -> Path:
    """A directory to put on PYTHONPATH holding a fake ``triton``."""
    pkg = root / "triton"
    (pkg / "profiler").mkdir(parents=True)
    (pkg / "_C").mkdir()
    init = f"__version__ = {version!r}\n"
    if import_hang:
        init += "import time\ntime.sleep(3600)\n"
    (pkg / "__init__.py").write_text(init)
    (pkg / "profiler" / "__init__.py").write_text(textwrap.dedent(FAKE_PROFILER.format(behaviour=behaviour)))
    lib = "class proton:\n"
    if registry is not None:
        lib += f"    @staticmethod\n    def get_available_profilers():\n        return {registry!r}\n"
    else:
        lib += "    pass\n"
    (pkg / "_C" / "__init__.py").write_text("")
    (pkg / "_C" / "libproton.py").write_text(lib)
    return root


def pypi_venv(version: str):  # -> Resolved
    from survey.launchers.pip import PipLauncher

    return PipLauncher([f"triton=={version}"]).obtain()
