#!/usr/bin/env bash
# A larger schemathesis run than CI's: SCHEMATHESIS_EXAMPLES per operation (default 300).
set -euo pipefail
cd "$(dirname "$0")/.."
SCHEMATHESIS_EXAMPLES="${SCHEMATHESIS_EXAMPLES:-300}" \
  .venv/bin/python -m pytest tests/api/test_schemathesis.py -p no:cacheprovider "$@"
