#!/usr/bin/env bash
# Creates a separate Python environment with litert-torch (Google's PyTorch-to-LiteRT converter,
# PyPI `litert-torch`, formerly ai-edge-torch), used only by the conformance route
# "tflite-litert-torch" (generators/importers/conformance.py): a pytorchcv model converted to a
# .tflite file the way a PyTorch user targeting LiteRT converts it.
# litert-torch is kept out of the project's .venv: it pins older pydantic and typing_extensions
# and pulls jax and transformers.
#
#   scripts/setup-litert-torch-env.sh
#
# `make test` runs it (the test suite converts one network through the route); it does nothing
# when the environment was made by this version of the script (a stamp in the environment).
#
# Then: export LATBENCH_LITERT_TORCH_PYTHON=$PWD/.venv-litert-torch/bin/python (the default when
# .venv-litert-torch exists; tests/test_importer_coverage_litert_torch.py,
# benchmarks/bench_importer_coverage.py --route tflite-litert-torch).
# Environment: LITERT_TORCH_VENV (default .venv-litert-torch), PYTHON (default python3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
source scripts/venv.sh
NAME=setup-litert-torch-env

VENV=${LITERT_TORCH_VENV:-.venv-litert-torch}
PY=${PYTHON:-python3.11}
# torch first and pinned: the CPU build the project's .venv has. Left to litert-torch's
# resolution, pip would take the newest torch, a CUDA build of several GB.
TORCH_PIN="torch==2.13.0"
LITERT_TORCH_PIN="litert-torch==0.10.0"
PYTORCHCV_PIN="pytorchcv==0.0.67"  # the .venv's: the same models as the other routes

STAMP=$VENV/.setup-stamp
want=$(cat scripts/setup-litert-torch-env.sh scripts/venv.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    exit 0
fi

make_venv

echo "setup-litert-torch-env: installing $TORCH_PIN"
venv_pip install -q "$TORCH_PIN"
echo "setup-litert-torch-env: installing $LITERT_TORCH_PIN $PYTORCHCV_PIN (keeping $TORCH_PIN)"
venv_pip install -q "$LITERT_TORCH_PIN" "$PYTORCHCV_PIN" "$TORCH_PIN"

# the import's own chatter (absl, oneDNN, torchao's CUDA-only libraries) goes to a log, shown on failure
if ! "$VENV/bin/python" - 2>"$VENV/smoke.log" <<'EOF'
from importlib.metadata import version

import litert_torch
import pytorchcv.model_provider
import torch

print(f"setup-litert-torch-env: litert_torch {version('litert-torch')} imports (torch {torch.__version__})")
EOF
then
    echo "setup-litert-torch-env: litert_torch does not import in $VENV (see pip's output above); last lines of $VENV/smoke.log:" >&2
    tail -n 5 "$VENV/smoke.log" >&2
    exit 1
fi

echo "$want" > "$STAMP"
echo "setup-litert-torch-env: done; export LATBENCH_LITERT_TORCH_PYTHON=$PWD/$VENV/bin/python"
