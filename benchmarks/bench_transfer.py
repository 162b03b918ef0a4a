"""Cross-device transfer on HELP's devices (tracks help-transfer-n10 and -n20), from the committed
public entries: per device and N, each entry's Spearman as mean +- standard deviation over the
seeds (one fold per seed), MAPE and the share within +-10%, beside the published HELP (Table 3,
N=10) and NASFLAT (N=10, 20) figures and issue 17's goal (the better of the two at N=10).

    python benchmarks/bench_transfer.py [--dataset data/public] [--entries leaderboard/entries/public]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# this checkout's packages, not those of the checkout the virtualenv was installed from
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TRACKS = {10: "help-transfer-n10", 20: "help-transfer-n20"}
DEVICES = {"gold_6226": "help-gold6226-cpu", "pixel2": "help-pixel2-cpu", "raspi4": "help-raspi4-cpu",
           "eyeriss": "help-eyeriss-asic"}
GOAL_N10 = {"gold_6226": 0.989, "pixel2": 0.951, "raspi4": 0.890, "eyeriss": 0.957}  # issue 17
PUBLISHED_ROWS = {10: ("help-help-10-transfer", "nasflat-10-transfer"), 20: ("nasflat-20",)}  # the rows beside these tracks


def truth(dataset: Path) -> pd.DataFrame:
    """Measured e2e latency of the HELP scenarios (only those rows are read)."""
    e = pd.read_parquet(dataset / "e2e.parquet", columns=["scenario_id", "model_id", "latency_ms"],
                        filters=[("scenario_id", "in", list(DEVICES.values()))])
    return e


def scores(entries: Path, measured: pd.DataFrame) -> pd.DataFrame:
    """One row per (entry, N, device, fold): spearman, mape, acc10."""
    from leaderboard.metrics import compute

    rows = []
    for f in sorted(entries.glob("*/predictions.parquet")):
        p = pd.read_parquet(f)
        p = p[p["track"].isin(TRACKS.values())]
        if p.empty:
            continue
        if "fold" not in p.columns:
            raise SystemExit(f"{f}: transfer-track rows without a fold column (retrain the entry)")
        p = p.merge(measured, on=["scenario_id", "model_id"])
        for (track, sid, fold), g in p.groupby(["track", "scenario_id", "fold"]):
            m = compute(g["latency_ms"].to_numpy(), g["predicted_ms"].to_numpy(), ("spearman", "mape", "acc10"))
            n = next(k for k, v in TRACKS.items() if v == track)
            dev = next(k for k, v in DEVICES.items() if v == sid)
            rows.append({"entry": f.parent.name, "n": n, "device": dev, "fold": int(fold), **m})
    return pd.DataFrame(rows)


def published(n: int) -> dict[str, dict[str, float | None]]:
    try:
        from leaderboard.published import PUBLISHED
    except ImportError:  # the registry of published rows is newer than this checkout
        return {}
    out = {}
    for name in PUBLISHED_ROWS[n]:
        if name in PUBLISHED:
            row = PUBLISHED.get(name)
            out[row.method] = {d: row.values.get(s) for d, s in DEVICES.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="data/public")
    ap.add_argument("--entries", default="leaderboard/entries/public")
    a = ap.parse_args()
    df = scores(Path(a.entries), truth(Path(a.dataset)))
    if df.empty:
        raise SystemExit(f"{a.entries}: no entry on {', '.join(TRACKS.values())} yet "
                         "(leaderboard-train predictor=<p> track=help-transfer-n10 out=leaderboard/entries/public)")
    for n, track in TRACKS.items():
        d = df[df["n"] == n]
        if d.empty:
            print(f"\n{track}: no entries")
            continue
        seeds = d.groupby(["entry", "device"])["fold"].nunique().min()
        print(f"\n{track}: Spearman mean +- std over {seeds} seeds (MAPE %, within +-10 %), 800 test architectures per device")
        print(f"{'entry':<28}" + "".join(f"{dev:>26}" for dev in DEVICES) + f"{'mean':>9}")
        order = d.groupby("entry")["spearman"].mean().sort_values(ascending=False).index
        for entry in order:
            g = d[d["entry"] == entry].groupby("device")
            cells = []
            for dev in DEVICES:
                if dev not in g.groups:
                    cells.append(f"{'-':>26}")
                    continue
                x = g.get_group(dev)
                cells.append(f"{x['spearman'].mean():.3f}+-{x['spearman'].std(ddof=0):.3f} "
                             f"({x['mape'].mean():4.1f}%,{x['acc10'].mean() * 100:3.0f}%)".rjust(26))
            print(f"{entry:<28}" + "".join(cells) + f"{d[d['entry'] == entry]['spearman'].mean():>9.3f}")
        for method, vals in published(n).items():
            print(f"{('[published] ' + method)[:27]:<28}" + "".join(
                f"{(f'{vals[dev]:.3f}' if vals.get(dev) is not None else '-'):>26}" for dev in DEVICES))
        if n == 10:
            print(f"{'[goal, issue 17]':<28}" + "".join(f"{GOAL_N10[dev]:>26.3f}" for dev in DEVICES))
            best = d.groupby(["entry", "device"])["spearman"].mean().unstack()
            for entry in order[:1]:
                met = [dev for dev in DEVICES if best.loc[entry].get(dev, np.nan) >= GOAL_N10[dev]]
                print(f"best entry {entry}: goal met on {', '.join(met) or 'no device'} "
                      f"({len(met)} of {len(DEVICES)})")


if __name__ == "__main__":
    main()
