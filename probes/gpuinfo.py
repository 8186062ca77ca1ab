"""The GPU platform this probe runs on: vendor, model, architecture, driver, runtime.

Part of the evidence's identity: the same environment probed on an H200 and on an
MI300X is two pieces of evidence. Read without torch or Triton:

- NVIDIA: the kernel driver's ``/proc/driver/nvidia/version`` and
  ``/proc/driver/nvidia/gpus/*/information`` (model), and the CUDA driver API
  through ctypes (``libcuda.so.1``: device name, compute capability -> ``sm_90``,
  ``cuDriverGetVersion`` -> the CUDA version the driver supports). The ctypes
  query runs in a child process with a timeout (``python probe.zip gpuinfo``):
  ``cuInit`` can hang or crash on a broken driver.
- AMD: the KFD topology (``/sys/class/kfd/kfd/topology/nodes/*/properties``:
  ``gfx_target_version`` -> ``gfx942``), the marketing name where the DRM device
  publishes one, the amdgpu module version, ROCm's ``.info/version``.
- Neither: ``vendor`` "none" and the CPU architecture.

Whatever could not be read is ``None`` with the reason in ``errors``: nothing is
guessed (an NVIDIA device whose compute capability could not be read has arch None).
"""

import glob
import json
import os
import platform
import re
import sys


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def nvidia_proc():
    """Driver version and models from /proc (no library loaded)."""
    out = {"driver": None, "models": []}  # type: dict
    text = _read("/proc/driver/nvidia/version") or ""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    if m:
        out["driver"] = m.group(1)
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        m = re.search(r"^Model:\s*(.+)$", _read(info) or "", re.MULTILINE)
        if m:
            out["models"].append(m.group(1).strip())
    return out


def cuda_query():
    """Device names and compute capabilities through the CUDA driver API (ctypes).

    Runs in a child process (``gpuinfo`` command); prints one JSON object."""
    import ctypes

    res = {"devices": [], "cuda_driver_api": None, "error": None}  # type: dict
    lib = None
    for libname in ("libcuda.so.1", "libcuda.so"):
        try:
            lib = ctypes.CDLL(libname)
            break
        except OSError as e:
            res["error"] = "dlopen %s: %s" % (libname, e)
    if lib is None:
        return res
    res["error"] = None
    rc = lib.cuInit(0)
    if rc != 0:
        res["error"] = "cuInit returned %d" % rc
        return res
    ver = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(ver)) == 0:
        res["cuda_driver_api"] = "%d.%d" % (ver.value // 1000, (ver.value % 1000) // 10)
    count = ctypes.c_int()
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        res["error"] = "cuDeviceGetCount failed"
        return res
    for i in range(count.value):
        dev = ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), i) != 0:
            continue
        buf = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(buf, 256, dev)
        major, minor = ctypes.c_int(), ctypes.c_int()
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76 (cuda.h)
        lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
        lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
        arch = "sm_%d%d" % (major.value, minor.value) if major.value else None
        res["devices"].append({"index": i, "model": buf.value.decode("utf-8", "replace"), "arch": arch})
    return res


def print_cuda_query():
    sys.stdout.write(json.dumps(cuda_query()) + "\n")
    return 0


def gfx_name(target_version):
    """KFD's gfx_target_version (major*10000 + minor*100 + stepping) -> ``gfx942``."""
    try:
        v = int(target_version)
    except (TypeError, ValueError):
        return None
    if v <= 0:
        return None
    major, minor, step = v // 10000, (v // 100) % 100, v % 100
    return "gfx%d%x%x" % (major, minor, step)


def amd_kfd(root="/sys/class/kfd/kfd/topology/nodes"):
    """GPU nodes of the KFD topology (CPU nodes have gfx_target_version 0)."""
    devices = []  # type: list
    for node in sorted(glob.glob(os.path.join(root, "*")), key=lambda p: (len(p), p)):
        props = {}
        for line in (_read(os.path.join(node, "properties")) or "").splitlines():
            parts = line.split()
            if len(parts) == 2:
                props[parts[0]] = parts[1]
        arch = gfx_name(props.get("gfx_target_version"))
        if arch is None:
            continue
        name = (_read(os.path.join(node, "name")) or "").strip() or None
        devices.append({"index": len(devices), "arch": arch, "kfd_name": name})
    return devices


def amd_marketing_names():
    names = []
    for path in sorted(glob.glob("/sys/class/drm/card*/device/product_name")):
        text = (_read(path) or "").strip()
        if text and text not in names:
            names.append(text)
    return names


def rocm_version(roots=("/opt/rocm",)):
    for root in roots:
        text = (_read(os.path.join(root, ".info", "version")) or "").strip()
        if text:
            return text
    return None


def platform_key(vendor, arch, model):
    """The platform's identity: ``nvidia:sm_90:NVIDIA H200``, ``none:x86_64``."""
    if vendor == "none":
        return "none:%s" % (arch or "unknown")
    return "%s:%s:%s" % (vendor, arch or "unknown-arch", model or "unknown-model")


def detect(gpu_fact, run_cuda_query):
    """The platform record. ``gpu_fact`` is facts.gpu_fact(); ``run_cuda_query()``
    returns cuda_query()'s dict from a child process (or an error dict)."""
    errors = []  # type: list
    out = {
        "vendor": "none",
        "model": None,
        "arch": platform.machine() or None,
        "driver": None,
        "runtime": None,
        "devices": [],
        "errors": errors,
    }  # type: dict
    vendors = gpu_fact.get("vendors") or []
    if "nvidia" in vendors:
        out["vendor"] = "nvidia"
        out["arch"] = None
        proc = nvidia_proc()
        out["driver"] = proc["driver"]
        q = run_cuda_query() or {}
        if q.get("error"):
            errors.append("CUDA driver API: %s" % q["error"])
        devices = q.get("devices") or []
        if devices:
            out["devices"] = devices
            out["model"] = devices[0].get("model")
            out["arch"] = devices[0].get("arch")
        elif proc["models"]:
            out["devices"] = [{"index": i, "model": m, "arch": None} for i, m in enumerate(proc["models"])]
            out["model"] = proc["models"][0]
        if q.get("cuda_driver_api"):
            out["runtime"] = "CUDA %s" % q["cuda_driver_api"]
        if out["arch"] is None:
            errors.append("compute capability not read")
    elif "amd" in vendors:
        out["vendor"] = "amd"
        out["arch"] = None
        devices = amd_kfd()
        names = amd_marketing_names()
        for i, d in enumerate(devices):
            d["model"] = names[i] if i < len(names) else None
        out["devices"] = devices
        if devices:
            out["arch"] = devices[0]["arch"]
            out["model"] = devices[0].get("model")
        else:
            errors.append("no GPU node in the KFD topology")
        mod = (_read("/sys/module/amdgpu/version") or "").strip()
        out["driver"] = mod or None
        rv = rocm_version()
        out["runtime"] = ("ROCm %s" % rv) if rv else None
    if len({(d.get("model"), d.get("arch")) for d in out["devices"]}) > 1:
        errors.append("devices differ; the platform is that of device 0")
    out["key"] = platform_key(out["vendor"], out["arch"], out["model"])
    return out
