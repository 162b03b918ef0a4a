"""The USC study's qualitative findings, checked on the suite's own measurements.

The USC study (Li, Paolieri, Golubchik, Sec. 3.1 and 4.2) draws four lessons from its phones;
the dataset card states, for the suite's own rows (``dataset == "latbench"``), whether this data
shows the same and with which figures:

1. multicore: on homogeneous cores more threads give a *sublinear* end-to-end speed-up
   (Insight 1, Fig. 2);
2. int8: quantization speeds most networks and operations up, but element-wise operations and
   padding get slower (2.55x / 2.60x on Snapdragon 855 / Exynos 9820; Insight 2, Figs. 4-5);
3. op-type breakdown: convolutions carry most of the time (the reason op-wise predictors model
   them first, Sec. 4.2);
4. the sum of the operations' times is consistently below the end-to-end latency (Fig. 9),
   the gap being the framework's overhead.

Each finding is a :class:`Finding` with the figure behind it and whether it holds here; where
the host cannot show a finding (no heterogeneous cores on a VM) or shows it differently, the
card says why. Nothing is drawn here: the card's figures (card.py) show the distributions.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .load import Dataset

# op types the USC study groups as element-wise (its Fig. 5 "Element-wise" and "Padding")
ELEMENTWISE = ("add", "mul", "sub", "div", "maximum", "minimum")
PADDING = ("pad",)
CONV_TYPES = ("conv2d", "dwconv2d", "group_conv2d")


@dataclass(frozen=True)
class Finding:
    topic: str
    usc: str  # what the USC study reports
    here: str  # what this data shows, with figures
    holds: bool | None  # None: this data cannot tell


def _own(ds: Dataset) -> tuple[pd.DataFrame, pd.DataFrame]:
    s = ds.scenarios[(ds.scenarios["dataset"] == "latbench") & (ds.scenarios["accelerator"] == "cpu")]
    s = s[s["threads"].astype("Int64") == s["core_count"].astype("Int64")]
    return s, ds.e2e[ds.e2e["scenario_id"].isin(s["scenario_id"])]


def _pairs(s: pd.DataFrame, key: str, a: str, b: str) -> list[tuple[str, str, str]]:
    """(scenario with key=a, scenario with key=b, label) for scenarios equal in everything else."""
    cols = [c for c in ("device", "framework", "cores", "precision") if c != key]
    out = []
    for vals, g in s.groupby(cols, sort=True):
        x, y = g[g[key] == a], g[g[key] == b]
        if len(x) == 1 and len(y) == 1:
            out.append((x["scenario_id"].iloc[0], y["scenario_id"].iloc[0], " ".join(map(str, vals))))
    return out


def _ratios(ds: Dataset, pairs: list[tuple[str, str, str]]) -> list[tuple[str, pd.Series]]:
    out = []
    for a, b, label in pairs:
        c = ds.compare(a, b)
        if len(c):
            out.append((label, c["ratio"]))
    return out


def _q(r: pd.Series) -> str:
    return f"median {r.median():.2f}x (quartiles {r.quantile(0.25):.2f}-{r.quantile(0.75):.2f}, n = {len(r)})"


def multicore(ds: Dataset) -> Finding:
    usc = "sublinear end-to-end speed-up on homogeneous cores; heterogeneous combinations can be slower than one core"
    s, _ = _own(ds)
    s = s[s["cores"].isin(["1large", "2large"])]
    res = _ratios(ds, _pairs(s, "cores", "1large", "2large"))
    if not res:
        return Finding("multicore", usc, "no pair of one-core and two-core scenarios measured", None)
    parts, sub = [], []
    for label, r in res:
        parts.append(f"{label}: {_q(r)}, {(r < 2).mean():.0%} below 2x")
        sub.append(r.median() < 2)
    here = ("two large cores over one: " + "; ".join(parts) + ". The host's one cluster cannot show the "
            "heterogeneous-core slow-down; its two vCPUs may be hyperthreads of one physical core, which bounds "
            "the speed-up further than a phone's separate cores.")
    return Finding("multicore", usc, here, all(sub))


def int8(ds: Dataset) -> Finding:
    usc = ("int8 faster end to end in TFLite on every core set; element-wise ops and padding slower after "
           "quantization (2.55x / 2.60x on Snapdragon 855 / Exynos 9820)")
    s, _ = _own(ds)
    res = _ratios(ds, _pairs(s, "precision", "fp32", "int8"))
    if not res:
        return Finding("int8", usc, "no scenario measured at both fp32 and int8", None)
    faster = []
    parts = []
    for label, r in res:
        parts.append(f"{label}: fp32/int8 {_q(r)}, int8 faster for {(r > 1).mean():.0%} of networks")
        faster.append(r.median() > 1)
    ops = _op_ratio(ds, _pairs(s, "precision", "fp32", "int8"))
    slow = ""
    if ops is not None and len(ops):
        ew = ops[ops.index.isin(ELEMENTWISE + PADDING)]
        top = ops.sort_values()
        slow = (" Per op type (summed per network, fp32/int8, median over networks): "
                + ", ".join(f"{t} {v:.2f}x" for t, v in top.head(6).items())
                + (f"; element-wise and padding: {', '.join(f'{t} {v:.2f}x' for t, v in ew.items())}" if len(ew) else "")
                + ".")
    here = "; ".join(parts) + "." + slow
    return Finding("int8", usc, here, all(faster))


def _op_ratio(ds: Dataset, pairs: list[tuple[str, str, str]]) -> pd.Series | None:
    """Per op type: median over networks of (summed fp32 time / summed int8 time)."""
    rows = []
    for a, b, _ in pairs:
        oa = ds.ops[ds.ops["scenario_id"] == a].groupby(["model_id", "op_type"])["latency_ms"].sum()
        ob = ds.ops[ds.ops["scenario_id"] == b].groupby(["model_id", "op_type"])["latency_ms"].sum()
        j = pd.concat([oa.rename("a"), ob.rename("b")], axis=1).dropna()
        j = j[(j["a"] > 0) & (j["b"] > 0)]
        if len(j):
            rows.append((j["a"] / j["b"]).rename("ratio").reset_index())
    if not rows:
        return None
    r = pd.concat(rows, ignore_index=True)
    return r.groupby("op_type")["ratio"].median()


def breakdown(ds: Dataset) -> Finding:
    usc = "convolutions (regular and depthwise) carry most of a CNN's time"
    s, _ = _own(ds)
    ops = ds.ops[ds.ops["scenario_id"].isin(s.loc[s["precision"] == "fp32", "scenario_id"])]
    if ops.empty:
        return Finding("op types", usc, "no fp32 op records", None)
    share = ops.groupby("op_type")["latency_ms"].sum()
    share = (share / share.sum()).sort_values(ascending=False)
    conv = float(share[share.index.isin(CONV_TYPES + ("fc",))].sum())
    here = (f"share of summed fp32 op time over {ops['model_id'].nunique()} networks: "
            + ", ".join(f"{t} {v:.1%}" for t, v in share.head(6).items())
            + f"; convolutions and FC together {conv:.1%}.")
    return Finding("op types", usc, here, conv > 0.5)


def op_gap(ds: Dataset) -> Finding:
    from .card import gap_frame

    usc = "the sum of operation times is consistently below the end-to-end latency (framework overhead)"
    s, _ = _own(ds)
    g = gap_frame(ds)
    g = g[g["scenario_id"].isin(s["scenario_id"])]
    if g.empty:
        return Finding("e2e minus sum of ops", usc, "no op records with an end-to-end time", None)
    parts, holds = [], []
    for label, gg in g.groupby("label", sort=True):
        rel = gg["gap_ms"] / gg["reference_ms"]
        parts.append(f"{label}: {rel.median():.1%} of the end-to-end time (median; "
                     f"positive for {(gg['gap_ms'] > 0).mean():.0%} of {len(gg)} networks)")
        holds.append((gg["gap_ms"] > 0).mean() >= 0.9)
    here = ("; ".join(parts) + ". The reference is the end-to-end time of the same profiled process (op mode "
            "runs the builtin kernels, kernel mode XNNPACK), so the gap is the runtime's own time between "
            "operators, not the difference between two backends.")
    return Finding("e2e minus sum of ops", usc, here, all(holds))


FINDINGS = (int8, multicore, breakdown, op_gap)


def findings(ds: Dataset) -> list[Finding]:
    return [f(ds) for f in FINDINGS]


def findings_section(ds: Dataset) -> tuple[str, str] | None:
    """The card's section: one row per finding (None when the dataset has none of the suite's rows)."""
    if not (ds.e2e["dataset"] == "latbench").any():
        return None
    mark = {True: "yes", False: "no", None: "cannot tell"}
    lines = ["The USC study's qualitative findings (Sec. 3.1, 4.2), checked on this dataset's own CPU "
             "scenarios (threads = cores):", ""]
    for f in findings(ds):
        lines += [f"- **{f.topic}** (holds here: {mark[f.holds]}). USC: {f.usc}. Here: {f.here}"]
    return "Findings: the USC study on this data", "\n".join(lines)
