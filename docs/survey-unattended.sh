#!/bin/sh
# proton-survey, unattended: survey the catalog; when that changed the store, rewrite the
# Availability table of a docs page and publish the static site. When nothing changed it
# exits 0 and prints nothing, so cron sends no mail and a CI job has nothing to commit.
# docs/unattended.md shows it run by a systemd timer, cron and GitHub Actions.
#
# Settings (environment; only SURVEY_DB is usually needed):
#   SURVEY          the survey command (default: survey; e.g. /opt/proton-survey/.venv/bin/survey)
#   SURVEY_DB       the store, as for `survey --db` (default: SQLite under ~/.local/share/proton-survey)
#   SURVEY_CATALOG  the catalog (default: the built-in one)
#   SURVEY_PAGE     a Markdown page whose table (between the proton-survey markers) is rewritten
#   SURVEY_SITE     the directory the static site is published into (replaced whole)
#   SURVEY_NOTIFY   webhook URLs, separated by spaces (signed with SURVEY_WEBHOOK_SECRET)
#   SURVEY_ARGS     more `survey run` options, separated by spaces (e.g. --jobs 4)
#
# Exit status: 0 nothing changed, or the page and site were brought up to date; anything
# else is `survey`'s own (said on stderr): 64 usage, 65 a bad catalog or store, 69 unavailable.
set -eu

survey=${SURVEY:-survey}
set -- run --quiet --exit-code --no-table
if [ -n "${SURVEY_CATALOG:-}" ]; then set -- "$@" --catalog "$SURVEY_CATALOG"; fi
for url in ${SURVEY_NOTIFY:-}; do set -- "$@" --notify "$url"; done
# shellcheck disable=SC2086  # SURVEY and SURVEY_ARGS are split into words on purpose
set -- "$@" ${SURVEY_ARGS:-}

status=0
# shellcheck disable=SC2086
$survey "$@" || status=$?
case $status in
  0) exit 0 ;;              # nothing changed: stop quietly
  1) ;;                     # the store changed: bring the page and the site up to date
  *) exit "$status" ;;      # an error, already said on stderr
esac
if [ -n "${SURVEY_PAGE:-}" ]; then
  # shellcheck disable=SC2086
  $survey table --write "$SURVEY_PAGE"
fi
if [ -n "${SURVEY_SITE:-}" ]; then
  # shellcheck disable=SC2086
  $survey publish --force "$SURVEY_SITE"
fi
