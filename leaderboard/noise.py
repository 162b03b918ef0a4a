"""The noise references of a track: the noise floor and the perfect predictor's score.

The noise floor is how well one independent measurement of a network predicts another: the
agreement between two measurements of the same network in the same scenario, scored with the
track's own metrics (MAPE, +-10% accuracy, Spearman, ...) on the track's test networks. It
says how far re-measuring would move the figures. It is not quite a bound on predictors: where
each recorded headline pools several measurements (the suite's median of processes), a
predictor is scored against that steadier headline and can come closer than one measurement
comes to another (host-random's fp32 2-large: 75% within 10% against a floor of 64%). The
perfect predictor's score, below, estimates the bound.

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

Beside the floor, a track gets the score of a **perfect predictor** where the source says how its
headline was formed: a predictor that knows each network's true latency is still scored against
the recorded headline, which carries its own measuring noise. The suite's headline is the median
of ``processes`` per-process medians, so the perfect predictor is simulated as the centre against
the median of that many draws with the spread above. It estimates the best score a predictor can
get on the track: a goal well above it (say 99% within 10% on a scenario whose slowest networks
scatter by 20% between processes) cannot be met by predicting better, only by measuring each
test network more times. It is an estimate under a model, and a pessimistic one where the spread
is one outlying process among three to five (a process slowed by a neighbour): between_cv, a
standard deviation, grows with the outlier, while the median the headline takes ignores it; the
lognormal draws with that spread move the simulated median as the real one did not. So an entry
can pass it: nnmeter_xnnpack on host-random's fp32 2-large scenario, 90% within 10% against the
estimate's 88% (between_cv there ranges from 1% to 22% between the 10th and 90th percentile of
rows, far wider than three to five samples of one spread would give). The USC CSVs do not say how
many runs their means average, so their tracks' perfect predictor is unknown.

Where the release holds a **retest** (``retest.csv`` beside the dataset, pipelines/retest.py:
the test networks measured again in a later session), a second perfect predictor,
``perfect_retest``, is estimated from it per retested scenario: each network's log(retest /
released) around the session's median ratio is taken as the sum of two independent, alike label
errors, so a label's own error is that residual over sqrt 2, and the true latency is the label
with it removed. Unlike the estimate above it sees what moves a label over the hours a sweep
takes (the machine's wander between the networks' turns), which between_cv, the spread of one
pair's processes within minutes, cannot; it is an estimate too (alike errors, a median factor).

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
