"""What the torch zygote saves per PyTorch process, and whether it moves the latency.

    python benchmarks/bench_torch_zygote.py [--artifacts data/release/artifacts] [--models 30]
                                             [--processes 3] [--cpu 1]

For each of the first N TorchScript fp32 artifacts (``<artifacts>/<id>/torchscript_fp32.pt``,
input shape from the export's sidecar), 2 x P processes on one pinned CPU, alternating a fresh
interpreter (``python -m pipelines.runners.torch``: imports torch itself) and a fork of the
zygote (the measure stage's way). Prints per way: the wall time of a process (start to records
read), the between-process spread of each network's per-process medians (coefficient of
variation, median over networks: the noise floor), and the zygote's latency over the fresh
interpreter's per network (median of its per-process medians; median and quartiles over the
networks). A shift beyond the noise floor would mean the two ways measure different things.
Run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.runners import torch as trn  # noqa: E402
from pipelines.runners.records import read_records  # noqa: E402
from pipelines.runners.torch_zygote import run_torch, zygote, zygote_env  # noqa: E402

WARMUP, RUNS = 3, 30


def exec_process(model: Path, cpu: int, records: Path) -> list[int]:
    argv = trn.build_argv(model, records=records, cpus=[cpu], warmup=WARMUP, runs=RUNS)
    subprocess.run(argv, check=True, capture_output=True, env=zygote_env(), timeout=600)  # the same allocator
    return [r["duration_ns"] for r in read_records(records) if r.get("type") == "run" and r["phase"] == "timed"]


def zygote_process(model: Path, cpu: int, records: Path) -> list[int]:
    return run_torch(model, cpus=[cpu], warmup=WARMUP, runs=RUNS, records_path=records).durations_ns()


WAYS = {"exec": exec_process, "zygote": zygote_process}


def cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.mean(values)


def quartiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", type=Path, default=ROOT / "data" / "release" / "artifacts")
    ap.add_argument("--models", type=int, default=30, help="networks (the first N with a TorchScript fp32 file)")
    ap.add_argument("--processes", type=int, default=3, help="processes per way per network")
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)), help="the pinned CPU")
    args = ap.parse_args()
    models = sorted(args.artifacts.glob("*/torchscript_fp32.pt"))[: args.models]
    if not models:
        print(f"{args.artifacts}: no */torchscript_fp32.pt (export the synthetic networks first)", file=sys.stderr)
        return 2
    zygote()  # started (torch imported) before any timing, as in a sweep
    walls: dict[str, list[float]] = {w: [] for w in WAYS}
    medians: dict[str, dict[Path, list[float]]] = {w: {m: [] for m in models} for w in WAYS}
    with tempfile.TemporaryDirectory() as tmp:
        for i, model in enumerate(models):
            for p in range(args.processes):
                for way, fn in (WAYS.items() if p % 2 == 0 else reversed(WAYS.items())):
                    t0 = time.monotonic()
                    durs = fn(model, args.cpu, Path(tmp) / f"{way}.jsonl")
                    walls[way].append(time.monotonic() - t0)
                    medians[way][model].append(statistics.median(durs) / 1e6)
            print(f"\r{i + 1}/{len(models)} networks", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"{len(models)} networks x {args.processes} processes per way, CPU {args.cpu}, "
          f"{WARMUP} warm-up + {RUNS} timed runs")
    print("| way | wall per process (s, median) | noise floor (between-process CV, median over networks) |")
    print("|---|---|---|")
    for way in WAYS:
        floor = statistics.median(cv(v) for v in medians[way].values())
        print(f"| {way} | {statistics.median(walls[way]):.2f} | {floor:.2%} |")
    ratio = [statistics.median(medians["zygote"][m]) / statistics.median(medians["exec"][m]) for m in models]
    print(f"zygote / exec latency per network: {quartiles(ratio)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
