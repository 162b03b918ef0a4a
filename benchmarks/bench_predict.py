"""Prints predictions per second of every baseline predictor (featurize + predict, one batch), on
the cores this process may use (2 here).

Goal (issue 6): at least 10,000 networks/s for the op-wise GBDT on featurized inputs.

What is timed, per predictor, on ``--n`` NAS-Bench-201 networks (HELP's Pixel 3 scenario; each
predictor trained on ``--train`` other cells first, untimed):

- ``cold``: featurize from IR graphs already in memory (op lists, interning of op configurations,
  derived features) + predict. Building the graphs from their cell strings is reported apart
  (it is the IR generator's cost, not the predictor's).
- ``warm``: ``predict(Networks)`` again: the per-graph op lists are cached, so this is
  concatenating them + evaluating each distinct op configuration once + the per-network sums.
- ``featurized``: ``predict_frame`` on an op frame built beforehand (op-wise predictors only):
  model evaluation and sums alone. ``all rows``: the same without the per-batch deduplication of
  op configurations (every op row goes through the model).

The same for the 102 USC real CNNs (``--usc-repeat`` copies of the list, so the batch is of a
comparable size; their op lists are cached after the first copy).

Side by side, nn-Meter (in its own environment, ``scripts/setup-nnmeter-env.sh``; found through
``LATBENCH_NNMETER_PYTHON`` or ``.venv-nnmeter``) on ``--nnmeter-n`` of the same networks exported
as nn-Meter IR: its kernel detection and kernel feature extraction per network, then its own
``nn_predict``. Its shipped forests cannot be loaded on Python 3.11 (their pickles need
scikit-learn 0.23, and it downloads them at run time), so ``nn_predict`` runs forests refit with
its own per-kernel hyperparameters (``kernel_predictor.get_model``) on the kernels of these
networks; fit on far fewer samples than the shipped ones, they are no larger, so its figure is a
lower bound of its predict time.

    python benchmarks/bench_predict.py --dataset data/public [--n 10000] [--train 900]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from leaderboard.baselines import Networks, make_predictor
from leaderboard.baselines.cv import MINE, predictor_params
from leaderboard.baselines.features import op_frame

FAST_FIT = {"usc_mlp": {"max_epochs": 60}}  # the MLP's fit is not what is measured here


def best_of(fn, repeats: int = 3) -> float:
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def line(what: str, n: int, s: float) -> str:
    return f"{what:<34} {n:>7} networks {s:8.3f} s {n / s:>11,.0f} networks/s"


def bench(ds, scenario: str, train_ids, test_ids, names, threads: int, label: str) -> None:
    Xtr = Networks(ds, tuple(train_ids), scenario)
    ytr = Xtr.y()
    print(f"\n## {label}: {len(test_ids)} networks to predict, trained on {len(train_ids)} ({scenario})\n", flush=True)
    for name in names:
        params = {**predictor_params(name), **FAST_FIT.get(name, {})}
        if "n_jobs" in params:
            params["n_jobs"] = threads
        p = make_predictor(name, **params).fit(Xtr, ytr)
        X = Networks(ds, tuple(test_ids), scenario)
        if name in ("flops", "flops_mac"):
            from leaderboard.baselines.flops import _COSTS
            _COSTS.pop(ds, None)
        else:
            from leaderboard.baselines.features import _IR_CACHE
            cache = _IR_CACHE.get(ds, {})
            for m in set(test_ids) - set(train_ids):
                cache.pop(m, None)
        t0 = time.perf_counter()
        p.predict(X)
        cold = time.perf_counter() - t0
        warm = best_of(lambda: p.predict(X))
        out = [line(f"{name} cold (featurize+predict)", len(X), cold), line(f"{name} warm (cached op lists)", len(X), warm)]
        if hasattr(p, "predict_frame"):
            frame = op_frame(X)
            feat = best_of(lambda: p.predict_frame(frame))
            allrows = best_of(lambda: p.predict_frame(frame, unique=False), repeats=1)
            out += [line(f"{name} featurized", len(X), feat), line(f"{name} featurized, all rows", len(X), allrows)]
        print("\n".join(out), flush=True)


NNMETER_TIMER = r"""
import json, sys, time
import numpy as np
from nn_meter.ir_converter import model_file_to_graph
from nn_meter.kernel_detector import KernelDetector
from nn_meter.predictor.prediction.extract_feature import get_predict_features
from nn_meter.predictor.prediction.kernel_predictor import get_model
from nn_meter.predictor.prediction.predict_by_kernel import nn_predict
from nn_meter.predictor.prediction.utils import get_kernel_name
paths = sys.argv[1:]
graphs = [model_file_to_graph(p, "nnmeter-ir") for p in paths]   # reading files: not timed
kd = KernelDetector(None)
t0 = time.perf_counter()
units = []
for g in graphs:
    kd.load_graph(g)
    units.append(kd.get_kernels())
detect = time.perf_counter() - t0
# Its shipped forests cannot be loaded here, so each kernel's forest is refit with its own
# get_model("cpu", kernel) hyperparameters (320 trees for conv-bn-relu, ...) on these networks'
# kernel features with random targets: forests fit on our few networks are no deeper than the
# shipped ones, so the time below is still a lower bound of its predict.
rows = {}
for u in units:
    for layer in get_predict_features(u).values():
        (kernel, feats), = layer.items()
        rows.setdefault(get_kernel_name(kernel), []).append(feats)
rng = np.random.default_rng(0)
predictors = {}
for name, X in rows.items():
    m = get_model("cpu", name.replace("-", ""))
    m = get_model("cpu", "relu") if m is None else m  # a kernel without hyperparameters of its own
    predictors[name] = m.fit(X, rng.random(len(X)))
t0 = time.perf_counter()
for u in units:
    nn_predict(predictors, u)
forests = time.perf_counter() - t0
print(json.dumps({"seconds": detect, "predict_seconds": forests, "networks": len(graphs),
                  "kernels": sum(len(u) for u in units), "forests": sorted(predictors)}))
"""


def bench_nnmeter(graphs: dict, ours_label: str) -> float | None:
    """nn-Meter's kernel detection + features per network ({name: IR graph}), in its own
    environment; prints the figure and returns its networks per second (None: not installed)."""
    root = Path(__file__).resolve().parents[1]
    python = os.environ.get("LATBENCH_NNMETER_PYTHON") or str(root / ".venv-nnmeter" / "bin" / "python")
    if not Path(python).exists():
        print("\nnn-Meter: not installed (scripts/setup-nnmeter-env.sh); side-by-side figure skipped")
        return None
    from generators.export.nnmeter_ir import export_nnmeter_ir

    with tempfile.TemporaryDirectory(prefix="bench-nnmeter-") as tmp:
        paths = [export_nnmeter_ir(g, Path(tmp) / f"{m}.json")["path"] for m, g in graphs.items()]
        script = Path(tmp) / "timer.py"
        script.write_text(NNMETER_TIMER)
        proc = subprocess.run([python, str(script), *map(str, paths)], capture_output=True, text=True, cwd=tmp,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        print(f"\nnn-Meter failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
        return None
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    n, total = r["networks"], r["seconds"] + r["predict_seconds"]
    print(f"\n## nn-Meter ({ours_label}, {n} networks, in {Path(python).parent.parent.name})\n")
    print(line("nn-Meter kernel detection", n, r["seconds"]))
    print(line("nn-Meter nn_predict (features, forests)", n, r["predict_seconds"]))
    print(line("nn-Meter predict, both", n, total))
    print(f"  {total / n * 1e3:.1f} ms per network, {r['kernels'] / n:.0f} kernels per network; forests of its "
          f"get_model('cpu', ...) hyperparameters for {', '.join(r['forests'])}")
    return n / total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="data/public")
    ap.add_argument("--n", type=int, default=10000, help="NAS-Bench-201 networks to predict")
    ap.add_argument("--train", type=int, default=900, help="networks to train on")
    ap.add_argument("--usc-repeat", type=int, default=100)
    ap.add_argument("--predictors", default=",".join(MINE))
    ap.add_argument("--nnmeter-n", type=int, default=200, help="networks for nn-Meter's side-by-side timing")
    a = ap.parse_args()
    from pipelines.dataset import load_dataset

    threads = len(os.sched_getaffinity(0))
    try:
        import torch
        torch.set_num_threads(threads)
    except ImportError:
        pass
    names = [n for n in a.predictors.split(",") if n]
    ds = load_dataset(a.dataset)
    print(f"cores available: {threads}; predictors: {', '.join(names)}")
    sc = "help-pixel3-tflite-cpu"
    ids = ds.e2e_for(sc)["model_id"].tolist()
    ids = sorted(ids, key=lambda m: ds.model(m)["name"]) if len(ids) < 2000 else ids
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(ids))
    train = [ids[i] for i in perm[:a.train]]
    test = [ids[i] for i in perm[a.train:a.train + a.n]]
    t0 = time.perf_counter()
    for m in train + test:
        ds.graph(m)
    print(f"IR graphs built from cell strings (not timed below): {len(train) + len(test)} in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    bench(ds, sc, train, test, names, threads, "NAS-Bench-201 cells")
    bench_nnmeter({m: ds.graph(m) for m in test[:a.nnmeter_n]}, "NAS-Bench-201 cells")
    usc = ds.e2e_for("usc-pixel4-tflite-cpu-1large-fp32")["model_id"].tolist()
    bench(ds, "usc-pixel4-tflite-cpu-1large-fp32", usc, usc * a.usc_repeat, names, threads,
          f"USC real CNNs x {a.usc_repeat}")


if __name__ == "__main__":
    main()
