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
handler tables, node names, pending patterns, the finishing of the graph).
"""
from .common import UnsupportedModelError  # noqa: F401
from .pytorch import PytorchImportConfig, import_module, import_pytorchcv  # noqa: F401
from .onnx import import_onnx  # noqa: F401  (imports onnx only when called)
from .tflite import import_tflite  # noqa: F401  (reads the schema only when called)
