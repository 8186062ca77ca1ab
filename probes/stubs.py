"""Build the stub libraries (C sources in ``probes/stubs/``).

Preference: stubs prebuilt by the host for this machine's architecture (shipped
in the bundle), else a C compiler in the target, else none - and the report says
which, and why.
"""

import os
import platform
import shutil
import subprocess

# soname Proton asks for -> C source
STUBS = (
    ("librocprofiler-sdk.so", "rocprofiler_sdk.c"),
    ("libroctracer64.so", "roctracer64.c"),
    ("libamdhip64.so", "amdhip64.c"),
)
SOURCES = ("stub_common.h",) + tuple(src for _, src in STUBS)
STUB_DIR_NAME = "proton-survey-stubs"


def find_compiler(environ):
    for name in (environ.get("CC"), "cc", "gcc", "clang"):
        if not name:
            continue
        path = shutil.which(name, path=environ.get("PATH"))
        if path:
            return path
    return None


def elf_machine(path):
    """e_machine of an ELF file, or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    little = head[5] == 1
    return int.from_bytes(head[18:20], "little" if little else "big")


MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183, "ppc64le": 21}


def compile_stubs(source_dir, out_dir, cc, timeout=60):
    """Compile every stub into ``out_dir``. Returns (built names, errors)."""
    os.makedirs(out_dir, exist_ok=True)
    built, errors = [], []
    for soname, src in STUBS:
        cmd = [
            cc, "-shared", "-fPIC", "-O1", "-Wl,-soname," + soname,
            "-I", source_dir, "-o", os.path.join(out_dir, soname), os.path.join(source_dir, src),
        ]
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        except (OSError, subprocess.SubprocessError) as e:
            errors.append("%s: %s" % (soname, e))
            continue
        if proc.returncode != 0:
            errors.append("%s: %s" % (soname, proc.stdout.decode("utf-8", "replace")[-500:]))
        else:
            built.append(soname)
    return built, errors


def prepare(source_dir, prebuilt_dir, work_dir, environ):
    """Make the stub libraries available under ``work_dir``; returns the report's
    ``stubs`` section (``dir`` is where they are, when available)."""
    out_dir = os.path.join(work_dir, STUB_DIR_NAME)
    machine = platform.machine()
    want = MACHINES.get(machine)
    if prebuilt_dir and os.path.isdir(prebuilt_dir):
        names = [s for s, _ in STUBS if os.path.exists(os.path.join(prebuilt_dir, s))]
        if names and all(elf_machine(os.path.join(prebuilt_dir, n)) == want for n in names):
            os.makedirs(out_dir, exist_ok=True)
            for n in names:
                shutil.copy2(os.path.join(prebuilt_dir, n), os.path.join(out_dir, n))
            return {"status": "found", "how": "prebuilt by the host", "dir": out_dir, "libraries": names,
                    "machine": machine}
    cc = find_compiler(environ)
    if cc is None:
        return {
            "status": "absent",
            "how": None,
            "dir": None,
            "libraries": [],
            "machine": machine,
            "reason": "no prebuilt stub for %s and no C compiler (cc, gcc, clang) in this environment; "
            "stub-derived mode answers were skipped" % machine,
        }
    built, errors = compile_stubs(source_dir, out_dir, cc)
    if not built:
        return {"status": "failed", "how": "compiled with " + cc, "dir": None, "libraries": [], "machine": machine,
                "reason": "; ".join(errors)}
    res = {"status": "found", "how": "compiled with " + cc, "dir": out_dir, "libraries": built, "machine": machine}
    if errors:
        res["errors"] = errors
    return res
