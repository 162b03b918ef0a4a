"""Comparisons across scenarios of a dataset: which scenarios pair up and how they compare.

Core combinations order by cluster (large, medium, small); a combination's baseline is one core
of the fastest cluster it uses. Pairs of scenarios (one core and several, fp32 and int8) within
each device and framework, with threads = cores, give per-model ratios; the gap frame compares
summed op or kernel times with the end-to-end time they belong to. Across frameworks, pairs of
scenarios of one device that differ in the framework alone (:func:`framework_pairs`) give
per-network ratios of one runtime over another, grouped by generator source or by the op type
that carries most of a network's MACs in its IR (:func:`dominant_op`). The card draws them
(card.py) and the findings quote them (findings.py).
"""
from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pandas as pd

from .load import Dataset

_CORES = re.compile(r"(\d+)([a-z]+)")
CLUSTER_RANK = {"large": 0, "med": 1, "medium": 1, "small": 2}


def baseline_cores(cores: str) -> str | None:
    """One core of the fastest cluster a combination uses (``1large2med`` -> ``1large``)."""
    parts = _CORES.findall(cores or "")
    if not parts:
        return None
    fastest = min((c for _, c in parts), key=lambda c: CLUSTER_RANK.get(c, 9))
    return f"1{fastest}"


def core_order(cores: str) -> tuple:
    parts = _CORES.findall(cores)
    return tuple((CLUSTER_RANK.get(c, 9), int(n)) for n, c in parts)


def cpu_scenarios(ds: Dataset) -> pd.DataFrame:
    s = ds.scenarios
    return s[(s["accelerator"] == "cpu") & s["cores"].notna() & s["framework"].notna()]


def thread_per_core(s: pd.DataFrame) -> pd.DataFrame:
    """Scenarios running one thread per core (or not saying): one per core combination."""
    keep = s["threads"].isna() | s["core_count"].isna() | (s["threads"] == s["core_count"])
    return s[keep.fillna(True).astype(bool)]


Pairs = Callable[[pd.DataFrame], list[tuple[str, str, str]]]


def multicore_pairs(g: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(one-core scenario, multicore scenario, cores) of a device's framework, fp32: base / multi
    is the speed-up over one core of the fastest cluster the combination uses."""
    g = g[g["precision"] == "fp32"]
    by_cores = dict(zip(g["cores"], g["scenario_id"]))
    out_pairs = []
    for cores, sid in sorted(by_cores.items()):
        base = baseline_cores(cores)
        if base and base != cores and base in by_cores:
            out_pairs.append((by_cores[base], sid, cores))
    return out_pairs


def int8_pairs(g: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(fp32 scenario, int8 scenario, cores) of a device's framework: fp32 / int8 is the speed-up."""
    fp32 = dict(zip(g.loc[g["precision"] == "fp32", "cores"], g.loc[g["precision"] == "fp32", "scenario_id"]))
    int8 = dict(zip(g.loc[g["precision"] == "int8", "cores"], g.loc[g["precision"] == "int8", "scenario_id"]))
    return [(fp32[c], int8[c], c) for c in sorted(set(fp32) & set(int8))]


def scenario_pairs(ds: Dataset, pairs: Pairs) -> list[tuple[str, str, str, str]]:
    """(group ``<device> <framework>``, numerator scenario, denominator scenario, label) of the
    CPU scenarios with threads = cores, paired by ``pairs`` within each device and framework."""
    s = thread_per_core(cpu_scenarios(ds))
    return [(f"{device} {fw}", num, den, label)
            for (dataset, device, fw), g in s.groupby(["dataset", "device", "framework"], sort=True)
            for num, den, label in pairs(g)]


def ratio_frame(ds: Dataset, pairs: Pairs) -> pd.DataFrame:
    """Rows (group, label, ratio) from (numerator scenario, denominator scenario, label) pairs per group."""
    rows = [(group, label, r) for group, num, den, label in scenario_pairs(ds, pairs)
            for r in ds.compare(num, den)["ratio"]]
    return pd.DataFrame(rows, columns=["group", "label", "ratio"])


def gap_frame(ds: Dataset) -> pd.DataFrame:
    """Per model x scenario with op (or kernel) times: ``label`` (the scenario id, `` kernels``
    appended for kernel sums), ``sum_ms``, ``reference_ms`` and ``gap_ms`` = reference - sum.
    The reference is the e2e time of the profiled process that recorded the times when the e2e
    row has it (``op_run_ms`` / ``kernel_run_ms``), else the e2e latency."""
    keys = ["model_id", "scenario_id"]
    e2e = ds.e2e[keys + ["latency_ms", "op_run_ms", "kernel_run_ms"]]
    # a runtime whose kernel process records its op rows too (ExecuTorch: the portable operators
    # outside its XNNPACK delegate) has no op process of its own: its op rows are a part of the
    # run, so only its kernel gap is drawn, the portable operators' time inside it
    both = _ops_in_kernel_mode(ds)
    parts = []
    for table, ref, suffix in ((ds.ops, "op_run_ms", ""), (ds.kernels, "kernel_run_ms", " kernels")):
        if table.empty:
            continue
        s = table.groupby(keys, sort=True)["latency_ms"].sum().rename("sum_ms").reset_index()
        s = s.merge(e2e, on=keys, how="inner")
        if not suffix:
            s = s[~s["scenario_id"].isin(both)]
        else:  # kernel sums only where the source timed a kernel run of its own (the suite)
            s = s[s[ref].notna()]
        s["reference_ms"] = s[ref].fillna(s["latency_ms"]) if not suffix else s[ref]
        s["label"] = s["scenario_id"] + suffix
        parts.append(s[["model_id", "scenario_id", "label", "sum_ms", "reference_ms"]])
    if not parts:
        return pd.DataFrame(columns=["model_id", "scenario_id", "label", "sum_ms", "reference_ms", "gap_ms"])
    g = pd.concat(parts, ignore_index=True)
    g = g[g["reference_ms"].notna() & (g["sum_ms"] > 0)].reset_index(drop=True)
    g["gap_ms"] = g["reference_ms"] - g["sum_ms"]
    return g


def _ops_in_kernel_mode(ds: Dataset) -> set[str]:
    """The scenarios whose runner records op rows in its kernel process (``Runner.ops_in_kernel_mode``)."""
    from pipelines.runners import runner_for

    out = set()
    for r in ds.scenarios[["scenario_id", "framework", "accelerator"]].itertuples(index=False):
        runner = runner_for(str(r.framework), str(r.accelerator))
        if runner is not None and runner.ops_in_kernel_mode:
            out.add(r.scenario_id)
    return out


# ---------------------------------------------------------------- frameworks on the same device
# the scenario columns two scenarios share when they differ in the framework alone: one device
# (and processor), one CPU point (accelerator, cores, threads, precision, batch), one toolchain
SAME_POINT = ("dataset", "device", "device_model", "soc", "cpu", "accelerator", "cores", "core_count", "threads",
              "heterogeneous", "precision", "batch", "graph_passes")


def framework_rank(framework: str) -> tuple[int, str]:
    """Sort key of a framework: the runner registry's order (pipelines/runners), others after by name."""
    from pipelines.runners import frameworks

    known = frameworks()
    return (known.index(framework) if framework in known else len(known), framework)


def point_label(row: pd.Series | dict) -> str:
    """How the card names a CPU point: ``1large, 1 thread, fp32``."""
    threads = row.get("threads")
    t = "-" if threads is None or pd.isna(threads) else f"{int(threads)} thread{'s' if int(threads) != 1 else ''}"
    return f"{row.get('cores') or '-'}, {t}, {row.get('precision') or '-'}"


def framework_points(g: pd.DataFrame) -> list[tuple[str, dict[str, str]]]:
    """(point label, framework -> scenario id in the registry's order) of the scenarios of ``g``
    (CPU scenarios of one device) at the points where two or more frameworks share every column
    of :data:`SAME_POINT`."""
    g = g.assign(_rank=g["framework"].map(framework_rank)).sort_values(["_rank", "scenario_id"], kind="stable")
    keys = [c for c in SAME_POINT if c in g.columns]
    out = []
    for _, same in g.groupby(keys, dropna=False, sort=True):
        sids: dict[str, str] = {}
        for fw, sid in zip(same["framework"], same["scenario_id"]):
            sids.setdefault(fw, sid)
        if len(sids) >= 2:
            out.append((point_label(same.iloc[0]), sids))
    return out


def framework_pairs(g: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(scenario of framework A, scenario of framework B, point) of one device's CPU scenarios
    that differ in the framework alone, A before B in the registry's order: B / A is B's time
    over A's (> 1: A faster)."""
    return [(sids[a], sids[b], point) for point, sids in framework_points(g)
            for i, a in enumerate(sids) for b in list(sids)[i + 1:]]


def framework_scenario_points(ds: Dataset) -> list[tuple[str, str, dict[str, str]]]:
    """(device, point, framework -> scenario id) of every device's CPU points with two or more frameworks."""
    s = cpu_scenarios(ds)
    return [(device, point, sids) for (_, device), g in s.groupby(["dataset", "device"], sort=True)
            for point, sids in framework_points(g)]


def framework_ratio_frame(ds: Dataset) -> pd.DataFrame:
    """Per framework pair at one device's point and network measured by both: ``device``,
    ``point``, frameworks ``a`` and ``b``, ``a_ms``, ``b_ms``, ``ratio`` = b / a, and the
    network's ``source`` and ``flops``."""
    cols = ["device", "point", "a", "b", "model_id", "source", "flops", "a_ms", "b_ms", "ratio"]
    fw = dict(zip(ds.scenarios["scenario_id"], ds.scenarios["framework"]))
    parts = []
    for device, point, sids in framework_scenario_points(ds):
        g = ds.scenarios[ds.scenarios["scenario_id"].isin(sids.values())]
        for a, b, _ in framework_pairs(g):
            c = ds.compare(b, a)  # a_ms there is b's time: ratio = b / a
            if c.empty:
                continue
            parts.append(pd.DataFrame({"device": device, "point": point, "a": fw[a], "b": fw[b],
                                       "model_id": c["model_id"], "a_ms": c["b_ms"], "b_ms": c["a_ms"],
                                       "ratio": c["ratio"]}))
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)
    out = out.merge(ds.models[["model_id", "source", "flops"]], on="model_id", how="left")
    return out[cols]


def _conv_kind(attrs: dict, in_channels: int) -> str:
    """The ops table's op type of an IR convolution: dwconv2d, group_conv2d or conv2d."""
    groups = attrs.get("groups", 1)
    if groups == 1:
        return "conv2d"
    return "dwconv2d" if groups == in_channels == attrs.get("out_channels") else "group_conv2d"


def dominant_op(ir: str | None) -> str | None:
    """The op type carrying most of an IR's multiply-accumulates, named as the ops table's
    ``op_type`` (convolutions split into conv2d, dwconv2d and group_conv2d; fc); None without a
    stored, readable IR or without MACs. Read from the JSON alone (no graph validation): the card
    classifies every network of a release."""
    if not isinstance(ir, str) or not ir:
        return None
    import json

    from generators.ir import split_ref
    from generators.ops import op_spec

    try:
        nodes = json.loads(ir)["nodes"]
        shapes = {n["name"]: n["shapes"] for n in nodes}
        macs: dict[str, int] = {}
        for n in nodes:
            spec = op_spec(n["op"]) if n["op"] in ("conv2d", "fc") else None
            if spec is None:
                continue
            ins = [shapes[name][i] for name, i in map(split_ref, n["inputs"])]
            kind = _conv_kind(n["attrs"], ins[0][1]) if n["op"] == "conv2d" else "fc"
            macs[kind] = macs.get(kind, 0) + int(spec.macs(n["attrs"], ins, n["shapes"]))
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not macs or max(macs.values()) <= 0:
        return None
    return max(sorted(macs), key=lambda k: macs[k])


def outside_shares(ds: Dataset) -> dict[str, tuple[float, str, int]]:
    """Scenario id -> (median over networks of the share of the profiled run's time outside the
    recorded kernels, or else ops; ``"kernels"`` or ``"ops"``; networks), from :func:`gap_frame`,
    for the scenarios with such records."""
    g = gap_frame(ds)
    out: dict[str, tuple[float, str, int]] = {}
    for sid, gs in g.groupby("scenario_id", sort=True):
        for label, what in ((f"{sid} kernels", "kernels"), (sid, "ops")):
            gg = gs[gs["label"] == label]
            if len(gg):
                out[sid] = (float((gg["gap_ms"] / gg["reference_ms"]).median()), what, len(gg))
                break
    return out


def rank_correlation(x: pd.Series, y: pd.Series) -> float | None:
    """Spearman's rank correlation of two aligned series (None below 4 pairs or when one is constant)."""
    j = pd.concat([pd.to_numeric(x, errors="coerce").rename("x"), pd.to_numeric(y, errors="coerce").rename("y")],
                  axis=1).dropna()
    if len(j) < 4 or j["x"].nunique() < 2 or j["y"].nunique() < 2:
        return None
    return float(j["x"].rank().corr(j["y"].rank()))


def framework_wins(ds: Dataset) -> pd.DataFrame:
    """Per device, point and framework where two or more frameworks share the point, over the
    networks all of them measured there: ``networks``, ``wins`` (networks where it is the
    fastest), ``vs_best_other`` (median of its time over the fastest other framework's) and
    ``size_trend`` (rank correlation of |log| of that ratio with the network's FLOPs: > 0 the
    difference grows with size, < 0 it is largest on small networks), ``scenario_id``."""
    cols = ["device", "point", "framework", "scenario_id", "networks", "wins", "vs_best_other", "size_trend"]
    flops = ds.models.set_index("model_id")["flops"] if len(ds.models) else pd.Series(dtype="float64")
    rows = []
    for device, point, sids in framework_scenario_points(ds):
        m = ds.latency_matrix(list(sids.values())).dropna()
        if m.empty or len(m.columns) < len(sids):
            continue
        fastest = m.idxmin(axis=1)
        for fw, sid in sids.items():
            other = m.drop(columns=[sid]).min(axis=1)
            ratio = m[sid] / other
            rows.append([device, point, fw, sid, len(m), int((fastest == sid).sum()), float(ratio.median()),
                         rank_correlation(np.abs(np.log(ratio)), flops.reindex(m.index))])
    return pd.DataFrame(rows, columns=cols)
