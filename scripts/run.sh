#!/usr/bin/env bash
# Sets up and runs the whole product on this machine: SQLite, a broker that needs no server,
# the web server (with MCP at /mcp), a Celery worker and Celery beat. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# The product as it really runs: DEBUG stays off (a 500 must never show a debug page with the
# request body). Development turns it on explicitly: DEBUG=1 bash scripts/run.sh
export DEBUG="${DEBUG:-0}"
PORT="${PORT:-8000}"
PY=.venv/bin/python
$PY manage.py migrate --noinput >/dev/null
$PY manage.py reembed >/dev/null 2>&1  # vectors of another embedder (or an older term format), if any
$PY manage.py seed_demo --port "$PORT"

pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT
.venv/bin/celery -A memoryapp worker --loglevel=warning --concurrency=2 --pool=threads &
pids+=($!)
.venv/bin/celery -A memoryapp beat --loglevel=warning &
pids+=($!)
.venv/bin/uvicorn memoryapp.asgi:application --host 127.0.0.1 --port "$PORT" --log-level warning &
pids+=($!)
wait -n "${pids[@]}"
