#!/usr/bin/env bash
# One command: install hlo-dedup with its test extra (pytest, hypothesis, jax/jaxlib for
# the XLA oracle) into .venv and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
exec .venv/bin/python -m pytest -q "$@"
