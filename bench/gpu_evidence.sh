#!/usr/bin/env bash
# Produce GPU evidence on a GPU host whose python3 has torch and Triton:
#   1. the probe report (every backend x mode, captures of every working mode),
#   2. the GELU bandwidth / capture-overhead benchmark,
#   3. the probe-speed benchmark across --jobs values.
# Usage: bench/gpu_evidence.sh OUTDIR [PYTHON]
# Bring OUTDIR/report.json back and `survey ingest` it.
set -u
out=${1:?OUTDIR}
py=${2:-python3}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  hostname
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  "$py" -c 'import sys, triton, torch; print(sys.version.split()[0], "triton", triton.__version__, "torch", torch.__version__)'
} > "$out/host.txt" 2>&1
cat "$out/host.txt"
"$py" -c "import sys; sys.path.insert(0, '.'); from probes import bundle; bundle.write('/tmp/proton-survey-probe.zip')"
PYTHONUNBUFFERED=1 "$py" /tmp/proton-survey-probe.zip probe --capture instrumentation -o "$out/report.json"
echo "probe exit: $?"
PYTHONUNBUFFERED=1 "$py" bench/bench_gelu.py --output "$out/bench_gelu.json"
echo "bench_gelu exit: $?"
PYTHONUNBUFFERED=1 "$py" bench/bench_probe.py --python "$py" --jobs "${PROBE_JOBS:-1,4,16}" --repeat 3 --output "$out/bench_probe.json"
echo "bench_probe exit: $?"
