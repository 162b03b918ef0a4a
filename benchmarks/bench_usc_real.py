"""USC real CNNs on the usc-real-kfold track, from the committed public entries: per entry the mean
MAPE over the scenarios, Pixel 4 1-large fp32 MAPE and share within +-10%, the per-scenario MAPE
distribution of the best entry, and the scenarios where an entry is worse than FLOPs.

    python benchmarks/bench_usc_real.py [--dataset data/public] [--entries leaderboard/entries/public]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

TRACK = "usc-real-kfold"
FOCUS = "usc-pixel4-tflite-cpu-1large-fp32"


def per_scenario(entries: Path, truth: pd.DataFrame) -> dict[str, pd.DataFrame]:
    out = {}
    for f in sorted(entries.glob("*/predictions.parquet")):
        p = pd.read_parquet(f)
        p = p[p["track"] == TRACK].merge(truth, on=["model_id", "scenario_id"])
        if p.empty:
            continue
        p["ape"] = (p["predicted_ms"] - p["latency_ms"]).abs() / p["latency_ms"] * 100
        out[f.parent.name] = p.groupby("scenario_id")["ape"].agg(mape="mean", acc10=lambda a: (a <= 10).mean() * 100)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="data/public")
    ap.add_argument("--entries", default="leaderboard/entries/public")
    a = ap.parse_args()
    truth = pd.read_parquet(Path(a.dataset) / "e2e.parquet", columns=["model_id", "scenario_id", "latency_ms"])
    res = per_scenario(Path(a.entries), truth)
    print(f"| entry | scenarios | mean MAPE | CPU mean | GPU mean | {FOCUS} MAPE | within +-10% |\n"
          "|---|---:|---:|---:|---:|---:|---:|")
    for name, r in sorted(res.items(), key=lambda kv: kv[1]["mape"].mean()):
        f = r.loc[FOCUS] if FOCUS in r.index else None
        gpu = r.index.str.contains("-gpu-")  # the scenarios with op records (where entries differ most)
        print(f"| {name} | {len(r)} | {r['mape'].mean():.2f}% | {r['mape'][~gpu].mean():.2f}% | {r['mape'][gpu].mean():.2f}% | "
              f"{'-' if f is None else format(f['mape'], '.2f') + '%'} | {'-' if f is None else format(f['acc10'], '.1f') + '%'} |")
    best = min(res, key=lambda n: res[n]["mape"].mean())
    q = res[best]["mape"].quantile([0, 0.1, 0.25, 0.5, 0.75, 0.9, 1])
    print(f"\nper-scenario MAPE of {best}: " + ", ".join(f"p{int(k * 100)} {v:.1f}%" for k, v in q.items()))
    flops = res.get("flops")
    if flops is not None:
        for name, r in sorted(res.items()):
            worse = [s for s in r.index if s in flops.index and r.loc[s, "mape"] > flops.loc[s, "mape"]]
            if worse and name != "flops":
                print(f"{name} worse than flops on: {', '.join(worse)}")


if __name__ == "__main__":
    main()
