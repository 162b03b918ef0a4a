"""Baseline latency predictors (see base.py for the contract). Importing this package
registers every baseline in ``PREDICTORS``."""
from .base import PREDICTORS, Networks, Predictor, make_predictor, register_predictor
from . import flops, lookup, mlp, usc_opwise  # noqa: F401  (register flops, flops_mac, lookup, usc_*)
from . import gnn, gnn_ensemble, nnmeter_kernelwise, typed_nnls, typed_nnls_family  # noqa: F401  (register gnn*, nnmeter, typed_nnls*)
from . import additive_mlp, transfer  # noqa: F401  (register additive_mlp, transfer)
from .persist import load_predictor, save_predictor

__all__ = ["PREDICTORS", "Networks", "Predictor", "load_predictor", "make_predictor", "register_predictor",
           "save_predictor"]
