"""Environment facts gathered without importing triton, torch or any GPU runtime.

Every fact is a dict with ``status`` one of found / absent / failed; a failed fact
keeps its error. Nothing here loads a shared library or starts a GPU runtime, so
it is safe to run in the probe's own process.
"""

import glob
import os
import platform
import re
import socket
import sys

from . import outcomes as O

TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton-rocm", "pytorch-triton", "triton-nightly", "pytorch-triton-xpu")

# Variables that change what Proton does. ``controlled`` ones are removed from the
# environment of the clean checks (and their effect measured separately when they
# were inherited); the others describe how the environment finds its libraries and
# are kept as inherited.
CONTROLLED_EXACT = (
    "TRITON_PROTON_DISABLE",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "LD_PRELOAD",
    "HSA_TOOLS_LIB",
    "TRITON_INSTRUMENTATION_MODE",
)
CONTROLLED_PATTERNS = (
    re.compile(r"^TRITON_\w+_LIB_PATH$"),
    re.compile(r"^TRITON_\w+_LIBRARY$"),
    re.compile(r"^TRITON_HSA_RUNTIME_PATH$"),
    re.compile(r"^TRITON_LIBHIP_PATH$"),
    re.compile(r"^ROCP_\w+$"),
    re.compile(r"^ROCPROF\w*$"),
)
RECORDED_EXACT = CONTROLLED_EXACT + (
    "LD_LIBRARY_PATH",
    "ROCM_PATH",
    "ROCM_HOME",
    "HIP_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "PYTHONPATH",
    "TRITON_HOME",
    "TRITON_CACHE_DIR",
)
RECORDED_PATTERNS = CONTROLLED_PATTERNS + (re.compile(r"^TRITON_PROTON_\w+$"), re.compile(r"^PROTON_\w+$"))



def is_controlled(name):
    return name in CONTROLLED_EXACT or any(p.match(name) for p in CONTROLLED_PATTERNS)


def is_recorded(name):
    return name in RECORDED_EXACT or any(p.match(name) for p in RECORDED_PATTERNS)


def fact(status, **fields):
    d = {"status": status}
    d.update(fields)
    return d


def python_fact():
    return fact(
        O.FOUND,
        version=platform.python_version(),
        implementation=platform.python_implementation(),
        executable=sys.executable,
        prefix=sys.prefix,
        base_prefix=getattr(sys, "base_prefix", sys.prefix),
    )


def platform_fact():
    try:
        libc, libc_version = platform.libc_ver()
    except Exception:  # pragma: no cover - platform quirks
        libc, libc_version = "", ""
    os_release = {}
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    os_release[k] = v.strip('"')
    except OSError:
        pass
    return fact(
        O.FOUND,
        system=platform.system(),
        release=platform.release(),
        machine=platform.machine(),
        libc=(libc + " " + libc_version).strip() or None,
        os=os_release.get("PRETTY_NAME"),
        hostname=socket.gethostname(),
        cpu_count=cpu_count(),
    )


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _metadata():
    try:
        from importlib import metadata  # Python >= 3.8
    except ImportError:  # pragma: no cover
        return None
    return metadata


def distributions():
    """All installed distributions: name -> (version, location)."""
    md = _metadata()
    found = {}  # type: dict
    if md is None:
        return found
    for dist in md.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            continue
        if not name:
            continue
        key = normalise(name)
        if key in found:
            continue  # first on sys.path wins, as for imports
        location = None
        try:
            location = str(dist.locate_file(""))
        except Exception:
            pass
        found[key] = (dist.version, location)
    return found


def normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def package_dir(name):
    """Directory of a top-level package, located without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)
    if spec is None or not spec.submodule_search_locations:
        return None, None
    return list(spec.submodule_search_locations)[0], None


def triton_fact(dists):
    present = [d for d in TRITON_DISTRIBUTIONS if d in dists]
    pkg_dir, err = package_dir("triton")
    if err:
        return fact(O.FAILED, error=err, distributions=present)
    if not present and pkg_dir is None:
        return fact(O.ABSENT, distributions=[])
    dist = present[0] if present else None
    return fact(
        O.FOUND,
        distribution=dist,
        version=dists[dist][0] if dist else None,
        distributions=[{"name": d, "version": dists[d][0]} for d in present],
        package_dir=pkg_dir,
        libproton=_existing(os.path.join(pkg_dir, "_C", "libproton.so")) if pkg_dir else None,
    )


def _existing(path):
    return path if os.path.exists(path) else None


def torch_fact(dists):
    """torch's version and its CUDA/HIP versions, read from torch/version.py.

    The file is parsed, not imported: importing torch can initialise a GPU runtime,
    and nothing may do that before Proton. (The GELU capture imports torch for
    real, after Proton, in its own process.)
    """
    import ast

    pkg, err = package_dir("torch")
    if pkg is None:
        if err:
            return fact(O.FAILED, error=err)
        if "torch" in dists:
            return fact(O.FAILED, error="the torch distribution is installed but no torch package is on sys.path")
        return fact(O.ABSENT)
    path = os.path.join(pkg, "version.py")
    values = {}
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id in ("__version__", "cuda", "hip", "git_version", "xpu"):
                        try:
                            values[t.id] = ast.literal_eval(node.value) if node.value is not None else None
                        except ValueError:
                            values[t.id] = None
    except (OSError, SyntaxError) as exc:
        return fact(O.FAILED, error="%s: %s" % (type(exc).__name__, exc), package_dir=pkg)
    return fact(
        O.FOUND,
        version=values.get("__version__") or (dists.get("torch") or (None,))[0],
        cuda=values.get("cuda"),
        hip=values.get("hip"),
        package_dir=pkg,
        source="torch/version.py (parsed, not imported)",
    )


ROCM_ROOT_GLOBS = ("/opt/rocm", "/opt/rocm-*", "/opt/amdgpu")


def rocm_fact(dists, site_dirs):
    roots = []
    for var in ("ROCM_PATH", "ROCM_HOME", "HIP_PATH"):
        v = os.environ.get(var)
        if v and os.path.isdir(v) and v not in roots:
            roots.append(v)
    for pattern in ROCM_ROOT_GLOBS:
        for p in sorted(glob.glob(pattern)):
            if os.path.isdir(p) and p not in roots:
                roots.append(os.path.realpath(p) if os.path.islink(p) else p)
    classic = []
    for r in roots:
        version = None
        for vf in (".info/version", ".info/version-dev"):
            try:
                with open(os.path.join(r, vf)) as f:
                    version = f.read().strip()
                    break
            except OSError:
                continue
        classic.append({"root": r, "version": version})
    wheel_dists = [
        {"name": n, "version": v[0]}
        for n, v in sorted(dists.items())
        if n.startswith("rocm-sdk") or n in ("rocm", "rocm-sdk")
    ]
    wheel_dirs = []
    for sd in site_dirs:
        for pattern in ("_rocm_sdk_*", "rocm_sdk*", "rocm"):
            for p in sorted(glob.glob(os.path.join(sd, pattern))):
                if os.path.isdir(p):
                    wheel_dirs.append(p)
    layouts = []
    if classic:
        layouts.append("classic")
    if wheel_dists or wheel_dirs:
        layouts.append("wheel")
    if not layouts:
        return fact(O.ABSENT, layout="none", roots=[], wheel_distributions=[], wheel_dirs=[])
    return fact(
        O.FOUND,
        layout="+".join(layouts),
        roots=classic,
        wheel_distributions=wheel_dists,
        wheel_dirs=wheel_dirs,
    )


def gpu_fact():
    try:
        nvidia = sorted(p for p in glob.glob("/dev/nvidia*") if re.match(r"/dev/nvidia\d+$", p))
        nvidia_ctl = os.path.exists("/dev/nvidiactl")
        kfd = os.path.exists("/dev/kfd")
        render = sorted(glob.glob("/dev/dri/renderD*"))
    except OSError as exc:  # pragma: no cover
        return fact(O.FAILED, error=str(exc))
    vendors = []
    if nvidia:
        vendors.append("nvidia")
    if kfd:
        vendors.append("amd")
    return fact(
        O.FOUND if (nvidia or kfd) else O.ABSENT,
        vendors=vendors,
        nvidia_devices=nvidia,
        nvidia_ctl=nvidia_ctl,
        kfd=kfd,
        dri_render_nodes=render,
    )


def variables_fact(environ):
    rows = []
    for name in sorted(environ):
        if is_recorded(name):
            rows.append(
                {
                    "name": name,
                    "value": environ[name],
                    "controlled": is_controlled(name),
                }
            )
    return rows


def site_dirs():
    dirs = []
    for p in sys.path:
        if p and os.path.isdir(p) and (p.endswith("site-packages") or p.endswith("dist-packages")):
            if p not in dirs:
                dirs.append(p)
    return dirs


def gather(environ):
    """All static facts, each guarded so one failure cannot lose the others."""
    out = {}  # type: dict
    dists = {}  # type: dict
    try:
        dists = distributions()
    except Exception as exc:  # pragma: no cover - defensive
        out["distributions_error"] = "%s: %s" % (type(exc).__name__, exc)
    sds = site_dirs()
    for key, fn in (
        ("python", python_fact),
        ("platform", platform_fact),
        ("triton", lambda: triton_fact(dists)),
        ("torch", lambda: torch_fact(dists)),
        ("rocm", lambda: rocm_fact(dists, sds)),
        ("gpu", gpu_fact),
    ):
        try:
            out[key] = fn()
        except Exception as exc:
            out[key] = fact(O.FAILED, error="%s: %s" % (type(exc).__name__, exc))
    out["variables"] = variables_fact(environ)
    interesting = [
        {"name": n, "version": v[0]}
        for n, v in sorted(dists.items())
        if n in TRITON_DISTRIBUTIONS
        or n == "torch"
        or n.startswith("rocm")
        or n.startswith("nvidia-cuda-cupti")
        or n.startswith("nvidia-cuda-runtime")
        or n in ("numpy",)
    ]
    out["distributions"] = interesting
    return out


def resolved():
    """What identifies this environment for proton-survey's "unchanged?" check:
    the interpreter, every installed distribution and the hash of each
    distribution's RECORD (which lists the sha256 of every installed file)."""
    import hashlib

    md = _metadata()
    dists = []
    if md is not None:
        seen = set()
        for dist in md.distributions():
            try:
                name = dist.metadata["Name"]
            except Exception:
                continue
            if not name or normalise(name) in seen:
                continue
            seen.add(normalise(name))
            record = None
            try:
                text = dist.read_text("RECORD")
                if text:
                    record = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
            except Exception:
                pass
            dists.append({"name": normalise(name), "version": dist.version, "record_sha256": record})
    dists.sort(key=lambda d: d["name"])
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "machine": platform.machine(),
        "distributions": dists,
    }
