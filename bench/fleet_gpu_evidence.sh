#!/usr/bin/env bash
# A fleet survey whose node is a real GPU host, all on this one machine:
#   1. `survey platform --head --json`: the platform this host detects, and the
#      `ray start` line that offers it;
#   2. a Ray head started with exactly that line (plus --port and --block, so that it
#      can be stopped by its pid), the checkout on PYTHONPATH of its workers;
#   3. `survey run --ray 127.0.0.1:6379` of PYTHON (its catalog entry names that platform)
#      and of a candidate that names gfx942 only (no node offers it), twice: the
#      second run re-probes nothing;
#   4. bench/bench_fleet.py (3 simulated platforms, fresh venvs) on this machine's cores.
# Usage: bench/fleet_gpu_evidence.sh OUTDIR [PYTHON]   (PYTHON has our dependencies and Ray)
set -u
out=${1:?OUTDIR}
py=${2:-python3}
port=${FLEET_PORT:-6379}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  hostname
  nproc
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  "$py" -c 'import sys, ray; print(sys.version.split()[0], "ray", ray.__version__)'
  "$py" -c 'import triton; print("triton", triton.__version__)' 2>&1 | tail -1
} > "$out/host.txt" 2>&1
cat "$out/host.txt"

"$py" -m survey platform --head --json > "$out/platform.json"
echo "survey platform exit: $?"
cat "$out/platform.json"
# The printed line, run as printed; `ray` is this Python's Ray.
mapfile -t argv < <("$py" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["ray_start"][1:]))' \
  "$out/platform.json")
"$py" -m ray.scripts.scripts "${argv[@]}" --port="$port" --disable-usage-stats --block > "${TMPDIR:-/tmp}/proton-survey-ray-head.log" 2>&1 &
head_pid=$!
for _ in $(seq 60); do
  "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()' "$port" 2>/dev/null && break
  sleep 1
done
sleep 5

key=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["key"])' "$out/platform.json")
cat > "$out/catalog.toml" <<EOF
[[candidate]]
name = "host-python"
label = "this host's $py"
python = "$(command -v "$py")"
platforms = ["$key"]

[[candidate]]
name = "rocm-only"
python = "$(command -v "$py")"
platforms = ["gfx942"]
EOF
for i in 1 2; do
  t0=$(date +%s.%N)
  "$py" -m survey run --ray "127.0.0.1:$port" --catalog "$out/catalog.toml" --db "sqlite:///$out/fleet.db" \
    --no-table > "$out/run$i.txt" 2>&1
  echo "survey run $i exit: $? after $("$py" -c 'import sys, time; print(round(time.time() - float(sys.argv[1]), 1))' "$t0") s" >> "$out/run$i.txt"
  cat "$out/run$i.txt"
done
tail -3 "${TMPDIR:-/tmp}/proton-survey-ray-head.log"
"$py" -m survey table --all --format json --db "sqlite:///$out/fleet.db" > "$out/table.json" 2>&1
kill -TERM "$head_pid"
wait "$head_pid"

"$py" bench/bench_fleet.py --candidates "${FLEET_CANDIDATES:-6}" --repeat 3 --output "$out/bench_fleet.json"
echo "bench_fleet exit: $?"
