"""Why LiteRT int8 is the hard scenario of host-transformer-random: what the data allows there.

The track's best entry sits within 2 points of MAPE of the noise floor on the track as a whole
and at fp32, not at int8 (the board's figures). This prints, for the track's frozen split on
the board's release:

1. the labels: the test networks measured again in a later session (the release's
   ``retest.csv``, pipelines/retest.py), per scenario: networks, session factor, the residual
   spread (sigma) and the ceiling within 10%: whether the labels themselves cap a predictor;
2. where the error is: the committed entries' MAPE by the networks' token count (the largest
   attention grid of a network: 49, 196 or 784 tokens at 224x224), per scenario;
3. what the op rows can tell an op-wise predictor: the op-granularity process runs LiteRT's
   builtin kernels (XNNPACK off), the e2e process runs XNNPACK; the spread of e2e / sum of ops
   by token count says how far the op times stand from the e2e run's kernels;
4. a learning curve: registered predictors trained on a seeded share of the training networks
   (25%, 50%, 100%), scored on the same test networks, fp32 against int8, all and 784-token
   networks: whether more networks of the space would close the gap;
5. where int8's attention matmuls run: LiteRT's XNNPACK delegate takes an int8 BATCH_MATMUL
   (``Batch Matrix Multiply (NC, QS8) GEMM``) only when its second operand's zero point is 0 and
   leaves the others to the builtin kernel, many times slower; the converter sets that zero
   point from the calibration data's range, so the placement follows the weights and the
   calibration samples, not the architecture the IR describes. Per network, the kernel rows of
   the e2e process give the placement; the committed entries' error is split by it. With
   ``--artifacts`` (a data folder's ``artifacts/``, machine-local) the rule is checked against
   the int8 ``.tflite`` files' zero points.

Every figure is measured data of the release; nothing is fitted on a test network.

    python benchmarks/bench_transformer_int8.py [--predictor usc_gbdt --predictor lookup] [--host datasets/host-v1]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# this checkout's packages, not those of the checkout the virtualenv was installed from
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TRACK = "host-transformer-random"
SHARES = (0.25, 0.5, 1.0)


def tokens(meta: str) -> int:
    """The largest token grid of a transformer-space network (its models.meta)."""
    return max(int(s["tokens"]) for s in json.loads(meta)["stages"])


def mape(pred: np.ndarray, true: np.ndarray) -> float:
    return float(np.mean(np.abs(pred / true - 1.0)) * 100.0)


def retest_rows(root: Path, test_ids: set[str]) -> None:
    """pipelines.retest's comparison, on the retest rows of ``test_ids`` only."""
    from pipelines.control import read_history
    from pipelines.dataset.load import load_dataset
    from pipelines.retest import HISTORY, compare, format_compare

    rows = [r for r in read_history(root / HISTORY) if r["model_id"] in test_ids]
    print("  " + format_compare(compare(rows, load_dataset(root).e2e)).replace("\n", "\n  "))


def main() -> None:
    from leaderboard.baselines import Networks
    from leaderboard.baselines.base import make_predictor
    from leaderboard.run import board_view
    from leaderboard.tracks import TRACKS, read_split, resolve
    from leaderboard.train import predictor_params

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="datasets/host-v1", help="the board's release (default: %(default)s)")
    ap.add_argument("--predictor", action="append", help="registered predictors for the learning curve "
                    "(default: usc_gbdt and lookup, the fast ones)")
    ap.add_argument("--entries", default="leaderboard/entries/host", help="committed entries (default: %(default)s)")
    ap.add_argument("--artifacts", help="a data folder's artifacts/ with the networks' tflite_int8.tflite: check the "
                    "zero-point rule of section 5 against them")
    ap.add_argument("--no-curve", action="store_true", help="skip the learning curve (section 4)")
    a = ap.parse_args()
    root = Path(a.host)
    track = TRACKS.get(TRACK)
    data = resolve(track, {"host": str(root)})
    split = read_split(track)
    if split is None:
        sys.exit(f"{TRACK}: no frozen split file")
    ds = data.dataset
    ids = dict(zip(data.networks["name"], data.networks["model_id"]))
    tok = {mid: tokens(m) for mid, m in zip(ds.models["model_id"], ds.models["meta"]) if mid in set(ids.values())}
    e2e = ds.e2e.set_index(["scenario_id", "model_id"])["latency_ms"]
    scen = [s for s in data.scenario_ids if s.endswith("1large-fp32") or s.endswith("1large-int8")]

    print(f"{TRACK}: {len(ids)} networks, token grids {dict(sorted(pd.Series(tok).value_counts().items()))}")
    test_all = {ids[n] for s in data.scenario_ids for n in split.test_names(s) if n in ids}
    print("\n1. The labels measured again (retest.csv): sigma is the residual spread after the session factor")
    retest_rows(root, test_all)

    print("\n2. Committed entries' MAPE on the test networks by token grid")
    folder = Path(a.entries)
    for sid in data.scenario_ids:
        test = [ids[n] for n in split.test_names(sid) if n in ids]
        true = np.array([e2e[(sid, m)] for m in test])
        t = np.array([tok[m] for m in test])
        line = []
        for entry in ("gnn_ensemble", "lookup", "usc_gbdt"):
            p = pd.read_parquet(folder / entry / "predictions.parquet")
            p = p[(p["track"] == TRACK) & (p["scenario_id"] == sid)].set_index("model_id")["predicted_ms"]
            pred = p.reindex(test).to_numpy(dtype="float64")
            by = " ".join(f"{k}:{mape(pred[t == k], true[t == k]):4.1f}" for k in sorted(set(t)))
            line.append(f"{entry} {mape(pred, true):4.2f}% ({by})")
        print(f"  {sid:30s} " + "; ".join(line))

    print("\n3. e2e / sum of op rows (op rows: builtin kernels, XNNPACK off), median and CV by token grid")
    e = ds.e2e[ds.e2e["model_id"].isin(tok) & ds.e2e["op_run_ms"].notna()]
    e = e.assign(tokens=e["model_id"].map(tok), gap=e["latency_ms"] / e["op_run_ms"])
    for (sid, k), g in e.groupby(["scenario_id", "tokens"]):
        print(f"  {sid:30s} {k:4d} tokens: median {g['gap'].median():.3f}, CV {g['gap'].std() / g['gap'].mean() * 100:4.1f}% ({len(g)} networks)")

    if not a.no_curve:
        learning_curve(data, split, ids, tok, e2e, scen, a.predictor or ["usc_gbdt", "lookup"])
    placement(data, split, ids, tok, e2e, folder, a.artifacts)


def learning_curve(data, split, ids, tok, e2e, scen, predictors) -> None:
    from leaderboard.baselines import Networks
    from leaderboard.baselines.base import make_predictor
    from leaderboard.run import board_view
    from leaderboard.train import predictor_params

    print("\n4. Learning curve: MAPE on the test networks (all / 784 tokens) by share of the training networks")
    rng = np.random.default_rng(0)
    for name in predictors:
        params = predictor_params(name)
        for sid in scen:
            fold = split.for_scenario(sid)[0]
            train = [ids[n] for n in fold.train if n in ids and (sid, ids[n]) in e2e.index]
            test = [ids[n] for n in fold.test if n in ids and (sid, ids[n]) in e2e.index]
            order = list(rng.permutation(len(train)))
            true = np.array([e2e[(sid, m)] for m in test])
            big = np.array([tok[m] == 784 for m in test])
            cells = []
            for share in SHARES:
                sub = [train[i] for i in sorted(order[: max(2, int(round(share * len(train))))])]
                view = board_view(data, sid, sub, test)
                est = make_predictor(name, **params).fit(Networks(view, tuple(sub), sid), Networks(view, tuple(sub), sid).y())
                pred = np.asarray(est.predict(Networks(view, tuple(test), sid)), dtype="float64")
                cells.append(f"{len(sub):3d} nets {mape(pred, true):5.2f}% / {mape(pred[big], true[big]):5.2f}%")
            print(f"  {name:12s} {sid:30s} " + " | ".join(cells), flush=True)


DELEGATED = "Batch Matrix Multiply"  # XNNPACK's batch matmul operators, by the profiler's name
BUILTIN = "BATCH_MATMUL"  # the builtin kernel, by its TFLite operator


def zero_points(path: Path) -> tuple[int, int]:
    """(int8 BATCH_MATMULs whose second operand's zero point is 0, the others) of a .tflite file."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    tensors = {t["index"]: t for t in it.get_tensor_details()}
    zero = other = 0
    for op in it._get_ops_details():
        if op["op_name"] == BUILTIN:
            zp = tensors[op["inputs"][1]]["quantization_parameters"]["zero_points"]
            zero, other = (zero + 1, other) if len(zp) and int(zp[0]) == 0 else (zero, other + 1)
    return zero, other


def placement(data, split, ids, tok, e2e, folder: Path, artifacts: str | None) -> None:
    ds = data.dataset
    print("\n5. int8 attention matmuls: delegated to XNNPACK (second operand's zero point 0) or builtin")
    for sid in [s for s in data.scenario_ids if s.endswith("-int8")]:
        k = ds.kernels[(ds.kernels["scenario_id"] == sid) & ds.kernels["model_id"].isin(tok)]
        name = k["kernel_name"].astype(str)
        count = pd.DataFrame({"model_id": k["model_id"], "xnn": name.str.startswith(DELEGATED),
                              "builtin": name == BUILTIN}).groupby("model_id")[["xnn", "builtin"]].sum()
        some = count["xnn"] > 0
        print(f"  {sid}: {len(count)} networks with kernel rows; {int(some.sum())} ({some.mean() * 100:.0f}%) have a "
              f"delegated int8 batch matmul; {int(count['xnn'].sum())} of {int(count.sum().sum())} batch matmuls delegated")
        test = [ids[n] for n in split.test_names(sid) if n in ids and ids[n] in count.index]
        true = np.array([e2e[(sid, m)] for m in test])
        grp = np.array([bool(some[m]) for m in test])
        t = np.array([tok[m] for m in test])
        for entry in ("gnn_ensemble", "lookup", "usc_gbdt"):
            p = pd.read_parquet(folder / entry / "predictions.parquet")
            p = p[(p["track"] == TRACK) & (p["scenario_id"] == sid)].set_index("model_id")["predicted_ms"]
            pred = p.reindex(test).to_numpy(dtype="float64")
            cells = []
            for label, sel in (("all builtin", ~grp), ("some delegated", grp)):
                signed = float(np.mean(pred[sel] / true[sel] - 1.0) * 100.0)
                by = " ".join(f"{k}:{mape(pred[sel & (t == k)], true[sel & (t == k)]):4.1f}"
                              for k in sorted(set(t[sel])))
                cells.append(f"{label} ({int(sel.sum())}) {mape(pred[sel], true[sel]):5.2f}% MAPE, "
                             f"{signed:+5.1f}% mean ({by})")
            print(f"    {entry:13s} " + "; ".join(cells))
        if artifacts:
            agree = checked = 0
            for mid in count.index:
                f = Path(artifacts) / mid / "tflite_int8.tflite"
                if f.is_file():
                    checked += 1
                    agree += zero_points(f) == (int(count.loc[mid, "xnn"]), int(count.loc[mid, "builtin"]))
            print(f"    zero-point rule: {agree} of {checked} networks' int8 files have exactly their delegated batch "
                  f"matmuls' second operand at zero point 0")


if __name__ == "__main__":
    main()
