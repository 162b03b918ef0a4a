"""The runtimes side by side: each one's profiler overhead and pairs per minute, in one run.

    python benchmarks/bench_runtimes.py [--params params.yaml] [--models 8] [--cores 1large] [--pairs 20]
                                        [--frameworks tflite,onnxruntime,executorch,pytorch] [--granularities e2e]

Needs networks exported for every framework's fp32 format (``make run`` exports the tour's
NAS-Bench-201 cells and imported CNNs for all four; ``--params data/release.params.yaml`` reads
the release sweep's). The networks are the ``--models`` with every artifact, spread over FLOPs.

1. **Overhead** of each runtime's instrument, measured in-process by its own worker with
   ``--overhead-pairs`` (rounds alternating two conditions of the same model; the runtimes take
   turns network by network, so a slow phase of the machine hits all of them): e2e mode times
   runs one by one against runs timed as one block (what the instrument adds to a run: clock
   reads, records); op and kernel modes run the profiled model against a twin without the
   profiler. Printed per runtime and mode: the median over networks of (ratio - 1) with its
   interquartile range. Goal: e2e mode within 0.5% for every runtime (nnPerf reports 0.231%).
2. **Pairs per minute** at one protocol: the measure stage (fresh pinned processes, the
   configured stopping rule and load checks) on the same networks for each runtime, scenario
   after scenario, by wall time (process start-up included: a Python runtime's processes are
   forks of its zygote, ``pipelines/runners/zygote.py``). ``--granularities e2e`` (default)
   compares the one granularity every runtime has; ``all`` adds the op and kernel processes each
   runtime offers, as a release point measures them. Goal: within 20% of LiteRT's.

The load average before and after each part is printed: figures read on a loaded machine are not
the instrument's.
"""
from __future__ import annotations

import argparse
import copy
import csv
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.artifacts import artifact_path  # noqa: E402
from pipelines.config import load_params  # noqa: E402
from pipelines.devices import make_device  # noqa: E402
from pipelines.measure import run_measure, stage_scenario  # noqa: E402
from pipelines.runners import RUNNERS, frameworks  # noqa: E402

MODES = ("e2e", "op", "kernel")


def pick_models(data: Path, fws: list[str], n: int) -> list[str]:
    """``n`` networks with every framework's fp32 artifact, spread over FLOPs."""
    rows = list(csv.DictReader((data / "models" / "index.csv").open()))
    fmts = [RUNNERS[(f, "cpu")].formats["fp32"] for f in fws]
    rows = [r for r in rows if all(artifact_path(data / "artifacts", r["model_id"], f).is_file() for f in fmts)]
    rows.sort(key=lambda r: int(r["flops"]))
    step = max(len(rows) // n, 1) if n else 1
    return [r["model_id"] for r in rows[::step][:n]]


def _quartiles(v: list[float]) -> tuple[float, float, float]:
    if len(v) < 2:
        x = v[0] if v else float("nan")
        return x, x, x
    q = statistics.quantiles(v, n=4)
    return q[0], statistics.median(v), q[2]


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def overhead(cfg, data: Path, models: list[str], fws: list[str], cores: str, pairs: int) -> dict:
    device = make_device(cfg.device)
    print(f"== instrument overhead ({len(models)} networks, {cores}, {pairs} rounds each; {load()})")
    ratios: dict[tuple[str, str], list[float]] = {}
    launchers = {f: RUNNERS[(f, "cpu")].launcher() for f in fws}
    for k, mid in enumerate(models, 1):
        for fw in fws:  # the runtimes take turns on each network
            runner = RUNNERS[(fw, "cpu")]
            sc = stage_scenario(device, fw, "fp32", cores).scenario
            art = artifact_path(data / "artifacts", mid, runner.formats["fp32"])
            for mode in MODES:
                if mode not in runner.granularities:
                    continue
                with tempfile.TemporaryDirectory(prefix="bench-runtimes-") as tmp:
                    run = launchers[fw](art, scenario=sc, cpus=list(sc.cpus), mode=mode, warmup=5, runs=5,
                                        overhead_pairs=pairs, records_path=Path(tmp) / "r.jsonl", timeout=900)
                ov = run.overhead or {}
                if ov.get("ratio"):
                    ratios.setdefault((fw, mode), []).append(ov["ratio"] - 1)
        print(f"  {k}/{len(models)} {mid} done", flush=True)
    print(f"{'runtime':<14}" + "".join(f"{m + ' (IQR)':>26}" for m in MODES))
    met = True
    for fw in fws:
        cells = []
        for mode in MODES:
            v = ratios.get((fw, mode))
            if not v:
                cells.append(f"{'not offered' if mode not in RUNNERS[(fw, 'cpu')].granularities else '-':>26}")
                continue
            lo, med, hi = _quartiles(v)
            cells.append(f"{100 * med:>+10.2f}% ({100 * lo:+.2f}..{100 * hi:+.2f})")
        print(f"{fw:<14}" + "".join(cells))
        e2e = ratios.get((fw, "e2e"))
        met &= bool(e2e) and abs(statistics.median(e2e)) <= 0.005
    print(f"goal: e2e mode within 0.5% for every runtime: {'met' if met else 'NOT met'} (median over networks; "
          f"{load()})")
    return ratios


def pairs_per_minute(cfg, models: list[str], fws: list[str], cores: str, granularities: str) -> dict[str, float]:
    print(f"== pairs per minute ({len(models)} networks, {cores}, granularities {granularities}; {load()})")
    rates = {}
    print(f"{'runtime':<14}{'pairs':>7}{'seconds':>10}{'pairs/min':>11}{'vs LiteRT':>11}{'runs made':>11}")
    with tempfile.TemporaryDirectory(prefix="bench-runtimes-") as tmp:
        for fw in fws:
            c = copy.deepcopy(cfg)
            c.measure.models = models
            c.measure.sources = []
            c.measure.runner_sources = {}  # the main job's tour narrows some runners' sources
            c.measure.points = {}
            offered = list(RUNNERS[(fw, "cpu")].granularities)
            c.measure.granularities = ["e2e"] if granularities == "e2e" else offered
            if getattr(c, "release", None) is not None:
                c.release.reuse = False  # measure every pair, released or not
            t0 = time.perf_counter()
            r = run_measure(c, fw, "fp32", cores, out_root=Path(tmp) / fw, progress=False)
            secs = time.perf_counter() - t0
            done = r["ok"]
            rates[fw] = done / secs * 60 if secs > 0 else 0.0
            base = rates.get("tflite")
            print(f"{fw:<14}{done:>7}{secs:>10.1f}{rates[fw]:>11.1f}"
                  f"{(f'{rates[fw] / base:.2f}x' if base else '-'):>11}{r['runs_made']:>11}"
                  + (f"  ({r['failed']} failed)" if r["failed"] else ""), flush=True)
    if not rates.get("tflite"):
        print(f"goal: within 20% of LiteRT's pairs per minute: no LiteRT pair measured ({load()})")
    else:
        slow = [f for f in fws if f != "tflite" and rates[f] < 0.8 * rates["tflite"]]
        print(f"goal: within 20% of LiteRT's pairs per minute: {'met' if not slow else 'NOT met by ' + ', '.join(slow)}"
              f" ({load()})")
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=str(ROOT / "params.yaml"), help="composed parameters (default: %(default)s)")
    ap.add_argument("--models", type=int, default=8, help="networks (default: %(default)s)")
    ap.add_argument("--cores", default="1large", help="core set (default: %(default)s)")
    ap.add_argument("--pairs", type=int, default=20, help="overhead rounds per network and mode (default: %(default)s)")
    ap.add_argument("--frameworks", default=",".join(frameworks()), help="runtimes (default: %(default)s)")
    ap.add_argument("--granularities", choices=("e2e", "all"), default="e2e",
                    help="what the pairs-per-minute part measures (default: %(default)s)")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--skip-rate", action="store_true")
    args = ap.parse_args()
    cfg = load_params(args.params)
    data = ROOT / cfg.data_dir
    fws = [f for f in args.frameworks.split(",") if f]
    unknown = [f for f in fws if (f, "cpu") not in RUNNERS]
    if unknown:
        print(f"--frameworks: no CPU runner for {', '.join(unknown)} (known: {', '.join(frameworks())})", file=sys.stderr)
        return 2
    models = pick_models(data, fws, args.models)
    if not models:
        print(f"no network in {data} has every fp32 artifact of {', '.join(fws)}: run `make run` first", file=sys.stderr)
        return 2
    if not args.skip_overhead:
        overhead(cfg, data, models, fws, args.cores, args.pairs)
    if not args.skip_rate:
        pairs_per_minute(cfg, models, fws, args.cores, args.granularities)
    return 0


if __name__ == "__main__":
    sys.exit(main())
