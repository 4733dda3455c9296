#!/usr/bin/env bash
# The README's two commands:
#   scripts/run.sh demo   set up .venv, then run the main job
#   scripts/run.sh test   set up .venv, then lint (ruff) and run the test suite
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-}
shift || true
"$(dirname "$0")/setup.sh"
VENV=${TENSORPOSE_VENV:-.venv}
export PATH="$PWD/$VENV/bin:$PATH"
case "$job" in
    demo)
        tensorpose demo "$@"
        ;;
    test)
        ruff check .
        ruff format --check .
        python -m pytest -q "$@"
        ;;
    *)
        echo "usage: scripts/run.sh demo|test [args...]" >&2
        exit 2
        ;;
esac
