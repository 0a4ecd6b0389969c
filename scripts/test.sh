#!/usr/bin/env bash
# Sets up and runs the test suite: against PostgreSQL + Redis when they answer on this machine
# (always in CI, where REQUIRE_SERVICES=1 makes their absence a failure), then on SQLite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh test
PY=.venv/bin/python
PG_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/memory}"
REDIS="${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}"

services_up() {
  $PY - "$PG_URL" "$REDIS" <<'PYEOF'
import sys
import psycopg, redis
try:
    psycopg.connect(sys.argv[1].replace("/memory", "/postgres"), connect_timeout=3).close()
    redis.Redis.from_url(sys.argv[2], socket_connect_timeout=3).ping()
except Exception as exc:
    print(f"services unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(1)
PYEOF
}

echo "== Lint and format (ruff) =="
.venv/bin/ruff check --no-cache .
.venv/bin/ruff format --no-cache --check .
echo "== Import contracts (layers, independence, forbidden) =="
.venv/bin/lint-imports --no-cache

status=0
if services_up; then
  echo "== Suite on PostgreSQL + Redis =="
  DATABASE_URL="$PG_URL" REDIS_URL="$REDIS" VAR_DIR="${VAR_DIR:-$PWD/var}/pg" $PY manage.py makemigrations --check --dry-run >/dev/null
  DATABASE_URL="$PG_URL" REDIS_URL="$REDIS" VAR_DIR="${VAR_DIR:-$PWD/var}/pg" $PY -m pytest "$@" || status=$?
  if [ $# -eq 0 ]; then  # the whole suite (CI): the client's too; a chosen subset runs alone
    echo "== Python client against the live product on PostgreSQL + Redis =="
    DATABASE_URL="$PG_URL" REDIS_URL="$REDIS" bash scripts/test_client.sh || status=$?
  fi
elif [ "${REQUIRE_SERVICES:-0}" = "1" ]; then
  echo "PostgreSQL and Redis are required here (REQUIRE_SERVICES=1)." >&2
  exit 1
else
  echo "PostgreSQL/Redis not reachable: running the SQLite suite only."
fi
echo "== Suite on SQLite (embedded default) =="
env -u DATABASE_URL -u REDIS_URL VAR_DIR="${VAR_DIR:-$PWD/var}/sqlite" $PY -m pytest "$@" || status=$?
if [ $# -eq 0 ]; then
  echo "== Python client against the live product on SQLite =="
  env -u DATABASE_URL -u REDIS_URL bash scripts/test_client.sh || status=$?
fi
exit $status
