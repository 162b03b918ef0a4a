"""Why Pixel 2 is hard on the transfer tracks (issue 17): what HELP's test set allows on pixel2.

Prints, for the help-transfer-n10 test set of pixel2 (800 architectures): its distinct values and
range; how each source device's measured latency ranks it; the ceiling of models fitted on
pixel2's *own* latencies of every architecture outside the test set (a linear model of the op
counts, a LightGBM on the six edges, the same with the sources' latencies as inputs, the best
non-negative mix of the sources); the size of the residual and its correlation with the sources'
residuals; and, for NASFLAT's scoring (every architecture of the space, untrimmed), a 5-fold
LightGBM on pixel2's own latencies. Every figure is measured data; nothing is fitted on the test
architectures except where a line says "whole space, 5-fold".

    python benchmarks/bench_pixel2_ceiling.py [--dataset data/public]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# this checkout's packages, not those of the checkout the virtualenv was installed from
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET = "help-pixel2-cpu"
TRACK = "help-transfer-n10"
OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
COUNTED = ("nor_conv_3x3", "nor_conv_1x1", "avg_pool_3x3", "skip_connect")


def edges(arch: pd.Series) -> np.ndarray:
    """[n, 6] op codes of the NAS-Bench-201 cells (OPS order)."""
    return np.array([[OPS.index(t.split("~")[0]) for node in a.strip("|").split("|+|") for t in node.strip("|").split("|")]
                     for a in arch])


def lgbm(X: np.ndarray, y: np.ndarray):
    import lightgbm as lgb

    return lgb.LGBMRegressor(n_estimators=500, verbose=-1, deterministic=True, num_threads=1, seed=0).fit(X, np.log(y))


def main() -> None:
    from scipy.optimize import nnls

    from leaderboard.metrics import spearman
    from leaderboard.tracks import TRACKS, compute_split, resolve

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="data/public")
    a = ap.parse_args()
    data = resolve(TRACKS.get(TRACK), {"public": a.dataset})
    split = compute_split(data)
    sources = list(TRACKS.get(TRACK).params["sources"])
    ds = data.dataset
    e = ds.e2e.merge(ds.scenarios[["scenario_id", "device"]], on="scenario_id")
    wide = e.pivot_table(index="model_id", columns="device", values="latency_ms")
    m = ds.models.set_index("model_id").loc[wide.index]
    E = edges(m["arch"])
    counts = np.stack([(E == OPS.index(k)).sum(1) for k in COUNTED], 1).astype("float64")
    y = wide["pixel2"].to_numpy()
    test = m["name"].isin(set(split.test_names(TARGET))).to_numpy()
    rest = ~test
    src = {s: next(c for c in wide.columns if c.startswith(s)) for s in sources}
    S = np.stack([wide[src[s]].to_numpy() for s in sources], 1)

    print(f"{TRACK}, pixel2 test set: {test.sum()} architectures, {len(np.unique(y[test]))} distinct values, "
          f"{y[test].min():g}-{y[test].max():g} ms")
    print("sources' measured latency, Spearman on the test set: "
          + ", ".join(f"{s} {spearman(y[test], S[test, i]):.3f}" for i, s in enumerate(sources)))
    X = np.hstack([counts, np.ones((len(y), 1))])
    w = np.linalg.lstsq(X[rest], y[rest], rcond=None)[0]
    lin = X @ w
    print(f"ceiling, fitted on pixel2's {rest.sum()} other architectures: linear in op counts "
          f"{spearman(y[test], lin[test]):.3f} (ms per {', '.join(COUNTED)}: {', '.join(f'{v:.2f}' for v in w[:-1])}; "
          f"intercept {w[-1]:.2f})")
    print(f"  LightGBM on the 6 edges {spearman(y[test], lgbm(E[rest], y[rest]).predict(E[test])):.3f}; "
          f"with the sources' latencies as inputs "
          f"{spearman(y[test], lgbm(np.hstack([E, np.log(S)])[rest], y[rest]).predict(np.hstack([E, np.log(S)])[test])):.3f}")
    A = np.hstack([S, np.ones((len(y), 1))])
    ws, _ = nnls(A[rest], y[rest])
    print(f"  best non-negative mix of the sources' latencies {spearman(y[test], (A @ ws)[test]):.3f}")
    r = y[rest] - lin[rest]
    print(f"residual of the count model: {np.std(r):.2f} ms sd, {np.std(r / lin[rest]):.1%} of the prediction; "
          f"the count model rounded to whole ms against itself {spearman(lin[test], np.round(lin[test])):.3f}")
    idx = m["name"].str.slice(6).astype(int).to_numpy()
    order = np.argsort(idx)
    res_all = (y - lin)[order]
    print(f"  lag-1 autocorrelation along the NAS-Bench-201 index {np.corrcoef(res_all[:-1], res_all[1:])[0, 1]:.2f}")
    fold = np.random.default_rng(0).integers(0, 5, len(y))
    res = {}
    for dev in ["pixel2", *[src[s] for s in sources]]:
        v = wide[dev].to_numpy()
        pred = np.zeros(len(v))
        for k in range(5):
            pred[fold == k] = lgbm(E[fold != k], v[fold != k]).predict(E[fold == k])
        res[dev] = np.log(v) - pred
        if dev == "pixel2":
            print(f"whole space, 5-fold LightGBM on pixel2's own latencies (NASFLAT's scoring: all "
                  f"{len(v)}, untrimmed): {spearman(v, np.exp(pred)):.3f}")
    print("correlation of pixel2's residual (5-fold LightGBM, log) with the sources': "
          + ", ".join(f"{s} {np.corrcoef(res['pixel2'], res[src[s]])[0, 1]:+.3f}" for s in sources))
    print(f"the transfer predictor, fitted on each fold of {TRACK} as the board fits it, scored on "
          f"every architecture (NASFLAT's scoring): {transfer_on_whole_space(data, split, wide):s}")


def transfer_on_whole_space(data, split, wide: pd.DataFrame) -> str:
    """Spearman mean +- sd over the track's folds of ``transfer`` on pixel2, predicting all networks."""
    from leaderboard.baselines import Networks, make_predictor
    from leaderboard.metrics import spearman
    from leaderboard.run import board_view

    e = data.measured(TARGET)
    by_name = dict(zip(e["name"], e["model_id"]))
    every = tuple(wide.index)
    rho = []
    for f in split.for_scenario(TARGET):
        train = [by_name[n] for n in f.train]
        view = board_view(data, TARGET, train, [by_name[n] for n in f.test])
        X = Networks(view, tuple(train), TARGET)
        pred = make_predictor("transfer").fit(X, X.y()).predict(Networks(view, every, TARGET))
        rho.append(spearman(wide["pixel2"].to_numpy(), pred))
    return f"{np.mean(rho):.3f} +- {np.std(rho, ddof=1):.3f} over {len(rho)} folds"


if __name__ == "__main__":
    main()
