"""Build the stub libraries (C sources in ``probes/stubs/``).

Preference: stubs prebuilt by the host for this machine's architecture (shipped
in the bundle), else a C compiler in the target, else none - and the report says
which, and why.

What a compiler built is kept in a cache directory (``default_cache_dir``), keyed
by the sources, the compiler (its path, size and modification time), the flags
and the machine, so the next probe with the same compiler copies it instead of
compiling. A build enters the cache complete or not at all: it is compiled into
a directory of its own and renamed into place, so concurrent probes never see
half of one; one that cannot write the cache compiles as before.
"""

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile

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


FLAGS = ("-shared", "-fPIC", "-O1")
CACHE_FORMAT = "1"

MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183, "ppc64le": 21}


def compile_stubs(source_dir, out_dir, cc, timeout=60):
    """Compile every stub into ``out_dir`` (the compilers run at once). Returns
    (built names, errors), in the order of ``STUBS``."""
    os.makedirs(out_dir, exist_ok=True)
    procs = []  # type: list
    for soname, src in STUBS:
        cmd = [cc] + list(FLAGS) + [
            "-Wl,-soname," + soname, "-I", source_dir, "-o", os.path.join(out_dir, soname),
            os.path.join(source_dir, src),
        ]
        try:
            procs.append((soname, subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT), None))
        except OSError as e:
            procs.append((soname, None, "%s: %s" % (soname, e)))
    built, errors = [], []
    for soname, proc, error in procs:
        if proc is None:
            errors.append(error)
            continue
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as e:
            proc.kill()
            proc.communicate()
            errors.append("%s: %s" % (soname, e))
            continue
        if proc.returncode != 0:
            errors.append("%s: %s" % (soname, out.decode("utf-8", "replace")[-500:]))
        else:
            built.append(soname)
    return built, errors


def default_cache_dir(environ):
    """Where compiled stubs are kept between probes: under $XDG_CACHE_HOME (or
    ~/.cache), or None when there is no home to keep them in."""
    base = environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        home = environ.get("HOME")
        if not home or not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "proton-survey", "probe-stubs")


def cache_key(source_dir, cc):
    """What a compiled stub depends on: the sources, the compiler, the flags, the machine."""
    h = hashlib.sha256()
    h.update(("format %s\n" % CACHE_FORMAT).encode())
    for name in SOURCES:
        with open(os.path.join(source_dir, name), "rb") as f:
            data = f.read()
        h.update(("%s %d\n" % (name, len(data))).encode())
        h.update(data)
    real = os.path.realpath(cc)
    st = os.stat(real)
    h.update(("cc %s %d %d\n" % (real, st.st_size, st.st_mtime_ns)).encode())
    h.update(("flags %s\nmachine %s\n" % (" ".join(FLAGS), platform.machine())).encode())
    return h.hexdigest()[:32]


def _complete(d, want):
    return all(elf_machine(os.path.join(d, soname)) == want for soname, _ in STUBS)


def _copy_all(src_dir, out_dir, names):
    os.makedirs(out_dir, exist_ok=True)
    for n in names:
        shutil.copy2(os.path.join(src_dir, n), os.path.join(out_dir, n))


def compile_cached(source_dir, out_dir, cc, cache_dir):
    """``compile_stubs`` through the cache. Returns (built, errors, cache) where
    ``cache`` says what the cache did (hit, stored, or why it was not used)."""
    want = MACHINES.get(platform.machine())
    if not cache_dir:
        return compile_stubs(source_dir, out_dir, cc) + ("not used: no cache directory",)
    try:
        final = os.path.join(cache_dir, cache_key(source_dir, cc))
        if want is not None and _complete(final, want):
            _copy_all(final, out_dir, [s for s, _ in STUBS])
            return [s for s, _ in STUBS], [], "hit"
        os.makedirs(cache_dir, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".build-", dir=cache_dir)
    except OSError as e:
        return compile_stubs(source_dir, out_dir, cc) + ("not used: %s: %s" % (type(e).__name__, e),)
    try:
        built, errors = compile_stubs(source_dir, tmp, cc)
        _copy_all(tmp, out_dir, built)
        if errors or want is None or not _complete(tmp, want):
            return built, errors, "not stored: the build was incomplete"
        try:
            os.rename(tmp, final)  # whole, or not at all; a probe that got there first wins
        except OSError:
            return built, errors, "not stored: another probe stored the same build first"
        return built, errors, "stored"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prepare(source_dir, prebuilt_dir, work_dir, environ, cache_dir=None):
    """Make the stub libraries available under ``work_dir``; returns the report's
    ``stubs`` section (``dir`` is where they are, when available). Compiled stubs
    go through ``cache_dir`` when one is given."""
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
    built, errors, cache = compile_cached(source_dir, out_dir, cc, cache_dir)
    if not built:
        return {"status": "failed", "how": "compiled with " + cc, "dir": None, "libraries": [], "machine": machine,
                "reason": "; ".join(errors), "cache": cache}
    res = {"status": "found", "how": "compiled with " + cc, "dir": out_dir, "libraries": built, "machine": machine,
           "cache": cache}
    if errors:
        res["errors"] = errors
    return res
