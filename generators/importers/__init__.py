"""Importers of existing models into the architecture IR.

- :mod:`.pytorch`: any ``torch.nn.Module`` via ``torch.fx`` (``torch.export`` as fallback),
  and the pytorchcv model zoo (the 102 real-world CNNs of the USC dataset); also the
  ``pytorch`` generator source. Importing this package does not import torch; the first
  import does.
- :mod:`.onnx`: ``import_onnx(path_or_model, input_shape=None, name=None)``, an ONNX file
  (the ``onnx`` package is imported on first use).
- :mod:`.tflite`: ``import_tflite(path_or_bytes, input_shape=None, name=None)``, a TFLite
  flatbuffer (read with the schema of the ``ai-edge-litert`` wheel, on first use).

All raise :class:`UnsupportedModelError`, one line naming the model, the node and the op.
:mod:`.common` holds what the three share (that error, the walk's error translation, the
handler tables, node names, pending patterns, the finishing of the graph, and the bounds of
foundation/limits.py on a model file from outside, the zip check among them). The importers
load on first use of their names (``from generators.importers import import_onnx``), so the
processes that only check a file (the torch runner's worker, the HELP importer) import
:mod:`.common` alone.
"""
from __future__ import annotations

import importlib
from typing import Any

from .common import UnsupportedModelError  # noqa: F401

_LAZY = {"PytorchImportConfig": "pytorch", "import_module": "pytorch", "import_pytorchcv": "pytorch",
         "import_onnx": "onnx", "import_tflite": "tflite"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["UnsupportedModelError", *_LAZY]
