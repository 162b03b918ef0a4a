"""Test-retest of the release's labels: released networks measured again in a later session.

The noise floor (``between_cv``) is the spread between the processes of one sweep, interleaved
over minutes, and the control set (pipelines/control.py) follows nine networks across sessions.
Neither says how far the released label of a network would move if it were measured again on
another day, and that is what caps every predictor on the board: a predictor learns one
sweep's labels and is scored against labels of the same sweep, whose per-network wander over
the hours of a sweep it cannot know. The retest measures a set of released networks again
(``--split``: the test networks of a frozen board split), e2e at every point of the grid with
the point's own protocol (load check, speed probe), into ``<data_dir>/retest/<session>/``, and
appends one row per (network, scenario) to ``retest.csv`` inside the release (the columns of
``control.csv``), which ``pipelines.release_writer`` keeps and states on the card. Per scenario:

- the session factor: the median of retest / released over the networks (what moved every
  network alike: another day's machine, which no predictor is asked to know);
- the residual: log(retest / released) minus log(session factor), and its spread (sigma =
  1.4826 x the median absolute residual);
- agreement: the share of networks whose retest lies within 5% / 10% of the released label,
  as measured and after the session factor;
- the ceiling: were both labels' errors independent and alike (normal), a label's own error is
  the residual over sqrt(2); the share of networks with |residual| / sqrt(2) within 10% is what
  a predictor knowing every network's true latency would score within 10% on these labels:
  the board's perfect predictor, from a second session instead of one sweep's between_cv.

    python -m pipelines.retest --params data/retest.params.yaml --split leaderboard/splits/host/host-random.v2.json
    python -m pipelines.retest --report [--release datasets/host-v1]

The params are the release's protocol over a data folder of its own (``data_dir``): generate
the networks there first (docs/dataset.md has the commands); the retest exports what the named
networks lack, and only theirs.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

from .control import ControlError, append_history, card_section, measure_again, named_models, read_history

HISTORY = "retest.csv"
SQRT2 = math.sqrt(2.0)


def split_test_names(path: str | Path) -> list[str]:
    """The test networks of a frozen board split (``leaderboard/splits/<data>/<track>.v<N>.json``),
    every fold's, in first-seen order."""
    p = Path(path)
    try:
        folds = json.loads(p.read_text())["folds"]
        names = [str(n) for f in folds for n in f["test"]]
    except FileNotFoundError:
        raise ControlError(f"{p}: no such split file") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ControlError(f"{p}: not a split file (expected folds[].test: {e})") from None
    if not names:
        raise ControlError(f"{p}: the split has no test networks")
    return list(dict.fromkeys(names))


def measure_retest(cfg: Any, names: list[str], session: str | None = None, progress: bool = True,
                   sink: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Measure the named networks again at every grid point (see the module doc), exporting
    first what they lack of the formats the grid reads (just those networks)."""
    from .export import run_export

    chosen = named_models(Path(cfg.data_dir) / "models", names, "--split")
    run_export(cfg, progress=progress, only={mid for _, mid, _ in chosen})
    return measure_again(cfg, chosen, "retest", session, progress, sink)


def residuals(ratios: list[float]) -> tuple[float, list[float]]:
    """(session factor, residuals) of one scenario's retest / released ratios: the median ratio,
    and each log ratio around it."""
    factor = statistics.median(ratios)
    return factor, [math.log(q / factor) for q in ratios]


def label_error(residual: float) -> float:
    """A released label's own log error estimated from its residual: both sessions' errors taken
    as independent and alike, each is the residual over sqrt 2 (the ceiling; the board's retest
    perfect predictor removes it from the label)."""
    return residual / SQRT2


def _share(rel_errors: list[float], limit: float) -> float:
    return sum(abs(v) <= limit for v in rel_errors) / len(rel_errors)


def compare(rows: list[dict], released: Any) -> list[dict]:
    """Per (scenario, session) of the retest rows: the session factor, the residual spread,
    agreement within 5% and 10% (as measured and after the factor) and the ceiling (module doc).
    ``released``: the release's e2e table (model_id, scenario_id, latency_ms, between_cv);
    a retest row without a released row of its pair is left out."""
    label = {(str(m), str(s)): (float(v), float(c)) for m, s, v, c in
             zip(released["model_id"], released["scenario_id"], released["latency_ms"], released["between_cv"])}
    by: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in rows:
        key = (str(r["model_id"]), str(r["scenario_id"]))
        if key in label:
            lat, cv = label[key]
            by.setdefault((key[1], str(r["session"])), []).append((float(r["latency_ms"]) / lat, cv))
    out = []
    for (scenario, session), pairs in sorted(by.items()):
        ratios = [q for q, _ in pairs]
        factor, res = residuals(ratios)
        med = statistics.median(res)
        sigma = 1.4826 * statistics.median(abs(x - med) for x in res)
        # relative errors as the board scores them (|prediction / label - 1|); the ceiling's
        # prediction is the label with its own error (the residual over sqrt 2) removed, as
        # leaderboard/noise.py's retest perfect predictor
        raw = [q - 1 for q in ratios]
        after = [math.exp(x) - 1 for x in res]
        out.append({
            "scenario_id": scenario, "session": session, "networks": len(pairs), "factor": factor,
            "sigma": sigma, "within5": _share(raw, 0.05), "within10": _share(raw, 0.10),
            "within5_after": _share(after, 0.05), "within10_after": _share(after, 0.10),
            "ceiling10": _share([math.exp(-label_error(x)) - 1 for x in res], 0.10),
            "median_between_cv": statistics.median(c for _, c in pairs)})
    return out


def format_compare(table: list[dict]) -> str:
    if not table:
        return "retest: no history yet"
    lines = [f"{'scenario':<30} {'session':<17} {'nets':>4} {'factor':>7} {'sigma':>6} {'w10 raw':>7} "
             f"{'w5 adj':>6} {'w10 adj':>7} {'ceiling10':>9} {'bcv':>5}"]
    for r in table:
        lines.append(f"{r['scenario_id']:<30} {r['session']:<17} {r['networks']:>4} {r['factor']:>7.3f} "
                     f"{100 * r['sigma']:>5.1f}% {100 * r['within10']:>6.0f}% {100 * r['within5_after']:>5.0f}% "
                     f"{100 * r['within10_after']:>6.0f}% {100 * r['ceiling10']:>8.0f}% "
                     f"{100 * r['median_between_cv']:>4.1f}%")
    return "\n".join(lines)


def retest_markdown(table: list[dict]) -> str:
    """The card's section on the test-retest (the release writes it from ``retest.csv``)."""
    return card_section(
        "Test-retest (released networks measured again)",
        "Networks of the release measured again in a later session, e2e at every point with the point's own "
        "protocol (`python -m pipelines.retest`; the rows are `retest.csv` beside this card), against their "
        "released rows. Factor: the median retest / released ratio (the session's machine; no predictor is "
        "asked to know it). Sigma: the spread of log(retest / released) around that factor (1.4826 x MAD). "
        "Within 10%: networks whose retest lies within 10% of the released label, as measured and after the "
        "factor. Ceiling: the share within 10% of a predictor that knew every network's true latency, were "
        "both labels' errors independent and alike (the residual over sqrt 2), beside the median "
        "between-process spread (between_cv) of the released rows.",
        "No retest yet.",
        ["scenario", "session", "networks", "factor", "sigma", "within 10% (raw / after factor)",
         "within 5% (after factor)", "ceiling within 10%", "between_cv (median)"],
        [[r["scenario_id"], r["session"], str(r["networks"]), f"{r['factor']:.3f}", f"{100 * r['sigma']:.1f}%",
          f"{100 * r['within10']:.0f}% / {100 * r['within10_after']:.0f}%", f"{100 * r['within5_after']:.0f}%",
          f"{100 * r['ceiling10']:.0f}%", f"{100 * r['median_between_cv']:.1f}%"] for r in table])


def main(argv: list[str] | None = None) -> int:
    from .config import PARAMS, ConfigError, load_params
    from .dataset.load import load_dataset
    from .release import resolve

    ap = argparse.ArgumentParser(prog="python -m pipelines.retest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=str(PARAMS), help="the composed parameters (default: params.yaml)")
    ap.add_argument("--split", help="a frozen board split whose test networks are measured again")
    ap.add_argument("--session", help="the session's name (default: the UTC time, 20261128T064500Z)")
    ap.add_argument("--release", help="the release to compare with (default: the params' release.folder)")
    ap.add_argument("--report", action="store_true", help="print the comparison of the committed rows; measure nothing")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    try:
        release = resolve(args.release) if args.release else None
        if not args.report:
            if not args.split:
                raise ControlError("--split: name the split whose test networks to measure again (or --report)")
            cfg = load_params(args.params)
            release = release or resolve(cfg.release.folder)
            history = release / HISTORY
            names = split_test_names(args.split)
            rows = measure_retest(cfg, names, args.session, progress=not args.quiet,
                                  sink=lambda got: append_history(history, got))
            if not rows:
                raise ControlError(f"retest: no network was measured (see the measure.log of each scenario under "
                                   f"{cfg.data_dir}/retest/)")
            print(f"retest: {len(rows)} (scenario, network) rows appended to {history} (each point as it finished)")
        if release is None:
            release = resolve(load_params(args.params).release.folder)
        print(format_compare(compare(read_history(release / HISTORY), load_dataset(release).e2e)))
    except (ControlError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
