#!/usr/bin/env bash
# The Python client's suite (clients/python/tests) against the live product, in a virtualenv of its
# own (.venv-client): the client and its framework extras (LangGraph, OpenAI Agents SDK,
# pydantic-ai) pin what they pin, apart from the server's .venv, which the suite's fixture uses to
# start the product (migrations, a Celery worker, uvicorn on free ports; tests/live_server.py).
# The backend follows the environment like scripts/test.sh: DATABASE_URL (+ REDIS_URL) for
# PostgreSQL + Redis (database test_<name>_live), else SQLite. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
      PYTHON="$candidate"; break
    fi
  done
fi
[ -n "$PYTHON" ] || { echo "Python 3.11 is required (set PYTHON=/path/to/python3.11)." >&2; exit 1; }
[ -x .venv-client/bin/python ] || "$PYTHON" -m venv .venv-client
digest=$(cat clients/python/pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f ".venv-client/.installed-$digest" ]; then
  .venv-client/bin/python -m pip install --quiet --disable-pip-version-check \
    -e "./clients/python[langgraph,openai-agents,pydantic-ai,test]"
  find .venv-client -maxdepth 1 -name '.installed-*' -delete
  touch ".venv-client/.installed-$digest"
fi
exec .venv-client/bin/python -m pytest clients/python/tests "$@"
