"""Comparisons across scenarios of a dataset: which scenarios pair up and how they compare.

Core combinations order by cluster (large, medium, small); a combination's baseline is one core
of the fastest cluster it uses. Pairs of scenarios (one core and several, fp32 and int8) within
each device and framework, with threads = cores, give per-model ratios; the gap frame compares
summed op or kernel times with the end-to-end time they belong to. The card draws them
(card.py) and the findings quote them (findings.py).
"""
from __future__ import annotations

import re
from typing import Callable

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
    parts = []
    for table, ref, suffix in ((ds.ops, "op_run_ms", ""), (ds.kernels, "kernel_run_ms", " kernels")):
        if table.empty:
            continue
        s = table.groupby(keys, sort=True)["latency_ms"].sum().rename("sum_ms").reset_index()
        s = s.merge(e2e, on=keys, how="inner")
        if suffix:  # kernel sums only where the source timed a kernel run of its own (the suite)
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
