"""What a release sweep costs and how quiet it was, read from a measurement folder.

    python benchmarks/bench_release.py [data/measurements/host]

Per scenario folder (one measure stage), from the records it kept and its measure.log:

- pairs per minute: the kept pairs over the wall time of their measuring processes (every
  e2e, op and kernel process, start-up included, from each process's load window), and
  seconds per pair split by granularity; also the sweep's own throughput (pairs over the
  time of the stage's sessions in measure.log, `start:` to `end:`), which adds the load
  retries, their pauses, refused attempts and the stage's own work;
- refused / re-measured: pairs failed as taken under load, processes measured again;
- the noise floor: the median, over the pairs, of the spread between independent processes
  (between_cv: coefficient of variation of the per-process medians), and its 90th percentile;
- the load the kept processes saw (largest share of the pinned cores other processes used, as
  the load check judges it: at most two clock ticks per core reads 0).

Records made before the measure stage read the load have no process wall times: those pairs
are counted, not timed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.machine_load import judged_share  # noqa: E402


def _records(folder: Path) -> tuple[list[dict], list[dict]]:
    recs, errs = [], []
    for p in sorted(folder.glob("*.json")):
        if p.name == "SCENARIO.json" or p.name.endswith(".trace.json"):
            continue
        d = json.loads(p.read_text())
        (errs if p.name.endswith(".error.json") else recs).append(d)
    return recs, errs


def _walls(rec: dict) -> dict[str, float]:
    """Wall seconds of the pair's kept processes per granularity (from their load windows)."""
    out = {"e2e": sum((p.get("load") or {}).get("wall_s", 0.0) for p in rec["e2e"].get("per_process", []))}
    for mode in ("op", "kernel"):
        if isinstance(rec.get(mode), dict):
            out[mode] = (rec[mode].get("load") or {}).get("wall_s", 0.0)
    return out


def _sweep_minutes(folder: Path) -> float | None:
    """Minutes the stage ran: the sum of its sessions (each `start:` to its `end:`), so a
    resumed sweep counts every session, refused attempts included. A session stopped by hand
    or by its budget writes no `end:`; it ends at its last logged line (counting it as ending
    at its start made a stage of interrupted sessions read 400 pairs a minute)."""
    log = folder / "measure.log"
    if not log.is_file():
        return None
    total, start, last = 0.0, None, None
    for line in log.read_text().splitlines():
        stamp, _, msg = line.partition(" ")
        t = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S")
        if msg.startswith("start:"):
            if start is not None:  # the previous session was interrupted
                total += (last - start).total_seconds()
            start = t
        elif msg.startswith("end:") and start is not None:
            total += (t - start).total_seconds()
            start = None
        last = t
    if start is not None:
        total += (last - start).total_seconds()
    return total / 60 if total > 0 else None


def _windows(rec: dict) -> list[dict]:
    """The observed load windows of a record's kept processes (e2e, op, kernel)."""
    ws = [p.get("load") for p in rec["e2e"].get("per_process", [])]
    ws += [rec[m].get("load") for m in ("op", "kernel") if isinstance(rec.get(m), dict)]
    return [w for w in ws if w and w.get("observed") and "foreign_busy_s" in w]


def scenario_figures(folder: Path) -> dict | None:
    info = json.loads((folder / "SCENARIO.json").read_text())
    if info.get("status") != "measured":
        return None
    recs, errs = _records(folder)
    walls = [_walls(r) for r in recs]
    timed = [w for w in walls if w["e2e"] > 0]
    total = sum(sum(w.values()) for w in timed)
    cvs = sorted(r["e2e"]["between_cv"] for r in recs if r["e2e"].get("between_cv") is not None)
    # every kept process's window, judged as the load check judges it (machine_load.judged_share):
    # the record's max_foreign_busy_frac keeps the raw share, 100% for a 10 ms process that saw
    # one foreign clock tick, which the check rightly ignores
    loads = [judged_share(w) for r in recs for w in _windows(r)]
    minutes = _sweep_minutes(folder)
    return {
        "scenario": folder.name, "pairs": len(recs), "failed": len(errs),
        "refused": sum(e.get("kind") == "loaded" for e in errs),
        "remeasured": sum((r.get("load") or {}).get("remeasured", 0) for r in recs),
        "timed_pairs": len(timed),
        "pairs_per_min": 60 * len(timed) / total if total > 0 else None,
        "s_per_pair": {g: statistics.mean(w.get(g, 0.0) for w in timed) for g in ("e2e", "op", "kernel")
                       if any(g in w for w in timed)} if timed else {},
        "sweep_pairs_per_min": len(recs) / minutes if minutes else None,
        "noise_floor_median": statistics.median(cvs) if cvs else None,
        "noise_floor_p90": cvs[min(len(cvs) - 1, int(0.9 * len(cvs)))] if cvs else None,
        "max_foreign_busy": max(loads) if loads else None,
    }


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", default=str(ROOT / "data" / "measurements" / "host"),
                    help="a device's measurement folder (default: data/measurements/host)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    root = Path(args.folder)
    if not root.is_dir():
        print(f"bench_release: {root}: no such measurement folder", file=sys.stderr)
        return 2
    figs = [f for f in (scenario_figures(d) for d in sorted(root.iterdir())
                        if (d / "SCENARIO.json").is_file()) if f]
    if args.json:
        print(json.dumps(figs, indent=1))
        return 0
    print(f"{'scenario':36} {'pairs':>5} {'refused':>7} {'remeas':>6} {'pairs/min':>9} {'sweep/min':>9} "
          f"{'s/pair e2e+op+kernel':>22} {'noise med':>9} {'p90':>6} {'others max':>10}")
    for f in figs:
        sp = f["s_per_pair"]
        split = "+".join(f"{sp[g]:.1f}" for g in ("e2e", "op", "kernel") if g in sp) or "-"
        ppm = f"{f['pairs_per_min']:.1f}" if f["pairs_per_min"] else "-"
        spm = f"{f['sweep_pairs_per_min']:.1f}" if f["sweep_pairs_per_min"] else "-"
        print(f"{f['scenario']:36} {f['pairs']:>5} {f['refused']:>7} {f['remeasured']:>6} {ppm:>9} {spm:>9} "
              f"{split:>22} {_pct(f['noise_floor_median']):>9} {_pct(f['noise_floor_p90']):>6} "
              f"{_pct(f['max_foreign_busy']):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
