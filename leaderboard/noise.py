"""The noise floor of a track: how well one independent measurement of a network predicts another.

No predictor can honestly beat the agreement between two measurements of the same network in
the same scenario: that is the floor the board shows beside the entries, scored with the
track's own metrics (MAPE, +-10% accuracy, Spearman, ...) on the track's test networks.

What a source records decides how the floor is estimated; estimators register in
:data:`ESTIMATORS` and the first one whose ``applies`` accepts a scenario's e2e rows is used:

- ``processes`` (the suite's own records): each e2e row is the median of several fresh
  measuring processes and carries ``between_cv``, the coefficient of variation of the
  per-process medians. One process's median against another's is modelled as two independent
  draws around the headline with that spread (the dataset keeps the spread, not each
  process's median, so two disjoint halves of the processes cannot be compared directly).
- ``repeat-std`` (the USC CSVs): each cell is a mean with its standard deviation over the
  timed runs; one run against another is modelled the same way with that standard deviation.
  Some cells have a standard deviation near or above their mean (runs disturbed by background
  work): the draws are lognormal with the cell's mean and standard deviation, so a measurement
  stays positive and such cells give the long tail they would give on the phone.
  This is the floor of single runs: the board's targets are means, whose own scatter is lower
  by the square root of the (unstated) number of runs, and drift between sessions is not in it.
- otherwise (HELP: one value per network, no spread) the floor is unknown, and said so.

The draws are seeded (numpy PCG64, :data:`SEED`) and repeated :data:`REPLICATES` times; the
floor is the mean of each metric over the replicates, so the figures are reproducible.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from generators.registry import Registry

from .metrics import aggregate, compute

SEED = 0
REPLICATES = 20


@dataclass(frozen=True)
class Estimator:
    name: str
    applies: Callable[[pd.DataFrame], bool]
    sigma_ms: Callable[[pd.DataFrame], np.ndarray]  # per network: the spread of one measurement (ms)
    how: str  # one line for the board


ESTIMATORS: Registry[Estimator] = Registry("noise-floor estimator")


def _has(e: pd.DataFrame, col: str) -> bool:
    return col in e.columns and bool(e[col].notna().all()) and len(e) > 0


ESTIMATORS.register("processes")(Estimator(
    "processes",
    lambda e: _has(e, "between_cv") and "processes" in e.columns and bool((e["processes"].fillna(0) >= 2).all()),
    lambda e: e["between_cv"].to_numpy("float64") * e["latency_ms"].to_numpy("float64"),
    "one measuring process against another: lognormal draws with the spread of the per-process medians (between_cv)"))

ESTIMATORS.register("repeat-std")(Estimator(
    "repeat-std",
    lambda e: _has(e, "std_ms") and _has(e, "mean_ms"),
    lambda e: e["std_ms"].to_numpy("float64"),
    "one timed run against another: lognormal draws with the source's per-cell mean and standard deviation"))


def estimator_for(e: pd.DataFrame) -> Estimator | None:
    for name in ESTIMATORS.names():
        est = ESTIMATORS.get(name)
        if est.applies(e):
            return est
    return None


def simulate(latency_ms: np.ndarray, sigma_ms: np.ndarray, metrics: tuple[str, ...],
             rng: np.random.Generator, replicates: int = REPLICATES) -> dict[str, float]:
    """The track's metrics of one simulated measurement (as the prediction) against another (as
    the truth), averaged over ``replicates`` pairs of draws."""
    mu = np.asarray(latency_ms, dtype="float64")
    sd = np.asarray(sigma_ms, dtype="float64")
    # a lognormal with mean mu and standard deviation sd: positive, as latencies are
    s2 = np.log1p(np.square(sd / mu))
    loc, scale = np.log(mu) - s2 / 2, np.sqrt(s2)
    runs = []
    for _ in range(replicates):
        a, b = rng.lognormal(loc, scale), rng.lognormal(loc, scale)
        runs.append(compute(a, b, metrics))
    return {m: float(np.nanmean([r[m] for r in runs])) if any(not np.isnan(r[m]) for r in runs) else float("nan")
            for m in metrics}


def track_floor(data: Any, split: Any) -> dict[str, Any]:
    """The floor of one track (its TrackData and Split): per scenario and aggregated like the
    evaluator (unweighted mean over scenarios), with the estimator used, or why it is unknown."""
    track = data.track
    metrics = tuple(track.metrics)
    per, used, unknown = {}, set(), {}
    for sid in data.scenario_ids:
        e = data.measured(sid)
        e = e[e["name"].isin(set(split.test_names(sid)))]
        est = estimator_for(e)
        if est is None:
            unknown[sid] = "the source gives one value per network and no spread"
            continue
        sigma = est.sigma_ms(e)
        rng = np.random.default_rng([SEED, len(per)])  # per scenario, in the track's scenario order
        per[sid] = simulate(e["latency_ms"].to_numpy("float64"), sigma, metrics, rng)
        used.add(est.name)
    if not per:
        reason = next(iter(unknown.values()), "no scenario")
        return {"known": False, "why": f"unknown: {reason} (the floor is not invented)"}
    how = "; ".join(ESTIMATORS.get(n).how for n in sorted(used))
    out = {"known": True, "estimator": sorted(used), "how": how, "replicates": REPLICATES, "seed": SEED,
           "per_scenario": per, "aggregate": aggregate(per, metrics)}
    if unknown:
        out["unknown_scenarios"] = unknown
    return out


def write_noise_floor(roots: Mapping[str, Any] | None, results_dir: str | Path,
                      tracks: list[str] | None = None) -> dict[str, Any]:
    """``<results>/noise_floor.json``: the floor of every track with data here (tracks without
    data are left out: the board says the floor was not computed)."""
    from .run import _clean, available
    from .tracks import TRACKS

    ok, _ = available(tracks or TRACKS.names(), roots, write_splits=False)
    floors = {name: track_floor(data, split) for name, (data, split) in sorted(ok.items())}
    p = Path(results_dir) / "noise_floor.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(_clean(floors), indent=1, sort_keys=True) + "\n")
    return floors


__all__ = ["ESTIMATORS", "Estimator", "estimator_for", "simulate", "track_floor", "write_noise_floor",
           "SEED", "REPLICATES"]
