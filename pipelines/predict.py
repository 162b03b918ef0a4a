"""``latbench predict MODEL --scenario ID``: a model file's latency from the predictor zoo.

A model enters as IR: an IR JSON file as is, an ONNX or TFLite file through its importer
(:data:`LOADERS`, by suffix); the zoo (:mod:`leaderboard.zoo`) holds one fitted predictor per
scenario and states the held-out accuracy it reached on the board. The report gives the
predicted latency per scenario, that accuracy, and the per-op breakdown.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np


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
        raise ValueError(f"{p}: unknown model kind {p.suffix or '(no suffix)'!r} (predict takes "
                         f"{', '.join(LOADERS)}: IR JSON, ONNX, TFLite)")
    return loader(p, shape)


def report_lines(zoo: Any, graph: Any, scenario_ids: list[str], top: int = 8) -> tuple[list[str], list[str]]:
    """(report, errors): latency per scenario with the zoo's stated accuracy, then the top ops of
    the first scenario predicted; a scenario that cannot predict the graph (an op its predictor
    never saw) is one error line and the others go on."""
    from leaderboard.zoo import ZooError

    s = graph.summary()
    lines = [f"{graph.name or graph.model_id}: {s.get('flops', 0) / 1e6:.1f} MFLOPs, {s.get('params', 0) / 1e6:.2f} M "
             f"params, {len(graph.nodes) - 1} ops"]
    errors, done = [], []
    for sid in scenario_ids:
        try:
            ms = float(zoo.predict([graph], sid)[0])
        except ZooError as e:
            errors.append(str(e))
            continue
        done.append(sid)
        e = zoo.entry(sid)
        a = e["accuracy"]
        lines.append(f"  {sid:<40} {ms:10.3f} ms   ({e['predictor']}; on {a['held_out_networks']} held-out networks "
                     f"({a['protocol']}): MAPE {a['mape']:.1f}%, {100 * a['acc10']:.0f}% within 10%, "
                     f"Spearman {a['spearman']:.3f})")
    if top and done:
        b = zoo.breakdown(graph, done[0])
        total = float(b["predicted_ms"].sum())
        lines.append(f"per-op breakdown in {done[0]} (top {top} op types; the rows sum to the prediction):")
        by = b.groupby("op_type")["predicted_ms"].agg(["sum", "count"]).sort_values("sum", ascending=False).head(top)
        width = max([24, *(len(str(t)) for t in by.index)])  # LiteRT's operator types run long
        for t, r in by.iterrows():
            lines.append(f"  {t:<{width}} x{int(r['count']):<4} {r['sum']:9.3f} ms {100 * r['sum'] / total if total else 0:6.1f}%")
        biggest = b[b["op_index"] >= 0].nlargest(3, "predicted_ms")
        lines.append("  slowest ops: " + ", ".join(f"{n} ({t}) {v:.3f} ms" for n, t, v in
                                                 zip(biggest["node"], biggest["op_type"], biggest["predicted_ms"])))
    return lines, errors


__all__ = ["LOADERS", "load_model", "report_lines"]
