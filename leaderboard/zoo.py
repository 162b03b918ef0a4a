"""The predictor zoo: one fitted predictor per known scenario, committed, for ``latbench predict``.

nn-Meter ships a predictor per device; this zoo ships one per *scenario* the suite has data for
(every USC phone x framework x core set x precision, every HELP device, the host's scenarios),
each with its provenance and the accuracy it reached on networks it never saw.

Which predictor, and how it is stated
-------------------------------------
The board already scores every op-wise baseline on every scenario of its tracks (:data:`SOURCES`:
the k-fold USC track, HELP's 900-network track, the host's per-scenario track). For each
scenario the zoo takes the candidate (:data:`CANDIDATES`) with the lowest MAPE there, and
keeps those figures (``board``). It then fits that predictor, with the entry's parameters, on
the training networks of the first fold of the track's frozen split in that scenario, and
states as its ``accuracy`` what this very model reaches on that fold's test networks (MAPE,
+-10 % accuracy, Spearman, how many): ``held_out.json`` keeps them with the measured and
predicted times, so anyone can check the figure (a test does). On a k-fold track the model saw
80 % of the networks; on HELP's single split the same 900 as the board's entry.

Candidates (:data:`READERS`) are the predictors that price a network part by part, so
``breakdown`` says where the time goes: the USC op-wise models (Sec. 4.2; per IR op, a batch of
graphs one vectorised pass over distinct op configurations) and ``additive_mlp`` (per operator
LiteRT runs, deduced per graph; far slower, ``benchmarks/bench_zoo.py`` prints how much, and
on most scenarios far more accurate: ``zoo/INDEX.json`` states each scenario's choice and its
accuracy). A :class:`Reader` says how the zoo asks each kind.

Layout (``zoo/``, committed)::

    zoo/INDEX.json                 scenario_id -> predictor, folder, accuracy, provenance
    zoo/<scenario_id>/predictor.json (+ arrays)   leaderboard.baselines.persist format, no pickles

``latbench zoo build`` (or :func:`build`) rebuilds it from the board's results and the data;
``Zoo().predict(graphs, scenario_id)`` is the Python API for NAS loops.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
ZOO_DIR = ROOT / "zoo"
INDEX = "INDEX.json"
RESULTS_DIR = ROOT / "leaderboard" / "results"
INDEX_SCHEMA = "latbench.zoo/1"
HELD_OUT = "held_out.json"  # per scenario folder: the held-out networks, measured and predicted
ACCURACY = ("mape", "acc10", "spearman")


@dataclass(frozen=True)
class ZooSource:
    """A track whose scored scenarios enter the zoo."""

    track: str


SOURCES = (ZooSource("usc-real-kfold"), ZooSource("help-nb201-n900"), ZooSource("host-per-scenario"))


class ZooError(ValueError):
    """A scenario the zoo does not have, a graph it cannot predict, a broken zoo folder."""


# ---------------------------------------------------------------- reading a candidate
class _UserGraphs:
    """Graphs that are in no dataset (a user's), as :class:`~.baselines.Networks` reads them."""

    def __init__(self, graphs: Sequence[Any]):
        self.graphs = list(graphs)

    def graph(self, model_id: str, scenario_id: str) -> Any:
        return self.graphs[int(model_id)]


def _networks(graphs: Sequence[Any], scenario_id: str):
    from .baselines import Networks

    return Networks(_UserGraphs(graphs), tuple(str(i) for i in range(len(graphs))), scenario_id)


@dataclass(frozen=True)
class Reader:
    """How the zoo asks one kind of candidate for a batch of graphs' latency (``predict(est, sid,
    graphs)``, ms) and for one graph's breakdown (``breakdown(est, sid, graph)``: rows op_index,
    node, op_type, predicted_ms, and an ``(overhead)`` row, summing to the prediction)."""

    predict: Callable[[Any, str, Sequence[Any]], np.ndarray]
    breakdown: Callable[[Any, str, Any], pd.DataFrame]


def _overhead_row(ms: float) -> pd.DataFrame:
    return pd.DataFrame({"op_index": [-1], "node": ["(overhead)"], "op_type": ["T_overhead"], "predicted_ms": [ms]})


def _opwise_frame(est: Any, scenario_id: str, graphs: Sequence[Any]):
    from .baselines.features import CONFIGS

    frame = graph_frame(graphs)
    types = [CONFIGS.op_types[c] for c in np.unique(frame.op_type_code)]  # distinct types, not per op
    unseen = est.unseen_types(types)
    if unseen:
        raise ZooError(f"{scenario_id}: op type {unseen[0]!r} was never seen by this scenario's predictor "
                       f"({est.name}; trained on {', '.join(sorted(est.type_key_))})")
    return frame


def _opwise_breakdown(est: Any, scenario_id: str, graph: Any) -> pd.DataFrame:
    frame = _opwise_frame(est, scenario_id, [graph])
    nodes = [n for n in graph.nodes.values() if n.op != "input"]
    rows = pd.DataFrame({"op_index": frame.op_index, "node": [n.name for n in nodes],
                         "op_type": frame.op_types(), "predicted_ms": est._op_predictions(frame)})
    return pd.concat([rows, _overhead_row(float(est.overhead_ms_))], ignore_index=True)


#: The USC op-wise models: one vectorised pass over the graphs' distinct op configurations
#: (thousands of graphs a second); a graph with an op type the model never saw is refused.
OPWISE = Reader(predict=lambda est, sid, graphs: est.predict_frame(_opwise_frame(est, sid, graphs)),
                breakdown=_opwise_breakdown)


@contextlib.contextmanager
def _deducing(est: Any, scenario_id: str) -> Iterator[None]:
    """A graph the operator deduction cannot read is one ZooError naming the scenario."""
    try:
        yield
    except (KeyError, ValueError, NotImplementedError) as e:
        raise ZooError(f"{scenario_id}: {est.name} cannot deduce the operators of this graph: {e}"[:500]) from None


def _operators_predict(est: Any, scenario_id: str, graphs: Sequence[Any]) -> np.ndarray:
    with _deducing(est, scenario_id):
        return est.predict(_networks(graphs, scenario_id))


def _operators_breakdown(est: Any, scenario_id: str, graph: Any) -> pd.DataFrame:
    with _deducing(est, scenario_id):
        parts = est.predict_parts(_networks([graph], scenario_id))
    rows = pd.DataFrame({"op_index": parts["kernel_index"].to_numpy(), "node": parts["nodes"].astype(str).to_numpy(),
                         "op_type": parts["kernel_type"].astype(str).to_numpy(),
                         "predicted_ms": parts["predicted_ms"].to_numpy(dtype="float64")})
    return pd.concat([rows, _overhead_row(float(est.overhead_ms_))], ignore_index=True)


#: additive_mlp: the operators LiteRT runs, deduced per graph (kernels/xnnpack.py; ~115 NAS-Bench-201
#: cells a second), each one's time from one MLP over its description; an operator type it never
#: saw is priced from its sizes alone (its documented design), so nothing is refused.
OPERATORS = Reader(predict=_operators_predict, breakdown=_operators_breakdown)

#: The candidates, and how the zoo reads each. usc_gbdt is left out: its saved trees take
#: megabytes per scenario for little MAPE over the next best op-wise candidate where it won.
#: The GNNs are left out: they give no per-operator breakdown.
READERS: dict[str, Reader] = {"usc_lasso": OPWISE, "lookup": OPWISE, "usc_rf": OPWISE, "additive_mlp": OPERATORS}
CANDIDATES = tuple(READERS)


# ---------------------------------------------------------------- choosing
def choose(results_dir: Path = RESULTS_DIR, sources: Sequence[ZooSource] = SOURCES,
           candidates: Sequence[str] = CANDIDATES) -> dict[str, dict[str, Any]]:
    """scenario_id -> {predictor, track, params, accuracy} of the best candidate on the board."""
    best: dict[str, dict[str, Any]] = {}
    for src in sources:
        for name in candidates:
            f = Path(results_dir) / src.track / f"{name}.json"
            if not f.is_file():
                continue
            r = json.loads(f.read_text())
            for sid, m in r["result"]["per_scenario"].items():
                mape = m.get("mape")
                if mape is None or not np.isfinite(mape):
                    continue
                if sid in best and best[sid]["accuracy"]["mape"] <= mape:
                    continue
                best[sid] = {"predictor": name, "track": src.track, "track_version": r.get("track_version"),
                             "params": r["meta"].get("params", {}),
                             "accuracy": {"mape": float(mape), "acc10": float(m.get("acc10", np.nan)),
                                          "spearman": float(m.get("spearman", np.nan)),
                                          "protocol": f"{src.track}, every fold (board entry {name})"}}
    return best


# ---------------------------------------------------------------- building
def _git_commit() -> str | None:
    try:
        p = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return p.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _slug(sid: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in sid)


def build(out: Path = ZOO_DIR, scenarios: Iterable[str] | None = None, results_dir: Path = RESULTS_DIR,
          roots: dict[str, Any] | None = None, splits_dir: Path | None = None,
          progress: Callable[[str], None] | None = None, candidates: Sequence[str] = CANDIDATES) -> dict[str, Any]:
    """Fit the chosen predictor of every (or the given) scenario and write ``out`` (see module doc).
    ``candidates``: a subset of :data:`CANDIDATES` to choose from (the op-wise ones alone make a
    zoo that predicts thousands of graphs a second, for NAS loops that need speed over accuracy)."""
    from .baselines import Networks, make_predictor, save_predictor
    from .metrics import compute
    from .run import available, board_view

    unknown = [c for c in candidates if c not in READERS]
    if unknown or not candidates:
        raise ZooError(f"candidate {unknown[0] if unknown else '(none)'!r}: the zoo chooses among {', '.join(READERS)}")
    chosen = choose(results_dir, candidates=candidates)
    board = set(chosen)
    if scenarios is not None:
        want = list(scenarios)
        unknown = [s for s in want if s not in chosen]
        if unknown:
            raise ZooError(f"scenario {unknown[0]!r}: no board result to choose a predictor from "
                           f"(scenarios with results: {len(chosen)}; see leaderboard/results/)")
        chosen = {s: chosen[s] for s in want}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index_path = out / INDEX
    index = json.loads(index_path.read_text()) if index_path.is_file() else {"schema": INDEX_SCHEMA, "scenarios": {}}
    # a scenario the board no longer has results for has no data behind it any more (e.g. the
    # host's old per-machine scenarios, now that the host tracks read the release): drop it
    for sid in sorted(set(index["scenarios"]) - board):
        shutil.rmtree(out / index["scenarios"].pop(sid)["folder"], ignore_errors=True)
        if progress:
            progress(f"{sid}: dropped (no board result for it any more)")
    tracks = sorted({c["track"] for c in chosen.values()})
    ok, skipped = available(tracks, roots, splits_dir, write_splits=False)
    commit = _git_commit()
    for track in tracks:
        if track not in ok:
            raise ZooError(f"track {track}: no data to fit on ({skipped.get(track, 'unknown track')})")
        data, split = ok[track]
        for sid in sorted(s for s, c in chosen.items() if c["track"] == track):
            c = chosen[sid]
            e = data.measured(sid)
            by_name = dict(zip(e["name"], e["model_id"]))
            # the first fold: the zoo model is fitted on its training networks and states its
            # accuracy on its test networks, which it never saw (reproducible: held_out.json)
            fold = min(split.for_scenario(sid), key=lambda f: f.fold)
            train = [n for n in fold.train if n in by_name]
            test = sorted(n for n in fold.test if n in by_name)
            if not train or not test:
                raise ZooError(f"{track}: {sid}: fold {fold.fold} has {len(train)} training and {len(test)} test "
                               "networks measured")
            # the board's own view of the data: the test networks hidden, and on a track that
            # trains on e2e only every op time of the scenario blanked too (the host's op rows
            # come from the builtin kernels, not the XNNPACK path its e2e times measure)
            train_ids, test_ids = tuple(by_name[n] for n in train), tuple(by_name[n] for n in test)
            view = board_view(data, sid, train_ids, test_ids)
            X = Networks(view, train_ids, sid)
            est = make_predictor(c["predictor"], **c["params"]).fit(X, X.y())
            T = Networks(view, test_ids, sid)
            measured = Networks(data.dataset, test_ids, sid).y()  # the answer, from outside the view
            predicted = np.asarray(est.predict(T), dtype="float64")
            folder = out / _slug(sid)
            save_predictor(est, folder)
            (folder / HELD_OUT).write_text(json.dumps({"scenario_id": sid, "names": test,
                                                       "measured_ms": measured.tolist(),
                                                       "predicted_ms": predicted.tolist()}) + "\n")
            ids = sorted(X.model_ids)
            index["scenarios"][sid] = {
                "folder": folder.name, "predictor": c["predictor"], "params": c["params"],
                "accuracy": {**{k: float(v) for k, v in compute(measured, predicted, ACCURACY).items()},
                             "held_out_networks": len(test), "protocol": f"{track} fold {fold.fold}"},
                "board": c["accuracy"],
                "training": {"track": track, "track_version": c["track_version"], "dataset": str(data.track.data),
                             "fold": fold.fold, "networks": len(ids),
                             "networks_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16],
                             "sources": sorted(set(data.networks[data.networks["model_id"].isin(ids)]["dataset"]))},
                "built": {"date": _dt.date.today().isoformat(), "commit": commit}}
            if progress:
                a = index["scenarios"][sid]["accuracy"]
                progress(f"{sid}: {c['predictor']} on {len(ids)} networks, held-out MAPE {a['mape']:.1f}% "
                         f"on {len(test)} (board: {c['accuracy']['mape']:.1f}%)")
    index["scenarios"] = dict(sorted(index["scenarios"].items()))
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    return index


# ---------------------------------------------------------------- predicting
def graph_frame(graphs: Sequence[Any]):
    """An :class:`~.baselines.features.OpFrame` of IR graphs that are in no dataset (a user's)."""
    from .baselines.features import OpFrame, ir_config_ids

    parts = [ir_config_ids(g) for g in graphs]
    sizes = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    config = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    n = len(config)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    return OpFrame(net=np.repeat(np.arange(len(parts)), sizes), config=config,
                   op_index=np.arange(n, dtype=np.int64) - starts, latency=np.full(n, np.nan),
                   fused=np.zeros(n, bool), measured=np.zeros(len(graphs), bool), n_nets=len(graphs))


class Zoo:
    """The committed zoo (or another folder written by :func:`build`)."""

    def __init__(self, folder: str | Path = ZOO_DIR):
        from foundation.safeload import LoadError, load_json

        self.folder = Path(folder)
        f = self.folder / INDEX
        if not f.is_file():
            raise ZooError(f"{f}: no predictor zoo here (build one with `latbench zoo build`)")
        try:
            self.index = load_json(f, 16 << 20, max_nodes=2_000_000)
        except LoadError as e:
            raise ZooError(str(e)) from None
        if not isinstance(self.index, dict) or self.index.get("schema") != INDEX_SCHEMA:
            raise ZooError(f"{f}: not a {INDEX_SCHEMA} index")
        self._loaded: dict[str, Any] = {}

    def scenarios(self) -> list[str]:
        return list(self.index["scenarios"])

    def entry(self, scenario_id: str) -> dict[str, Any]:
        e = self.index["scenarios"].get(scenario_id)
        if e is None:
            near = [s for s in self.scenarios() if scenario_id.split("-")[0] in s][:5] or self.scenarios()[:5]
            raise ZooError(f"scenario {scenario_id!r}: not in the zoo ({len(self.scenarios())} scenarios, e.g. "
                           f"{', '.join(near)}; `latbench predict --list` shows all)")
        return e

    def predictor(self, scenario_id: str) -> Any:
        from .baselines import load_predictor

        if scenario_id not in self._loaded:
            e = self.entry(scenario_id)
            self._loaded[scenario_id] = load_predictor(self.folder / e["folder"])
        return self._loaded[scenario_id]

    def _reader(self, scenario_id: str) -> Reader:
        name = self.entry(scenario_id)["predictor"]
        if name not in READERS:
            raise ZooError(f"{self.folder / INDEX}: {scenario_id}: predictor {str(name)[:80]!r} is not one the zoo "
                           f"reads ({', '.join(READERS)})")
        return READERS[name]

    def predict(self, graphs: Sequence[Any], scenario_id: str) -> np.ndarray:
        """e2e latency (ms) of every graph in ``scenario_id``, as one batch."""
        reader = self._reader(scenario_id)
        return np.asarray(reader.predict(self.predictor(scenario_id), scenario_id, graphs), dtype="float64")

    def breakdown(self, graph: Any, scenario_id: str) -> pd.DataFrame:
        """One row per op (USC op-wise predictors: each IR op) or operator (additive_mlp: each
        operator LiteRT runs) of ``graph``: op_index, node, op_type, predicted_ms, plus the
        predictor's overhead as a last row, so the rows sum to :meth:`predict`."""
        reader = self._reader(scenario_id)
        return reader.breakdown(self.predictor(scenario_id), scenario_id, graph)


__all__ = ["CANDIDATES", "READERS", "Reader", "SOURCES", "Zoo", "ZooError", "ZooSource", "build", "choose", "graph_frame"]
