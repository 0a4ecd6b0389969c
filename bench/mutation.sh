#!/usr/bin/env bash
# Mutation testing of the rule modules (issue 15 §1), one module at a time, bounded in time.
#   bench/mutation.sh                    every rule module (gates masking visibility actions erasure previews receipts
#                                        ratelimit recall lifecycle credits)
#   bench/mutation.sh gates masking      just these
#   bench/mutation.sh --changed          the modules whose files differ from main
#   bench/mutation.sh --report [module]  reprint the last results (var/mutation/*.json)
#   MUTATION_BASELINE=1 bench/mutation.sh …   without the kill tests listed in bench/mutation_kill_tests.txt
#                                             (the "before" score)
#   bench/mutation.sh --survivors …     re-run only what the last run left undetected
#   MUTATION_KILLS_ONLY=1 bench/mutation.sh --survivors …   …judged by those kill tests alone (fast)
# Options: --jobs N (MUTATION_JOBS, default 2), --timeout SECONDS per module (MUTATION_TIMEOUT, 1800).
# Prints each surviving mutant's diff and a per-module score table. Equivalent survivors, with the
# reason, are in bench/mutation_equivalent.txt. Runs on SQLite; CPU-heavy, hence nice.
#   MUTATION_DATABASE_URL=postgres://postgres@127.0.0.1:5432/mutation bench/mutation.sh erasure
#                                        on PostgreSQL instead (the PostgreSQL-only branches; each parallel
#                                        mutant gets databases cloned from the first run's: tests/mutmut_plugin.py)
set -euo pipefail
cd "$(dirname "$0")/.."
unset DATABASE_URL REDIS_URL CELERY_BROKER_URL KEYRING_DATABASE_URL
if [ -n "${MUTATION_DATABASE_URL:-}" ]; then export DATABASE_URL="$MUTATION_DATABASE_URL"; fi
# The Redis limiter's mutants are killed only with a Redis to run against (tests/limits/test_rate_window.py).
export MUTATION_REDIS_URL="${MUTATION_REDIS_URL:-}"
exec nice -n "${MUTATION_NICE:-10}" .venv/bin/python bench/mutation.py "$@"
