"""Across runtimes on the host (track host-framework-transfer-n10): how much of a network's
latency on a target runtime its LiteRT latency on the same device says, from the committed
release and entries.

Prints, per target runtime scenario:
- the runtime ratio (target / LiteRT counterpart) over the networks both measured: median,
  10th-90th percentile, and the correlation of the two latencies in log space;
- the ceiling of a predictor that reads the LiteRT latency alone: a log-log line fitted on *every*
  network outside the track's test set (not 10), scored on the test set, and the same line fitted
  on the test set itself (no predictor of the LiteRT latency alone does better in log terms);
- the board's entries on the track (mean +- sd over the draws) beside the entries of the
  in-distribution track of the same scenario (host-onnxruntime: 900 networks of the target
  runtime, no LiteRT latency needed) and the scenario's noise floor (the leaderboard's).

    python benchmarks/bench_framework_transfer.py [--dataset datasets/host-v1] [--entries leaderboard/entries/host]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# this checkout's packages, not those of the checkout the virtualenv was installed from
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TRACK = "host-framework-transfer-n10"
IN_DISTRIBUTION = {"onnxruntime": "host-onnxruntime", "executorch": "host-executorch"}  # target framework -> its own host track


def _mape(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(np.abs(p - y) / y) * 100)


def ceiling(ds, data, split, sid: str, src: str) -> dict[str, float]:
    """The LiteRT-only figures of one target scenario (see the module doc)."""
    e = ds.e2e
    t = e[e["scenario_id"] == sid].set_index("model_id")["latency_ms"]
    s = e[e["scenario_id"] == src].set_index("model_id")["latency_ms"]
    both = t.index.intersection(s.index)
    test = [m for m in data.ids(split.for_scenario(sid)[0].test) if m in both]
    rest = [m for m in both if m not in set(test)]
    ratio = (t[both] / s[both]).to_numpy()
    lt, ls = np.log(t), np.log(s)
    b, a = np.polyfit(ls[rest], lt[rest], 1)
    b2, a2 = np.polyfit(ls[test], lt[test], 1)
    y = t[test].to_numpy()
    return {"networks": len(both), "ratio_median": float(np.median(ratio)), "ratio_p10": float(np.percentile(ratio, 10)),
            "ratio_p90": float(np.percentile(ratio, 90)), "log_corr": float(np.corrcoef(ls[both], lt[both])[0, 1]),
            "fit_rest_mape": _mape(y, np.exp(a + b * ls[test].to_numpy())),
            "fit_test_mape": _mape(y, np.exp(a2 + b2 * ls[test].to_numpy())), "rest": len(rest), "test": len(test)}


def entries(folder: Path, ds, track: str) -> pd.DataFrame:
    """Per entry: MAPE and +-10% on ``track``, mean and sd over its folds (one fold: sd 0)."""
    from leaderboard.metrics import compute

    truth = ds.e2e[["scenario_id", "model_id", "latency_ms"]]
    rows = []
    for f in sorted(folder.glob("*/predictions.parquet")):
        p = pd.read_parquet(f)
        p = p[p["track"] == track]
        if p.empty:
            continue
        p = p.merge(truth, on=["scenario_id", "model_id"])
        if "fold" not in p.columns or p["fold"].isna().all():
            p = p.assign(fold=0)
        per = [compute(g["latency_ms"].to_numpy(), g["predicted_ms"].to_numpy(), ("mape", "acc10"))
               for _, g in p.groupby("fold")]
        m = np.array([[d["mape"], d["acc10"] * 100] for d in per])
        rows.append({"entry": f.parent.name, "mape": m[:, 0].mean(), "mape_sd": m[:, 0].std(),
                     "acc10": m[:, 1].mean(), "folds": len(per)})
    return pd.DataFrame(rows).sort_values("mape").reset_index(drop=True) if rows else pd.DataFrame()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="datasets/host-v1")
    ap.add_argument("--entries", default="leaderboard/entries/host")
    args = ap.parse_args(argv)
    from leaderboard.noise import track_floor
    from leaderboard.protocols import counterpart
    from leaderboard.tracks import TRACKS, compute_split, resolve

    track = TRACKS.get(TRACK)
    data = resolve(track, {"host": args.dataset})
    split = compute_split(data)
    ds = data.dataset
    fw = track.params["source_framework"]
    for sid in data.scenario_ids:
        src = counterpart(ds, sid, fw)
        c = ceiling(ds, data, split, sid, src)
        print(f"{sid} from {src}: {c['networks']} networks measured on both")
        print(f"  runtime ratio (target / {fw}): median {c['ratio_median']:.2f}, 10th-90th percentile "
              f"{c['ratio_p10']:.2f}-{c['ratio_p90']:.2f}; log-latency correlation {c['log_corr']:.3f}")
        print(f"  {fw} latency alone, a log-log line fitted on the {c['rest']} networks outside the test set: "
              f"MAPE {c['fit_rest_mape']:.1f}% on the {c['test']} test networks "
              f"(fitted on the test set itself: {c['fit_test_mape']:.1f}%)")
    floor = track_floor(data, split)
    if floor["known"]:
        per = ", ".join(f"{sid} {m['mape']:.2f}%" for sid, m in floor["per_scenario"].items())
        print(f"noise floor (MAPE of one measurement against another, the test networks): {per}")
    else:
        print(f"noise floor: {floor['why']}")
    frameworks = set(ds.scenarios.set_index("scenario_id").loc[data.scenario_ids, "framework"])
    for name in (TRACK, *[IN_DISTRIBUTION[f] for f in sorted(frameworks) if f in IN_DISTRIBUTION]):
        df = entries(Path(args.entries), ds, name)
        print(f"\n{name}: {len(df)} entries (MAPE %, mean +- sd over the folds; +-10% accuracy)")
        for r in df.itertuples():
            print(f"  {r.entry:22s} {r.mape:7.2f} +- {r.mape_sd:5.2f}   {r.acc10:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
