"""How the shelf asks each kind of candidate predictor for latencies and a per-op breakdown.

Candidates (:data:`READERS`) are the predictors that price a network part by part, so a
breakdown says where the time goes: the USC op-wise models (Sec. 4.2; per IR op, a batch of
graphs one vectorised pass over distinct op configurations) and ``additive_mlp`` (per operator
LiteRT runs, deduced per graph; far slower, ``benchmarks/bench_shelf.py`` prints how much, and
on most scenarios far more accurate: ``shelf/data/INDEX.json`` states each scenario's choice and
its accuracy). A :class:`Reader` says how the shelf asks each kind.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from . import ShelfError

if TYPE_CHECKING:  # pandas is imported where a breakdown is built: `latbench predict --list` reads none
    import pandas as pd


class _UserGraphs:
    """Graphs that are in no dataset (a user's), as :class:`leaderboard.baselines.Networks` reads them."""

    def __init__(self, graphs: Sequence[Any]):
        self.graphs = list(graphs)

    def graph(self, model_id: str, scenario_id: str) -> Any:
        return self.graphs[int(model_id)]


def graph_networks(graphs: Sequence[Any], scenario_id: str):
    """IR graphs that are in no dataset as the :class:`leaderboard.baselines.Networks` of
    ``scenario_id`` a predictor takes (ids ``"0"``, ``"1"``, ...: the graphs' positions)."""
    from leaderboard.baselines import Networks

    return Networks(_UserGraphs(graphs), tuple(str(i) for i in range(len(graphs))), scenario_id)


def graph_frame(graphs: Sequence[Any]):
    """An :class:`leaderboard.baselines.features.OpFrame` of IR graphs that are in no dataset (a user's)."""
    from leaderboard.baselines.features import OpFrame, ir_config_ids

    parts = [ir_config_ids(g) for g in graphs]
    sizes = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    config = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    n = len(config)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    return OpFrame(net=np.repeat(np.arange(len(parts)), sizes), config=config,
                   op_index=np.arange(n, dtype=np.int64) - starts, latency=np.full(n, np.nan),
                   fused=np.zeros(n, bool), measured=np.zeros(len(graphs), bool), n_nets=len(graphs))


@dataclass(frozen=True)
class Reader:
    """How the shelf asks one kind of candidate for a batch of graphs' latency (``predict(est, sid,
    graphs)``, ms) and for one graph's breakdown (``breakdown(est, sid, graph)``: rows op_index,
    node, op_type, predicted_ms, and an ``(overhead)`` row, summing to the prediction)."""

    predict: Callable[[Any, str, Sequence[Any]], np.ndarray]
    breakdown: Callable[[Any, str, Any], pd.DataFrame]


def _overhead_row(ms: float) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({"op_index": [-1], "node": ["(overhead)"], "op_type": ["T_overhead"], "predicted_ms": [ms]})


def _opwise_frame(est: Any, scenario_id: str, graphs: Sequence[Any]):
    from leaderboard.baselines.features import CONFIGS

    frame = graph_frame(graphs)
    types = [CONFIGS.op_types[c] for c in np.unique(frame.op_type_code)]  # distinct types, not per op
    unseen = est.unseen_types(types)
    if unseen:
        raise ShelfError(f"{scenario_id}: op type {unseen[0]!r} was never seen by this scenario's predictor "
                         f"({est.name}; trained on {', '.join(sorted(est.type_key_))})")
    return frame


def _opwise_breakdown(est: Any, scenario_id: str, graph: Any) -> pd.DataFrame:
    import pandas as pd

    frame = _opwise_frame(est, scenario_id, [graph])
    nodes = [n for n in graph.nodes.values() if n.op != "input"]
    rows = pd.DataFrame({"op_index": frame.op_index, "node": [n.name for n in nodes],
                         "op_type": frame.op_types(), "predicted_ms": est._op_predictions(frame)})
    return pd.concat([rows, _overhead_row(float(est.overhead_ms_))], ignore_index=True)


#: The USC op-wise models: one vectorised pass over the graphs' distinct op configurations;
#: a graph with an op type the model never saw is refused.
OPWISE = Reader(predict=lambda est, sid, graphs: est.predict_frame(_opwise_frame(est, sid, graphs)),
                breakdown=_opwise_breakdown)


@contextlib.contextmanager
def _deducing(est: Any, scenario_id: str) -> Iterator[None]:
    """A graph the operator deduction cannot read is one ShelfError naming the scenario."""
    try:
        yield
    except (KeyError, ValueError, NotImplementedError) as e:
        raise ShelfError(f"{scenario_id}: {est.name} cannot deduce the operators of this graph: {e}"[:500]) from None


def _operators_predict(est: Any, scenario_id: str, graphs: Sequence[Any]) -> np.ndarray:
    with _deducing(est, scenario_id):
        return est.predict(graph_networks(graphs, scenario_id))


def _operators_breakdown(est: Any, scenario_id: str, graph: Any) -> pd.DataFrame:
    import pandas as pd

    with _deducing(est, scenario_id):
        parts = est.predict_parts(graph_networks([graph], scenario_id))
    rows = pd.DataFrame({"op_index": parts["kernel_index"].to_numpy(), "node": parts["nodes"].astype(str).to_numpy(),
                         "op_type": parts["kernel_type"].astype(str).to_numpy(),
                         "predicted_ms": parts["predicted_ms"].to_numpy(dtype="float64")})
    return pd.concat([rows, _overhead_row(float(est.overhead_ms_))], ignore_index=True)


#: additive_mlp: the operators LiteRT runs, deduced per graph (kernels/xnnpack.py), each one's
#: time from one MLP over its description; an operator type it never saw is priced from its
#: sizes alone (its documented design), so nothing is refused.
OPERATORS = Reader(predict=_operators_predict, breakdown=_operators_breakdown)

#: The candidates, and how the shelf reads each. usc_gbdt is left out: its saved trees take
#: megabytes per scenario for little MAPE over the next best op-wise candidate where it won.
#: The GNNs are left out: they give no per-operator breakdown.
READERS: dict[str, Reader] = {"usc_lasso": OPWISE, "lookup": OPWISE, "usc_rf": OPWISE, "additive_mlp": OPERATORS}
CANDIDATES = tuple(READERS)

__all__ = ["CANDIDATES", "OPERATORS", "OPWISE", "READERS", "Reader", "graph_frame", "graph_networks"]
