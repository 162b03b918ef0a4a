"""How accurate a calibration is against how many networks it measured and how long it took, beside
the board's entries trained on the host release's 900 networks.

1. ``latbench calibrate`` runs on this machine's CPU (``--device host``, the default pool and the
   release's protocol) within ``--budget`` into ``--work`` (a stopped run resumes; a finished one
   is reused).
2. The evaluation networks are the test networks of the board's ``host-fewshot-900`` track in the
   scenario (synthetic networks of the release, outside the calibration's pool, which draws with
   its own seed, and outside the 900 the board's entries trained on); they are measured here with
   the same protocol, so calibration and evaluation come from this machine.
3. For every prefix of the calibration's rounds, the from-scratch candidate (``additive_mlp``) and
   the zoo rescaled (the committed shelf's entry of the scenario, ``a * p + b``) are fitted on the
   calibration networks of those rounds and scored on the evaluation networks; the wall time is
   the measuring time of those rounds plus the fit's.
4. The calibration's own entry (what ``latbench predict`` answers with) is scored on the same
   networks, beside the board's entries of ``host-fewshot-900`` in the scenario (scored on the
   release's measurements of the same networks) and the stated held-out accuracy of the entry.

The table says where the curve flattens: the first prefix within one point of MAPE of the last.
Run on a quiet machine (the measure protocol refuses data taken under load).

``--emulator`` calibrates through the adb layer instead: the test suite's adbd emulator
(tests/adbd_emulator.py) plays a Pixel 4 whose processes run on this machine, under the release's
protocol without load checks (the emulated phone shares this machine's CPUs). It prints the
mechanics (rounds, networks, seconds per network, the candidates' cross-validated error and the
held-out accuracy); the figures are this machine's, not a phone's.

    python benchmarks/bench_calibrate.py --budget 15m
    python benchmarks/bench_calibrate.py --budget 15m --work data/benchmarks/calibrate --json out.json
    python benchmarks/bench_calibrate.py --emulator --budget 5m --work data/benchmarks/calibrate-adb
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

TRACK = "host-fewshot-900"
METRICS = ("mape", "acc10", "spearman")


def board_rows(sid: str, ids: list[str], release_y: dict[str, float]) -> list[tuple[str, dict]]:
    """(entry, metrics) of the committed board's entries on TRACK in ``sid``, scored on the
    evaluation networks ``ids`` against the release's measurements of them (the entries'
    predictions files), best MAPE first."""
    import pandas as pd

    from leaderboard.metrics import compute

    rows = []
    for folder in sorted((Path(__file__).resolve().parents[1] / "leaderboard" / "entries" / "host").iterdir()):
        f = folder / "predictions.parquet"
        if not f.is_file():
            continue
        d = pd.read_parquet(f)
        d = d[(d["track"] == TRACK) & (d["scenario_id"] == sid)].set_index("model_id")["predicted_ms"]
        if not set(ids) <= set(d.index):
            continue
        rows.append((folder.name, compute(np.asarray([release_y[m] for m in ids]), d.loc[ids].to_numpy(), METRICS)))
    return sorted(rows, key=lambda r: r[1]["mape"])


def release_latencies(sid: str) -> dict[str, float]:
    """model_id -> the release's measured latency in ``sid``."""
    from leaderboard.run import available

    ok, _ = available([TRACK], None, None, write_splits=False)
    e = ok[TRACK][0].measured(sid)
    return dict(zip(e["model_id"], e["latency_ms"]))


def evaluation_graphs(sid: str, limit: int | None) -> list:
    """The IR graphs of TRACK's test networks in ``sid`` (the release's dataset)."""
    from leaderboard.run import available

    ok, skipped = available([TRACK], None, None, write_splits=False)
    if TRACK not in ok:
        raise SystemExit(f"{TRACK}: no data ({skipped.get(TRACK)})")
    data, split = ok[TRACK]
    e = data.measured(sid)
    by_name = dict(zip(e["name"], e["model_id"]))
    fold = min(split.for_scenario(sid), key=lambda f: f.fold)
    names = sorted(n for n in fold.test if n in by_name)[:limit]
    graphs = []
    for n in names:
        g = data.dataset.graph(by_name[n])
        g.source = g.source or "synthetic"
        graphs.append(g)
    return graphs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", default="15m")
    ap.add_argument("--work", default="data/benchmarks/calibrate")
    ap.add_argument("--eval-networks", type=int, default=None, help="score on the first N test networks (by name)")
    ap.add_argument("--allow-load", action="store_true", help="keep data measured under load (mechanics only)")
    ap.add_argument("--json", default=None, help="write the figures here too")
    ap.add_argument("--emulator", action="store_true", help="calibrate the emulated phone (the mechanics)")
    a = ap.parse_args()
    if a.emulator:
        return emulated(a)

    from leaderboard.baselines import Networks
    from leaderboard.metrics import compute
    from pipelines.devices import make_device
    from pipelines.measure import stage_scenario
    from pipelines.profile import device_config
    from shelf.calibrate import calibrate, fitting
    from shelf.calibrate.measuring import Bench, calibration_config
    from shelf.calibrate.pool import DEFAULT_SEED, DEFAULT_SIZES, build_pool, graph_pool
    from shelf.calibrate.session import STATE, parse_budget
    from shelf.readers import graph_networks
    from shelf.store import SHELF_DIR, Shelf

    work = Path(a.work)
    cfg = calibration_config()
    dev_cfg, _ = device_config("host")
    device = make_device(dev_cfg)
    scenario = stage_scenario(device, "tflite", "fp32", "1large").scenario
    sid = scenario.scenario_id
    zoo = Shelf(SHELF_DIR)
    budget = parse_budget(a.budget)

    t0 = time.perf_counter()
    out = calibrate(cfg, device, scenario, work=work / "calibration", shelf_dir=work / "shelf", budget_s=budget,
                    pool_sizes=DEFAULT_SIZES, seed=DEFAULT_SEED, allow_load=a.allow_load, zoo=zoo, say=print)
    print(f"calibrate: {time.perf_counter() - t0:.0f} s wall (this run)")

    graphs = evaluation_graphs(sid, a.eval_networks)
    eval_pool = graph_pool(work / "evaluation", graphs)
    bench = Bench(cfg, device, scenario, work / "evaluation", eval_pool, allow_load=a.allow_load)
    t1 = time.perf_counter()
    counts = bench.measure(eval_pool.ids)
    lat = bench.latencies()
    ids = [m for m in eval_pool.ids if m in lat]
    y = np.asarray([lat[m] for m in ids])
    print(f"evaluation: {len(ids)} of {TRACK}'s {len(graphs)} test networks measured here in "
          f"{time.perf_counter() - t1:.0f} s ({counts.get('failed', 0)} failed, {counts.get('remeasured', 0)} processes "
          "measured again under load)")
    eval_graphs = [eval_pool.graph(m) for m in ids]

    user = Shelf.open(user=work / "shelf")
    entry = user.entry(sid)
    final = compute(y, user.predict(eval_graphs, sid), METRICS)

    # the curve over round prefixes
    state = json.loads((work / "calibration" / STATE).read_text())
    pool = build_pool(work / "calibration", cfg.generator, DEFAULT_SIZES, DEFAULT_SEED)
    cal_bench = Bench(cfg, device, scenario, work / "calibration", pool, allow_load=a.allow_load)
    data = cal_bench.dataset()
    measured = set(data.e2e_for(sid)["model_id"])
    p_zoo_eval = np.asarray(zoo.predict(eval_graphs, sid))
    rows = []
    cal: list[str] = []
    seconds = 0.0
    for r in state["rounds"]:
        cal += [m for m in r["calibration"] if m in measured]
        seconds += r.get("seconds", 0.0)
        tf = time.perf_counter()
        est = fitting.fit_scratch("additive_mlp", data, sid, cal)
        t_fit = time.perf_counter() - tf
        graphs_eval = graph_networks(eval_graphs, sid)
        scratch = compute(y, np.asarray(est.predict(graphs_eval)), METRICS)
        y_cal = Networks(data, tuple(cal), sid).y()
        p_cal = np.asarray(zoo.predict([pool.graph(m) for m in cal], sid))
        aa, bb = fitting.fit_scale(p_cal, y_cal)
        transfer = compute(y, aa * p_zoo_eval + bb, METRICS)
        rows.append({"networks": len(cal), "measure_s": round(seconds), "fit_s": round(t_fit, 1),
                     "additive_mlp": scratch, "transfer": transfer, "scale": [aa, bb]})

    print(f"\n{sid}: accuracy on {len(ids)} evaluation networks ({TRACK}'s test networks measured on this machine)")
    print(f"{'networks':>8} {'measure':>8} {'fit':>6}   {'additive_mlp MAPE':>17} {'±10%':>5} {'ρ':>6}   "
          f"{'zoo rescaled MAPE':>17} {'±10%':>5} {'ρ':>6}")
    for r in rows:
        s, t = r["additive_mlp"], r["transfer"]
        print(f"{r['networks']:>8} {r['measure_s'] / 60:7.1f}m {r['fit_s']:5.0f}s   {s['mape']:16.2f}% "
              f"{100 * s['acc10']:4.0f}% {s['spearman']:6.3f}   {t['mape']:16.2f}% {100 * t['acc10']:4.0f}% "
              f"{t['spearman']:6.3f}")
    for key in ("additive_mlp", "transfer"):
        last = rows[-1][key]["mape"]
        flat = next(r for r in rows if r[key]["mape"] <= last + 1.0)
        print(f"{key}: within 1 point of its last MAPE ({last:.2f}%) from {flat['networks']} networks "
              f"({flat['measure_s'] / 60:.1f} min of measuring) on")
    a_ = entry["accuracy"]
    print(f"\nthe calibration's entry ({entry['predictor']}"
          + (f", rescaled from {entry['scale']['source']}" if entry.get("scale") else ", from scratch")
          + f"; {entry['training']['networks']} networks, {out.spent_s / 60:.1f} min measuring): MAPE {final['mape']:.2f}%, "
          f"{100 * final['acc10']:.0f}% within 10%, Spearman {final['spearman']:.3f} on the evaluation networks; "
          f"stated on its {a_['held_out_networks']} held-out networks: MAPE {a_['mape']:.2f}%")
    rel = release_latencies(sid)
    y_rel = np.asarray([rel[m] for m in ids])
    drift = compute(y_rel, y, METRICS)
    print(f"this machine against the release's measurements of the same networks: MAPE {drift['mape']:.2f}%, "
          f"{100 * drift['acc10']:.0f}% within 10%, Spearman {drift['spearman']:.3f} (the labels' own difference)")
    board = board_rows(sid, ids, rel)
    print(f"board, {TRACK} in {sid} (900 training networks of the release), on the same networks against the "
          "release's measurements of them:")
    for name, mm in board[:5]:
        print(f"  {name:<16} MAPE {mm['mape']:6.2f}%  {100 * mm['acc10']:3.0f}% within 10%  Spearman {mm['spearman']:.3f}")
    best = board[0]
    print(f"gap to the best board entry ({best[0]}): {final['mape'] - best[1]['mape']:+.2f} points of MAPE "
          f"(target: within 3)")
    if a.json:
        Path(a.json).write_text(json.dumps({"scenario_id": sid, "evaluation_networks": len(ids), "curve": rows,
                                            "entry": final, "entry_stated": a_, "board": dict(board),
                                            "labels_vs_release": drift}, indent=1))


def emulated(a: argparse.Namespace) -> None:
    """A calibration through adb, the adbd emulator playing a Pixel 4 (see the module doc)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from adbd_emulator import AdbServer, EmulatorProcess
    from support.native import build_native

    from pipelines.devices import make_device
    from pipelines.measure import stage_scenario
    from shelf.calibrate import calibrate
    from shelf.calibrate.measuring import calibration_config
    from shelf.calibrate.pool import DEFAULT_SEED, DEFAULT_SIZES
    from shelf.calibrate.session import parse_budget
    from shelf.store import SHELF_DIR, Shelf

    work = Path(a.work)
    build_native()
    server = AdbServer().start()
    emu = EmulatorProcess(work / "phone").start()
    try:
        cfg = calibration_config(overrides=["device=pixel4", f"device.serial={emu.serial}",
                                             f"device.adb_server={server.address}"], check_load=False)
        device = make_device(cfg.device)
        scenario = stage_scenario(device, "tflite", "fp32", "1large").scenario
        t0 = time.perf_counter()
        out = calibrate(cfg, device, scenario, work=work / "calibration", shelf_dir=work / "shelf",
                        budget_s=parse_budget(a.budget), pool_sizes=DEFAULT_SIZES, seed=DEFAULT_SEED, zoo=Shelf(SHELF_DIR),
                        say=print)
    finally:
        emu.kill()
        server.stop()
    e = out.entry
    state = json.loads((work / "calibration" / "state.json").read_text())
    n = sum(len(r["calibration"]) + len(r["held_out"]) for r in state["rounds"])
    print(f"\n{out.scenario_id} through adb: {out.rounds} rounds, {n} networks measured in {out.spent_s:.0f} s "
          f"({out.spent_s / max(1, n):.1f} s per network), {time.perf_counter() - t0:.0f} s wall in all")
    print("candidates (cross-validated MAPE): " + ", ".join(f"{k} {v:.1f}%" for k, v in e["training"]["cv"].items()
                                                         if v is not None))
    print(f"entry: {e['predictor']}" + (f" rescaled from {e['scale']['source']}" if e.get("scale") else "")
          + f", held-out MAPE {e['accuracy']['mape']:.2f}% on {e['accuracy']['held_out_networks']} networks")


if __name__ == "__main__":
    main()
