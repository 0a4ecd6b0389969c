#!/usr/bin/env bash
# Sets up and runs the whole product on this machine: SQLite, a broker that needs no server,
# the web server (with MCP at /mcp), a Celery worker and Celery beat. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
# PORT (default 8000) is the web server's port; every printed URL uses it (docs/run.md). Checked
# first: with 0 uvicorn would listen on a port of the kernel's choice and no address would be printed.
PORT="${PORT:-8000}"
if ! [[ "$PORT" =~ ^[0-9]{1,5}$ ]] || ((10#$PORT < 1 || 10#$PORT > 65535)); then
  echo "PORT=$PORT is no TCP port: choose one from 1 to 65535, e.g. PORT=8001 bash scripts/run.sh" >&2
  exit 2
fi
PORT=$((10#$PORT)) # "08001" is printed as 8001
bash scripts/bootstrap.sh
# The product as it really runs: DEBUG stays off (a 500 must never show a debug page with the
# request body). Development turns it on explicitly: DEBUG=1 bash scripts/run.sh
export DEBUG="${DEBUG:-0}"
PY=.venv/bin/python
# Metrics in multiprocess mode (docs/operations.md): uvicorn, the worker and beat each write their
# samples under one directory, wiped here, once, before any of them starts (never by a process:
# a restarting worker must not erase the others' counters). /metrics needs METRICS_TOKEN.
export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-${VAR_DIR:-$PWD/var}/prometheus}"
rm -rf "$PROMETHEUS_MULTIPROC_DIR"
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
# Logs are JSON lines on stderr (LOG_FORMAT=plain for text), at LOG_LEVEL (default INFO) for the
# web server, the worker and beat alike: one line per request and per task, never content.
# The data's database, then the key store's (memoryapp/management/commands/migrate.py).
$PY manage.py migrate --noinput >/dev/null
# Memory content stored before encryption, if any: sealed (SPEC §8.2; a no-op once done).
$PY manage.py encrypt_memories >/dev/null
$PY manage.py reembed >/dev/null 2>&1  # vectors of another embedder (or an older term format), if any
# The demo agent token is kept in $VAR_DIR/demo-agent-token (mode 600) and printed again while it
# is valid, so an exported GAM_TOKEN survives a restart; a new one is announced (docs/run.md).
# Where to click is printed once the web server answers (a link that refuses is no welcome).
banner=$($PY manage.py seed_demo --port "$PORT")

if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "Port $PORT is in use: stop what serves it, or choose another with PORT=8001 bash scripts/run.sh" >&2
  exit 1
fi
pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT
.venv/bin/celery -A config worker --concurrency=2 --pool=threads &
pids+=($!)
.venv/bin/celery -A config beat &
pids+=($!)
.venv/bin/uvicorn config.asgi:application --host 127.0.0.1 --port "$PORT" --no-access-log &
web=$!
pids+=("$web")
until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
  kill -0 "$web" 2>/dev/null || break  # the server stopped (port taken, bad settings): its error is above
  sleep 0.2
done
kill -0 "$web" 2>/dev/null && printf '%s\n' "$banner"
wait -n "${pids[@]}"
