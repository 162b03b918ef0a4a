"""Prints how fast the predictor zoo answers (`latbench predict` and `leaderboard.zoo.Zoo.predict`).

- ``IR batch``: ``Zoo().predict(graphs, scenario)`` on ``--n`` NAS-Bench-201 cells already built
  as IR graphs (what a NAS loop holds): featurizing (op lists, interning of op configurations)
  and the zoo predictor of the scenario, one call. ``cold``: the first call (every op
  configuration new to the process); ``warm``: the same batch again.
- ``from a file``: ``load_model`` + ``predict`` of one IR JSON file, the per-call cost of
  ``latbench predict`` past Python's start-up, repeated ``--files`` times.

nn-Meter's predict on the same networks is timed by benchmarks/bench_predict.py in its own
environment (scripts/setup-nnmeter-env.sh); its figure there is the one to put beside these.

    python benchmarks/bench_zoo.py [--n 10000] [--scenario help-pixel2-cpu]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10000, help="cells in the batch (default: %(default)s)")
    ap.add_argument("--scenario", default="help-pixel2-cpu", help="zoo scenario (default: %(default)s)")
    ap.add_argument("--files", type=int, default=50, help="IR files predicted one by one (default: %(default)s)")
    a = ap.parse_args()

    from generators.nasbench201 import build
    from leaderboard.zoo import Zoo
    from pipelines.predict import load_model

    zoo = Zoo()
    zoo.predictor(a.scenario)  # loading the saved predictor is not part of the timed calls
    t = time.perf_counter()
    graphs = [build(i) for i in range(min(a.n, 15625))]
    build_s = time.perf_counter() - t
    print(f"scenario {a.scenario} ({zoo.entry(a.scenario)['predictor']}), {len(graphs)} NAS-Bench-201 cells, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"  building the IR graphs (the generator, not timed below): {build_s:.1f} s")
    for label in ("cold", "warm"):
        t = time.perf_counter()
        zoo.predict(graphs, a.scenario)
        s = time.perf_counter() - t
        print(f"  IR batch, {label}: {len(graphs) / s:,.0f} graphs/s ({s:.2f} s)")
    with tempfile.TemporaryDirectory() as d:
        paths = [graphs[i].save(Path(d) / f"m{i}.json") for i in range(min(a.files, len(graphs)))]
        t = time.perf_counter()
        for p in paths:
            zoo.predict([load_model(p)], a.scenario)
        s = time.perf_counter() - t
        print(f"  from a file (load + predict, one at a time): {len(paths) / s:,.0f} models/s")


if __name__ == "__main__":
    main()
