"""An OGB-style evaluator: a fixed input format, checked, and a fixed output format.

>>> ev = Evaluator("help-nb201-n10")
>>> print(ev.expected_input_format)
>>> ev.eval({"scenario_id": [...], "y_true": [...], "y_pred": [...]})
{"per_scenario": {"help-pixel2-cpu": {"spearman": ..., ...}, ...}, "aggregate": {...}, "groups": {...}}

The input is a dict with three equally long 1-D sequences: ``scenario_id`` (strings, each one
of the track's scenarios), ``y_true`` (measured ms) and ``y_pred`` (predicted ms), numbers
that are finite and > 0; on a track of repeated draws (seeds) a fourth, ``fold`` (ints): each
fold is scored on its own, the per-scenario and aggregate figures are the mean over folds and
``seeds`` holds each fold's aggregate and the spread (sample standard deviation) over folds. Anything else raises :class:`EvaluationError` with one line that
says which key is wrong and how (first offending position and value). Like OGB's
``Evaluator``, it knows nothing about models or splits: it scores arrays (the submission
validator checks that the right networks were predicted).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from .metrics import aggregate, compute


# What the board's per-scenario views need to know of a scenario (phone x core set x precision,
# framework); recorded in each result beside the metrics, whatever the track groups by.
SCENARIO_COLUMNS = ("device", "framework", "accelerator", "cores", "precision")


class EvaluationError(ValueError):
    """The evaluator's input is not in the expected format (the message says what is wrong)."""


def _as_array(name: str, v: Any, numeric: bool) -> np.ndarray:
    if isinstance(v, (str, bytes)) or isinstance(v, Mapping) or not hasattr(v, "__len__"):
        raise EvaluationError(f"{name}: expected a 1-D sequence (list, numpy array, pandas Series), got {type(v).__name__}")
    a = np.asarray(v, dtype=object if not numeric else None)
    if a.ndim != 1:
        raise EvaluationError(f"{name}: expected a 1-D sequence, got shape {a.shape}")
    if numeric:
        if a.dtype == bool or not (np.issubdtype(a.dtype, np.number)):
            bad = next((i for i, x in enumerate(a.tolist()) if isinstance(x, bool) or not isinstance(x, (int, float))), 0)
            raise EvaluationError(f"{name}: expected numbers, position {bad} is {a.tolist()[bad]!r}")
        a = a.astype("float64")
        for what, mask in (("NaN", np.isnan(a)), ("infinite", np.isinf(a)), ("zero", a == 0), ("negative", a < 0)):
            if mask.any():
                i = int(np.flatnonzero(mask)[0])
                raise EvaluationError(f"{name}: {int(mask.sum())} value(s) {what} (latencies are ms > 0), first at position {i}: {a[i]!r}")
    return a


class Evaluator:
    """Scores predictions of one track: per scenario, aggregated (mean over scenarios), and per
    group of scenarios (the track's ``group_by`` columns, e.g. precision)."""

    def __init__(self, track: Any, scenario_groups: Mapping[str, Mapping[str, Any]] | None = None):
        from .tracks import TRACKS, Track

        self.track = track if isinstance(track, Track) else TRACKS.get(track)
        self.metrics = tuple(self.track.metrics)
        # scenario_id -> {column: value} for the group_by columns (from the dataset's scenarios)
        self.scenario_groups = {k: dict(v) for k, v in (scenario_groups or {}).items()}

    @property
    def expected_input_format(self) -> str:
        return (f"==== Expected input format of Evaluator for {self.track.name}\n"
                "{'scenario_id': scenario_id, 'y_true': y_true, 'y_pred': y_pred}\n"
                "- scenario_id: 1-D sequence of str, each a scenario of the track\n"
                "- y_true: 1-D sequence of measured latencies (ms, finite, > 0), same length\n"
                "- y_pred: 1-D sequence of predicted latencies (ms, finite, > 0), same length\n"
                "(one element per network x scenario; any order)")

    @property
    def expected_output_format(self) -> str:
        m = ", ".join(self.metrics)
        return (f"==== Expected output format of Evaluator for {self.track.name}\n"
                "{'per_scenario': {scenario_id: {metric: float}}, 'aggregate': {metric: float}, "
                "'groups': {column: {value: {metric: float}}}, 'n': {scenario_id: int}}\n"
                f"- metrics: {m} (aggregate = unweighted mean over scenarios)\n"
                "- with a fold key (repeated draws): per_scenario/aggregate are means over folds, and "
                "'seeds': {'folds', 'per_fold', 'aggregate_std', 'per_scenario_std'} their spread")

    def check(self, input_dict: Any) -> pd.DataFrame:
        """The checked input as a frame (scenario_id, y_true, y_pred); EvaluationError if wrong."""
        if not isinstance(input_dict, Mapping):
            raise EvaluationError(f"input: expected a dict with keys scenario_id, y_true, y_pred, got {type(input_dict).__name__}")
        keys = ("scenario_id", "y_true", "y_pred")
        missing = [k for k in keys if k not in input_dict]
        if missing:
            raise EvaluationError(f"input: missing key(s) {', '.join(missing)} (expected exactly {', '.join(keys)})")
        extra = sorted(set(input_dict) - set(keys) - {"fold"})
        if extra:
            raise EvaluationError(f"input: unexpected key(s) {', '.join(map(str, extra))} (expected exactly {', '.join(keys)})")
        sid = _as_array("scenario_id", input_dict["scenario_id"], numeric=False)
        yt = _as_array("y_true", input_dict["y_true"], numeric=True)
        yp = _as_array("y_pred", input_dict["y_pred"], numeric=True)
        if not (len(sid) == len(yt) == len(yp)):
            raise EvaluationError(f"input: lengths differ: scenario_id {len(sid)}, y_true {len(yt)}, y_pred {len(yp)}")
        if len(sid) == 0:
            raise EvaluationError("input: no predictions (the sequences are empty)")
        fold = None
        if "fold" in input_dict:
            fold = _as_array("fold", input_dict["fold"], numeric=False)
            if len(fold) != len(sid):
                raise EvaluationError(f"input: lengths differ: scenario_id {len(sid)}, fold {len(fold)}")
            bad = [i for i, x in enumerate(fold.tolist())
                   if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0]
            if bad:
                raise EvaluationError(f"fold: expected ints >= 0, position {bad[0]} is {fold[bad[0]]!r}")
        bad = [i for i, s in enumerate(sid.tolist()) if not isinstance(s, str)]
        if bad:
            raise EvaluationError(f"scenario_id: expected strings, position {bad[0]} is {sid[bad[0]]!r}")
        if self.scenario_groups:
            unknown = sorted(set(sid.tolist()) - set(self.scenario_groups))
            if unknown:
                raise EvaluationError(f"scenario_id: {unknown[0]!r} is not a scenario of track {self.track.name}"
                                      f" ({len(unknown)} unknown)")
        df = pd.DataFrame({"scenario_id": sid.astype(str), "y_true": yt, "y_pred": yp})
        return df if fold is None else df.assign(fold=fold.astype("int64"))

    def _per_scenario(self, df: pd.DataFrame) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
        per, n = {}, {}
        for sid, g in df.groupby("scenario_id", sort=True):
            per[sid] = compute(g["y_true"].to_numpy(), g["y_pred"].to_numpy(), self.metrics)
            n[sid] = len(g)
        return per, n

    def eval(self, input_dict: Any) -> dict[str, Any]:
        df = self.check(input_dict)
        seeds = None
        if "fold" in df.columns:
            # each draw scored as its own board, then averaged: a lucky draw cannot hide in a pooled figure
            by_fold = {int(k): self._per_scenario(g)[0] for k, g in df.groupby("fold", sort=True)}
            per, seeds = _mean_over_folds(by_fold, self.metrics)
            n = self._per_scenario(df[df["fold"] == min(by_fold)])[1]
        else:
            per, n = self._per_scenario(df)
        groups: dict[str, dict[str, dict[str, float]]] = {}
        for col in self.track.group_by:
            by: dict[str, list[str]] = {}
            for sid in per:
                v = self.scenario_groups.get(sid, {}).get(col)
                by.setdefault("-" if v is None else str(v), []).append(sid)
            groups[col] = {v: aggregate({s: per[s] for s in sids}, self.metrics) for v, sids in sorted(by.items())}
        out = {"per_scenario": per, "aggregate": aggregate(per, self.metrics), "groups": groups, "n": n}
        if self.scenario_groups:
            out["scenarios"] = {sid: {k: _plain(v) for k, v in self.scenario_groups.get(sid, {}).items()} for sid in per}
        if seeds is not None:
            out["aggregate"] = seeds.pop("aggregate_mean")
            out["seeds"] = seeds
        return out


def _plain(v: Any) -> Any:
    """A scenario attribute as a JSON value (numpy scalars to Python, missing to None)."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return v.item() if isinstance(v, np.generic) else v


def _mean_over_folds(by_fold: Mapping[int, Mapping[str, Mapping[str, float]]],
                     metrics: Iterable[str]) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Per-scenario means over folds, and the folds' spread: each fold's aggregate, the mean and
    sample standard deviation (ddof=1; 0 with one fold) of those aggregates, and per scenario
    the standard deviation over folds. NaN values (an undefined rank correlation) are left out."""
    metrics = list(metrics)
    sids = sorted({s for per in by_fold.values() for s in per})
    folds = sorted(by_fold)

    def stats(vals: list[float]) -> tuple[float, float]:
        v = np.array([x for x in vals if not np.isnan(x)], dtype="float64")
        if v.size == 0:
            return float("nan"), float("nan")
        return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0

    per, per_std = {}, {}
    for sid in sids:
        cells = {m: stats([by_fold[f][sid][m] for f in folds if sid in by_fold[f]]) for m in metrics}
        per[sid] = {m: c[0] for m, c in cells.items()}
        per_std[sid] = {m: c[1] for m, c in cells.items()}
    fold_agg = {f: aggregate(by_fold[f], metrics) for f in folds}
    cells = {m: stats([fold_agg[f][m] for f in folds]) for m in metrics}
    return per, {"folds": folds, "per_fold": {str(f): a for f, a in fold_agg.items()},
                 "aggregate_mean": {m: c[0] for m, c in cells.items()},
                 "aggregate_std": {m: c[1] for m, c in cells.items()}, "per_scenario_std": per_std}


def scenario_groups(dataset: Any, scenario_ids: Iterable[str], columns: Iterable[str]) -> dict[str, dict[str, Any]]:
    """scenario_id -> {column: value} from a dataset's scenarios table (for :class:`Evaluator`)."""
    cols = list(columns)
    sc = dataset.scenarios.set_index("scenario_id")
    out = {}
    for s in scenario_ids:
        row = sc.loc[s] if s in sc.index else None
        out[s] = {c: (None if row is None or pd.isna(row[c]) else row[c]) for c in cols}
    return out


__all__ = ["Evaluator", "EvaluationError", "SCENARIO_COLUMNS", "scenario_groups"]
