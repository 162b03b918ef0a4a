"""Baseline latency predictors (see base.py for the contract). Importing this package
registers every baseline in ``PREDICTORS``; a package of one's own registers more through the
``latbench.predictors`` entry-point group, and ``check_predictor`` checks a class against the
contract (docs/predictors.md)."""
from .base import PREDICTORS, Networks, Predictor, make_predictor, register_predictor
from . import flops, lookup, mlp, usc_opwise  # noqa: F401  (register flops, flops_mac, lookup, usc_*)
from . import gnn, gnn_ensemble, nnmeter_kernelwise, typed_nnls, typed_nnls_family  # noqa: F401  (register gnn*, nnmeter, typed_nnls*)
from . import additive_mlp, transfer  # noqa: F401  (register additive_mlp, transfer)
from .persist import load_predictor, save_predictor
from .conformance import ConformanceError, check_predictor

__all__ = ["PREDICTORS", "ConformanceError", "Networks", "Predictor", "check_predictor", "load_predictor",
           "make_predictor", "register_predictor", "save_predictor"]
