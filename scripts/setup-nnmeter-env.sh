#!/usr/bin/env bash
# Creates a separate Python environment with nn-Meter (microsoft/nn-Meter, PyPI `nn-meter`),
# used only to cross-check our nn-Meter IR export with nn-Meter's own kernel detector.
# nn-Meter is kept out of the project's .venv: it predates numpy 2 and its shipped latency
# predictors are scikit-learn pickles bound to old versions.
#
#   scripts/setup-nnmeter-env.sh            # kernel detector only (what the tests need)
#   scripts/setup-nnmeter-env.sh --predictors   # also try the scikit-learn pin of the pickles
#
# Then: export LATBENCH_NNMETER_PYTHON=$PWD/.venv-nnmeter/bin/python  (tests/test_export_nnmeter.py)
# Environment: NNMETER_VENV (default .venv-nnmeter), PYTHON (default python3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
source scripts/venv.sh
NAME=setup-nnmeter-env

VENV=${NNMETER_VENV:-.venv-nnmeter}
PY=${PYTHON:-python3.11}
NNMETER_VERSION=2.0
# nn-Meter 2.0 declares its dependencies without versions; these bounds keep it working:
# numpy < 2 (the code and its pickles predate numpy 2), networkx 2/3 both provide the
# MultiDiGraphMatcher its kernel detector uses, setuptools < 81 still ships pkg_resources,
# which nn_meter/__init__.py imports.
PINS=("numpy<2" "networkx>=2.5" "setuptools<81" "protobuf<4")
# The kernel predictors nn-Meter downloads were pickled with scikit-learn 0.23.x (they fail
# to unpickle with newer releases); only needed for predict(), not for kernel detection.
SKLEARN_PICKLE_PIN="scikit-learn==0.23.1"

want_predictors=0
for arg in "$@"; do
    case "$arg" in
        --predictors) want_predictors=1 ;;
        *) echo "setup-nnmeter-env: unknown argument $arg (known: --predictors)" >&2; exit 2 ;;
    esac
done

make_venv

echo "setup-nnmeter-env: installing nn-meter==$NNMETER_VERSION with ${PINS[*]}"
venv_pip install -q "nn-meter==$NNMETER_VERSION" "${PINS[@]}"
"$VENV/bin/python" - <<'EOF' || { echo "setup-nnmeter-env: nn-Meter does not import in $VENV (see pip's output above)" >&2; exit 1; }
import nn_meter
from nn_meter.kernel_detector import KernelDetector
from nn_meter.predictor.prediction.extract_feature import get_predict_features
k = KernelDetector(None)
print(f"setup-nnmeter-env: nn_meter {nn_meter.__version__} imports; kernel detector ready")
EOF

if [ "$want_predictors" = 1 ]; then
    echo "setup-nnmeter-env: trying $SKLEARN_PICKLE_PIN (needed to unpickle nn-Meter's predictors)"
    if ! "$VENV/bin/python" -m pip install -q "$SKLEARN_PICKLE_PIN" 2>"$VENV/sklearn-pin.log"; then
        echo "setup-nnmeter-env: $SKLEARN_PICKLE_PIN does not install with $("$VENV/bin/python" --version) (no wheel;" \
             "building it needs an older Python, e.g. 3.8); last lines of $VENV/sklearn-pin.log:" >&2
        tail -n 5 "$VENV/sklearn-pin.log" >&2
        exit 1
    fi
fi

echo "setup-nnmeter-env: done; export LATBENCH_NNMETER_PYTHON=$PWD/$VENV/bin/python"
