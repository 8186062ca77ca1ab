"""Which shared libraries Proton dlopens, where versions of them exist, and whether
the exact name Proton asks for loads.

The names come from the installed ``libproton.so`` itself (its string table), so a
new release that asks for a new library is seen without a code change here; the
table below only says which backend each known name belongs to.
"""

import glob
import os
import re
import subprocess

# name Proton asks for -> backends that need it
KNOWN = {
    "libcupti.so": ("cupti",),
    "libcuda.so.1": ("cupti", "instrumentation"),
    "libroctracer64.so": ("roctracer",),
    "libroctx64.so": ("roctracer", "rocprofiler"),
    "librocprofiler-sdk.so": ("rocprofiler",),
    "librocprofiler-register.so": ("rocprofiler",),
    "libamdhip64.so": ("roctracer", "rocprofiler", "instrumentation"),
    "libhsa-runtime64.so": ("roctracer", "rocprofiler"),
    "libhsa-runtime64.so.1": ("roctracer", "rocprofiler"),
}
# Libraries every C++ extension needs; not Proton's choice, not reported.
IGNORED = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libproton.so", "libdl.so.2", "libpthread.so.0"}

# Proton's per-library override knobs: (directory variable, file-name variable).
# Which of them a release reads is measured (triton.knobs.proton); this only maps
# a library to the knobs that would apply to it.
OVERRIDES = {
    "libcupti.so": ("TRITON_CUPTI_LIB_PATH", None),
    "librocprofiler-sdk.so": ("TRITON_ROCPROFILER_SDK_LIB_PATH", "TRITON_ROCPROFILER_SDK_LIBRARY"),
    "libroctracer64.so": ("TRITON_ROCTRACER_LIB_PATH", "TRITON_ROCTRACER_LIBRARY"),
    "libroctx64.so": ("TRITON_ROCTX_LIB_PATH", "TRITON_ROCTX_LIBRARY"),
    "libhsa-runtime64.so.1": ("TRITON_HSA_RUNTIME_PATH", "TRITON_HSA_RUNTIME_LIBRARY"),
}

_SONAME = re.compile(rb"lib[A-Za-z0-9_+\-]+\.so(?:\.[0-9]+)*")


def names_in_libproton(path):
    """Library names in libproton.so's strings, in first-seen order."""
    with open(path, "rb") as f:
        data = f.read()
    names = []
    for m in _SONAME.finditer(data):
        # A real string is NUL-delimited on both sides (or bracketed by backticks).
        start, end = m.start(), m.end()
        before = data[start - 1 : start]
        after = data[end : end + 1]
        if before not in (b"\x00", b"`") or after not in (b"\x00", b"`"):
            continue
        name = m.group().decode("ascii")
        if name in IGNORED or name in names:
            continue
        names.append(name)
    return names


def base_of(name):
    """'librocprofiler-sdk.so.1' -> 'librocprofiler-sdk'"""
    return name.split(".so", 1)[0]


def ldconfig_entries():
    """(soname, path) pairs from the loader cache, or None when unavailable."""
    for exe in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "/sbin/ldconfig.real", "ldconfig"):
        try:
            proc = subprocess.run(
                [exe, "-p"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=20
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode != 0:
            continue
        rows = []
        for line in proc.stdout.decode("utf-8", "replace").splitlines():
            m = re.match(r"\s*(\S+)\s+\(.*\)\s+=>\s+(\S+)", line)
            if m:
                rows.append((m.group(1), m.group(2)))
        return rows
    return None


def search_dirs(environ, rocm, site_dirs, triton_dir):
    """(where, directory) pairs to look in, in the order a user would care about."""
    dirs = []  # type: list

    def add(where, d):
        if d and os.path.isdir(d) and all(d != x[1] for x in dirs):
            dirs.append((where, d))

    for d in (environ.get("LD_LIBRARY_PATH") or "").split(":"):
        add("LD_LIBRARY_PATH", d)
    for root in rocm.get("roots") or []:
        for sub in ("lib", "lib64", "lib/rocprofiler-sdk", "lib/roctracer"):
            add("rocm_root", os.path.join(root["root"], sub))
    for wd in rocm.get("wheel_dirs") or []:
        for sub in ("lib", "lib64", ""):
            add("python_wheel", os.path.join(wd, sub).rstrip("/"))
    for sd in site_dirs:
        for pattern in ("_rocm_sdk_*/lib*", "rocm_sdk*/lib*", "torch/lib", "nvidia/*/lib"):
            for d in sorted(glob.glob(os.path.join(sd, pattern))):
                add("python_wheel", d)
    if triton_dir:
        for d in sorted(glob.glob(os.path.join(triton_dir, "backends", "*", "lib", "*"))):
            add("triton_package", d)
        for d in sorted(glob.glob(os.path.join(triton_dir, "backends", "*", "lib"))):
            add("triton_package", d)
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib"):
        add("system", d)
    return dirs


def candidates(name, dirs, ld_entries):
    """Files whose name is ``name`` or a versioned form of it."""
    base = base_of(name)
    pat = re.compile(re.escape(base) + r"\.so(\.[0-9][0-9.]*)?$")
    found = []
    seen = set()
    for soname, path in ld_entries or []:
        if pat.match(soname) and path not in seen:
            seen.add(path)
            found.append({"path": path, "file": soname, "where": "ld.so.cache"})
    for where, d in dirs:
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for e in sorted(entries):
            if pat.match(e):
                path = os.path.join(d, e)
                if path in seen:
                    continue
                seen.add(path)
                found.append({"path": path, "file": e, "where": where})
    return found


def describe_fix(name, loads, found, knobs_present):
    """What to do when the exact name does not load. None when nothing to fix."""
    if loads:
        return None
    exact = [c for c in found if c["file"] == name]
    versioned = [c for c in found if c["file"] != name]
    dir_knob, file_knob = OVERRIDES.get(name, (None, None))
    have_dir = dir_knob in knobs_present if dir_knob else False
    have_file = file_knob in knobs_present if file_knob else False
    if exact:
        d = os.path.dirname(exact[0]["path"])
        if have_dir:
            return "%s exists at %s but is not on the loader's path: set %s=%s, or add %s to LD_LIBRARY_PATH" % (
                name, exact[0]["path"], dir_knob, d, d)
        return "%s exists at %s but is not on the loader's path: add %s to LD_LIBRARY_PATH" % (
            name, exact[0]["path"], d)
    if versioned:
        v = versioned[0]
        d = os.path.dirname(v["path"])
        if have_dir and have_file:
            return ("only versioned files exist (%s); Proton asks for the unversioned %s. "
                    "Set %s=%s and %s=%s" % (", ".join(c["path"] for c in versioned), name, dir_knob, d,
                                             file_knob, v["file"]))
        how = "set %s to a directory holding it" % dir_knob if have_dir else "put that directory on LD_LIBRARY_PATH"
        return ("only versioned files exist (%s); Proton dlopens the unversioned %s. "
                "Create it as a link, e.g. `ln -s %s <dir>/%s`, and %s" % (
                    ", ".join(c["path"] for c in versioned), name, v["path"], name, how))
    return "no file named %s (or a versioned form) was found; install the package that provides it" % name
