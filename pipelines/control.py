"""The control set: a few fixed networks measured again at the start of every release sweep.

A release is measured over many sessions, days and possibly machines. Its card must say how
far the instrument moved between them (the between-run drift), which the spread inside one
sweep cannot show. So every sweep session starts by measuring the same few networks
(``release.control``: generator names, e.g. ``zoo-mobilenetv2-ref``) at every measure point
of the grid, with the point's own protocol (e2e only), into a fresh folder
``<data_dir>/control/<session>/``. One row per (session, scenario, network) is appended to
``control.csv`` inside the committed release, which ``pipelines.release_writer`` keeps when it
rewrites the folder, so the history travels with the project.

    python -m pipelines.control [--params params.yaml]     # measure the control set, print the drift
    python -m pipelines.control --report                    # the drift of the committed history only

The drift of a (scenario, network) is its latency in a session over its latency in the first
session whose rows record the speed probe's judgement (``max_probe_slowdown``; else the first
session), minus one; the report gives per scenario the
median and largest |drift| over the networks, beside the between-process spread of the
sessions themselves.
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from foundation.atomic import atomic_path

COLUMNS = ("session", "host", "scenario_id", "model_id", "name", "latency_ms", "between_cv", "processes",
           "max_loadavg", "max_foreign_busy_frac", "cpu_freq_khz", "runtime_version", "max_probe_slowdown")
# columns a history written before them lacks (read as empty): a row without max_probe_slowdown
# carries no record of the speed probe's judgement (measured before the probe existed, or written
# before the column was kept)
LATER_COLUMNS = ("max_probe_slowdown",)
HISTORY = "control.csv"


class ControlError(ValueError):
    """A control set that cannot be measured as configured; one line naming the key or file."""


def named_models(models_dir: Path, names: list[str], key: str) -> list[tuple[str, str, str]]:
    """(source, model_id, name) of the generated networks ``names`` lists, in its order; a name
    that was not generated raises, naming ``key`` (the setting or file that listed it)."""
    index = models_dir / "index.csv"
    if not index.is_file():
        raise ControlError(f"{index}: no generated networks (run the generate stage first)")
    by_name = {}
    with index.open() as f:
        for row in csv.DictReader(f):
            by_name[row["name"]] = (row["source"], row["model_id"], row["name"])
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ControlError(f"{key}: {missing[0]!r} is not among the generated networks of "
                           f"{index} (the generator config must produce it)")
    return [by_name[n] for n in names]


def control_models(cfg: Any, models_dir: Path) -> list[tuple[str, str, str]]:
    """(source, model_id, name) of every network ``release.control`` names, in its order."""
    return named_models(models_dir, list(cfg.release.control), "release.control")


def measure_control(cfg: Any, session: str | None = None, progress: bool = True,
                    sink: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Measure the control set at every grid point the device offers; return one row per
    measured (scenario, network). A point's ``sources`` still apply (a PyTorch point that
    measures synthetic networks measures only the synthetic control networks). ``sink`` gets
    each point's rows as soon as the point is done: a session stopped part-way (a slow episode
    can keep one point busy for many minutes) keeps the points it finished."""
    if not cfg.release.control:
        raise ControlError("release.control: empty; name the networks to measure again every session")
    chosen = control_models(cfg, Path(cfg.data_dir) / "models")
    return measure_again(cfg, chosen, "control", session, progress, sink)


def measure_again(cfg: Any, chosen: list[tuple[str, str, str]], folder: str, session: str | None = None,
                  progress: bool = True, sink: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Measure the networks ``chosen`` ((source, model_id, name)) again, released or not, e2e
    with each point's own protocol, at every grid point the device offers, into
    ``<data_dir>/<folder>/<session>/``; one row per measured (scenario, network), each point's
    rows handed to ``sink`` as the point finishes (the control set; the retest,
    pipelines/retest.py)."""
    from .devices import make_device
    from .measure import grid_points, run_measure

    data = Path(cfg.data_dir)
    session = session or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    c = copy.deepcopy(cfg)
    m = c.measure
    m.models = [mid for _, mid, _ in chosen]
    c.release.reuse = False  # measured again, released or not
    m.granularities = ["e2e"]
    for p in m.points.values():
        p.granularities = ["e2e"]
    device = make_device(c.device)
    out_root = data / folder / session / device.name
    names = {mid: name for _, mid, name in chosen}
    rows = []
    for framework, precision, cores, accelerator in grid_points(c.scenario):
        res = run_measure(c, framework, precision, cores, accelerator=accelerator, device=device,
                          out_root=out_root, progress=progress)
        if res["status"] != "measured":
            continue
        got = _rows(Path(res["out"]), session, names)
        if sink is not None and got:
            sink(got)
        rows += got
    return rows


def _rows(folder: Path, session: str, names: dict[str, str]) -> list[dict]:
    out = []
    for mid, name in names.items():
        p = folder / f"{mid}.json"
        if not p.is_file():
            continue  # not in this point's sources, or failed (its .error.json says why)
        rec = json.loads(p.read_text())
        load, rt = rec.get("load", {}), rec.get("runtime", {})
        freq = load.get("cpu_freq_khz")
        out.append({
            "session": session, "host": rt.get("hostname", ""), "scenario_id": rec["scenario"]["scenario_id"],
            "model_id": mid, "name": name, "latency_ms": round(rec["e2e"]["latency_ms"], 6),
            "between_cv": round(rec["e2e"].get("between_cv", float("nan")), 6),
            "processes": rec["protocol"]["processes"], "max_loadavg": load.get("max_loadavg", ""),
            "max_foreign_busy_frac": load.get("max_foreign_busy_frac", ""),
            "cpu_freq_khz": "" if freq in (None, "unknown") else f"{freq['min']}-{freq['max']}",
            "runtime_version": rt.get("runtime_version", ""),
            "max_probe_slowdown": load.get("max_probe_slowdown", "")})
    return out


def append_history(path: Path, rows: list[dict]) -> None:
    """Append rows to the committed history (written whole through a temporary file)."""
    old = read_history(path)
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(old + rows)


def read_history(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open() as f:
        rows = list(csv.DictReader(f))
    missing = set(COLUMNS) - set(LATER_COLUMNS) - set(rows[0]) if rows else set()
    if missing:
        raise ControlError(f"{path}: missing columns {sorted(missing)}")
    return [{**{c: "" for c in LATER_COLUMNS}, **r} for r in rows]


def _judged(row: dict) -> bool:
    return str(row.get("max_probe_slowdown", "")).strip() != ""


def drift(rows: list[dict]) -> list[dict]:
    """Per (scenario, session): how far the control networks moved from their reference: the
    first session whose rows record the speed probe's judgement (else the first session). A
    session without it (``judged: False``: rows written before the column, or measured before
    the probe existed, when processes could run in the VM's slow episodes unseen) is reported
    against that reference too."""
    ordered = sorted(rows, key=lambda r: (not _judged(r), r["session"]))  # judged sessions first
    ref: dict[tuple[str, str], float] = {}
    for r in ordered:
        ref.setdefault((r["scenario_id"], r["model_id"]), float(r["latency_ms"]))
    by: dict[tuple[str, str], list[float]] = {}
    cvs: dict[tuple[str, str], list[float]] = {}
    judged: dict[tuple[str, str], bool] = {}
    for r in rows:
        key = (r["scenario_id"], r["session"])
        by.setdefault(key, []).append(float(r["latency_ms"]) / ref[(r["scenario_id"], r["model_id"])] - 1.0)
        cvs.setdefault(key, []).append(float(r["between_cv"]))
        judged[key] = judged.get(key, True) and _judged(r)
    out = []
    for (scenario, session), d in sorted(by.items()):
        out.append({"scenario_id": scenario, "session": session, "networks": len(d),
                    "median_abs_drift": statistics.median(abs(x) for x in d), "max_abs_drift": max(abs(x) for x in d),
                    "median_between_cv": statistics.median(cvs[(scenario, session)]),
                    "judged": judged[(scenario, session)]})
    return out


def format_drift(table: list[dict]) -> str:
    if not table:
        return "control: no history yet"
    lines = [f"{'scenario':<34} {'session':<17} {'nets':>4} {'median |drift|':>14} {'max |drift|':>11} "
             f"{'between-process CV':>18}"]
    for r in table:
        lines.append(f"{r['scenario_id']:<34} {r['session']:<17} {r['networks']:>4} {100 * r['median_abs_drift']:>13.2f}% "
                     f"{100 * r['max_abs_drift']:>10.2f}% {100 * r['median_between_cv']:>17.2f}%"
                     + ("" if r.get("judged", True) else "  (probe not recorded)"))
    return "\n".join(lines)


def card_section(title: str, intro: str, empty: str, header: list[str], rows: list[list[str]]) -> str:
    """A section of the release's card: its title, what it shows, and a table of ``rows`` under
    ``header`` (``empty`` when there is none); the drift here, the retest's (pipelines/retest.py)."""
    lines = [f"## {title}", "", intro, ""]
    if not rows:
        return "\n".join(lines + [empty, ""])
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines + [""])


def drift_markdown(table: list[dict]) -> str:
    """The card's section on the between-session drift (the release writes it from its history)."""
    return card_section(
        "Between-session drift (the control set)",
        "The same control networks (`release.control`) are measured again at the start of every sweep "
        "session, e2e, at each point of the grid (`python -m pipelines.control`; the rows are `control.csv` "
        "beside this card). Drift: a network's latency in a session over its latency in the first session whose "
        "rows record the speed probe's judgement (else the first session), minus one; median and largest "
        "|drift| over the networks, beside that session's own between-process spread. A session without the "
        "probe's record may have run in the VM's slow episodes unseen.",
        "No session yet.",
        ["scenario", "session", "networks", "median \\|drift\\|", "max \\|drift\\|", "between-process CV (median)",
         "probe recorded"],
        [[r["scenario_id"], r["session"], str(r["networks"]), f"{100 * r['median_abs_drift']:.1f}%",
          f"{100 * r['max_abs_drift']:.1f}%", f"{100 * r['median_between_cv']:.1f}%",
          "yes" if r.get("judged", True) else "no"] for r in table])


def main(argv: list[str] | None = None) -> int:
    from .config import PARAMS, ConfigError, load_params
    from .release import Release

    ap = argparse.ArgumentParser(prog="python -m pipelines.control", description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=str(PARAMS), help="the composed parameters (default: params.yaml)")
    ap.add_argument("--report", action="store_true", help="print the drift of the committed history; measure nothing")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    try:
        cfg = load_params(args.params)
        history = Release(cfg.release.folder).history(HISTORY)
        if not args.report:
            # each point's rows land as the point finishes (the sink), and only then
            rows = measure_control(cfg, progress=not args.quiet, sink=lambda got: append_history(history, got))
            if not rows:
                raise ControlError("control: no control network was measured (see the measure.log of each "
                                   f"scenario under {cfg.data_dir}/control/)")
            print(f"control: {len(rows)} (scenario, network) rows appended to {history} (each point as it finished)")
        print(format_drift(drift(read_history(history))))
    except (ControlError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
