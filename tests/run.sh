#!/usr/bin/env bash
# Set up and run proton-survey's tests on a fresh machine. `.ci/run` calls this.
#
#   tests/run.sh            every tier: lint, types, fast, integration (real PyPI triton
#                           wheels), podman (real images), browser (chromium), schemathesis
#                           (the service against its OpenAPI document, ~12,000 cases), fleet
#                           (a local Ray cluster)
#   tests/run.sh --fast     lint, types and the fast tier (no downloads beyond the Python deps
#                           and, when missing, Debian's postgresql)
#   tests/run.sh ... ARGS   extra arguments go to pytest
#
# Tests that use a store run on SQLite; those marked both_stores (what the database itself
# decides) run on PostgreSQL too (tests/conftest.py).
#
# Heavy downloads (triton wheels, the Debian root filesystem) are cached under
# SURVEY_CACHE (default: .cache/ in the checkout) and reused within and across runs.
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
if [ "${1:-}" = "--fast" ]; then fast=1; shift; fi

export SURVEY_CACHE=${SURVEY_CACHE:-$PWD/.cache/proton-survey}
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$SURVEY_CACHE/pip}
export PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p "$SURVEY_CACHE"

if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
apt_updated=0
apt_install() {  # Debian packages, installed only when missing
  local need=() pkg
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  if [ "$apt_updated" = 0 ]; then $sudo apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# Every tier runs the both_stores tests on PostgreSQL too: tests/pgserver.py starts a
# server of its own from /usr/lib/postgresql/*/bin (Debian's postgresql).
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || apt_install postgresql

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test,browser,bench,fleet]"

.venv/bin/ruff check .
.venv/bin/mypy

if [ "$fast" = 1 ]; then
  exec .venv/bin/python -m pytest -m "not integration and not podman and not browser and not schemathesis and not fleet" "$@"
fi

# System packages for the podman and browser tiers (Debian): podman + runc for real
# containers, debootstrap for the test images, chromium for Playwright, wrk for bench.
apt_install podman runc debootstrap chromium wrk

export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/.ci/containers.conf}
PYTHON=.venv/bin/python .ci/build-images

.venv/bin/python -m pytest "$@"
