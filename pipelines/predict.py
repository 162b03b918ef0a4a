"""A user's model file as an IR graph, by its suffix (:data:`LOADERS`): an IR JSON file as is, an
ONNX or TFLite file through its importer (generators/importers). What ``latbench predict``
reads before the predictor shelf (:mod:`shelf`) predicts it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


def _ir(path: Path, shape: list[int] | None) -> Any:
    from generators.ir import Graph

    return Graph.load(path)


def _importer(name: str) -> Callable[[Path, list[int] | None], Any]:
    def load(path: Path, shape: list[int] | None) -> Any:
        import generators.importers as importers

        fn = getattr(importers, name, None)
        if fn is None:
            raise ValueError(f"{path}: this installation has no {name} (generators/importers)")
        try:
            return fn(path, input_shape=shape)
        except importers.UnsupportedModelError as e:  # one line naming the model, node and op
            raise ValueError(str(e)) from None
    return load


# file suffix -> how it becomes an IR graph
LOADERS: dict[str, Callable[[Path, list[int] | None], Any]] = {
    ".json": _ir,
    ".onnx": _importer("import_onnx"),
    ".tflite": _importer("import_tflite"),
}


def load_model(path: str | Path, shape: list[int] | None = None) -> Any:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such model file")
    loader = LOADERS.get(p.suffix.lower())
    if loader is None:
        raise ValueError(f"{p}: unknown model kind {p.suffix or '(no suffix)'!r} (the importers take "
                         f"{', '.join(LOADERS)}: IR JSON, ONNX, TFLite)")
    return loader(p, shape)


__all__ = ["LOADERS", "load_model"]
