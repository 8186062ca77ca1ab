"""Build the zip that ships the probe into a target interpreter.

The zip holds this package and a top-level ``__main__.py``; ``python probe.zip
...`` runs it. Prebuilt stub libraries may be added under
``probes/stubs/prebuilt/`` (built on the host for the target's architecture).

Beside each module it holds the bytecode this (the host's) Python compiled, as a
checked hash-based ``.pyc``: a target of the same Python version imports it
without compiling the source again (the probe's processes all import from the
zip), after checking it against the source beside it; any other version finds a
magic number it does not know and compiles the source, as without it.
"""

import io
import os
import py_compile
import shutil
import tempfile
import zipfile

MAIN = (
    "import sys\n"
    "# The probe's own children (a check's worker, a zygote) go straight to their\n"
    "# module: the same modules are loaded before Triton whether forked or fresh,\n"
    "# and neither pays for the CLI's imports.\n"
    "if sys.argv[1:2] == ['worker']:\n"
    "    from probes import worker\n"
    "    sys.exit(worker.main(sys.argv[2:]))\n"
    "if sys.argv[1:2] == ['zygote']:\n"
    "    from probes import zygote\n"
    "    sys.exit(zygote.main(sys.argv[2:]))\n"
    "from probes import cli\n"
    "sys.exit(cli.main(sys.argv[1:], bundle=sys.argv[0]))\n"
)


def package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def build(prebuilt_stubs=None):
    """The bundle as bytes."""
    buf = io.BytesIO()
    root = package_dir()
    tmp = tempfile.mkdtemp(prefix="proton-survey-bundle-")
    try:
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("__main__.py", MAIN)
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "prebuilt"))
                for fn in sorted(filenames):
                    if fn.endswith((".pyc", ".so")):
                        continue
                    full = os.path.join(dirpath, fn)
                    arc = os.path.join("probes", os.path.relpath(full, root))
                    z.write(full, arc)
                    if fn.endswith(".py"):
                        z.writestr(arc + "c", _bytecode(full, tmp))
            if prebuilt_stubs:
                for fn in sorted(os.listdir(prebuilt_stubs)):
                    if fn.endswith(".so"):
                        z.write(os.path.join(prebuilt_stubs, fn), "probes/stubs/prebuilt/" + fn)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return buf.getvalue()


def _bytecode(path, tmp):
    out = os.path.join(tmp, "module.pyc")
    py_compile.compile(path, cfile=out, doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    with open(out, "rb") as f:
        return f.read()


def write(path, prebuilt_stubs=None):
    data = build(prebuilt_stubs)
    with open(path, "wb") as f:
        f.write(data)
    return path
