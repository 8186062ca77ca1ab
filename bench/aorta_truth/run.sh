#!/usr/bin/env bash
# The truth recipes' shell-script command shape: runs workload.py with the Python
# named by TRUTH_PYTHON (aorta's mode: cli refuses to wrap a shell script; under
# mode: env the workload starts Proton itself).
exec "${TRUTH_PYTHON:-python3}" "$(dirname "$0")/workload.py" "$@"
