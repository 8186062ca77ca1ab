#!/usr/bin/env bash
# Set up and run proton-survey's tests on a fresh machine. `.ci/run` calls this.
#
#   tests/run.sh                  every tier: lint, types, fast, integration (real PyPI triton
#                                 wheels), podman (real images), browser (chromium), schemathesis
#                                 (the service against its OpenAPI document, over 10,000 cases), fleet
#                                 (a local Ray cluster)
#   tests/run.sh --fast           lint, types and the fast tier (no downloads beyond the Python deps
#                                 and, when missing, PostgreSQL)
#   tests/run.sh --flake-hunt N   the fast and integration tiers, N times over, in random order
#                                 (a new seed each time), on SQLite and PostgreSQL
#   tests/run.sh ... ARGS         extra arguments go to pytest (e.g. -p no:randomly, -n 0, a path)
#
# Tests run in parallel (pytest-xdist; TEST_WORKERS, default: twice the cores) and in random
# order (pytest-randomly: it prints the seed; `--randomly-seed=N` repeats an order,
# `-p no:randomly` keeps the files' order).
# Tests that use a store run on SQLite; those marked both_stores (what the database itself
# decides) on PostgreSQL too, one server per run (tests/conftest.py).
#
# System packages it needs, installed with apt-get when missing (as root, or through sudo):
#   postgresql            every tier: the both_stores tests run on a real PostgreSQL server
#   podman runc           the podman tier: real containers
#   debootstrap           the podman tier: the test images' Debian root filesystem (.ci/build-images)
#   chromium              the browser tier: Playwright drives Debian's chromium
# On a machine without apt-get it names what is missing and stops: install them by hand.
#
# Heavy downloads (triton wheels, the Debian root filesystem) and mypy's cache are kept
# under SURVEY_CACHE (default: .cache/ in the checkout) and reused within and across runs.
# Exit status: 0 when every tier passed; pytest's status (1: a test failed) otherwise;
# 64 bad arguments; 69 a system package is missing and cannot be installed here.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=all
hunt=0
case "${1:-}" in
  --fast) mode=fast; shift ;;
  --flake-hunt)
    mode=hunt
    hunt=${2:-}
    [[ $hunt =~ ^[1-9][0-9]*$ ]] || { echo "tests/run.sh: --flake-hunt wants a number of repeats, e.g. --flake-hunt 20" >&2; exit 64; }
    shift 2 ;;
esac

say() { printf '[run.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

export SURVEY_CACHE=${SURVEY_CACHE:-$PWD/.cache/proton-survey}
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$SURVEY_CACHE/pip}
export MYPY_CACHE_DIR=${MYPY_CACHE_DIR:-$SURVEY_CACHE/mypy}  # incremental: rechecks what changed
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Each Python process of the run (workers, CLIs, servers, probes, Ray tasks) reads the
# modules' bytecode that the first one wrote, rather than compiling them all again
unset PYTHONDONTWRITEBYTECODE
mkdir -p "$SURVEY_CACHE"

# ------------------------------------------------------------------ system packages
# package, why the tests need it, what finds it installed (last: it may hold "||")
packages=(
  "postgresql|the both_stores tests run on a real PostgreSQL server (every tier)|compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' || command -v pg_ctl"
  "podman|the podman tier runs real containers|command -v podman"
  "runc|podman's container runtime|command -v runc || command -v crun"
  "debootstrap|.ci/build-images makes the test images' Debian root filesystem|command -v debootstrap"
  "chromium|the browser tier drives Debian's chromium through Playwright|command -v chromium"
)
wanted=(postgresql)
[[ $mode == all ]] && wanted=(postgresql podman runc debootstrap chromium)

missing=()
for entry in "${packages[@]}"; do
  IFS='|' read -r pkg why test <<<"$entry"
  [[ " ${wanted[*]} " == *" $pkg "* ]] || continue
  bash -c "$test" >/dev/null 2>&1 || missing+=("$pkg|$why")
done
if ((${#missing[@]})); then
  names=()
  for entry in "${missing[@]}"; do
    IFS='|' read -r pkg why <<<"$entry"
    names+=("$pkg")
    say "needs $pkg: $why"
  done
  sudo=()
  [[ $(id -u) == 0 ]] || sudo=(sudo)
  if ! command -v apt-get >/dev/null; then
    say "no apt-get here: install these by hand (Debian names): ${names[*]}; then run tests/run.sh again"
    exit 69
  fi
  if ((${#sudo[@]})) && ! command -v sudo >/dev/null; then
    say "not root and no sudo: install these as root: apt-get install ${names[*]}"
    exit 69
  fi
  say "installing with apt-get: ${names[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${names[@]}" >/dev/null
fi

# ------------------------------------------------------------------ Python
say "the Python dependencies (.venv, pip install -e .[test,browser,bench,fleet])"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip

# Every tier: the podman tier's images and the integration tier's Triton venvs (mostly
# downloads and unpacking) are made in the background from here on, while the rest installs
# and the tests that need neither run; mypy, too, runs beside the tests. Each job writes its
# log to $logs/JOB and then its exit status to $logs/JOB.rc; the tests that need it are handed
# out once that file is there (tests/helpers/scheduling.py). A log is shown only when its job failed.
started=() logs=''  # the background jobs, stopped on exit
prepare() {  # JOB COMMAND...: COMMAND in the background; the clean-up below stops it too
  ( trap 'kill $child 2>/dev/null' TERM  # set before the command starts: no moment without it
    "${@:2}" >"$logs/$1" 2>&1 & child=$!
    from=$SECONDS; rc=0; wait $child || rc=$?
    times >"$logs/$1.times"; echo $((SECONDS - from)) >"$logs/$1.wall"  # for `took`, at the end
    echo $rc >"$logs/$1.rc" ) &
  started+=($!)
}
cpu() {  # FILE: the CPU seconds of the children a `times` output there names (user + system)
  awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
                 printf "%.1f", s }' "$1"
}
took() {  # JOB: "JOB W s, CPU C s", from what prepare wrote
  [[ -s $logs/$1.times ]] || { echo "$1 (not ended)"; return; }
  echo "$1 $(cat "$logs/$1.wall") s, CPU $(cpu "$logs/$1.times") s"
}
if [[ $mode == all ]]; then
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/.ci/containers.conf}
  logs=$(mktemp -d)
  export PROTON_SURVEY_PREPARING=$logs
  # by the end the jobs have ended, so kill fails: `|| true` keeps that from becoming
  # the exit status under set -e (tests/test_run_script.py)
  # and waits for them: a stopped job's wrapper still writes its status files as it ends
  trap 'kill ${started[@]+"${started[@]}"} 2>/dev/null || true; wait ${started[@]+"${started[@]}"} 2>/dev/null || true; rm -rf "$logs"' EXIT
  prepare images env PYTHON=.venv/bin/python .ci/build-images  # needs only pip
fi
.venv/bin/python -m pip install -q -e ".[test,browser,bench,fleet]"
.venv/bin/ruff check .
if [[ $mode == all ]]; then
  prepare venvs .venv/bin/python -m tests.envs  # needs proton-survey installed
  prepare types .venv/bin/mypy
else
  .venv/bin/mypy
fi

workers=${TEST_WORKERS:-$(($(nproc) * 2))}
pytest=(.venv/bin/python -m pytest -n "$workers" --dist loadgroup)
heavy="podman or browser or schemathesis or fleet"

if [[ $mode == fast ]]; then
  exec "${pytest[@]}" -m "not integration and not ($heavy)" "$@"
fi

if [[ $mode == hunt ]]; then
  say "flake hunt: the fast and integration tiers, $hunt times over, in random order"
  .venv/bin/python -m tests.envs >/dev/null  # the integration tier's Triton venvs, once
  # tests/helpers/leaks.py names, at the end, each test that changed its process for the tests after it
  exec "${pytest[@]}" -p tests.helpers.leaks -m "not ($heavy)" --count "$hunt" "$@"
fi

# ------------------------------------------------------------------ every tier
# One pytest run of every tier: the longest tests first (the schemathesis ones on PostgreSQL
# above all), the tests that need the images or the venvs as soon as those are made, the many
# short ones last (tests/conftest.py, tests/helpers/scheduling.py).
# --durations: the slowest tests are in the log, so where the time goes is on record
status=0
tests_from=$SECONDS
"${pytest[@]}" --durations=30 "$@" || status=$?
tests_took=$((SECONDS - tests_from))
wait  # the background jobs: ended by now, as a rule
for job in images venvs types; do
  if [[ $(cat "$logs/$job.rc" 2>/dev/null) != 0 ]]; then
    case $job in types) say "mypy failed:" ;; *) say "preparing the $job failed:" ;; esac
    tail -40 "$logs/$job" >&2
    ((status)) || status=1
  fi
done
# where the time went: the jobs ran beside the tests, so their CPU is time the tests did not have
times >"$logs/all.times"  # every command this script ran and waited for
say "took: setup $tests_from s; tests $tests_took s; beside them $(took images); $(took venvs); $(took types)"
say "every tier: exit $status; ${SECONDS} s in all, CPU $(cpu "$logs/all.times") s"
exit "$status"
