import os, signal, subprocess, sys, time, urllib.request
root, db, port = sys.argv[1], sys.argv[2], sys.argv[3]
env = {**os.environ, "PYTHONPATH": root}
p = subprocess.Popen(["/work/main/.venv/bin/python", "-m", "survey", "serve", "--db", "sqlite:///" + db, "--port", port],
                     cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
def hwm():
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith(("VmHWM", "VmRSS")): yield line.split()[1]
base = f"http://127.0.0.1:{port}"
for _ in range(300):
    try: urllib.request.urlopen(base + "/healthz", timeout=2); break
    except OSError: time.sleep(0.2)
out = [f"start hwm/rss {'/'.join(hwm())} KB"]
for path in ["/matrix.json", "/matrix", "/matrix.md"]:
    t = time.perf_counter(); body = urllib.request.urlopen(base + path, timeout=300).read()
    out.append(f"{path} {time.perf_counter()-t:.2f}s {len(body)} B hwm/rss {'/'.join(hwm())} KB")
os.killpg(p.pid, signal.SIGTERM); p.wait()
print(root, *out, sep="\n  ")
