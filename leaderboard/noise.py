"""The noise references of a track: the noise floor and the perfect predictor's score.

The noise floor is how well one independent measurement of a network predicts another, scored
with the track's own metrics on its test networks: how far measuring again would move the
figures. What a source records decides how it is estimated; estimators register in
:data:`ESTIMATORS` and the first whose ``applies`` accepts a scenario's e2e rows is used
(``processes`` for the suite's records, from ``between_cv``; ``repeat-std`` for the USC CSVs,
from each cell's standard deviation; otherwise the floor is unknown, and said so).

The perfect predictor knows each network's true latency and is still scored against the
recorded headline, which carries its own measuring noise: it estimates the best score a
predictor can get on the track. ``perfect`` simulates it from the headline's protocol (the
median of several processes' medians); ``perfect_retest`` estimates it from the release's
retest (``retest.csv``, pipelines/retest.py), which also sees the machine's wander over the
hours a sweep takes. Both are estimates under a model; docs/leaderboard.md says where each is
pessimistic and what it means for a goal.

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

from foundation.registry import Registry

from .metrics import aggregate, compute

SEED = 0
REPLICATES = 20


@dataclass(frozen=True)
class Estimator:
    name: str
    applies: Callable[[pd.DataFrame], bool]
    sigma_ms: Callable[[pd.DataFrame], np.ndarray]  # per network: the spread of one measurement (ms)
    how: str  # one line for the board
    # per network: how many independent draws the recorded headline is the median of, or None
    # where the source does not say (then the perfect predictor's score is unknown)
    label_draws: Callable[[pd.DataFrame], np.ndarray] | None = None


ESTIMATORS: Registry[Estimator] = Registry("noise-floor estimator")


def _has(e: pd.DataFrame, col: str) -> bool:
    return col in e.columns and bool(e[col].notna().all()) and len(e) > 0


ESTIMATORS.register("processes")(Estimator(
    "processes",
    lambda e: _has(e, "between_cv") and "processes" in e.columns and bool((e["processes"].fillna(0) >= 2).all()),
    lambda e: e["between_cv"].to_numpy("float64") * e["latency_ms"].to_numpy("float64"),
    "one measuring process against another: lognormal draws with the spread of the per-process medians (between_cv)",
    lambda e: e["processes"].to_numpy("int64")))

PERFECT_HOW = ("a predictor that knows each network's true latency, scored against the headline as recorded: the "
               "median of the row's `processes` lognormal draws with the spread of the per-process medians (between_cv); "
               "an estimate of the best score, pessimistic where one outlying process inflated between_cv")

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
    loc, scale = _lognormal(mu, sd)
    runs = []
    for _ in range(replicates):
        a, b = rng.lognormal(loc, scale), rng.lognormal(loc, scale)
        runs.append(compute(a, b, metrics))
    return _mean_over(runs, metrics)


def _mean_over(runs: list[dict[str, float]], metrics: tuple[str, ...]) -> dict[str, float]:
    """Each metric's mean over the replicates (NaN where every replicate gave NaN)."""
    return {m: float(np.nanmean([r[m] for r in runs])) if any(not np.isnan(r[m]) for r in runs) else float("nan")
            for m in metrics}


def _lognormal(mu: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log-space location and scale of a lognormal with mean ``mu`` and standard deviation ``sd``."""
    s2 = np.log1p(np.square(sd / mu))
    return np.log(mu) - s2 / 2, np.sqrt(s2)


def simulate_perfect(latency_ms: np.ndarray, sigma_ms: np.ndarray, draws: np.ndarray, metrics: tuple[str, ...],
                     rng: np.random.Generator, replicates: int = REPLICATES) -> dict[str, float]:
    """The track's metrics of a perfect predictor (the centre) against a simulated headline: the
    median of ``draws[i]`` draws around network i, averaged over ``replicates`` headlines."""
    mu = np.asarray(latency_ms, dtype="float64")
    k = np.asarray(draws, dtype="int64")
    if len(k) and int(k.min()) < 1:
        raise ValueError(f"draws: every headline is the median of at least one draw, got {int(k.min())}")
    loc, scale = _lognormal(mu, np.asarray(sigma_ms, dtype="float64"))
    width = int(k.max()) if len(k) else 1
    unused = np.arange(width)[None, :] >= k[:, None]  # a network with fewer draws than the widest
    runs = []
    for _ in range(replicates):
        x = rng.lognormal(loc[:, None], scale[:, None], size=(len(mu), width))
        x[unused] = np.nan
        runs.append(compute(np.nanmedian(x, axis=1), mu, metrics))
    return _mean_over(runs, metrics)


def track_floor(data: Any, split: Any) -> dict[str, Any]:
    """The floor of one track (its TrackData and Split): per scenario and aggregated like the
    evaluator (unweighted mean over scenarios), with the estimator used, or why it is unknown."""
    track = data.track
    metrics = tuple(track.metrics)
    per, perfect, used, unknown = {}, {}, set(), {}
    for sid in data.scenario_ids:
        e = data.measured(sid)
        e = e[e["name"].isin(set(split.test_names(sid)))]
        est = estimator_for(e)
        if est is None:
            unknown[sid] = "the source gives one value per network and no spread"
            continue
        sigma = est.sigma_ms(e)
        rng = np.random.default_rng([SEED, len(per)])  # per scenario, in the track's scenario order
        lat = e["latency_ms"].to_numpy("float64")
        per[sid] = simulate(lat, sigma, metrics, rng)
        if est.label_draws is not None:
            perfect[sid] = simulate_perfect(lat, sigma, est.label_draws(e), metrics, rng)
        used.add(est.name)
    if not per:
        reason = next(iter(unknown.values()), "no scenario")
        return {"known": False, "why": f"unknown: {reason} (the floor is not invented)"}
    how = "; ".join(ESTIMATORS.get(n).how for n in sorted(used))
    out = {"known": True, "estimator": sorted(used), "how": how, "replicates": REPLICATES, "seed": SEED,
           "per_scenario": per, "aggregate": aggregate(per, metrics)}
    if unknown:
        out["unknown_scenarios"] = unknown
    retested = retest_perfect(data, split)
    if retested is not None:
        out["perfect_retest"] = retested
    if perfect and len(perfect) == len(per):
        out["perfect"] = {"known": True, "how": PERFECT_HOW, "per_scenario": perfect,
                          "aggregate": aggregate(perfect, metrics)}
    else:
        out["perfect"] = {"known": False, "why": "unknown: the source does not say how many runs each recorded "
                                                 "figure averages"}
    return out


RETEST_HOW = ("a predictor that knows each network's true latency, scored against the released label, the label's "
              "own error estimated from a second session (pipelines/retest.py): log(retest / released) around the "
              "session's median, over sqrt 2 (both sessions' errors taken as independent and alike); it includes "
              "the wander over the hours of a sweep that between_cv, one pair's few minutes, does not see")


def retest_perfect(data: Any, split: Any) -> dict[str, Any] | None:
    """The perfect predictor from the release's retest (``retest.csv`` beside the dataset,
    pipelines/retest.py), per scenario whose every test network was measured again in one
    session (the latest such session); None where the dataset has no retest. The aggregate is
    given only when every scenario of the track was retested."""
    from pipelines.control import read_history
    from pipelines.retest import HISTORY, label_error, residuals

    root = getattr(data.dataset, "path", None)
    if root is None or not (Path(root) / HISTORY).is_file():
        return None
    rows = read_history(Path(root) / HISTORY)
    metrics = tuple(data.track.metrics)
    per, sessions = {}, {}
    for sid in data.scenario_ids:
        e = data.measured(sid)
        e = e[e["name"].isin(set(split.test_names(sid)))]
        need = set(e["model_id"])
        by_session: dict[str, dict[str, float]] = {}
        for r in rows:
            if r["scenario_id"] == sid and r["model_id"] in need:
                by_session.setdefault(r["session"], {})[r["model_id"]] = float(r["latency_ms"])
        full = sorted(s for s, got in by_session.items() if set(got) == need)
        if not need or not full:
            continue
        again = by_session[full[-1]]
        label = e["latency_ms"].to_numpy("float64")
        _, res = residuals([again[m] / v for m, v in zip(e["model_id"], label)])
        per[sid] = compute(label, label * np.exp(-np.array([label_error(x) for x in res])), metrics)
        sessions[sid] = full[-1]
    if not per:
        return None
    out = {"known": True, "how": RETEST_HOW, "per_scenario": per, "sessions": sessions,
           "aggregate": aggregate(per, metrics) if len(per) == len(data.scenario_ids) else {}}
    if len(per) < len(data.scenario_ids):
        out["not_retested"] = sorted(set(data.scenario_ids) - set(per))
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


__all__ = ["ESTIMATORS", "Estimator", "estimator_for", "retest_perfect", "simulate", "simulate_perfect", "track_floor",
           "write_noise_floor",
           "SEED", "REPLICATES"]
