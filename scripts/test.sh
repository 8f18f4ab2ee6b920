#!/usr/bin/env bash
# One command: install hlo-dedup with its test extra (pytest, hypothesis, jax/jaxlib for
# the XLA oracle) into .venv and run the whole test suite in two parts: every test that
# does not touch XLA, with jax and jaxlib shadowed (the core must not need them), then the
# XLA-oracle tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/python -m pytest -q --without-xla "$@"
exec .venv/bin/python -m pytest -q -m oracle "$@"
