#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine of its kind: Debian packages,
# the Python environment (.venv) and, as later stages add it, the native build.
# Idempotent and quick when nothing changed: a stamp holds the hash of what it installed from.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
source scripts/venv.sh
NAME=setup

VENV=.venv
PY=${PYTHON:-python3.11}
STAMP=$VENV/.setup-stamp
want=$(cat pyproject.toml scripts/setup.sh scripts/venv.sh scripts/setup-debian.sh scripts/debian-packages.txt | sha256sum | cut -d' ' -f1)

pull_public_data() {
    # Public measurements are never part of the project: external/ gets this machine's copies
    # (../shared/external) or the pinned commits' files (`dvc get`); without either, each dataset's
    # folder holds MISSING.txt with the reason, import-public skips it and the set-up goes on.
    "$VENV/bin/python" -m pipelines.dataset.pull || echo "setup: the public data could not be set up (python -m pipelines.dataset.pull)" >&2
}

build_native() {
    # Incremental (about 0.2 s when up to date), so it runs every time.
    bash native/build.sh >/dev/null || { echo "setup: the native runtime did not build (native/build.sh)" >&2; exit 1; }
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    pull_public_data
    build_native
    exit 0
fi

# Debian packages (scripts/setup-debian.sh). The GPU path is optional: if its driver cannot be
# installed, the set-up says so and goes on, and the GPU tests skip saying why.
gpu_ok=1
bash scripts/setup-debian.sh || { rc=$?; [ "$rc" = 3 ] || exit "$rc"; gpu_ok=""; }

make_venv
echo "setup: installing Python packages into $VENV (first time: a few minutes)"
venv_pip install -q --upgrade pip
venv_pip install -q -e '.[test]'
"$VENV/bin/python" -c "import generators, torch, tensorflow, ai_edge_litert, hydra, dvc, pytorchcv, onnxruntime, executorch, torchao" \
    || { echo "setup: the Python environment is incomplete (see pip's output above)" >&2; exit 1; }

pull_public_data
build_native
# without the GPU driver the stamp is not written, so the next set-up tries again
if [ -n "$gpu_ok" ]; then echo "$want" > "$STAMP"; fi
echo "setup: done"
