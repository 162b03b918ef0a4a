"""Prints how far ``latbench predict --scale-to-this-machine`` carries the host shelf's predictions
to this machine: the speed probe's ratio to the release's reference, and the MAPE of the
unscaled and the scaled predictions against what this machine measures.

What is done, on ``--scenario`` (a host CPU scenario; default host-tflite-cpu-1large-fp32):

- ``--n`` networks of the release (datasets/host-v1) that the scenario's shelf predictor held out
  (its ``held_out.json``: it never saw them) and whose ``.tflite`` the export stage left in
  ``data/release/artifacts/``, spread over their released latency (at most ``--max-ms``);
- each is measured here with ``latbench profile <file> --processes P`` (the measure stage's
  instrument: fresh pinned processes, the configured stopping rule, its load check; a network
  the load check refuses stops the benchmark, unless ``--allow-load`` keeps such processes, said
  in the output);
- each is predicted from its IR (``data/release/models/``) with the committed shelf, unscaled
  (the release machine's time) and scaled by the probe ratio ``shelf.machine.compare`` reads
  (what ``latbench predict --scale-to-this-machine`` prints);
- printed: per network the released, measured, predicted and scaled times; the MAPE of each
  prediction against the measured times; the probe ratio beside the measured ratio (this
  machine's time over the released one, median over the networks); the load average before and
  after.

    python benchmarks/bench_probe_scaling.py [--n 6] [--processes 3] [--scenario host-tflite-cpu-1large-fp32]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELEASE = "datasets/host-v1"


def mape(pred: list[float], true: list[float]) -> float:
    return 100 * statistics.fmean(abs(p - t) / t for p, t in zip(pred, true))


def candidates(sid: str, n: int, max_ms: float) -> list[dict]:
    """Held-out networks of the scenario's shelf entry with a released time and a .tflite here,
    ``n`` of them spread over their released latency."""
    import pandas as pd

    from shelf.store import HELD_OUT, Shelf

    shelf = Shelf()
    held = json.loads((shelf.folder / shelf.entry(sid)["folder"] / HELD_OUT).read_text())
    models = pd.read_parquet(ROOT / RELEASE / "models.parquet", columns=["model_id", "name", "source"])
    e2e = pd.read_parquet(ROOT / RELEASE / "e2e.parquet", columns=["model_id", "scenario_id", "latency_ms"])
    e = e2e[e2e["scenario_id"] == sid].merge(models, on="model_id")
    e = e[e["name"].isin(set(held["names"])) & (e["latency_ms"] <= max_ms)]
    e = e[[(ROOT / "data/release/artifacts" / m / "tflite_fp32.tflite").is_file() and
           (ROOT / "data/release/models" / s / f"{m}.json").is_file() for m, s in zip(e["model_id"], e["source"])]]
    e = e.sort_values("latency_ms").reset_index(drop=True)
    if len(e) == 0:
        return []
    picks = sorted({round(i * (len(e) - 1) / max(1, n - 1)) for i in range(n)})
    return e.iloc[picks].to_dict("records")


def measure(tflite: Path, out: Path, processes: int, allow_load: bool) -> float:
    """e2e median (ms) of ``latbench profile`` on this machine's 1-large core set."""
    cmd = [sys.executable, "-m", "pipelines.cli", "profile", str(tflite), "--out", str(out), "--processes",
           str(processes), "-q", *(["--allow-load"] if allow_load else [])]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        last = (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        sys.exit(f"{tflite}: latbench profile failed: {last[0]}")
    recs = [f for f in out.glob("*/*.json") if f.name.count(".") == 1 and f.name != "source.json"]
    if len(recs) != 1:
        sys.exit(f"{out}: expected one profile record, found {len(recs)}")
    return float(json.loads(recs[0].read_text())["e2e"]["latency_ms"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="host-tflite-cpu-1large-fp32")
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--processes", type=int, default=3, help="e2e processes per network (latbench profile)")
    ap.add_argument("--max-ms", type=float, default=60.0, help="leave out networks released slower than this")
    ap.add_argument("--allow-load", action="store_true",
                    help="pass --allow-load to latbench profile: keep processes its load check would measure again "
                    "(said in the output: the times are then a loaded machine's)")
    args = ap.parse_args()
    if not args.scenario.startswith("host-") or "-cpu-" not in args.scenario:
        sys.exit(f"--scenario {args.scenario!r}: a host CPU scenario (the probe times CPUs)")
    from generators.ir import Graph
    from shelf.machine import compare
    from shelf.store import Shelf

    load0 = os.getloadavg()
    print(f"load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} (1, 5, 15 min) on "
          f"{os.cpu_count()} CPUs")
    shelf = Shelf()
    entry = shelf.entry(args.scenario)
    (cmp,) = compare({args.scenario: entry})
    print("\n".join(cmp.lines(scaled=False)))
    ratio = cmp.ratio(args.scenario)
    if ratio is None:
        sys.exit(f"no probe ratio for {args.scenario}: {cmp.no_probe or 'no reference for its CPUs'}")
    nets = candidates(args.scenario, args.n, args.max_ms)
    if not nets:
        sys.exit(f"no held-out network of {args.scenario} with a .tflite in data/release/artifacts/")
    print(f"{args.scenario}: {len(nets)} networks the shelf's {entry['predictor']} held out, measured here with "
          f"`latbench profile --processes {args.processes}{' --allow-load' if args.allow_load else ''}`"
          f"{' (processes taken under load kept: times of a loaded machine)' if args.allow_load else ''}; probe ratio x{ratio:.3f} (this machine's probe over "
          f"the release's reference)")
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-probe-scaling-") as tmp:
        for i, n in enumerate(nets):
            here = measure(ROOT / "data/release/artifacts" / n["model_id"] / "tflite_fp32.tflite",
                           Path(tmp) / str(i), args.processes, args.allow_load)
            g = Graph.load(ROOT / "data/release/models" / n["source"] / f"{n['model_id']}.json")
            pred = float(shelf.predict([g], args.scenario)[0])
            rows.append((n["name"], float(n["latency_ms"]), here, pred, pred * ratio))
            print(f"  {n['name']:<24} released {n['latency_ms']:9.3f} ms  here {here:9.3f} ms  "
                  f"predicted {pred:9.3f} ms  scaled {pred * ratio:9.3f} ms", flush=True)
    released, here, pred, scaled = ([r[k] for r in rows] for k in (1, 2, 3, 4))
    print(f"MAPE against the times measured here: unscaled {mape(pred, here):.1f}%, scaled {mape(scaled, here):.1f}% "
          f"(the shelf's stated held-out MAPE on the release's machine: {entry['accuracy']['mape']:.1f}%)")
    print(f"the released times against those measured here: MAPE {mape(released, here):.1f}%; measured ratio (here "
          f"over released, median of {len(rows)}) x{statistics.median(h / r for h, r in zip(here, released)):.3f}, "
          f"probe ratio x{ratio:.3f}")
    load1 = os.getloadavg()
    print(f"load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {time.perf_counter() - t0:.0f} s of "
          f"measuring")


if __name__ == "__main__":
    main()
