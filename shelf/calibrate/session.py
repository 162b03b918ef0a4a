"""A calibration from start to entry: rounds of choosing and measuring within a time budget, then
the fit, the held-out accuracy and the shelf entry.

Rounds. Round 0 measures a spread of the pool (:func:`~shelf.calibrate.sampling.spread`); every
later round refits the uncertainty model on what was measured and measures the next batch
(:func:`~shelf.calibrate.sampling.next_batch`). Each round also measures held-out networks, the
next ones of a seeded uniform draw from the pool, so that they are ``holdout`` of everything
measured. Rounds go on while the time spent, the next round (at the pace measured so far) and
the fit's reserve fit in the budget.

Resuming. ``state.json`` in the work folder records the spec (device, scenario, pool, seed), the
rounds planned and the time spent. A calibration started again with the same spec continues:
the round in flight is measured again (the sweep skips the pairs it finished), the time already
spent counts against the budget, and a larger ``--budget`` adds rounds to a finished calibration
before it is fitted again. A different spec in the same work folder is refused.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import CalibrateError
from .pool import Pool

STATE = "state.json"


def parse_budget(text: str) -> float:
    """``"15m"``, ``"1h"``, ``"900s"`` or ``"900"`` (seconds) -> seconds."""
    t = str(text).strip().lower()
    units = {"s": 1, "m": 60, "h": 3600}
    mult = units.get(t[-1:], None)
    num = t[:-1] if mult else t
    try:
        v = float(num) * (mult or 1)
    except ValueError:
        raise CalibrateError(f"--budget {text!r}: expected a duration such as 15m, 1h or 900s") from None
    if not (60 <= v <= 7 * 86400):
        raise CalibrateError(f"--budget {text!r}: between 1 minute and 7 days")
    return v


@dataclass
class Spec:
    """What a calibration is: the scenario it calibrates and how it chooses networks."""

    scenario_id: str
    device: str
    pool: dict[str, int]
    seed: int
    holdout: float = 0.2
    first: int = 24  # networks of round 0 (besides its held-out ones)
    batch: int = 24  # networks of every later round
    granularities: list[str] = field(default_factory=lambda: ["e2e"])

    def key(self) -> dict[str, Any]:
        return {"scenario_id": self.scenario_id, "device": self.device, "pool": self.pool, "seed": self.seed,
                "holdout": self.holdout, "granularities": self.granularities}


class State:
    """``state.json``: the spec, the rounds (calibration and held-out ids, seconds) and the time spent."""

    def __init__(self, work: Path, spec: Spec):
        self.path = Path(work) / STATE
        self.spec = spec
        if self.path.is_file():
            d = json.loads(self.path.read_text())
            if d.get("spec") != spec.key():
                raise CalibrateError(f"{self.path}: a calibration of {json.dumps(d.get('spec'))} is here, not of "
                                     f"{json.dumps(spec.key())}: give the same options to resume it, or another --work")
            self.rounds: list[dict[str, Any]] = d["rounds"]
            self.spent_s: float = float(d["spent_s"])
        else:
            self.rounds, self.spent_s = [], 0.0

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"spec": self.spec.key(), "spent_s": round(self.spent_s, 3),
                                         "rounds": self.rounds}, indent=1) + "\n")

    def ids(self, kind: str) -> list[str]:
        return [m for r in self.rounds for m in r[kind]]


@dataclass
class Outcome:
    scenario_id: str
    entry: dict[str, Any]
    calibration: int
    held_out: int
    rounds: int
    spent_s: float
    scored: list[Any]


def _fmt_s(s: float) -> str:
    s = max(0, int(round(s)))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def run_rounds(bench: Any, pool: Pool, state: State, budget_s: float, reserve_s: float,
               say: Callable[[str], None], progress: bool) -> None:
    """Choose and measure rounds until the budget (see the module doc)."""
    from tqdm import tqdm

    from .sampling import Uncertainty, held_out_order, next_batch, spread

    spec = state.spec
    X = pool.matrix()
    index = {m: i for i, m in enumerate(pool.ids)}
    order = [pool.ids[i] for i in held_out_order(len(pool.ids), spec.seed)]
    per_net = None
    bar = tqdm(total=int(budget_s), initial=min(int(state.spent_s), int(budget_s)), unit="s", desc="calibrate",
               disable=not progress, bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} s [{elapsed}<{remaining}]{postfix}")
    try:
        while True:
            measured = bench.latencies()
            cal_done = [m for m in state.ids("calibration") if m in measured]
            if per_net is None and state.rounds and state.rounds[-1].get("seconds"):
                r = state.rounds[-1]
                per_net = r["seconds"] / max(1, len(r["calibration"]) + len(r["held_out"]))
            resume = bool(state.rounds) and not state.rounds[-1].get("done")
            if not resume:
                k = spec.first if not state.rounds else spec.batch
                n_ho = max(1, round(k * spec.holdout / (1 - spec.holdout)))
                if state.rounds and per_net is not None:
                    if state.spent_s + per_net * (k + n_ho) + reserve_s > budget_s:
                        break
                taken = set(state.ids("calibration")) | set(state.ids("held_out"))
                new_ho = [m for m in order if m not in taken][:n_ho]  # the draw goes on down its order
                excluded = [index[m] for m in taken | set(new_ho)]
                if not state.rounds:
                    cal = [pool.ids[i] for i in spread(X, k, exclude=excluded)]
                else:
                    y = np.asarray([measured[m] for m in cal_done])
                    unc = Uncertainty(seed=len(state.rounds)).fit(X[[index[m] for m in cal_done]], y,
                                                                  len(pool.op_types)).score(X)
                    cand = [i for i in range(len(pool.ids)) if i not in set(excluded)]
                    cal = [pool.ids[i] for i in next_batch(X, unc, [index[m] for m in cal_done], cand, k)]
                if not cal:
                    say("calibrate: the pool is exhausted")
                    break
                state.rounds.append({"round": len(state.rounds), "calibration": cal, "held_out": new_ho})
                state.save()
            r = state.rounds[-1]
            t0 = time.perf_counter()
            counts = bench.measure(r["calibration"] + r["held_out"], progress=False)
            dt = time.perf_counter() - t0
            state.spent_s += dt
            r["seconds"] = round(r.get("seconds", 0.0) + dt, 3)
            r["counts"] = {k: counts.get(k, 0) for k in ("ok", "failed", "refused", "remeasured", "export_failed")}
            r["done"] = True
            state.save()
            per_net = r["seconds"] / max(1, len(r["calibration"]) + len(r["held_out"]))
            measured = bench.latencies()
            n_cal = sum(m in measured for m in state.ids("calibration"))
            n_ho = sum(m in measured for m in state.ids("held_out"))
            bar.n = min(int(state.spent_s), int(budget_s))
            bar.set_postfix_str(f"{n_cal} calibration + {n_ho} held out")
            bar.refresh()
            left = budget_s - state.spent_s - reserve_s
            failed = counts.get("failed", 0) + counts.get("export_failed", 0)
            say(f"round {r['round']}: measured {counts.get('ok', 0)} of {len(r['calibration']) + len(r['held_out'])} "
                f"({failed} failed, {counts.get('refused', 0)} refused under load) in "
                f"{_fmt_s(dt)}; {n_cal} calibration + {n_ho} held-out networks; spent {_fmt_s(state.spent_s)} of "
                f"{_fmt_s(budget_s)}, ETA {_fmt_s(max(0.0, left) + reserve_s)}")
            if failed:
                say(failures_line(bench.failures(), bench.out))
            if counts.get("refused", 0) and counts.get("refused", 0) >= max(1, len(r["calibration"]) // 2):
                raise CalibrateError(f"round {r['round']}: {counts['refused']} networks refused as measured under "
                                     "load: the device is busy (quiet it, or --allow-load to keep such data)")
    finally:
        bar.close()


def failures_line(failures: dict[str, str], where: Path) -> str:
    """One line on the networks that failed: how many, the first one's reason, where the rest are."""
    if not failures:
        return f"no failure on record in {where}"
    mid, why = next(iter(failures.items()))
    return (f"{len(failures)} network(s) failed so far (they are left out), e.g. {mid}: {why}; "
            f"each one's .error.json is in {where} or under its artifact")


def finish(bench: Any, pool: Pool, state: State, shelf_dir: Path, zoo: Any, budget_s: float,
           say: Callable[[str], None], k: int = 5, params: dict[str, dict[str, Any]] | None = None) -> Outcome:
    """Fit, state the held-out accuracy and write the entry (see :mod:`.fitting`, :mod:`.entry`);
    ``k`` folds of cross-validation; ``params``: predictor -> parameter overrides."""
    from leaderboard.baselines import Networks
    from leaderboard.metrics import compute

    from ..build import ACCURACY, _finite, _generator_sources, _networks_digest, _op_types
    from . import fitting
    from .entry import write_entry

    spec = state.spec
    sid = spec.scenario_id
    data = bench.dataset()
    measured = set(data.e2e_for(sid)["model_id"]) if sid in set(data.scenarios["scenario_id"]) else set()
    cal = [m for m in state.ids("calibration") if m in measured]
    ho = [m for m in state.ids("held_out") if m in measured]
    if len(cal) < 10 or len(ho) < 3:
        raise CalibrateError(f"{sid}: {len(cal)} calibration and {len(ho)} held-out networks measured; at least 10 "
                             "and 3 are needed (a larger --budget, or see the failures in "
                             f"{bench.out})")
    y = Networks(data, tuple(cal), sid).y()
    graphs = [pool.graph(m) for m in cal]
    parts = (bench.scenario.framework, bench.scenario.accelerator, bench.scenario.precision)
    say(f"fit: {len(cal)} calibration networks, {k}-fold cross-validation of each candidate")
    t0 = time.perf_counter()
    # an earlier calibration of this very scenario in the user's shelf is not a source to transfer from
    own = zoo is not None and sid in zoo.scenarios() and zoo.root(sid).resolve() == Path(shelf_dir).resolve()
    scored = fitting.score_candidates(data, sid, cal, graphs, y, zoo, parts, k=k, seed=spec.seed, say=say,
                                      exclude=sid if own else None, params=params)
    best = scored[0]
    y_ho = Networks(data, tuple(ho), sid).y()
    ho_graphs = [pool.graph(m) for m in ho]
    training = {"kind": "calibration", "device": spec.device,
                "scenario": bench.scenario.to_dict(), "networks": len(cal),
                "networks_sha256": _networks_digest(cal), "generator_sources": _generator_sources(data, cal),
                "op_types": _op_types(data, cal), "pool": {"sizes": pool.sizes, "seed": pool.seed,
                                                              "networks": len(pool.ids)},
                "rounds": len(state.rounds), "budget_s": round(budget_s), "measure_s": round(state.spent_s),
                "cv": {s.name: (round(s.cv_mape, 3) if math.isfinite(s.cv_mape) else None) for s in scored},
                "work": str(bench.work)}
    if best.name.startswith(fitting.TRANSFER):
        src = best.name[len(fitting.TRANSFER):]
        p_ho = fitting.zoo_predictions(zoo, src, ho_graphs)
        if p_ho is None:
            raise CalibrateError(f"{sid}: the zoo entry {src} cannot price the held-out networks")
        a, b = best.detail["a"], best.detail["b"]
        predicted = a * p_ho + b
        src_entry = zoo.entry(src)
        name, params = src_entry["predictor"], src_entry.get("params", {})
        copy_from = zoo.root(src) / src_entry["folder"]
        est = None
        scale = {"a": a, "b": b, "source": src}
        training["transfer_from"] = src
    else:
        est = fitting.fit_scratch(best.name, data, sid, cal, (params or {}).get(best.name))
        predicted = np.asarray(est.predict(Networks(data, tuple(ho), sid)), dtype="float64")
        name, params, copy_from, scale = best.name, dict(getattr(est, "get_params", lambda: {})()), None, None
    fit_s = time.perf_counter() - t0
    training["fit_s"] = round(fit_s)
    metrics = compute(y_ho, predicted, ACCURACY)
    accuracy = {**{k2: _finite(v) for k2, v in metrics.items()}, "held_out_networks": len(ho),
                "protocol": "calibration held-out (a uniform draw from the pool, never chosen or fitted on)"}
    names = [pool._by_id[m]["name"] for m in ho]
    entry = write_entry(shelf_dir, sid, predictor_name=name, params=params, accuracy=accuracy, training=training,
                        held_out={"names": names, "model_ids": ho, "measured_ms": y_ho.tolist(),
                                  "predicted_ms": predicted.tolist()},
                        estimator=est, copy_from=copy_from, scale=scale)
    return Outcome(sid, entry, len(cal), len(ho), len(state.rounds), state.spent_s, scored)


__all__ = ["Outcome", "STATE", "Spec", "State", "failures_line", "finish", "parse_budget", "run_rounds"]
