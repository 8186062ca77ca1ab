"""Test environments (doubles of *environments*, never of our code's answers).

``fake_triton`` writes a small ``triton`` package whose ``proton.start`` does
what a broken environment does - hang, die of a signal, print bytes that are not
UTF-8, fail one way on one attempt and another way on the next (a counter file
per (backend, mode): deterministic) - so the real probe can be run against it.
``fake_interpreter`` makes a venv that sees such a fake (a catalog's ``python =``
entry). ``pypi_venv`` builds a real venv from a PyPI triton wheel with our own pip
launcher (cached in SURVEY_CACHE).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

FAKE_PROFILER = '''
import fcntl, os, signal, sys, time

BEHAVIOUR = {behaviour!r}
COUNTERS = {counters!r}
LIBRARIES = {{"cupti": "libcupti.so", "roctracer": "libroctracer64.so", "rocprofiler": "librocprofiler-sdk.so"}}
PROFILERS = {{"cupti": "CuptiProfiler", "roctracer": "RoctracerProfiler", "rocprofiler": "RocprofSDKProfiler"}}


def _library_found(backend):
    lib = LIBRARIES.get(backend, "libproton-fake.so")
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    return any(os.path.exists(os.path.join(d, lib)) for d in dirs)


def _stale_environ_read(backend):
    """As Triton 3.7.x's periodic_flushing on a host without a GPU reads its options:
    through a stale pointer into the environment block. Where the environment is
    where exec put it (the stack), the read faults; where it was rewritten (its
    strings moved to the heap), it reads a variable's name as an option key."""
    import ctypes

    environ = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    env_start, env_end = int(fields[47]), int(fields[48])  # stat fields 50 and 51
    if env_start <= (environ[0] or 0) < env_end:
        os.kill(os.getpid(), signal.SIGSEGV)
    name = ctypes.cast(environ[0], ctypes.c_char_p).value.decode("utf-8", "replace").split("=")[0]
    raise ValueError("[PROTON] %s: unsupported option key: %s" % (PROFILERS.get(backend, "Profiler"), name))


def _next_step(steps, backend, mode):
    """steps[n % len(steps)] for the n-th call of this (backend, mode), n counted in a file."""
    os.makedirs(COUNTERS, exist_ok=True)
    with open(os.path.join(COUNTERS, "%s-%s" % (backend, mode)), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = int(f.read() or "0")
        f.seek(0)
        f.truncate()
        f.write(str(n + 1))
    return steps[n % len(steps)]


def start(name=None, *, context="shadow", data="tree", backend=None, mode=None, hook=None):
    what = BEHAVIOUR.get("%s:%s" % (backend, mode), BEHAVIOUR.get(backend, "unknown"))
    if what.startswith("seq:"):
        if _library_found(backend):  # a stub rerun: the library loads, and start() with it
            return 0
        what = _next_step(what[4:].split(","), backend, mode)
    if what == "no-lib":  # as dlopen: loads only where the loader path has it
        if not _library_found(backend):
            raise RuntimeError("Could not load `%s`" % LIBRARIES.get(backend, "libproton-fake.so"))
        return 0
    if what == "layout":
        _stale_environ_read(backend)
    if what == "no-gpu":
        raise RuntimeError("0 active drivers ([]). There should only be one.")
    if what == "refuse":
        raise ValueError("[PROTON] %s: unsupported mode: %s" % (PROFILERS.get(backend, "Profiler"), mode or ""))
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
                registry: list[str] | None = None, import_hang: bool = False, dist: bool = False) -> Path:
    """A directory to put on PYTHONPATH holding a fake ``triton``.

    ``behaviour``: what ``proton.start`` does, per backend or per ``backend:mode``
    (which wins): ok, hang, segv, abort, exit, bad-bytes, script, no-lib (``Could
    not load `lib...so``` unless LD_LIBRARY_PATH holds it, as dlopen), no-gpu,
    refuse (``unsupported mode``), layout (SIGSEGV in a process whose environment
    is where exec put it, an unrecognised error where it was rewritten: undefined
    behaviour that depends on the process's memory), unknown (the default); or
    ``seq:A,B,...``: A on
    the first call of that (backend, mode), B on the second, and round again,
    counted in a file under ``root/counters`` (so across processes and probes);
    where LD_LIBRARY_PATH holds the backend's library (a stub rerun) a ``seq:``
    start succeeds and counts nothing.
    ``dist``: also a ``triton`` distribution of ``version`` (its dist-info), so the
    probe reports that version."""
    pkg = root / "triton"
    (pkg / "profiler").mkdir(parents=True)
    (pkg / "_C").mkdir()
    init = f"__version__ = {version!r}\n"
    if import_hang:
        init += "import time\ntime.sleep(3600)\n"
    (pkg / "__init__.py").write_text(init)
    (pkg / "profiler" / "__init__.py").write_text(
        textwrap.dedent(FAKE_PROFILER.format(behaviour=behaviour, counters=str(root / "counters"))))
    if dist:
        info = root / f"triton-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: triton\nVersion: {version}\n")
        (info / "RECORD").write_text(f"triton/__init__.py,,\ntriton-{version}.dist-info/METADATA,,\n")
    lib = "class proton:\n"
    if registry is not None:
        lib += f"    @staticmethod\n    def get_available_profilers():\n        return {registry!r}\n"
    else:
        lib += "    pass\n"
    (pkg / "_C" / "__init__.py").write_text("")
    (pkg / "_C" / "libproton.py").write_text(lib)
    return root


def fake_interpreter(root: Path, fake: Path) -> Path:
    """A venv (no pip) whose site-packages puts ``fake`` (a ``fake_triton`` root) on
    sys.path: an interpreter that sees the fake as its own, for a catalog's
    ``python =`` entry. Returns its python."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    [site] = root.glob("lib/python*/site-packages")
    (site / "fake_triton.pth").write_text(str(fake) + "\n")
    return root / "bin" / "python"


def pypi_venv(version: str):  # -> Resolved
    from survey.launchers.pip import PipLauncher

    return PipLauncher([f"triton=={version}"]).obtain()


FAKE_GPU_TRITON = '''
__version__ = "0.0.0+fake-gpu"
import math


def cdiv(a, b):
    return -(-a // b)


def jit(fn):
    return _Kernel(fn)


class _Kernel:
    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        def launch(x, y, n, BLOCK):
            from triton import profiler
            for i in range(n):
                y.data[i] = 0.5 * x.data[i] * (1.0 + math.erf(x.data[i] * 0.7071067811865476))
            profiler._launched(self.fn.__name__)
        return launch


class _Target:
    def __repr__(self):
        return "FakeTarget(backend='fake', arch=0)"


class _Active:
    def get_current_target(self):
        return _Target()


class _Driver:
    active = _Active()


class runtime:
    driver = _Driver()


class _ProtonKnobs:
    disable = False


class knobs:
    proton = _ProtonKnobs()
'''

FAKE_GPU_PROFILER = '''
import atexit, json, os, time

_session = {"name": None, "launches": {}}
BEHAVIOUR = @BEHAVIOUR@


def _launched(name):
    if _session["name"] is not None:
        _session["launches"][name] = _session["launches"].get(name, 0) + 1


def start(name=None, *, context="shadow", data="tree", backend=None, mode=None, hook=None):
    _session["name"] = name
    return 0


def finalize(session=None, output_format=""):
    children = []
    if BEHAVIOUR != "empty":
        children = [{"frame": {"name": k, "type": "function"}, "children": [],
                     "metrics": {"count": v, "time (ns)": 1000.0 * v}} for k, v in _session["launches"].items()]
    tree = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": children}, {}]
    with open(_session["name"] + ".hatchet", "w") as f:
        json.dump(tree, f)
    _session["name"] = None
    if BEHAVIOUR == "hang_at_exit":
        atexit.register(time.sleep, 3600)
'''

FAKE_TORCH = '''
import random

__version__ = "0.0.0+fake"


class Tensor:
    def __init__(self, data):
        self.data = data

    def __sub__(self, other):
        return Tensor([a - b for a, b in zip(self.data, other.data)])

    def abs(self):
        return Tensor([abs(a) for a in self.data])

    def max(self):
        return Tensor([max(self.data)])

    def item(self):
        return self.data[0]


float32 = "float32"


def randn(n, device=None, dtype=None):
    rng = random.Random(0)
    return Tensor([rng.gauss(0.0, 1.0) for _ in range(n)])


def empty_like(t):
    return Tensor([0.0] * len(t.data))


class cuda:
    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def get_device_name(i=0):
        return "Fake GPU (an environment double)"
'''

FAKE_TORCH_NN = '''
import math
from torch import Tensor


def gelu(x, approximate="none"):
    return Tensor([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.data])
'''


def fake_gpu_stack(root: Path, behaviour: str = "ok") -> Path:
    """A fake triton + torch in which the GELU payload runs to completion on the CPU
    and a fake Proton writes a capture; ``behaviour`` ok | empty | hang_at_exit."""
    pkg = root / "triton"
    (pkg / "profiler").mkdir(parents=True)
    (pkg / "language").mkdir()
    (pkg / "_C").mkdir()
    (pkg / "__init__.py").write_text(FAKE_GPU_TRITON)
    (pkg / "profiler" / "__init__.py").write_text(FAKE_GPU_PROFILER.replace("@BEHAVIOUR@", repr(behaviour)))
    (pkg / "language" / "__init__.py").write_text("constexpr = int\n")
    (pkg / "_C" / "__init__.py").write_text("")
    (pkg / "_C" / "libproton.py").write_text(
        "class proton:\n    @staticmethod\n    def get_available_profilers():\n        return ['cupti']\n")
    torch = root / "torch"
    (torch / "nn").mkdir(parents=True)
    (torch / "__init__.py").write_text(FAKE_TORCH + "\nfrom torch import nn\n")
    (torch / "nn" / "__init__.py").write_text("from torch.nn import functional\n")
    (torch / "nn" / "functional.py").write_text(FAKE_TORCH_NN)
    return root
