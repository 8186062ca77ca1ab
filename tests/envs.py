"""Test environments (doubles of *environments*, never of our code's answers).

``fake_triton`` writes a small ``triton`` package whose ``proton.start`` does
what a broken environment does - hang, die of a signal, print bytes that are not
UTF-8, fail one way on one attempt and another way on the next (a counter file
per (backend, mode): deterministic) - so the real probe can be run against it.
``fake_interpreter`` makes a venv that sees such a fake (a catalog's ``python =``
entry), ``wrapper`` a shell script running this Python that sees one.
``installed_aorta`` installs an aorta (its workloads' entry points, its ``aorta``
command) and ``plugin_dist`` a distribution registering aorta environments, read as
the real ones are. ``pypi_venv`` builds a real venv from a PyPI triton wheel with our
own pip launcher (cached in SURVEY_CACHE).
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


def wrapper(root: Path, name: str, behaviour: dict[str, str], **env: str) -> Path:
    """An interpreter (a shell script that runs this Python) that sees its own fake triton."""
    import sys

    pkg = fake_triton(root / name / "pkg", behaviour)
    exe = root / name / "bin" / "python"
    exe.parent.mkdir(parents=True)
    exports = "".join(f"export {k}='{v}'\n" for k, v in env.items())
    exe.write_text(f"#!/bin/sh\nexport PYTHONPATH='{pkg}'\n{exports}exec '{sys.executable}' \"$@\"\n")
    exe.chmod(0o755)
    return exe


def installed_aorta(root: Path, version: str) -> Path:
    """An installed distribution `amd-aorta` whose aorta.workloads entry points name
    classes of a module beside it, and an `aorta` command shebanged to this Python:
    an environment, read the way the real one is."""
    import sys

    site = root / "site"
    site.mkdir(parents=True)
    (site / "acme_aorta.py").write_text("class SubprocessWorkload:\n    pass\n\n\nclass GpuSmoke:\n    pass\n\n\n"
                                        "class Wrapped(SubprocessWorkload):\n    pass\n")
    info = site / f"amd_aorta-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: amd-aorta\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[aorta.workloads]\n_subprocess = acme_aorta:SubprocessWorkload\n"
                                           "gpu_smoke = acme_aorta:GpuSmoke\nwrapped = acme_aorta:Wrapped\n")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "aorta").write_text(f"#!{sys.executable}\n")
    (bin_dir / "aorta").chmod(0o755)
    return site


def plugin_dist(root: Path, payloads: dict[str, str], dist: str = "acme-envs") -> Path:
    """An installed distribution (a dist-info on sys.path) registering
    aorta.environments entry points: an environment for the loader, not a
    double of our code."""
    root.mkdir(parents=True, exist_ok=True)
    mod = dist.replace("-", "_")
    (root / f"{mod}.py").write_text("".join(f"{k} = {v}\n" for k, v in payloads.items()))
    info = root / f"{mod}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[aorta.environments]\n" + "".join(f"{k.lower().replace('_', '-')} = {mod}:{k}\n" for k in payloads))
    return root


def pip_venv(*requirements: str):  # -> Resolved
    """A venv from PyPI built by our own pip launcher, cached in SURVEY_CACHE (the launcher
    builds it in one process at a time: tests in parallel build it once and reuse it)."""
    from survey.environments.launchers.pip import PipLauncher

    return PipLauncher(list(requirements)).obtain()


def pypi_venv(version: str):  # -> Resolved
    """A venv holding the PyPI ``triton`` wheel of ``version`` (:func:`pip_venv`)."""
    return pip_venv(f"triton=={version}")


# The Triton releases the integration tier builds venvs of (tests/run.sh builds them
# before the tests start: `python -m tests.envs`).
RELEASES = ("3.7.1", "3.8.0", "3.9.0")


if __name__ == "__main__":
    import sys

    for v in sys.argv[1:] or RELEASES:
        print(f"triton {v}: {pypi_venv(v).python}", flush=True)


FAKE_GPU_TRITON = '''
__version__ = "0.0.0+fake-gpu"
import inspect
import math
import re


def cdiv(a, b):
    return -(-a // b)


def jit(fn):
    return _Kernel(fn)


class _Kernel:
    \"\"\"Runs the GELU on the CPU. Its "compilation" (first launch) finds the
    kernel's proton.language scopes in its source, as Triton's compiler finds the
    records in the kernel's code, and refuses them, as Triton 3.6.0 does, unless the
    triton semantic was enabled.\"\"\"

    def __init__(self, fn):
        self.fn = fn
        self.scopes = None

    def _compile(self):
        from triton import profiler
        scopes = re.findall(r'enter_scope\\("(\\w+)"\\)', inspect.getsource(self.fn))
        if scopes and profiler._instrumenting():
            from triton.profiler import language
            if "triton" not in language._SEMANTICS:
                raise TypeError("Unsupported semantic type: <class 'triton.language.semantic.TritonSemantic'>. "
                                "Supported semantics are: {<class 'GluonSemantic'>}")
        profiler._compiling(self.fn.__name__)
        return scopes

    def __getitem__(self, grid):
        def launch(x, y, n, BLOCK):
            from triton import profiler
            if self.scopes is None or (profiler._instrumenting() and not profiler._compiled(self.fn.__name__)):
                self.scopes = self._compile()
            for i in range(n):
                y.data[i] = 0.5 * x.data[i] * (1.0 + math.erf(x.data[i] * 0.7071067811865476))
            profiler._launched(self.fn.__name__, self.scopes)
        return launch


class _Target:
    backend = "fake"

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


class _CompilationKnobs:
    instrumentation_mode = ""


class knobs:
    proton = _ProtonKnobs()
    compilation = _CompilationKnobs()
'''

FAKE_GPU_PROFILER = '''
import atexit, json, os, signal, time

import triton
from triton.profiler.flags import flags

_session = {"name": None, "backend": None, "data": "tree", "mode": None, "launches": {}, "scopes": {},
            "compiled": set()}
BEHAVIOUR = @BEHAVIOUR@
MODES = ("default", "mma")


def _instrumenting():
    return _session["name"] is not None and _session["backend"] == "instrumentation"


def _compiled(name):
    return name in _session["compiled"]


def _compiling(name):
    if _session["name"] is not None:
        _session["compiled"].add(name)


def _launched(name, scopes):
    if _session["name"] is None:
        return
    if _instrumenting() and scopes:
        _session["scoped_seen"] = True
    elif _instrumenting() and _session.get("scoped_seen"):
        # Triton 3.6.0 as measured on the H200: an unscoped kernel launched after a
        # scoped one in the same instrumentation session dies of SIGFPE.
        os.kill(os.getpid(), signal.SIGFPE)
    if _instrumenting() and "granularity=" in (_session["mode"] or ""):
        # Triton 3.6.0's libproton, at the kernel's exit: the mode string arrives as
        # written, and only an absent granularity or GRANULARITY.WARP is taken.
        raise RuntimeError("Only warp granularity is supported for now")
    _session["launches"][name] = _session["launches"].get(name, 0) + 1
    if _instrumenting():
        for s in scopes or ():
            key = (name, s)
            _session["scopes"][key] = _session["scopes"].get(key, 0) + 1000


def start(name=None, *, context="shadow", data="tree", backend=None, mode=None, hook=None):
    if flags.command_line or triton.knobs.proton.disable:
        return None
    if backend == "instrumentation":
        mode_name = (mode or "default").split(":")[0]
        if mode_name not in MODES:
            raise ValueError("Unknown mode: " + str(mode))
        triton.knobs.compilation.instrumentation_mode = mode or "default"
    _session.update(name=name, backend=backend, data=data, mode=mode, launches={}, scopes={}, compiled=set())
    return 0


def _tree():
    kernels = []
    for k, v in _session["launches"].items():
        if _session["backend"] == "instrumentation":
            scopes = [{"frame": {"name": s, "type": "function"}, "children": [],
                       "metrics": {"cycles": c, "normalized_cycles": c / 7.0, "device_id": "0", "device_type": "1"}}
                      for (kn, s), c in _session["scopes"].items() if kn == k]
            if scopes:
                kernels.append({"frame": {"name": k, "type": "function"}, "metrics": {}, "children": scopes})
        elif BEHAVIOUR != "empty":
            kernels.append({"frame": {"name": k, "type": "function"}, "children": [],
                            "metrics": {"count": v, "time (ns)": 1000.0 * v}})
    return [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": kernels}, {}]


def finalize(session=None, output_format=""):
    if _session["name"] is None:
        return
    if _session["data"] == "trace":
        if BEHAVIOUR == "trace_hangs":
            time.sleep(3600)
        if _session["backend"] == "instrumentation":  # a scope event per warp (4) and launch, as 3.6.0 writes them
            events = [{"name": s, "cat": k, "ph": "X", "pid": k + " Core0 CTA0", "tid": "warp %d (line 0)" % w,
                       "ts": 0.0, "dur": 1.5, "args": {"Finalization Time (ns)": 0, "Frequency (MHz)": 1000.0,
                                                       "call_stack": ["ROOT", k]}}
                      for (k, s), c in _session["scopes"].items() for _ in range(c // 1000) for w in range(4)]
        else:
            events = [{"name": k, "cat": "kernel", "ph": "X", "ts": i, "dur": 1.0, "tid": 7,
                       "args": {"call_stack": ["ROOT", k]}}
                      for k, v in _session["launches"].items() for i in range(v)]
        with open(_session["name"] + ".chrome_trace", "w") as f:
            f.write(json.dumps({"displayTimeUnit": "us", "traceEvents": events}) + "\\n")
    else:
        with open(_session["name"] + ".hatchet", "w") as f:
            json.dump(_tree(), f)
    triton.knobs.compilation.instrumentation_mode = ""
    _session["name"] = None
    if BEHAVIOUR == "hang_at_exit":
        atexit.register(time.sleep, 3600)
'''

# Proton's command line as Triton 3.6.0 builds it (triton/profiler/proton.py): -b
# choices, --mode parsed and not passed on, the script run with exec.
FAKE_PROTON_CLI = '''
import argparse, os, sys

from triton.profiler import finalize, start
from triton.profiler.flags import flags


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-n", "--name", type=str)
    p.add_argument("-b", "--backend", type=str, default=None, choices=["cupti", "roctracer", "instrumentation"])
    p.add_argument("-c", "--context", type=str, default="shadow", choices=["shadow", "python"])
    p.add_argument("-m", "--mode", type=str, default=None)
    p.add_argument("-d", "--data", type=str, default="tree", choices=["tree", "trace"])
    p.add_argument("target_args", nargs=argparse.REMAINDER)
    args = p.parse_args()
    start(args.name, context=args.context, data=args.data, backend=args.backend or "cupti")
    flags.command_line = True
    script = os.path.abspath(args.target_args[0])
    sys.argv = [script] + args.target_args[1:]
    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec")
    exec(code, {"__name__": "__main__", "__file__": script})
    finalize()


if __name__ == "__main__":
    main()
'''

FAKE_FLAGS = '''
class _Flags:
    profiling_on = False
    instrumentation_on = False
    command_line = False


flags = _Flags()
'''

FAKE_LANGUAGE = '''
_SEMANTICS = {"gluon"}


def enable_semantic(name):
    _SEMANTICS.add(name)


def enter_scope(name, _semantic=None):
    pass


def exit_scope(name, _semantic=None):
    pass
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


def fake_gpu_stack(root: Path, behaviour: str = "ok", *, profilers: tuple[str, ...] = ("cupti",),
                   language: bool = True) -> Path:
    """A fake triton + torch in which the GELU payload runs to completion on the CPU
    and a fake Proton writes a capture: a tree (kernel nodes; for instrumentation,
    scope nodes with cycle metrics under the kernel) or, for data="trace", a Chrome
    trace; with Triton 3.6.0's command line (``python -m triton.profiler.proton``) and,
    with ``language``, ``triton.profiler.language`` (scopes refused in Triton kernels
    until ``enable_semantic("triton")``, as in 3.6.0). ``behaviour``: ok | empty |
    hang_at_exit | trace_hangs (finalize never returns for data="trace")."""
    pkg = root / "triton"
    (pkg / "profiler").mkdir(parents=True)
    (pkg / "language").mkdir()
    (pkg / "_C").mkdir()
    (pkg / "__init__.py").write_text(FAKE_GPU_TRITON)
    (pkg / "profiler" / "__init__.py").write_text(FAKE_GPU_PROFILER.replace("@BEHAVIOUR@", repr(behaviour)))
    (pkg / "profiler" / "flags.py").write_text(FAKE_FLAGS)
    (pkg / "profiler" / "proton.py").write_text(FAKE_PROTON_CLI)
    if language:
        (pkg / "profiler" / "language.py").write_text(FAKE_LANGUAGE)
    (pkg / "language" / "__init__.py").write_text("constexpr = int\n")
    (pkg / "_C" / "__init__.py").write_text("")
    (pkg / "_C" / "libproton.py").write_text(
        f"class proton:\n    @staticmethod\n    def get_available_profilers():\n        return {list(profilers)!r}\n")
    torch = root / "torch"
    (torch / "nn").mkdir(parents=True)
    (torch / "__init__.py").write_text(FAKE_TORCH + "\nfrom torch import nn\n")
    (torch / "nn" / "__init__.py").write_text("from torch.nn import functional\n")
    (torch / "nn" / "functional.py").write_text(FAKE_TORCH_NN)
    return root
