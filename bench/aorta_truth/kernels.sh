#!/usr/bin/env bash
# Which of workload.py's kernels a Proton session survives: the workload run under
# Proton's command line (as aorta's mode: cli runs it) with its unscoped kernel
# alone, its scoped kernel alone and both, per backend; each run's exit status,
# the last lines of its stderr and the profile files it left.
#   bench/aorta_truth/kernels.sh OUT [PYTHON] [BACKENDS]   (default: python3, "instrumentation cupti")
set -u
out=${1:?OUT}
py=${2:-python3}
backends=${3:-instrumentation cupti}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for b in $backends; do
  for k in plain scoped both; do
    d="$out/$b-$k"
    mkdir -p "$d"
    (
      WORKLOAD_KERNELS=$k timeout 120 "$py" -m triton.profiler.proton -n "$d/proton" -b "$b" \
        "$here/workload.py" > "$d/stdout" 2> "$d/stderr"
      echo "$b $k: exit $?; stdout: $(tail -n 1 "$d/stdout"); stderr: $(tail -n 1 "$d/stderr"); left: $(cd "$d" && ls proton.* 2>/dev/null | tr '\n' ' ')"
    ) &
  done
done
wait
