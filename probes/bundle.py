"""Build the zip that ships the probe into a target interpreter.

The zip holds this package and a top-level ``__main__.py``; ``python probe.zip
...`` runs it. Prebuilt stub libraries may be added under
``probes/stubs/prebuilt/`` (built on the host for the target's architecture).
"""

import io
import os
import zipfile

MAIN = (
    "import sys\n"
    "from probes import cli\n"
    "sys.exit(cli.main(sys.argv[1:], bundle=sys.argv[0]))\n"
)


def package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def build(prebuilt_stubs=None):
    """The bundle as bytes."""
    buf = io.BytesIO()
    root = package_dir()
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
        if prebuilt_stubs:
            for fn in sorted(os.listdir(prebuilt_stubs)):
                if fn.endswith(".so"):
                    z.write(os.path.join(prebuilt_stubs, fn), "probes/stubs/prebuilt/" + fn)
    return buf.getvalue()


def write(path, prebuilt_stubs=None):
    data = build(prebuilt_stubs)
    with open(path, "wb") as f:
        f.write(data)
    return path
