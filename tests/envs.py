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
        if os.environ.get("FAKE_TRITON_HANGING"):  # a file that says a hang has begun
            with open(os.environ["FAKE_TRITON_HANGING"], "a") as f:
                f.write(str(backend) + "\\n")
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
    from survey.environments.launchers.pip import PipLauncher

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
