"""Prints how fast the predictor shelf answers (`latbench predict` and `shelf.Shelf.predict`),
side by side with nn-Meter on the same networks.

- ``IR batch``: ``Shelf().predict(graphs, scenario)`` on ``--n`` NAS-Bench-201 cells (or, with
  ``--graphs transformer``, networks of the transformer space at 224x224) already built as IR
  graphs (what a NAS loop holds), one call. ``first scenario``: featurizing every graph
  (its op configurations, interned) + the scenario's predictor; ``each further scenario``: the
  same graphs in the next ``--scenarios`` (featurized graphs are remembered per graph object, so
  this is the predictor alone), i.e. what predicting a candidate on several phones costs.
- ``from a file``: ``load_model`` + ``predict`` of one IR JSON file at a time, the per-call cost of
  ``latbench predict`` past Python's start-up, ``--files`` times; the same for ONNX and TFLite files
  when their importers are there.
- nn-Meter (its own environment, ``scripts/setup-nnmeter-env.sh``): kernel detection, kernel
  features and its ``nn_predict`` on ``--nnmeter-n`` of the same cells exported as nn-Meter IR,
  with forests refit by its own hyperparameters (its shipped ones cannot be loaded here: see
  benchmarks/bench_predict.py), a lower bound of its predict time.

    python benchmarks/bench_shelf.py [--n 10000] [--scenarios help-pixel2-cpu,usc-pixel4-...]
    python benchmarks/bench_shelf.py --graphs transformer --n 2000 --scenarios host-tflite-cpu-1large-fp32
    python benchmarks/bench_shelf.py --graphs transformer --shelf fastshelf --scenarios host-tflite-cpu-1large-fp32
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_SCENARIOS = "help-pixel2-cpu,help-raspi4-cpu,help-gold6226-cpu"


def nasbench201_graphs(n: int) -> tuple[list, str]:
    from generators.nasbench201 import build

    return [build(i) for i in range(min(n, 15625))], "NAS-Bench-201 cells"


def transformer_graphs(n: int) -> tuple[list, str]:
    from generators import transformer

    cfg = transformer.validate_config({})
    return [transformer.build_network(cfg, 0, i) for i in range(n)], "networks of the transformer space"


GRAPHS = {"nasbench201": nasbench201_graphs, "transformer": transformer_graphs}


def timed(fn) -> float:
    # the collection that building the batch's graphs has made due is the generator's cost, not
    # the predictor's: collected before the clock starts (as timeit keeps it out of its figures)
    gc.collect()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10000, help="graphs in the batch (default: %(default)s)")
    ap.add_argument("--graphs", choices=sorted(GRAPHS), default="nasbench201",
                    help="what the batch holds (default: %(default)s)")
    ap.add_argument("--scenarios", default=DEFAULT_SCENARIOS, help="shelf scenarios, comma-separated (default: %(default)s)")
    ap.add_argument("--files", type=int, default=50, help="model files predicted one by one (default: %(default)s)")
    ap.add_argument("--nnmeter-n", type=int, default=200, help="cells for nn-Meter's figure (default: %(default)s)")
    ap.add_argument("--shelf", help="a shelf folder (default: the committed one); e.g. one of the op-wise candidates "
                                    "alone, `latbench shelf build --out fastshelf --candidate usc_lasso ...`")
    a = ap.parse_args()

    from pipelines.predict import load_model
    from shelf import Shelf

    shelf = Shelf(a.shelf) if a.shelf else Shelf()
    scenarios = [s for s in a.scenarios.split(",") if s]
    for sid in scenarios:
        shelf.predictor(sid)  # loading the saved predictors is not part of the timed calls
    t = time.perf_counter()
    graphs, what = GRAPHS[a.graphs](a.n)
    build_s = time.perf_counter() - t
    ops = sum(len(g.nodes) - 1 for g in graphs) / len(graphs)
    print(f"{len(graphs)} {what} ({ops:.0f} ops each), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"  building the IR graphs (the generator, not timed below): {build_s:.1f} s, "
          f"{len(graphs) / build_s:,.0f} graphs/s")
    first = timed(lambda: shelf.predict(graphs, scenarios[0]))
    print(f"  IR batch, first scenario ({scenarios[0]}, {shelf.entry(scenarios[0])['predictor']}): "
          f"{len(graphs) / first:,.0f} graphs/s ({first:.2f} s)")
    total = first
    for sid in scenarios[1:]:
        s = timed(lambda: shelf.predict(graphs, sid))
        total += s
        print(f"  IR batch, further scenario ({sid}, {shelf.entry(sid)['predictor']}): "
              f"{len(graphs) / s:,.0f} graphs/s ({s:.3f} s)")
    print(f"  IR batch on all {len(scenarios)} scenarios: {len(graphs) * len(scenarios) / total:,.0f} "
          f"graph-scenario predictions/s (each graph featurized once)")

    per_file = {}
    with tempfile.TemporaryDirectory() as d:
        paths = {".json": [graphs[i].save(Path(d) / f"m{i}.json") for i in range(min(a.files, len(graphs)))]}
        for suffix, fn in file_writers().items():
            paths[suffix] = [fn(graphs[i], Path(d) / f"m{i}{suffix}") for i in range(min(a.files, len(graphs)))]
        for suffix, ps in paths.items():
            if not ps:
                continue
            s = timed(lambda: [shelf.predict([load_model(p)], scenarios[0]) for p in ps])
            per_file[suffix] = len(ps) / s
            print(f"  from a {suffix} file (load + predict, one at a time): {per_file[suffix]:,.0f} models/s")

    if a.graphs != "nasbench201":
        print("\nnn-Meter: no side-by-side figure (its kernel detection knows CNN operators only: no layer "
              "norm, matmul of activations or attention)")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_predict import bench_nnmeter

    theirs = bench_nnmeter({f"{a.graphs}-{i}": graphs[i] for i in range(min(a.nnmeter_n, len(graphs)))},
                           f"the same {what}")
    if theirs:
        from_file = f", from an IR file {per_file['.json'] / theirs:,.0f}x" if ".json" in per_file else ""
        print(f"\nours / nn-Meter (its time a lower bound): IR batch {len(graphs) / first / theirs:,.0f}x{from_file}")


def file_writers() -> dict:
    """Model-file writers for the formats `latbench predict` reads besides IR JSON (TFLite through
    the project's exporter), when the importer for the format is installed."""
    from pipelines.predict import LOADERS

    out = {}
    try:
        from generators.importers import import_tflite  # noqa: F401
    except ImportError:
        return out
    if ".tflite" in LOADERS:
        from generators.export.tflite import export_tflite

        out[".tflite"] = lambda g, p: export_tflite(g, p)["path"]
    return out


if __name__ == "__main__":
    main()
