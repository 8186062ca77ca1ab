"""The server's memory around the docs table: `survey serve` on a store, then /matrix.json,
/matrix and /matrix.md once each, with VmHWM/VmRSS after each.

    python md_rss.py CHECKOUT STORE.db PORT
"""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator


def main() -> None:
    root, db, port = sys.argv[1], sys.argv[2], sys.argv[3]
    env = {**os.environ, "PYTHONPATH": root}
    cmd = [sys.executable, "-m", "survey", "serve", "--db", "sqlite:///" + db, "--port", port]
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)

    def memory() -> Iterator[str]:
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM", "VmRSS")):
                    yield line.split()[1]

    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/healthz", timeout=2)
            break
        except OSError:
            time.sleep(0.2)
    out = [f"start hwm/rss {'/'.join(memory())} KB"]
    for path in ["/matrix.json", "/matrix", "/matrix.md"]:
        t = time.perf_counter()
        body = urllib.request.urlopen(base + path, timeout=300).read()
        out.append(f"{path} {time.perf_counter() - t:.2f}s {len(body)} B hwm/rss {'/'.join(memory())} KB")
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    print(root, *out, sep="\n  ")


if __name__ == "__main__":
    main()
