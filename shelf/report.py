"""What ``latbench predict`` prints: a graph's predicted latency in each scenario asked, with the
accuracy its shelf predictor reached on held-out networks, and the per-op breakdown."""
from __future__ import annotations

from typing import Any

from . import ShelfError


def report_lines(shelf: Any, graph: Any, scenario_ids: list[str], top: int = 8) -> tuple[list[str], list[str]]:
    """(report, errors): latency per scenario with the shelf's stated accuracy, then the top ops of
    the first scenario predicted; a scenario that cannot predict the graph (an op its predictor
    never saw) is one error line and the others go on."""
    s = graph.summary()
    lines = [f"{graph.name or graph.model_id}: {s.get('flops', 0) / 1e6:.1f} MFLOPs, {s.get('params', 0) / 1e6:.2f} M "
             f"params, {len(graph.nodes) - 1} ops"]
    errors, done = [], []
    for sid in scenario_ids:
        try:
            ms = float(shelf.predict([graph], sid)[0])
        except ShelfError as e:
            errors.append(str(e))
            continue
        done.append(sid)
        e = shelf.entry(sid)
        a = e["accuracy"]
        lines.append(f"  {sid:<40} {ms:10.3f} ms   ({e['predictor']}; on {a['held_out_networks']} held-out networks "
                     f"({a['protocol']}): MAPE {a['mape']:.1f}%, {100 * a['acc10']:.0f}% within 10%, "
                     f"Spearman {a['spearman']:.3f})")
    for sid in done:
        caveat = unseen_ops(shelf.entry(sid), graph)
        if caveat:
            lines.append(f"  caveat: {sid}'s predictor never saw {caveat} in training: its stated accuracy "
                         "does not cover this graph")
    if top and done:
        b = shelf.breakdown(graph, done[0])
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


def unseen_ops(entry: dict[str, Any], graph: Any) -> str | None:
    """The graph's operator types that none of the entry's training networks has, with how many of
    its ops they are and their share of its FLOPs (``layernorm, matmul (52 of 180 ops, 3% of the
    FLOPs)``); None when it saw them all or the entry does not record its training op types."""
    seen = entry.get("training", {}).get("op_types")
    if seen is None:
        return None
    costs = [c for c in graph.costs() if c.op != "input"]
    new = [c for c in costs if c.op not in seen]
    if not new:
        return None
    total = sum(c.macs for c in costs)
    share = f", {100 * sum(c.macs for c in new) / total:.0f}% of the FLOPs" if total else ""
    return f"{', '.join(sorted({c.op for c in new}))} ({len(new)} of {len(costs)} ops{share})"


__all__ = ["report_lines", "unseen_ops"]
