"""What ``latbench predict`` prints: a graph's predicted latency in each scenario asked, with the
accuracy its shelf predictor reached on held-out networks, the machine the host scenarios are
priced on beside this one (:mod:`shelf.machine`), caveats where the graph is unlike the
predictor's training networks, and the per-op breakdown."""
from __future__ import annotations

from typing import Any

from . import ShelfError

#: The generator sources (generators/) whose networks are sampled from a search space: a graph
#: of one of them is of that space's kind. Every other source (an imported PyTorch, ONNX or
#: TFLite file, the model-zoo families, a public benchmark's networks) is a hand-designed
#: network, one kind: :func:`network_kind`.
SPACES = ("synthetic", "nasbench201", "transformer")
DESIGNED = "hand-designed"


def network_kind(source: str | None) -> str | None:
    """The kind of network a generator source gives (:data:`SPACES`, else hand-designed); None
    for a graph that records no source."""
    if not source:
        return None
    return source if source in SPACES else DESIGNED


def report_lines(shelf: Any, graph: Any, scenario_ids: list[str], top: int = 8,
                 scale_to_this_machine: bool = False) -> tuple[list[str], list[str]]:
    """(report, errors): the machine lines of the host scenarios asked (:mod:`shelf.machine`),
    latency per scenario with the shelf's stated accuracy, caveats, then the top ops of the first
    scenario predicted; a scenario that cannot predict the graph (an op its predictor never saw)
    is one error line and the others go on. ``scale_to_this_machine``: a host scenario's figures
    are multiplied by this machine's speed-probe ratio to the release's (an estimate, said so)."""
    from .machine import compare, is_host

    s = graph.summary()
    lines = [f"{graph.name or graph.model_id}: {s.get('flops', 0) / 1e6:.1f} MFLOPs, {s.get('params', 0) / 1e6:.2f} M "
             f"params, {len(graph.nodes) - 1} ops"]
    errors, done = [], []
    entries = {}
    for sid in scenario_ids:
        try:
            e = shelf.entry(sid)
        except ShelfError:
            continue  # named in the error lines below
        if e.get("origin") == "calibration":  # measured on the device it names, not priced on a release
            lines.append(f"{sid}: {origin(e)}, {training_networks(e)}")
        else:
            entries[sid] = e
    ratios: dict[str, float | None] = {}
    try:
        comparisons = compare(entries)
    except ValueError as e:  # an entry without its release, a release without its manifest
        comparisons = []
        lines.append(f"machine: not stated: {e}")
    for c in comparisons:
        lines += c.lines(scaled=scale_to_this_machine)
        ratios.update({sid: c.ratio(sid) for sid in c.cpus})
    scales: dict[str, float] = {}
    for sid in scenario_ids:
        try:
            ms = float(shelf.predict([graph], sid)[0])
        except ShelfError as e:
            errors.append(str(e))
            continue
        done.append(sid)
        e = shelf.entry(sid)
        a = e["accuracy"]
        stated = (f"({e['predictor']}; on {a['held_out_networks']} held-out networks ({a['protocol']}): MAPE "
                  f"{a['mape']:.1f}%, {100 * a['acc10']:.0f}% within 10%, "
                  + ("Spearman undefined on one network)" if a["spearman"] is None else f"Spearman {a['spearman']:.3f})"))
        q = ratios.get(sid)
        if scale_to_this_machine and is_host(sid) and q is not None:
            scales[sid] = q
            lines.append(f"  {sid:<40} {ms * q:10.3f} ms   estimate for this machine: x{q:.2f} (speed probe) of "
                         f"{ms:.3f} ms on the release's machine {stated}")
        elif scale_to_this_machine and is_host(sid):
            lines.append(f"  {sid:<40} {ms:10.3f} ms   not scaled (no speed-probe ratio for it) {stated}")
        else:
            lines.append(f"  {sid:<40} {ms:10.3f} ms   {stated}")
    for sid in done:
        caveat = unseen_ops(shelf.entry(sid), graph)
        if caveat:
            lines.append(f"  caveat: {sid}'s predictor never saw {caveat} in training: its stated accuracy "
                         "does not cover this graph")
        kind = unseen_kind(shelf.entry(sid), graph)
        if kind:
            lines.append(f"  caveat: {sid}'s predictor {kind}: its stated accuracy is for networks like those")
    if top and done:
        b = shelf.breakdown(graph, done[0])
        q = scales.get(done[0], 1.0)
        b["predicted_ms"] = b["predicted_ms"] * q
        total = float(b["predicted_ms"].sum())
        how = f"; scaled x{q:.2f} to this machine, an estimate" if done[0] in scales else ""
        lines.append(f"per-op breakdown in {done[0]} (top {top} op types; the rows sum to the prediction{how}):")
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


def origin(entry: dict[str, Any]) -> str:
    """Where an entry came from: ``board track usc-real-kfold`` or ``calibrated 2026-12-07 on host
    (4 rounds)``."""
    t = entry.get("training", {})
    if entry.get("origin") == "calibration":
        how = f", rescaled from {t['transfer_from']}" if t.get("transfer_from") else ""
        return (f"calibrated {entry.get('built', {}).get('date', '?')} on {t.get('device', '?')} "
                f"({t.get('rounds', '?')} rounds{how})")
    return f"board track {t.get('track', '?')}"


def list_line(shelf: Any, scenario_id: str) -> str:
    """One line of ``latbench predict --list``: scenario, predictor, held-out MAPE, what it was
    trained on and where it came from (a user's entry that replaces a committed one says so)."""
    e = shelf.entry(scenario_id)
    over = f"; replaces the entry in {shelf.shadowed[scenario_id]}" if scenario_id in shelf.shadowed else ""
    return (f"{scenario_id:<42} {e['predictor']:<12} MAPE {e['accuracy']['mape']:6.2f}%  trained on "
            f"{training_networks(e)} ({origin(e)}{over})")


def training_networks(entry: dict[str, Any]) -> str:
    """What an entry was trained on: ``915 networks: synthetic 915``; the count alone where the
    entry does not record its generator sources."""
    t = entry.get("training", {})
    gens = t.get("generator_sources")
    if not isinstance(gens, dict) or not gens:
        return f"{t.get('networks', '?')} networks"
    return f"{t.get('networks', sum(gens.values()))} networks: " + ", ".join(f"{k} {v}" for k, v in gens.items())


def unseen_kind(entry: dict[str, Any], graph: Any) -> str | None:
    """``was trained on synthetic networks only (915), never a hand-designed one like this
    graph (onnx)`` when the graph's kind (:func:`network_kind` of its source) is none of the
    kinds of the entry's training networks; None when it saw the kind, or the graph or the entry
    does not record its sources."""
    gens = entry.get("training", {}).get("generator_sources")
    kind = network_kind(getattr(graph, "source", None))
    if not isinstance(gens, dict) or not gens or kind is None:
        return None
    if kind in {network_kind(s) for s in gens}:
        return None
    only = ", ".join(f"{k} {v}" for k, v in gens.items()) if len(gens) > 1 else str(next(iter(gens.values())))
    what = "a hand-designed one" if kind == DESIGNED else f"a {kind} one"
    return (f"was trained on {' and '.join(gens)} networks only ({only}), never {what} like this graph "
            f"({graph.source})")


__all__ = ["DESIGNED", "SPACES", "list_line", "network_kind", "origin", "report_lines", "training_networks", "unseen_kind",
           "unseen_ops"]
