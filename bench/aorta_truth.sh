#!/usr/bin/env bash
# Ground truth for `survey check --recipe` on aorta recipes (bench/aorta_truth/).
#
#   bench/aorta_truth.sh record OUT [PYTHON]   on a GPU host: the probe's report
#       (OUT/report.json, its profiles under OUT/artifacts/) and every recipe of
#       bench/aorta_truth/recipes run by `aorta sweep run` (OUT/truth.json: per cell,
#       whether a Proton profile recording something measured was left). The two
#       run side by side; neither times anything.
#   bench/aorta_truth.sh compare OUT           on any host with proton-survey: OUT/report.json
#       ingested into a temporary store, `survey check CANDIDATE --recipe R --platform
#       sm_90 --json` for every recipe, one row per cell and the agreement.
#
# PYTHON (record) needs torch, Triton, pyyaml and click, and amd-aorta 0.3.0:
# installed, or unpacked (the wheel is a zip) in the directory AORTA_SITE names.
# compare uses SURVEY (default: .venv/bin/survey of this checkout, else survey on
# PATH), PYTHON (one that imports proton-survey: default .venv/bin/python) and
# PLATFORM (default sm_90).
#   bench/aorta_truth/truth.py measure OUT --survey "python3 -m survey"   on the GPU host,
#       beside record: `survey check PY --recipe R --measure` for the overlay recipes;
#       their overlay reports go to OUT/overlays/, which compare ingests.
set -u
cmd=${1:?usage: aorta_truth.sh record OUT [PYTHON] | compare OUT}
out=${2:?usage: aorta_truth.sh record OUT [PYTHON] | compare OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
case "$cmd" in
record)
  py=${3:-python3}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    hostname
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    "$py" -c 'import sys, triton, torch; print(sys.version.split()[0], "triton", triton.__version__, "torch", torch.__version__)'
    PYTHONPATH="${AORTA_SITE:-}" "$py" -c 'from importlib.metadata import version; print("amd-aorta", version("amd-aorta"))'
  } > "$out/host.txt" 2>&1
  cat "$out/host.txt"
  "$py" -c "import sys; sys.path.insert(0, '$here'); from probes import bundle; bundle.write('$out/probe.zip')"
  (
    PYTHONUNBUFFERED=1 timeout "${PROBE_TIMEOUT:-400}" "$py" "$out/probe.zip" probe \
      --artifacts-dir "$out/artifacts" -o "$out/report.json" > "$out/probe.log" 2>&1
    echo "probe exit: $?" >> "$out/probe.log"
  ) &
  probe_pid=$!
  PYTHONUNBUFFERED=1 PYTHONPATH="${AORTA_SITE:+$AORTA_SITE${PYTHONPATH:+:$PYTHONPATH}}" \
    timeout "${TRUTH_TIMEOUT:-480}" "$py" "$here/bench/aorta_truth/truth.py" record "$out" --python "$py" \
    --jobs "${TRUTH_JOBS:-6}"
  echo "truth exit: $?"
  wait "$probe_pid"
  tail -n 3 "$out/probe.log"
  rm -f "$out/probe.zip"
  ;;
compare)
  survey=${SURVEY:-}
  if [ -z "$survey" ]; then
    if [ -x "$here/.venv/bin/survey" ]; then survey="$here/.venv/bin/survey"; else survey=survey; fi
  fi
  py=${PYTHON:-}
  if [ -z "$py" ]; then
    if [ -x "$here/.venv/bin/python" ]; then py="$here/.venv/bin/python"; else py=python3; fi
  fi
  "$py" "$here/bench/aorta_truth/truth.py" compare "$out" --survey "$survey" --platform "${PLATFORM:-sm_90}"
  ;;
*)
  echo "aorta_truth.sh: unknown stage '$cmd' (record or compare)" >&2
  exit 64
  ;;
esac
