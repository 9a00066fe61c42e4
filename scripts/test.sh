#!/usr/bin/env bash
# The whole test suite: lint, strict types, then pytest (extra arguments go to pytest).
source "$(dirname "$0")/_venv.sh"
source "$(dirname "$0")/postgres.sh"
echo "== ruff"; ruff check src tests benchmarks
echo "== mypy --strict"; mypy --strict src
echo "== pytest"
set +e
python -m pytest "$@"
rc=$?
set -e
exit "$rc"
