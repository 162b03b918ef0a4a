"""Benchmark of the measuring instrument: profiler overhead, and pairs per minute with adaptive
versus fixed stopping at the same confidence-interval width.

    python benchmarks/bench_measure.py [--models 8] [--cores 1large]

Needs generated and exported networks (``make run``, or ``latbench generate`` + ``export``).

1. Profiler overhead per granularity, measured in-process by the runtime (``--overhead-pairs``:
   rounds of alternating runs of the same model): e2e mode against runs timed as one block
   (no per-run clock reads, no record hand-off), op and kernel modes against a second compiled
   model without the profiler. Goal (nnPerf reports 0.2%): e2e within 0.5%.
2. Stopping rules (issue goal: adaptive needs at most half the runs of a fixed 50-run protocol
   for the same interval width): the fixed protocol (50 runs in 5 interleaved processes) is run
   first; the width it guarantees for 90% of the pairs (the 90th percentile of the relative CI
   widths it reached: a fixed run count must be sized for the hard pairs) becomes the adaptive
   target; then the adaptive protocol (processes of 10 runs, at least 2, until the pooled
   median's CI is that narrow), which stops early on the easy pairs.
   Printed: runs per pair, pairs per minute, widths reached.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.config import load_params  # noqa: E402
from pipelines.measure import run_measure  # noqa: E402
from pipelines.runners.litert import run_native  # noqa: E402


def pick_models(data: Path, n: int) -> list[str]:
    """The n smallest exported networks by FLOPs with a tflite_fp32 artifact (fast to run)."""
    import csv

    rows = list(csv.DictReader((data / "models" / "index.csv").open()))
    rows = [r for r in rows if (data / "artifacts" / r["model_id"] / "tflite_fp32.tflite").is_file()]
    rows.sort(key=lambda r: int(r["flops"]))
    # spread over sizes: every k-th of the sorted list
    step = max(len(rows) // n, 1)
    return [r["model_id"] for r in rows[::step][:n]]


def overhead(data: Path, models: list[str], cpus: list[int], pairs: int) -> None:
    print(f"== profiler overhead ({len(models)} models, cpus {cpus}, {pairs} rounds each)")
    print(f"{'model':<18}{'e2e ms':>9}{'e2e mode':>10}{'op mode':>10}{'kernel':>10}")
    ratios = {"e2e": [], "op": [], "kernel": []}
    for mid in models:
        art = data / "artifacts" / mid / "tflite_fp32.tflite"
        row = {}
        for mode in ("e2e", "op", "kernel"):
            run = run_native(art, cpus=cpus, threads=len(cpus), mode=mode, warmup=5, runs=5, overhead_pairs=pairs)
            ov = run.overhead
            row[mode] = ov["ratio"]
            ratios[mode].append(ov["ratio"])
            if mode == "e2e":
                ms = ov["median_unprofiled_ns"] / 1e6
        print(f"{mid:<18}{ms:>9.3f}" + "".join(f"{row[m]:>10.4f}" for m in ("e2e", "op", "kernel")))
    med = {m: statistics.median(v) for m, v in ratios.items()}
    print("median ratio (instrumented / uninstrumented): "
          + ", ".join(f"{m} {v:.4f} ({(v - 1) * 100:+.2f}%)" for m, v in med.items()))
    print(f"goal e2e within 0.5%: {'met' if abs(med['e2e'] - 1) <= 0.005 else 'NOT met'}")


def stopping(cfg, models: list[str], cores: str) -> None:
    print(f"== stopping rules ({len(models)} models, {cores})")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-measure-") as tmp:
        cfg.measure.models = models
        cfg.measure.granularities = ["e2e"]
        cfg.measure.stopping.policy = "fixed"
        cfg.measure.stopping.runs = 50
        cfg.measure.processes = 5
        t0 = time.perf_counter()
        r = run_measure(cfg, "tflite", "fp32", cores, out_root=Path(tmp) / "fixed", progress=False)
        results["fixed"] = (time.perf_counter() - t0, r)
        widths = [json.loads(p.read_text())["e2e"]["pooled"]["ci_rel_width"] for p in _records(r["out"])]
        target = float(np.percentile(widths, 90))
        cfg.measure.stopping.policy = "adaptive"
        cfg.measure.stopping.rel_width = round(target, 5)
        cfg.measure.stopping.batch = 10
        cfg.measure.stopping.max_processes = 10
        cfg.measure.processes = 2
        t0 = time.perf_counter()
        r = run_measure(cfg, "tflite", "fp32", cores, out_root=Path(tmp) / "adaptive", progress=False)
        results["adaptive"] = (time.perf_counter() - t0, r)
        print(f"target width (reached by fixed 50 runs for 90% of pairs): {target:.4f} of the median")
        print(f"{'policy':<10}{'pairs':>6}{'runs/pair':>11}{'pairs/min':>11}{'median width':>14}{'reached':>9}")
        runs = {}
        for name, (secs, r) in results.items():
            recs = [json.loads(p.read_text()) for p in _records(r["out"])]
            w = [x["e2e"]["pooled"]["ci_rel_width"] for x in recs]
            runs[name] = statistics.mean(x["protocol"]["stopping"]["runs"] for x in recs)
            reached = sum(v <= target + 1e-12 for v in w) / len(w)
            print(f"{name:<10}{len(recs):>6}{runs[name]:>11.1f}{len(recs) / secs * 60:>11.1f}"
                  f"{statistics.median(w):>14.4f}{reached:>9.0%}")
        ratio = runs["adaptive"] / runs["fixed"]
        print(f"adaptive / fixed runs: {ratio:.2f} (goal <= 0.5: {'met' if ratio <= 0.5 else 'NOT met'})")


def _records(out: Path) -> list[Path]:
    return [p for p in out.glob("*.json") if p.name != "SCENARIO.json" and not p.name.endswith(
        (".error.json", ".trace.json"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=8, help="networks to measure (default: %(default)s)")
    ap.add_argument("--cores", default="1large", help="core set (default: %(default)s)")
    ap.add_argument("--pairs", type=int, default=30, help="overhead rounds per model (default: %(default)s)")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--skip-stopping", action="store_true")
    args = ap.parse_args()
    cfg = load_params()
    data = ROOT / cfg.data_dir
    models = pick_models(data, args.models)
    if not models:
        print("no exported networks: run `make run` (or latbench generate + export) first", file=sys.stderr)
        return 2
    from pipelines.devices import make_device

    cpus = list(__import__("pipelines.measure", fromlist=["x"]).stage_scenario(
        make_device(cfg.device), "tflite", "fp32", args.cores).scenario.cpus)
    if not args.skip_overhead:
        overhead(data, models, cpus, args.pairs)
    if not args.skip_stopping:
        stopping(cfg, models, args.cores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
