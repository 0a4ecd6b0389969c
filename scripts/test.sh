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
sqlite_suite() {
  env -u DATABASE_URL -u REDIS_URL VAR_DIR="${VAR_DIR:-$PWD/var}/sqlite" $PY -m pytest "$@"
}
sqlite_client() {
  env -u DATABASE_URL -u REDIS_URL bash scripts/test_client.sh
}
if services_up; then
  sqlite_log=""
  if [ $# -eq 0 ]; then
    # The whole suite (CI): the SQLite suite and its client run beside the PostgreSQL ones. They
    # share no database, directory or port, and each spends much of its time waiting on the servers
    # it starts, so two cores run the pair in less than the sum. The client's virtualenv is
    # installed first, once; the SQLite output follows the PostgreSQL output.
    bash scripts/test_client.sh --collect-only -q >/dev/null
    mkdir -p "${VAR_DIR:-$PWD/var}"
    sqlite_log="${VAR_DIR:-$PWD/var}/sqlite-suite.log"
    (
      rc=0
      echo "== Suite on SQLite (embedded default), run beside the PostgreSQL suite =="
      sqlite_suite || rc=$?
      echo "== Python client against the live product on SQLite =="
      sqlite_client || rc=$?
      echo "$rc" > "$sqlite_log.rc"
    ) > "$sqlite_log" 2>&1 &
  fi
  echo "== Suite on PostgreSQL + Redis =="
  DATABASE_URL="$PG_URL" REDIS_URL="$REDIS" VAR_DIR="${VAR_DIR:-$PWD/var}/pg" \
    $PY manage.py makemigrations --check --dry-run >/dev/null
  DATABASE_URL="$PG_URL" REDIS_URL="$REDIS" VAR_DIR="${VAR_DIR:-$PWD/var}/pg" $PY -m pytest "$@" || status=$?
  if [ $# -eq 0 ]; then  # the whole suite (CI): the client's too; a chosen subset runs alone
    echo "== Python client against the live product on PostgreSQL + Redis =="
    DATABASE_URL="$PG_URL" REDIS_URL="$REDIS" bash scripts/test_client.sh || status=$?
    wait
    cat "$sqlite_log"
    [ "$(cat "$sqlite_log.rc" 2>/dev/null)" = "0" ] || status=1
  fi
elif [ "${REQUIRE_SERVICES:-0}" = "1" ]; then
  echo "PostgreSQL and Redis are required here (REQUIRE_SERVICES=1)." >&2
  exit 1
else
  echo "PostgreSQL/Redis not reachable: running the SQLite suite only."
fi
if [ -z "${sqlite_log:-}" ]; then
  echo "== Suite on SQLite (embedded default) =="
  sqlite_suite "$@" || status=$?
  if [ $# -eq 0 ]; then
    echo "== Python client against the live product on SQLite =="
    sqlite_client || status=$?
  fi
fi
exit $status
