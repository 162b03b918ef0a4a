"""The board's per-scenario views of a track, as plain tables that the README and the site both
draw (:mod:`leaderboard.render`): computed once here, from the result files, the published rows
(:mod:`leaderboard.published`), the noise floor and the perfect predictor's score
(:mod:`leaderboard.noise`).

A view is a dict: ``id``, ``title``, ``caption``, ``metric`` (how cells are formatted),
``columns`` (headers) and ``rows`` (each ``label``, ``kind`` -- ``baseline``, ``submission``,
``published`` or ``floor``, the noise references: the noise floor and the perfect predictor
--, ``note``, ``cells`` and ``spread``: one value or None per column). A matrix view (phone x
core set by framework x precision) has ``layers`` instead of ``rows``: one matrix per entry
(``label``, ``kind``, ``cells`` as rows of values) over ``row_labels``, the first layer the best
entry; the site lets the reader pick the layer.

Views register in :data:`VIEWS` with ``applies(ctx)`` and ``build(ctx)``; a track gets every
view that applies (HELP's few devices: Table 3's layout; the USC phones' 135 scenarios: the
Fig. 21-like matrix, aggregates by framework, precision, core set and phone, and the USC
study's published cells beside ours).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from foundation.registry import Registry

from .metrics import METRICS
from .published import published_for

FEW_SCENARIOS = 12  # up to this many scenarios a track is shown one column per scenario (Table 3's layout)


@dataclass
class Context:
    """What the views of one track see."""

    name: str
    status: dict[str, Any]
    entries: list[dict[str, Any]]  # result documents, ranked by the primary metric
    floor: dict[str, Any] | None  # the track's noise floor (noise_floor.json), or None
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)  # scenario_id -> attributes
    below_flops: dict[tuple[str, str], str] = field(default_factory=dict)  # (scenario_id, entry) -> why

    @property
    def primary(self) -> str:
        return self.status["primary"]

    def label(self, metric: str) -> str:
        """``metric``'s column header in the unit of the track's target."""
        return METRICS.get(metric).label_in(self.status.get("unit", "ms"))

    @property
    def scenario_ids(self) -> list[str]:
        return sorted(self.scenarios) if self.scenarios else sorted(
            {s for d in self.entries for s in d["result"].get("per_scenario", {})})


@dataclass(frozen=True)
class View:
    name: str
    applies: Callable[[Context], bool]
    build: Callable[[Context], list[dict[str, Any]]]


VIEWS: Registry[View] = Registry("board view")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def entry_kind(doc: dict[str, Any]) -> str:
    """``baseline`` or ``submission``: what a result file's metadata says, where it says one of the
    two (a result file cannot make its row ``published`` or ``floor``, the references' kinds)."""
    return "baseline" if doc["meta"].get("kind") == "baseline" else "submission"


def _per(doc: dict[str, Any], sid: str, metric: str) -> float | None:
    return _num(doc["result"].get("per_scenario", {}).get(sid, {}).get(metric))


def _per_sd(doc: dict[str, Any], sid: str, metric: str) -> float | None:
    seeds = doc["result"].get("seeds") or {}
    return _num((seeds.get("per_scenario_std") or {}).get(sid, {}).get(metric))


def _floor_per(floor: dict[str, Any] | None, sid: str, metric: str) -> float | None:
    if not floor or not floor.get("known"):
        return None
    return _num(floor.get("per_scenario", {}).get(sid, {}).get(metric))


#: The perfect predictor's estimates in noise_floor.json: key -> the label of its reference row
PERFECT_KINDS = {"perfect": "perfect predictor", "perfect_retest": "perfect predictor (retest)"}


def _perfect(floor: dict[str, Any] | None, key: str = "perfect") -> dict[str, Any] | None:
    """A perfect predictor's scores (noise_floor.json's ``perfect`` or ``perfect_retest``), where known."""
    p = (floor or {}).get(key)
    return p if isinstance(p, dict) and p.get("known") else None


def _perfects(floor: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """(row label, scores) of every perfect-predictor estimate the floor has."""
    return [(label, p) for key, label in PERFECT_KINDS.items() if (p := _perfect(floor, key))]


def _perfect_per(p: dict[str, Any], sid: str, metric: str) -> float | None:
    return _num(p.get("per_scenario", {}).get(sid, {}).get(metric))


def _perfect_row(ctx: Context, sids: list[str], metric: str) -> list[dict[str, Any]]:
    """The perfect predictors' rows of a per-scenario table (a cell per scenario, then the track's
    mean); none where the source does not say how its headline was formed."""
    rows = []
    for label, p in _perfects(ctx.floor):
        cells = [_perfect_per(p, s, metric) for s in sids] + [_num(p["aggregate"].get(metric))]
        rows.append({"label": label, "kind": "floor", "note": p.get("how", ""), "cells": cells,
                     "spread": [None] * len(cells)})
    return rows


def _mean(vals: list[float | None]) -> float | None:
    v = [x for x in vals if x is not None]
    return float(np.mean(v)) if v else None


def scenario_attributes(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """scenario_id -> attributes (device, framework, cores, precision, ...) from the result files."""
    out: dict[str, dict[str, Any]] = {}
    for d in entries:
        for sid, attrs in (d["result"].get("scenarios") or {}).items():
            out.setdefault(sid, dict(attrs or {}))
    return out


def _floor_row(ctx: Context, columns: list[str], metric: str, value: Callable[[str], float | None]) -> dict[str, Any]:
    if ctx.floor and ctx.floor.get("known"):
        return {"label": "noise floor", "kind": "floor", "note": ctx.floor.get("how", ""),
                "cells": [value(c) for c in columns], "spread": [None] * len(columns)}
    why = (ctx.floor or {}).get("why") or "not computed: the track's data was not on the machine that rendered the board"
    return {"label": "noise floor", "kind": "floor", "note": why, "cells": [None] * len(columns),
            "spread": [None] * len(columns)}


# ---------------------------------------------------------------- one column per scenario (HELP Table 3)
def _few(ctx: Context) -> bool:
    return 0 < len(ctx.scenario_ids) <= FEW_SCENARIOS


def _column_label(ctx: Context, sid: str) -> str:
    """The device, or more of the scenario where one device has several scenarios on the track."""
    a = ctx.scenarios.get(sid) or {}
    dev = a.get("device")
    if not dev:
        return sid
    if sum((ctx.scenarios.get(s) or {}).get("device") == dev for s in ctx.scenario_ids) == 1:
        return str(dev)
    return " ".join(str(x) for x in (dev, a.get("framework"), a.get("cores") or a.get("accelerator"), a.get("precision"))
                    if x)


def _per_scenario_table(ctx: Context, metric: str, with_published: bool) -> dict[str, Any]:
    sids = ctx.scenario_ids
    rows = []
    for d in ctx.entries:
        cells = [_per(d, s, metric) for s in sids]
        spread = [_per_sd(d, s, metric) for s in sids]
        agg_sd = _num(((d["result"].get("seeds") or {}).get("aggregate_std") or {}).get(metric))
        row = {"label": d["entry"], "kind": entry_kind(d), "note": "",
               "cells": cells + [_num(d["result"]["aggregate"].get(metric))], "spread": spread + [agg_sd]}
        if metric == ctx.primary:
            row["below_flops"] = [ctx.below_flops.get((s, d["entry"])) for s in sids] + [None]
        rows.append(row)
    if with_published:
        for p in published_for(ctx.name):
            if p.metric != metric or not set(p.values) & set(sids):
                continue
            cells = [p.values.get(s) for s in sids]
            full = all(c is not None for c in cells)
            rows.append({"label": p.method, "kind": "published",
                         "note": f"{p.source}. Protocol: {p.protocol}." + (f" {p.note}." if p.note else ""),
                         "cells": cells + [p.mean() if full else None],
                         "spread": [p.spread.get(s) for s in sids] + [None]})
    floor_cells = [_floor_per(ctx.floor, s, metric) for s in sids]
    rows.append(_floor_row(ctx, sids, metric, lambda s: _floor_per(ctx.floor, s, metric)))
    rows[-1]["cells"] = floor_cells + [_num((ctx.floor or {}).get("aggregate", {}).get(metric)) if ctx.floor else None]
    rows[-1]["spread"] = [None] * (len(sids) + 1)
    rows += _perfect_row(ctx, sids, metric)
    label = ctx.label(metric)
    seeds = any(d["result"].get("seeds") for d in ctx.entries)
    return {"id": f"per-scenario-{metric}", "title": f"{label} per device", "metric": metric,
            "columns": [_column_label(ctx, s) for s in sids] + ["mean"],
            "caption": (f"{label} on each scenario of the track (rows: predictors; columns: devices, as HELP's "
                        "Table 3)." + (" Our entries: mean ± standard deviation over the track's seeds." if seeds else "")
                        + (" Published rows as their sources give them (± their spread over trials where given); "
                           "'–' where the source has no figure." if with_published else "")),
            "rows": rows}


def _build_few(ctx: Context) -> list[dict[str, Any]]:
    out = [_per_scenario_table(ctx, ctx.primary, with_published=True)]
    for m in ("mape", "acc10"):
        if m != ctx.primary and m in ctx.status.get("metrics", []):
            out.append(_per_scenario_table(ctx, m, with_published=True))
    return out


VIEWS.register("per-scenario")(View("per-scenario", _few, _build_few))


# ---------------------------------------------------------------- many scenarios: phones x core sets x precisions
def _many(ctx: Context) -> bool:
    return len(ctx.scenario_ids) > FEW_SCENARIOS and any(a.get("device") for a in ctx.scenarios.values())


def _setting(a: dict[str, Any]) -> str:
    """The column of a scenario in the matrix: framework and precision (GPU scenarios apart)."""
    fw = a.get("framework") or "-"
    if a.get("accelerator") and a.get("accelerator") != "cpu":
        return f"{fw} {a['accelerator']} {a.get('precision') or ''}".strip()
    return f"{fw} {a.get('precision') or '-'}"


def _row_key(a: dict[str, Any]) -> str:
    return f"{a.get('device')} · {a.get('cores') or a.get('accelerator') or '-'}"


def _build_matrix(ctx: Context) -> list[dict[str, Any]]:
    metric = ctx.primary
    cols = sorted({_setting(a) for a in ctx.scenarios.values()}, key=lambda c: (" gpu" in c, c))
    rows = sorted({_row_key(a) for a in ctx.scenarios.values()},
                  key=lambda r: (r.split(" · ")[0], "gpu" in r, r))
    where = {(_row_key(a), _setting(a)): sid for sid, a in ctx.scenarios.items()}

    def matrix(value: Callable[[str], float | None]) -> list[list[float | None]]:
        return [[value(where[(r, c)]) if (r, c) in where else None for c in cols] for r in rows]

    layers = [{"label": d["entry"], "kind": entry_kind(d), "cells": matrix(lambda s, d=d: _per(d, s, metric)),
               "below_flops": matrix(lambda s, d=d: ctx.below_flops.get((s, d["entry"])))}
              for d in ctx.entries]
    if ctx.floor and ctx.floor.get("known"):
        layers.append({"label": "noise floor", "kind": "floor", "cells": matrix(lambda s: _floor_per(ctx.floor, s, metric))})
    for plabel, p in _perfects(ctx.floor):
        layers.append({"label": plabel, "kind": "floor",
                       "cells": matrix(lambda s, p=p: _perfect_per(p, s, metric))})
    label = ctx.label(metric)
    return [{"id": "matrix", "title": f"{label} per phone × core set × precision", "metric": metric,
             "columns": cols, "row_labels": rows, "layers": layers,
             "caption": (f"{label} of one entry on every scenario (rows: phone and CPU core set, or the GPU; "
                         "columns: framework and precision), the layout of the USC study's Fig. 21. The first "
                         "layer is the best entry; the site lets you pick another, or the noise floor.")}]


def _group_table(ctx: Context, vid: str, title: str, keyfn: Callable[[dict[str, Any]], str | None]) -> dict[str, Any]:
    metric = ctx.primary
    groups: dict[str, list[str]] = {}
    for sid, a in sorted(ctx.scenarios.items()):
        k = keyfn(a)
        if k is not None:
            groups.setdefault(k, []).append(sid)
    cols = sorted(groups)
    rows = [{"label": d["entry"], "kind": entry_kind(d), "note": "",
             "cells": [_mean([_per(d, s, metric) for s in groups[c]]) for c in cols], "spread": [None] * len(cols)}
            for d in ctx.entries]
    rows.append(_floor_row(ctx, cols, metric, lambda c: _mean([_floor_per(ctx.floor, s, metric) for s in groups[c]])))
    label = ctx.label(metric)
    return {"id": vid, "title": f"{label} by {title}", "metric": metric, "columns": [f"{c} ({len(groups[c])})" for c in cols],
            "caption": f"{label}: unweighted mean over the scenarios of each {title} (how many in parentheses).",
            "rows": rows}


def _build_groups(ctx: Context) -> list[dict[str, Any]]:
    def fw_prec(a: dict[str, Any]) -> str:
        return f"{a.get('framework') or '-'} {a.get('accelerator') or '-'} {a.get('precision') or '-'}"

    return [
        _group_table(ctx, "by-framework", "framework", lambda a: a.get("framework") or "-"),
        _group_table(ctx, "by-precision", "framework × accelerator × precision", fw_prec),
        _group_table(ctx, "by-cores", "CPU core set", lambda a: a.get("cores") if a.get("accelerator") == "cpu" else None),
        _group_table(ctx, "by-phone", "phone", lambda a: a.get("device") or "-"),
    ]


def _published_cells(ctx: Context) -> bool:
    sids = set(ctx.scenario_ids)
    return _many(ctx) and any(p.metric == ctx.primary and set(p.values) & sids for p in published_for(ctx.name))


def _build_published(ctx: Context) -> list[dict[str, Any]]:
    metric = ctx.primary
    out = []
    pubs = [p for p in published_for(ctx.name) if p.metric == metric and set(p.values) & set(ctx.scenario_ids)]
    frameworks = sorted({(ctx.scenarios.get(s) or {}).get("framework") or "-" for p in pubs for s in p.values
                         if s in ctx.scenarios})
    for fw in frameworks:
        sids = sorted({s for p in pubs for s in p.values if (ctx.scenarios.get(s) or {}).get("framework") == fw},
                      key=lambda s: ((ctx.scenarios[s].get("device") or ""), ctx.scenarios[s].get("accelerator") or ""))
        mine = [p for p in pubs if set(p.values) & set(sids)]
        rows = [{"label": p.method, "kind": "published", "note": f"{p.source}. Protocol: {p.protocol}.",
                 "cells": [p.values.get(s) for s in sids], "spread": [None] * len(sids)} for p in mine]
        rows += [{"label": d["entry"], "kind": entry_kind(d), "note": "", "cells": [_per(d, s, metric) for s in sids],
                  "spread": [None] * len(sids)} for d in ctx.entries]
        rows.append(_floor_row(ctx, sids, metric, lambda s: _floor_per(ctx.floor, s, metric)))
        label = ctx.label(metric)
        cols = [f"{ctx.scenarios[s].get('device')} {'CPU 1 large ' + (ctx.scenarios[s].get('precision') or '') if ctx.scenarios[s].get('accelerator') == 'cpu' else 'GPU'}"
                for s in sids]
        src = sorted({p.source.split(", row")[0] for p in mine})
        out.append({"id": f"published-{fw}", "title": f"{label} beside the published figures ({fw})", "metric": metric,
                    "columns": cols, "rows": rows,
                    "caption": (f"The scenarios the published tables cover ({'; '.join(src)}), with their figures and "
                                "ours. Their protocol differs (see each row's note): they train on synthetic "
                                "networks and test on all real CNNs; the track cross-validates over the real CNNs.")})
    return out


VIEWS.register("matrix")(View("matrix", _many, _build_matrix))
VIEWS.register("groups")(View("groups", _many, _build_groups))
VIEWS.register("published-cells")(View("published-cells", _published_cells, _build_published))

_ORDER = ("per-scenario", "matrix", "groups", "published-cells")  # the order a track shows its views in


def views_for(ctx: Context) -> list[dict[str, Any]]:
    out = []
    for name in sorted(VIEWS.names(), key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n)):
        v = VIEWS.get(name)
        if v.applies(ctx):
            out += v.build(ctx)
    return out


def reference_rows(ctx: Context) -> list[dict[str, Any]]:
    """The rows shown under a track's board: the noise floor on the track's metrics, and every
    published row for the track with its figure (mean over the scenarios the source covers, and
    how many), its source and the protocol difference in one line."""
    metrics = ctx.status.get("metrics", [])
    rows = []
    fl = ctx.floor
    if fl and fl.get("known"):
        rows.append({"label": "noise floor", "kind": "floor", "aggregate": {m: _num(fl["aggregate"].get(m)) for m in metrics},
                     "note": f"{fl.get('how', '')} ({fl.get('replicates')} seeded replicates, test networks of the split)"})
    else:
        why = (fl or {}).get("why") or "not computed: the track's data was not on the machine that rendered the board"
        rows.append({"label": "noise floor", "kind": "floor", "aggregate": {m: None for m in metrics}, "note": why})
    for plabel, perfect in _perfects(fl):
        how = perfect.get("how", "")
        rows.append({"label": plabel, "kind": "floor",
                     "aggregate": {m: _num(perfect["aggregate"].get(m)) for m in metrics},
                     "note": (f"{how} ({fl.get('replicates')} seeded replicates, test networks of the split)"
                              if plabel == PERFECT_KINDS["perfect"] else
                              f"{how} (sessions {', '.join(sorted(set(perfect.get('sessions', {}).values())))}"
                              + (f"; not retested: {', '.join(perfect['not_retested'])}"
                                 if perfect.get("not_retested") else "") + ")")})
    sids = set(ctx.scenario_ids)
    few = []
    for p in published_for(ctx.name):
        given = [s for s, v in p.values.items() if v is not None]
        on_track = [s for s in given if s in sids]
        if on_track and len(on_track) * 4 < len(sids):  # a few cells of a large track: in its per-scenario view
            few.append(p)
            continue
        if on_track:
            v = _mean([p.values[s] for s in on_track])
            cover = f"mean over {len(on_track)} of the track's {len(sids)} scenarios"
        else:  # the source's own devices: quoted as given
            v = None
            cover = "on its own devices: " + ", ".join(f"{k} {p.values[k]:.3g}" for k in given)
        rows.append({"label": p.method, "kind": "published", "aggregate": {p.metric: v},
                     "note": f"{cover}. {p.source}. Protocol: {p.protocol}." + (f" {p.note}." if p.note else "")})
    if few:
        sources = sorted({p.source.split(", row")[0] for p in few})
        rows.append({"label": f"{len(few)} published rows", "kind": "published", "aggregate": {},
                     "note": (f"{'; '.join(sources)}: each covers a few of the track's {len(sids)} scenarios, so they "
                              "stand beside ours in the per-scenario table below, whose caption states how their "
                              "protocol differs.")})
    return rows


__all__ = ["VIEWS", "View", "Context", "views_for", "reference_rows", "scenario_attributes", "entry_kind", "FEW_SCENARIOS"]
