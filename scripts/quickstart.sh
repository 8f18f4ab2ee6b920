#!/usr/bin/env bash
# One command: install hlo-dedup into .venv and run the Neuron dedup passes on the bundled
# JAX FSDP example (grad of an MLP with a tied weight under remat: both folds come from the tie).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh progress
mkdir -p out
.venv/bin/hlo-dedup examples/fsdp_remat_grad.hlo -o out/fsdp_remat_grad.dedup.hlo --report out/report.json
echo "wrote out/fsdp_remat_grad.dedup.hlo and out/report.json"
